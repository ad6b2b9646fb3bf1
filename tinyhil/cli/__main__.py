"""``python -m tinyhil.cli``: the ``tinyhil`` command line, for where the console script is not on ``PATH``."""

from __future__ import annotations

import sys

from tinyhil.cli import main

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(main())
