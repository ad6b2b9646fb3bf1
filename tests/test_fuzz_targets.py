"""Fuzz: random target strings and selector lists through parse_target, resolve and select.

Every outcome is a result or :class:`InvalidArgument` (never another exception), a parsed string round-trips
through ``str()``, and a resolved target resolves again to itself. Run longer with ``HYPOTHESIS_PROFILE=nightly``.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinyhil.errors import InvalidArgument
from tinyhil.registry import SELECT_ALL, SELECT_EMULATED, Target, default_registry
from tinyhil.target import INDEX_MAX, TargetString, parse_target

# Pieces a target string is made of, and pieces that break it: names, numbers (huge ones too), look-alike Unicode
# (dotless i, sharp s, fullwidth and Arabic-Indic digits, a combining mark), NULs, spaces, glob characters.
_PIECES = [
    "USB", "MOCKUSB", "KFD", "MOCKKFD", "AMD", "NV", "NULL", "QCOMCL", "QEMUCC", "LLVM", "HIP", "CC", "gfx1100",
    "gfx1201", "a630", "aarch64", "all", "emulated", "mock", "0", "1", "7", "8", "007", str(INDEX_MAX),
    str(INDEX_MAX + 1), "", " ", "\t", "\x00", "*", "?", "[", "]", "-", ".", "_",
    "\u0131", "\u0130", "\u00df", "\ufb00", "\uff11", "\u0663", "e\u0301", "\u216b", "\U0001f4a5",
]  # fmt: skip
_SEPARATORS = [":", "+", ",", "", " ", "::", "++", ":+", "+:"]

huge_numbers = st.integers(1, 6000).map(lambda n: "9" * n) | st.integers(0, 10**40).map(str)
pieces = st.sampled_from(_PIECES) | huge_numbers | st.text(max_size=6)
assembled = st.lists(st.tuples(pieces, st.sampled_from(_SEPARATORS)), max_size=6).map(
    lambda parts: "".join(piece + separator for piece, separator in parts)
)
registered_names = st.sampled_from([d.name for d in default_registry().definitions()])
# A registered name, changed a little: case, an index, a renderer or arch, spaces.
variants = st.tuples(
    registered_names,
    st.sampled_from(["", ":LLVM", ":llvm:gfx1100", ":HIP:gfx950", ":CC", ":QEMUCC:aarch64", ":x"]),
    st.sampled_from([str.upper, str.lower, str.strip, lambda s: f"  {s}\n"]),
    st.none() | st.integers(0, 10).map(str) | st.sampled_from([str(INDEX_MAX), str(INDEX_MAX + 1)]) | huge_numbers,
).map(lambda t: _variant(*t))
target_texts = st.one_of(st.text(), assembled, variants, huge_numbers.map(lambda digits: f"USB:{digits}+AMD"))
not_strings = st.one_of(st.none(), st.binary(max_size=8), st.integers(), st.floats(), st.lists(st.text(max_size=3)))


def _variant(name: str, suffix: str, case: Any, index: str | None) -> str:
    text = name + suffix if ":" not in name else name
    if index is not None and "+" in text:
        iface, _, rest = text.partition("+")
        text = f"{iface}:{index}+{rest}"
    return str(case(text))


def _round_trips(spec: TargetString) -> None:
    canonical = str(spec)
    assert parse_target(canonical) == spec, f"{canonical!r} does not parse back to {spec!r}"
    assert str(parse_target(canonical)) == canonical
    assert spec.index is None or 0 <= spec.index <= INDEX_MAX


@pytest.mark.fuzz
@given(text=target_texts | not_strings)
def test_parse_target_gives_a_round_tripping_spec_or_invalid_argument(text: Any) -> None:
    try:
        spec = parse_target(text)
    except InvalidArgument:
        return
    assert isinstance(text, str)
    _round_trips(spec)


@pytest.mark.fuzz
@given(text=target_texts | not_strings)
def test_resolve_gives_a_target_that_resolves_again_or_invalid_argument(text: Any) -> None:
    registry = default_registry()
    try:
        resolved = registry.resolve(text)
    except InvalidArgument:
        return
    assert isinstance(resolved, Target)
    _round_trips(resolved.spec)
    again = registry.resolve(resolved.name)
    assert (again.name, again.definition, again.renderer, again.arch) == (
        resolved.name,
        resolved.definition,
        resolved.renderer,
        resolved.arch,
    )


selector_entries = st.one_of(
    target_texts,
    st.sampled_from([SELECT_ALL, SELECT_EMULATED, "ALL", "MOCK*", "*", "*+AMD", "[", "[!M]*", "NULL,MOCKKFD+AMD"]),
    st.lists(variants, min_size=1, max_size=3).map(",".join),
    not_strings,
)
selector_lists = st.one_of(
    st.lists(selector_entries, max_size=4),
    st.lists(selector_entries, max_size=4).map(tuple),
    target_texts,  # one string where a list belongs
    not_strings,
)


@pytest.mark.fuzz
@given(selectors=selector_lists)
def test_select_gives_distinct_targets_or_invalid_argument(selectors: Any) -> None:
    try:
        selected = default_registry().select(selectors)
    except InvalidArgument:
        return
    assert isinstance(selectors, list | tuple) and all(isinstance(s, str) for s in selectors)
    names = [target.name for target in selected]
    assert len(names) == len(set(names)), f"select({selectors!r}) repeats a target: {names}"
    for target in selected:
        _round_trips(target.spec)
