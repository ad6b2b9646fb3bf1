"""Data flows one way: the bottom floor (core, emulators) never imports the top floor, the command line (the roof,
``tinyhil.cli``) is imported by nothing, and device models import nothing that could make them nondeterministic or
tie them to a host (README.md, "Layout")."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIRS: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
TOP_FLOOR = ("tinyhil.mocks", "tinyhil.device_farm", "tinyhil.fixtures")
ROOF = "tinyhil.cli"  # the command line: it may import every floor, and nothing imports it
ROOF_DIR = Path("tinyhil") / "cli"
# Host-process runners may live in emulators/ in modules of their own, which no device model imports.
EMULATOR_HOST_RUNNERS = {"qemu_runner.py"}
EMULATOR_FORBIDDEN = ("pytest", "hypothesis", "usb1", "time", "random", "socket", "subprocess", "threading")
EMULATOR_ALLOWED_CORE = ("tinyhil.errors", "tinyhil._check", "tinyhil.align", "tinyhil.spec", "tinyhil.emulators")


def _module_name(path: Path) -> str:
    relative = path.relative_to(ROOT)
    folder = relative.parts[0]
    package = next(p for p, d in PACKAGE_DIRS.items() if d == folder)
    parts = [*package.split("."), *relative.with_suffix("").parts[1:]]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    module = _module_name(path)
    return _imports_of(path.read_text(), module if path.name == "__init__.py" else module.rpartition(".")[0])


def _imports_of(source: str, package: str) -> set[str]:
    tree = ast.parse(source)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


def _sources(folder: str) -> list[Path]:
    return sorted(p for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts)


def _hits(imports: set[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(i for i in imports if any(i == p or i.startswith(p + ".") for p in prefixes))


def _core_sources() -> list[Path]:
    return [p for p in _sources("tinyhil") if not p.is_relative_to(ROOT / ROOF_DIR)]


@pytest.mark.parametrize("path", _core_sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_core_never_imports_the_top_floor_or_the_emulators(path: Path) -> None:
    bad = _hits(_imports(path), (*TOP_FLOOR, "tinyhil.emulators"))
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}; the core reaches those only through the registry"


@pytest.mark.parametrize("path", _sources("emulators"), ids=lambda p: str(p.relative_to(ROOT)))
def test_device_models_import_only_models_and_pure_helpers(path: Path) -> None:
    imports = _imports(path)
    bad = _hits(imports, TOP_FLOOR)
    core = [i for i in _hits(imports, ("tinyhil",)) if not _hits({i}, EMULATOR_ALLOWED_CORE)]
    assert not bad + core, f"{path.relative_to(ROOT)} imports {bad + core}"
    if path.name in EMULATOR_HOST_RUNNERS:
        return
    host = _hits(imports, EMULATOR_FORBIDDEN)
    runners = [i for i in imports if i.rpartition(".")[2] + ".py" in EMULATOR_HOST_RUNNERS]
    assert not host + runners, f"{path.relative_to(ROOT)} imports {host + runners}: device models stay deterministic"


@pytest.mark.parametrize("path", sorted((ROOT / "tinyhil" / "spec").glob("*.py")), ids=lambda p: p.name)
def test_spec_modules_hold_facts_and_import_nothing_else_of_tinyhil(path: Path) -> None:
    bad = [
        i
        for i in _hits(_imports(path), ("tinyhil",))
        if not _hits({i}, ("tinyhil.errors", "tinyhil.align", "tinyhil.spec"))
    ]
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}; tinyhil.spec is shared by drivers and models"


@pytest.mark.parametrize("path", _sources("mocks"), ids=lambda p: str(p.relative_to(ROOT)))
def test_mocks_never_import_the_farm_or_the_plugin(path: Path) -> None:
    bad = _hits(_imports(path), ("tinyhil.device_farm", "tinyhil.fixtures", "pytest"))
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def _below_the_roof() -> list[Path]:
    folders = [*PACKAGE_DIRS.values(), "benchmarks"]
    return [p for folder in folders for p in _sources(folder) if not p.is_relative_to(ROOT / ROOF_DIR)]


def _module_or_script_imports(path: Path) -> set[str]:
    if path.is_relative_to(ROOT / "benchmarks"):  # scripts, not a package: their imports are all absolute
        return _imports_of(path.read_text(), "")
    return _imports(path)


@pytest.mark.parametrize("path", _below_the_roof(), ids=lambda p: str(p.relative_to(ROOT)))
def test_nothing_imports_the_command_line(path: Path) -> None:
    bad = _hits(_module_or_script_imports(path), (ROOF,))
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}; the command line is the roof: move what both need down"


def test_the_roof_is_exempt_from_the_core_rule_and_only_the_roof() -> None:
    core = _core_sources()
    assert ROOT / ROOF_DIR / "__init__.py" not in core and ROOT / "tinyhil" / "registry.py" in core
    assert {p.parent for p in _sources("tinyhil") if p not in core} == {ROOT / ROOF_DIR}


def test_the_walker_sees_relative_and_nested_imports() -> None:
    assert _module_name(ROOT / "emulators" / "__init__.py") == "tinyhil.emulators"
    source = "def f():\n    from ..mocks import usb3\n    import time\n"
    assert {"tinyhil.mocks", "tinyhil.mocks.usb3", "time"} <= _imports_of(source, "tinyhil.emulators")


def _seam_table() -> list[tuple[list[str], Path]]:
    """The README's seam table: (protocol names, module path) per row."""
    readme = (ROOT / "README.md").read_text()
    table = readme.split("Each seam's `Protocol` lives in a module named after the seam:", 1)[1].split("\n\n", 2)[1]
    rows: list[tuple[list[str], Path]] = []
    for line in table.splitlines()[2:]:
        seam, module = line.split("|")[1:3]
        names = [part.split("`")[0] for part in seam.split("(`", 1)[1].split("`, `")]
        rows.append((names, ROOT / module.strip().strip("`")))
    return rows


def test_every_seam_protocol_lives_in_the_module_the_readme_names() -> None:
    rows = _seam_table()
    assert len(rows) >= 9
    for names, module in rows:
        tree = ast.parse(module.read_text())
        protocols = {
            node.name
            for node in tree.body
            if isinstance(node, ast.ClassDef) and any(ast.unparse(base).endswith("Protocol") for base in node.bases)
        }
        assert set(names) <= protocols, f"{module.relative_to(ROOT)} defines {sorted(protocols)}, README says {names}"


def test_no_core_module_shares_a_name_with_an_unrelated_one() -> None:
    """The generic names the layout retired stay retired (``qemu/protocol.py`` is a wire protocol, not a seam)."""
    names = {p.name for folder in PACKAGE_DIRS.values() for p in _sources(folder)}
    assert not names & {"runtime.py", "pool.py", "seam.py", "protocols.py", "port.py"}


MAX_MODULE_LINES = 500
MAX_PERFORMANCE_COMMENTS = 5


def test_no_module_outside_the_tests_is_over_500_lines() -> None:
    long = {str(p.relative_to(ROOT)): n for folder in PACKAGE_DIRS.values() for p in _sources(folder)
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}  # fmt: skip
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split them by concept): {long}"


def test_performance_reasoning_lives_in_docs_not_in_hot_comments() -> None:
    hot = [f"{p.relative_to(ROOT)}:{n}" for folder in PACKAGE_DIRS.values() for p in _sources(folder)
           for n, line in enumerate(p.read_text().splitlines(), 1) if "# hot" in line or "hot:" in line]  # fmt: skip
    assert len(hot) <= MAX_PERFORMANCE_COMMENTS, f"performance comments belong in docs/performance.md: {hot}"
