"""Target-string grammar: valid spellings round-trip, every malformed part is named."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinyhil import GRAMMAR, InvalidArgument, TargetString, parse_target
from tinyhil.target import INDEX_MAX

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


def test_arch_without_renderer_is_rejected_and_an_index_without_interface_belongs_to_the_device() -> None:
    with pytest.raises(InvalidArgument, match="without a renderer"):
        TargetString("AMD", arch="gfx1100")
    assert str(TargetString("NV", index=1, renderer="NVRTC")) == "NV:1:NVRTC"
    assert parse_target("nv:1:nvrtc") == TargetString("NV", index=1, renderer="NVRTC")
    with pytest.raises(InvalidArgument, match=r"the index goes on the interface \(KFD:1\+AMD\)"):
        parse_target("KFD+AMD:1")


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


@pytest.mark.parametrize(
    ("text", "index"),
    [("USB:65535+AMD", INDEX_MAX), ("USB:007+AMD", 7), ("USB:" + "0" * 5000 + "1+AMD", 1), ("USB:0+AMD", 0)],
    ids=["the maximum", "leading zeros", "many leading zeros", "zero"],
)
def test_interface_indexes_up_to_the_maximum_parse(text: str, index: int) -> None:
    spec = parse_target(text)
    assert spec.index == index and str(spec) == f"USB:{index}+AMD"


@pytest.mark.parametrize("digits", [str(INDEX_MAX + 1), "9" * 4301, "1" + "0" * 100_000], ids=["max+1", "4301", "1e5"])
def test_an_index_past_the_maximum_is_invalid_argument_naming_the_part_and_the_limit(digits: str) -> None:
    # "9" * 4301 used to reach int() and raise CPython's "Exceeds the limit (4300 digits)" ValueError
    with pytest.raises(InvalidArgument, match=f"interface index must be at most {INDEX_MAX}") as info:
        parse_target(f"USB:{digits}+AMD")
    message = str(info.value)
    assert digits[:20] in message and len(message) < 600, "a long part is shown cut"
    assert len(digits) < 80 or f"({len(digits)} characters)" in message, "a cut part says how long it was"


@pytest.mark.parametrize("value", [b"NULL", None, 42, ["NULL"], 1.5], ids=["bytes", "None", "int", "list", "float"])
def test_a_target_that_is_no_string_is_invalid_argument(value: object) -> None:
    with pytest.raises(InvalidArgument, match=f"target={type(value).__name__} object, expected a target string"):
        parse_target(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("index", [-1, INDEX_MAX + 1, 10**5000, "1", 1.0], ids=["-1", "max+1", "huge", "str", "float"])
def test_a_target_string_with_an_index_out_of_range_is_invalid_argument(index: object) -> None:
    with pytest.raises(InvalidArgument, match=f"expected an int in 0..{INDEX_MAX}"):
        TargetString("AMD", iface="USB", index=index)  # type: ignore[arg-type]
