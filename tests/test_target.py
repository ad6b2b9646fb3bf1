"""Target-string grammar: valid spellings round-trip, every malformed part is named."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinyhil import GRAMMAR, InvalidArgument, TargetString, parse_target

VALID = [
    ("NULL", TargetString("NULL")),
    ("null", TargetString("NULL")),
    ("MOCKUSB+AMD", TargetString("AMD", iface="MOCKUSB")),
    ("USB:1+AMD", TargetString("AMD", iface="USB", index=1)),
    ("MOCKKFD+AMD:LLVM:gfx1100", TargetString("AMD", iface="MOCKKFD", renderer="LLVM", arch="gfx1100")),
    ("NULL:QCOMCL:a630", TargetString("NULL", renderer="QCOMCL", arch="a630")),
    (" KFD+AMD:hip ", TargetString("AMD", iface="KFD", renderer="HIP")),
]


@pytest.mark.parametrize(("text", "expected"), VALID)
def test_valid_target_strings_parse(text: str, expected: TargetString) -> None:
    assert parse_target(text) == expected


@pytest.mark.parametrize(
    ("text", "bad_part"),
    [
        ("", "empty"),
        ("+AMD", "''"),
        ("USB:x+AMD", "'x'"),
        ("USB+AMD+NV", "'AMD+NV'"),
        ("USB+", "''"),
        ("9USB+AMD", "'9USB'"),
        ("AMD:LLVM:gfx1100:extra", "'extra'"),
        ("AMD:LL-VM", "'LL-VM'"),
        ("AMD:LLVM:gfx 1100", "'gfx 1100'"),
        ("AMD::gfx1100", "''"),
    ],
)
def test_malformed_target_strings_name_the_bad_part_and_the_grammar(text: str, bad_part: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_target(text)
    assert isinstance(info.value, InvalidArgument)
    assert bad_part in str(info.value)
    assert GRAMMAR in str(info.value)


def test_non_string_is_rejected() -> None:
    with pytest.raises(InvalidArgument, match="expected a target string"):
        parse_target(42)  # type: ignore[arg-type]


def test_arch_without_renderer_and_index_without_iface_are_rejected() -> None:
    with pytest.raises(InvalidArgument, match="without a renderer"):
        TargetString("AMD", arch="gfx1100")
    with pytest.raises(InvalidArgument, match="without an interface"):
        TargetString("AMD", index=1)


names = st.from_regex(r"[A-Z][A-Z0-9_]{0,7}", fullmatch=True)
archs = st.from_regex(r"[a-z0-9][a-z0-9_.\-]{0,7}", fullmatch=True)


@st.composite
def target_strings(draw: st.DrawFn) -> TargetString:
    iface = draw(st.none() | names)
    index = draw(st.none() | st.integers(0, 99)) if iface else None
    renderer = draw(st.none() | names)
    arch = draw(st.none() | archs) if renderer else None
    return TargetString(draw(names), iface, index, renderer, arch)


@given(target_strings())
def test_canonical_spelling_round_trips(spec: TargetString) -> None:
    assert parse_target(str(spec)) == spec
    assert parse_target(str(spec).lower() if spec.arch is None else str(spec)) == spec
