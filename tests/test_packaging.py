"""The installed layout: each top-level folder is a ``tinyhil`` subpackage, listed, typed and importable."""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _package_for(directory: Path) -> str:
    relative = directory.relative_to(ROOT)
    for package, folder in SETUPTOOLS["package-dir"].items():
        if relative.parts[0] == folder:
            return ".".join([package, *relative.parts[1:]])
    raise AssertionError(f"{relative} is not under a mapped folder")


def test_every_folder_with_an_init_is_a_listed_package() -> None:
    found = set()
    for folder in SETUPTOOLS["package-dir"].values():
        for init in (ROOT / folder).rglob("__init__.py"):
            if "__pycache__" not in init.parts:
                found.add(_package_for(init.parent))
    assert found == set(SETUPTOOLS["packages"]), "pyproject's packages list and the __init__.py files disagree"


def test_each_top_level_folder_imports_under_tinyhil_and_is_typed() -> None:
    for package, folder in SETUPTOOLS["package-dir"].items():
        module = importlib.import_module(package)
        assert Path(module.__file__ or "").resolve().parent == (ROOT / folder).resolve()
        assert (ROOT / folder / "py.typed").exists(), f"{folder}/py.typed is missing"
