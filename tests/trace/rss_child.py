"""Run ``tinyhil ARGV...`` in this process and print its exit status and peak RSS as JSON (for the memory tests).

``python rss_child.py trace drift FILE`` prints ``{"status": 2, "rss_bytes": ...}`` after the command's own
output; the peak is this process's ``ru_maxrss`` (kilobytes on Linux), measured in the child so that nothing the
test process did counts.
"""

from __future__ import annotations

import json
import resource
import sys

from tinyhil.device_farm.cli import main

if __name__ == "__main__":
    status = main(sys.argv[1:])
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"status": status, "rss_bytes": rss}))
