"""Every module's ``__all__`` lists exactly the public names it defines, and each package says what it exports."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import tomllib
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]


def _modules() -> list[str]:
    names = set(PACKAGES)
    for package in PACKAGES:
        module = importlib.import_module(package)
        for info in pkgutil.iter_modules(module.__path__, package + "."):
            if not info.ispkg and ".suite." not in info.name:
                names.add(info.name)
    return sorted(names)


@pytest.mark.parametrize("name", _modules())
def test_dunder_all_lists_exactly_the_public_definitions(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    missing = [n for n in exported if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names {missing}, which it does not define"
    assert len(set(exported)) == len(exported), f"{name}.__all__ has duplicates"
    defined = {
        n
        for n, obj in vars(module).items()
        if not n.startswith("_")
        and (inspect.isclass(obj) or inspect.isfunction(obj))
        and getattr(obj, "__module__", None) == name
    }
    unlisted = sorted(defined - set(exported))
    assert not unlisted, f"{name} defines public {unlisted} but leaves them out of __all__ (make them _private)"


@pytest.mark.parametrize("package", PACKAGES)
def test_packages_export_no_submodules_by_accident(package: str) -> None:
    module = importlib.import_module(package)
    for exported in module.__all__:
        assert not isinstance(getattr(module, exported), types.ModuleType), f"{package}.__all__ lists module {exported}"
