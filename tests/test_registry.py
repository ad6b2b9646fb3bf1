"""The target registry: resolution, renderers and archs, selection, availability, duplicate names."""

from __future__ import annotations

import re
import types
from dataclasses import dataclass
from typing import Any

import pytest
from support.registries import null_opener, registry_of

from tinyhil import InvalidArgument, TargetRegistry, TargetUnavailable, default_registry, open_target, target
from tinyhil._check import check_int
from tinyhil.device import Device
from tinyhil.null_device import NullDevice
from tinyhil.registry import split_selectors

REQUIRED_TARGETS = {"NULL", "MOCKUSB+AMD", "MOCKKFD+AMD", "USB+AMD", "KFD+AMD"}


def test_entry_points_register_the_five_foundation_targets() -> None:
    names = {d.name for d in default_registry().definitions()}
    assert names >= REQUIRED_TARGETS


def test_null_is_available_and_opens() -> None:
    with open_target("NULL") as device:
        assert device.name == "NULL"
        assert "exec" in device.capabilities


def test_mock_and_hardware_targets_say_why_they_are_unavailable() -> None:
    registry = default_registry()
    for name in REQUIRED_TARGETS - {"NULL"}:
        reason = registry.resolve(name).unavailable_reason()
        if reason is None:
            continue  # landed since the foundation issue: its own tests cover it
        assert reason.strip(), f"{name} is unavailable without a reason"


def test_opening_an_unavailable_target_raises_with_the_reason_and_never_falls_back() -> None:
    def unavailable() -> str:
        return "no board attached"

    registry = registry_of(target("GONE+X", capabilities=["copyin"], probe=unavailable, emulated=False)(null_opener))
    with pytest.raises(TargetUnavailable, match="no board attached") as info:
        registry.resolve("GONE+X").open()
    assert info.value.target == "GONE+X"


def test_renderer_aliases_and_archs_resolve() -> None:
    registry = registry_of(
        target(
            "MOCK+DEV",
            capabilities=[],
            renderers={"CC": "CC", "LLVM": "CC"},
            default_renderer="CC",
            archs=["gfx1100", "gfx950"],
        )(null_opener)
    )
    plain = registry.resolve("MOCK+DEV")
    assert (plain.renderer, plain.arch, plain.name) == ("CC", "gfx1100", "MOCK+DEV")
    picked = registry.resolve("mock+dev:llvm:gfx950")
    assert (picked.renderer, picked.arch, picked.name) == ("CC", "gfx950", "MOCK+DEV:LLVM:gfx950")
    with pytest.raises(InvalidArgument, match=r"unknown renderer 'HIP'.*known renderers: CC, LLVM"):
        registry.resolve("MOCK+DEV:HIP")
    with pytest.raises(InvalidArgument, match=r"unknown arch 'gfx1'.*gfx1100, gfx950"):
        registry.resolve("MOCK+DEV:CC:gfx1")


def test_a_definition_that_fixes_renderer_and_arch_wins_over_the_generic_one() -> None:
    generic = target("NULL", capabilities=["null"], renderers={"CC": "CC"}, default_renderer="CC")(null_opener)
    qemu = target("NULL:QEMUCC:aarch64", capabilities=["compile-only"])(null_opener)
    registry = registry_of(generic, qemu)
    assert registry.resolve("NULL:QEMUCC:aarch64").definition is qemu
    assert registry.resolve("NULL:QEMUCC").definition is qemu
    assert registry.resolve("NULL:CC").definition is generic
    with pytest.raises(InvalidArgument, match=r"unknown renderer 'FOO'.*CC, QEMUCC"):
        registry.resolve("NULL:FOO")


def test_unknown_target_names_the_known_ones_and_the_grammar() -> None:
    registry = registry_of(target("NULL", capabilities=[])(null_opener))
    with pytest.raises(InvalidArgument, match=r"unknown target 'NOPE\+X'; known targets: NULL; grammar"):
        registry.resolve("NOPE+X")


def test_duplicate_names_raise() -> None:
    registry = registry_of(target("NULL", capabilities=[])(null_opener))
    with pytest.raises(InvalidArgument, match="registered twice"):
        registry.add(target("NULL", capabilities=[])(null_opener))


def test_decorator_misuse_is_caught_at_definition_time() -> None:
    with pytest.raises(InvalidArgument, match="needs its name"):
        target(null_opener)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="canonical spelling 'NULL'"):
        target("null", capabilities=[])(null_opener)
    with pytest.raises(ValueError, match="target string"):
        target("NOT A TARGET", capabilities=[])(null_opener)
    with pytest.raises(InvalidArgument, match="default_renderer='X'"):
        target("N", capabilities=[], renderers={"CC": "CC"}, default_renderer="X")(null_opener)


def test_add_module_collects_every_target_def() -> None:
    module = types.ModuleType("user_targets")
    module.one = target("ONE", capabilities=[])(null_opener)  # type: ignore[attr-defined]
    module.two = target("TWO+X", capabilities=[])(null_opener)  # type: ignore[attr-defined]
    module.other = 3  # type: ignore[attr-defined]
    registry = TargetRegistry(load_entry_points=False)
    assert {d.name for d in registry.add_module(module)} == {"ONE", "TWO+X"}


def test_select_expands_all_emulated_and_globs_once_each() -> None:
    def down() -> str:
        return "down"

    registry = registry_of(
        target("NULL", capabilities=[])(null_opener),
        target("MOCKA+X", capabilities=[])(null_opener),
        target("MOCKB+X", capabilities=[], probe=down)(null_opener),
        target("REAL+X", capabilities=[], emulated=False)(null_opener),
    )
    assert [t.name for t in registry.select(["emulated"])] == ["MOCKA+X", "NULL"]
    assert [t.name for t in registry.select(["all"])] == ["MOCKA+X", "NULL", "REAL+X"]
    assert [t.name for t in registry.select(["MOCK*"])] == ["MOCKA+X", "MOCKB+X"]
    assert [t.name for t in registry.select(["NULL", "all", "NULL"])] == ["NULL", "MOCKA+X", "REAL+X"]
    with pytest.raises(InvalidArgument, match="matches no registered target"):
        registry.select(["NV*"])


def test_a_crashing_probe_is_reported_as_the_reason() -> None:
    def broken() -> str | None:
        raise OSError("libusb exploded")

    registry = registry_of(target("B+X", capabilities=[], probe=broken)(null_opener))
    reason = registry.resolve("B+X").unavailable_reason()
    assert reason is not None and "OSError: libusb exploded" in reason


@pytest.mark.parametrize("definition", default_registry().definitions(), ids=lambda d: d.name)
def test_every_target_checks_its_options_in_one_place(definition: Any) -> None:
    """A typo names the closest valid option and lists them all, on every target, available here or not."""
    resolved = default_registry().resolve(definition.name)
    with pytest.raises(InvalidArgument, match=rf"unknown option 'no_such_option' for {re.escape(definition.name)}; "
                                              r"valid options: "):  # fmt: skip
        resolved.open(no_such_option=1)
    for option in definition.options:
        typo = option[:-1] + ("x" if option[-1] != "x" else "y")
        with pytest.raises(InvalidArgument, match=rf"unknown option '{typo}' \(did you mean '{option}'\?\)"):
            resolved.open(**{typo: 1})


@dataclass(frozen=True)
class SpeedOptions:
    speed: int = 1
    label: str = "fast"

    def __post_init__(self) -> None:
        check_int("speed", self.speed, min_value=1)


def test_options_are_one_frozen_dataclass_built_and_passed_by_theregistry_of() -> None:
    seen: list[SpeedOptions] = []

    def opener(resolved: Any, options: SpeedOptions) -> Device:
        seen.append(options)
        return NullDevice(resolved.name)

    definition = target("FWD+X", capabilities=[], options=SpeedOptions)(opener)
    assert definition.options == ("label", "speed")
    resolved = registry_of(definition).resolve("FWD+X")
    resolved.open(speed=3).close()
    resolved.open().close()
    assert seen == [SpeedOptions(speed=3), SpeedOptions()]
    with pytest.raises(InvalidArgument, match="speed=0"):
        resolved.open(speed=0)
    with pytest.raises(InvalidArgument, match=r"unknown option 'sped' \(did you mean 'speed'\?\) for FWD\+X; "
                                              r"valid options: label, speed"):  # fmt: skip
        resolved.open(sped=2)
    assert len(seen) == 2  # neither bad call reached the opener


@dataclass
class Mutable:
    speed: int = 1


@dataclass(frozen=True)
class Required:
    speed: int


@pytest.mark.parametrize(
    ("options", "match"),
    [(["speed"], "expected a frozen dataclass type"),
     (Mutable, r"expected @dataclass\(frozen=True\)"),
     (Required, r"fields \['speed'\] have no default")],
)  # fmt: skip
def test_a_target_declares_its_options_as_a_frozen_dataclass_with_defaults(options: Any, match: str) -> None:
    def opener(resolved: Any, options: Any) -> Device:
        return NullDevice(resolved.name)

    with pytest.raises(InvalidArgument, match=match):
        target("FWD+X", capabilities=[], options=options)(opener)


def test_the_opener_takes_the_options_object_exactly_when_the_target_declares_options() -> None:
    def keywords(resolved: Any, *, speed: int = 1) -> Device:
        return NullDevice(resolved.name)

    with pytest.raises(InvalidArgument, match=r"expected fn\(target, options: SpeedOptions\)"):
        target("FWD+X", capabilities=[], options=SpeedOptions)(null_opener)
    with pytest.raises(InvalidArgument, match=r"expected fn\(target\)"):
        target("FWD+X", capabilities=[])(lambda resolved, options: NullDevice(resolved.name))
    assert target("FWD+X", capabilities=[])(keywords).options == ()


@pytest.mark.parametrize(
    ("text", "match"),
    [("MOCKUSB:1+AMD", "MOCKUSB\\+AMD takes no interface index"),
     ("USB:0+AMD", "USB\\+AMD takes no interface index"),
     ("MOCKKFD:8+AMD", "interface index 8, expected 0..7"),
     ("NULL:NOPE", "target 'NULL:NOPE': unknown renderer 'NOPE'")],
)  # fmt: skip
def test_parts_of_a_target_string_that_would_be_ignored_are_errors(text: str, match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        default_registry().resolve(text)


@pytest.mark.parametrize("bad", ["A,,B", "A,", ",A", ""])
def test_an_empty_selector_is_an_error(bad: str) -> None:
    with pytest.raises(InvalidArgument, match="empty entry"):
        default_registry().select([bad])


# One table: what select() was given instead of a list of selector strings, and what its error names.
BAD_SELECTIONS = [
    pytest.param([None], "target selector NoneType object", id="None entry"),  # was AttributeError
    pytest.param([b"NULL"], "target selector bytes object", id="bytes entry"),  # was a bare TypeError
    pytest.param([["NULL"]], "target selector list object", id="nested list"),
    pytest.param("NULL", "selectors=one string", id="one string, not a list"),  # was 'unknown target N'
    pytest.param(None, "selectors=NoneType object", id="None"),
    pytest.param(5, "selectors=int object", id="int"),
    pytest.param(b"NULL", "selectors=bytes object", id="bytes"),
]


@pytest.mark.parametrize(("selectors", "match"), BAD_SELECTIONS)
def test_selectors_that_are_not_a_list_of_strings_are_invalid_argument(selectors: Any, match: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(match)):
        default_registry().select(selectors)
    with pytest.raises(InvalidArgument, match=re.escape(match)):
        split_selectors(selectors)


@pytest.mark.parametrize("text", [None, b"NULL", 42, ["NULL"]], ids=["None", "bytes", "int", "list"])
def test_resolving_something_that_is_no_target_string_is_invalid_argument(text: Any) -> None:
    with pytest.raises(InvalidArgument, match=f"target={type(text).__name__} object, expected a target string"):
        default_registry().resolve(text)
    with pytest.raises(InvalidArgument, match="expected a target string"):
        open_target(text)


def test_a_huge_interface_index_is_invalid_argument_in_resolve_and_select() -> None:
    text = "MOCKKFD:" + "9" * 4301 + "+AMD"  # used to raise CPython's int-digits ValueError from parse_target
    with pytest.raises(InvalidArgument, match="interface index must be at most"):
        default_registry().resolve(text)
    with pytest.raises(InvalidArgument, match="interface index must be at most"):
        default_registry().select([text])


def test_a_renderer_probe_is_asked_after_the_target_probe_with_the_resolved_renderer_and_arch() -> None:
    asked: list[tuple[str | None, str | None]] = []

    def renderer_reason(renderer: str | None, arch: str | None) -> str | None:
        asked.append((renderer, arch))
        return f"no {renderer} compiler for {arch}" if renderer == "GPU" else None

    registry = registry_of(
        target(
            "R+X",
            capabilities=[],
            renderers={"CC": "CC", "GPU": "GPU"},
            default_renderer="CC",
            archs=["a1", "a2"],
            renderer_probe=renderer_reason,
        )(null_opener)
    )
    assert registry.resolve("R+X").unavailable_reason() is None
    assert registry.resolve("R+X:GPU:a2").unavailable_reason() == "no GPU compiler for a2"
    with pytest.raises(TargetUnavailable, match="no GPU compiler for a2"):
        registry.resolve("R+X:GPU:a2").open()
    assert asked[:2] == [("CC", "a1"), ("GPU", "a2")]
