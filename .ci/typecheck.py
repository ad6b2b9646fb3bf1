"""Run mypy --strict on the installed layout.

The repository keeps its folders at the top level and pyproject.toml maps them into the ``tinyhil`` namespace;
mypy cannot follow setuptools' editable import hook, so this script builds a tree of symlinks with the installed
layout (``build/typecheck/tinyhil/emulators -> emulators``) and checks that.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    package_dirs: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    tree = ROOT / "build" / "typecheck"
    shutil.rmtree(tree, ignore_errors=True)
    core = tree / "tinyhil"
    core.mkdir(parents=True)
    for entry in (ROOT / package_dirs["tinyhil"]).iterdir():
        if entry.name != "__pycache__":
            (core / entry.name).symlink_to(entry)
    for package, folder in package_dirs.items():
        if package != "tinyhil":
            (tree / package.replace(".", os.sep)).symlink_to(ROOT / folder)
    env = {**os.environ, "MYPYPATH": str(tree)}
    return subprocess.call([sys.executable, "-m", "mypy", "-p", "tinyhil", *sys.argv[1:]], cwd=ROOT, env=env)


if __name__ == "__main__":
    sys.exit(main())
