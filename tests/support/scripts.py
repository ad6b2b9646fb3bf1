"""Load files that are scripts, not importable modules: the benchmarks in ``benchmarks/`` and test helpers that
live beside the tests that own them; and where the ``tinyhil`` console script is (``TINYHIL``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from tinyhil.errors import InvalidArgument

TESTS = Path(__file__).resolve().parents[1]
BENCHMARKS = TESTS.parent / "benchmarks"
TINYHIL = Path(sys.executable).with_name("tinyhil")  # the console script of the environment running the tests

__all__ = ["BENCHMARKS", "TESTS", "TINYHIL", "load_benchmark", "load_script"]


def load_script(path: Path, name: str | None = None) -> ModuleType:
    """The module of the file at ``path``, executed once per process under ``name`` (default: ``script_<stem>``)."""
    name = name or f"script_{path.stem}"
    module = sys.modules.get(name)
    if module is not None:
        return module
    if not path.is_file():
        raise InvalidArgument(f"path={str(path)!r}, expected an existing Python file")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def load_benchmark(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` (``"bench_usb_copy"``, ``"_cli"``, ``"callcount"``) as a module."""
    path = BENCHMARKS / f"{name}.py"
    if not path.is_file():
        available = sorted(p.stem for p in BENCHMARKS.glob("*.py"))
        raise InvalidArgument(f"benchmark name={name!r}, expected one of {available}")
    return load_script(path, f"benchmarks_{name}")
