"""The capability table: every capability a target declares or a test asks for is described, and a misspelt name
is an error that suggests the right one."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from support.registries import null_opener, registry_of

from tinyhil import InvalidArgument, default_registry, target
from tinyhil.capabilities import CAPABILITIES, check_capabilities, known_capabilities
from tinyhil.device import RUNTIME_CAPABILITIES

ROOT = Path(__file__).resolve().parent.parent
MARKER_SOURCES = sorted([*(ROOT / "fixtures" / "suite").glob("*.py"), *(ROOT / "tests").rglob("*.py")])
SMALL = ["compile", "copy", "copyin", "copyout"]


def _required_by_markers(path: Path) -> set[str]:
    """Capability names in the ``requires=[...]`` of every ``@pytest.mark.hil(...)`` call of a source file."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "hil"):
            continue
        for keyword in node.keywords:
            if keyword.arg == "requires" and isinstance(keyword.value, ast.List | ast.Tuple | ast.Set):
                names.update(
                    e.value for e in keyword.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
                )
    return names


def _user_target(name: str, capabilities: list[str]) -> Any:
    return target(name, capabilities=capabilities, summary="a user package's target")(null_opener)


def test_every_capability_of_every_registered_target_is_described() -> None:
    for definition in default_registry().definitions():
        undescribed = sorted(definition.capabilities - set(CAPABILITIES))
        assert not undescribed, f"{definition.name} declares {undescribed}: describe them in tinyhil/capabilities.py"


def test_every_capability_a_hil_marker_requires_is_described() -> None:
    required = {path: _required_by_markers(path) for path in MARKER_SOURCES}
    assert required[ROOT / "fixtures" / "suite" / "test_memory.py"] >= {"copyin", "copyout"}  # the scan works
    for path, names in required.items():
        if path.name == "test_capabilities.py":
            continue  # this file's own examples of unknown names
        undescribed = sorted(names - set(CAPABILITIES))
        assert not undescribed, f"{path.relative_to(ROOT)} requires {undescribed}: describe them or fix the marker"


def test_the_runtime_capabilities_are_described() -> None:
    assert set(RUNTIME_CAPABILITIES) <= set(CAPABILITIES)


def test_the_table_is_sorted_one_line_each_and_read_only() -> None:
    assert list(CAPABILITIES) == sorted(CAPABILITIES)
    for name, description in CAPABILITIES.items():
        assert name == name.strip().lower() and " " not in name, name
        assert description.strip() and "\n" not in description and len(description) <= 110, name
    with pytest.raises(TypeError):
        CAPABILITIES["new"] = "x"  # type: ignore[index]


def test_known_capabilities_add_what_user_packages_declare() -> None:
    registry = registry_of(_user_target("MYBOARD+X", ["copyin", "my-dma-engine"]))
    known = known_capabilities(registry)
    assert known == frozenset(CAPABILITIES) | {"my-dma-engine"}
    assert known_capabilities(default_registry()) >= set(CAPABILITIES)


def test_known_capabilities_need_a_registry() -> None:
    with pytest.raises(InvalidArgument, match=r"registry=42, expected a TargetRegistry"):
        known_capabilities(42)  # type: ignore[arg-type]


def test_known_names_pass() -> None:
    check_capabilities([], SMALL, where="hil marker requires")
    check_capabilities(["copyout", "copyin", "copyout"], SMALL, where="hil marker requires")


def test_an_unknown_name_is_named_with_the_closest_known_one_and_every_known_one() -> None:
    with pytest.raises(InvalidArgument) as caught:
        check_capabilities(["copyin", "copyot"], SMALL, where="hil marker requires")
    assert str(caught.value) == (
        "hil marker requires unknown capability 'copyot' (did you mean 'copyout'?); "
        "known capabilities: compile, copy, copyin, copyout"
    )
    assert isinstance(caught.value, ValueError)


def test_several_unknown_names_are_each_named_once_in_order() -> None:
    with pytest.raises(InvalidArgument) as caught:
        check_capabilities(["usb", "nonsense-cap", "usb"], [*SMALL, "usb3"], where="@target('X') declares")
    message = str(caught.value)
    assert message == (
        "@target('X') declares unknown capabilities 'usb' (did you mean 'usb3'?), 'nonsense-cap'; "
        "known capabilities: compile, copy, copyin, copyout, usb3"
    )
    assert "\n" not in message


def test_the_known_names_come_from_the_registry() -> None:
    with pytest.raises(InvalidArgument, match=r"did you mean 'sram-windows'\?\); known capabilities: compile, "):
        check_capabilities(["sram-window"], known_capabilities(default_registry()), where="hil marker requires")


@pytest.mark.parametrize(
    ("names", "known", "match"),
    [
        (["x"], [], r"^hil marker requires unknown capability 'x'; known capabilities: none$"),
        ([7], SMALL, r"^hil marker requires capability 7, expected a capability name \(a string\)$"),
        ([None], SMALL, r"capability None, expected a capability name"),
    ],
)
def test_bad_input_gets_a_one_line_error(names: list[Any], known: list[str], match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        check_capabilities(names, known, where="hil marker requires")
