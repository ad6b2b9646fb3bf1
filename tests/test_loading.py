"""The one loader rule: size, depth and integer caps, typed fields, and one error naming file, line and field."""

from __future__ import annotations

import contextlib
from enum import StrEnum
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinyhil.loading import (
    INT_DIGITS_MAX,
    LIMITS,
    NESTING_MAX,
    Fields,
    FileFormatError,
    parse_json,
    parse_toml,
    read_capped,
)


def test_read_capped_refuses_a_file_over_its_limit_without_reading_it_whole(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    cap = LIMITS["bundle"].max_bytes
    path.write_bytes(b" " * (cap + 1))
    with pytest.raises(FileFormatError, match=rf"larger than {cap} bytes") as info:
        read_capped(path, "bundle")
    assert info.value.path == str(path) and info.value.field == "file"
    path.write_bytes(b" " * cap)
    assert len(read_capped(path, "bundle")) == cap


@pytest.mark.parametrize("make", [lambda p: p, lambda p: p / "missing"], ids=["directory", "missing"])
def test_read_capped_turns_os_errors_into_the_typed_error(tmp_path: Path, make: object) -> None:
    target = make(tmp_path)  # type: ignore[operator]
    with pytest.raises(FileFormatError, match="cannot read it"):
        read_capped(target, "hwmap")


def test_parse_json_refuses_deep_nesting_long_integers_and_non_finite_numbers() -> None:
    with pytest.raises(FileFormatError, match=f"deeper than {NESTING_MAX}"):
        parse_json("[" * (NESTING_MAX + 1) + "]" * (NESTING_MAX + 1), "f.json")
    with pytest.raises(FileFormatError, match=f"deeper than {NESTING_MAX}"):
        parse_json("[" * 100_000 + "]" * 100_000, "f.json")  # past the C parser's recursion limit
    with pytest.raises(FileFormatError, match="integer of 5000 digits"):
        parse_json('{"a": ' + "9" * 5000 + "}", "f.json", line=7)
    with pytest.raises(FileFormatError, match="NaN is not JSON"):
        parse_json("[NaN]", "f.json")
    with pytest.raises(FileFormatError, match="not UTF-8") as info:
        parse_json(b'{"a": "\xff"}', "f.json", line=3)
    assert info.value.line == 3 and str(info.value).startswith("f.json:3: file:")
    assert parse_json("[" * NESTING_MAX + "]" * NESTING_MAX, "f.json") is not None
    assert parse_json(str(-(10**19)), "f.json") == -(10**19)


def test_parse_json_refuses_integers_past_64_bits_by_field() -> None:
    with pytest.raises(FileFormatError, match="past 64 bits") as info:
        parse_json('{"a": {"b": [1, 99999999999999999999]}}', "f.json")
    assert info.value.field == "a.b[1]"


def test_parse_toml_refuses_what_tomllib_would_raise_untyped() -> None:
    with pytest.raises(FileFormatError, match="not TOML") as info:
        parse_toml("a = \n", "m.toml")
    assert info.value.line == 1
    with pytest.raises(FileFormatError, match="deeper than"):
        parse_toml("a = " + "[" * 5000 + "]" * 5000, "m.toml")
    with pytest.raises(FileFormatError):
        parse_toml("a = " + "9" * 5000, "m.toml")
    with pytest.raises(FileFormatError, match="past 64 bits"):
        parse_toml("a = 99999999999999999999", "m.toml")
    assert parse_toml(b"a = 1\n", "m.toml") == {"a": 1}


class _Colour(StrEnum):
    RED = "red"
    BLUE = "blue"


def test_fields_type_each_value_once_and_name_file_line_and_field() -> None:
    fields = Fields({"n": 3, "s": "x", "b": True, "l": ["a"], "c": "rde", "t": {"x": "1"}}, "f.json", line=4)
    assert fields.integer("n", minimum=1, maximum=3) == 3
    assert fields.string("s") == "x"
    assert fields.boolean("b") is True
    assert fields.strings("l") == ("a",)
    assert fields.integer("missing", required=False) is None
    with pytest.raises(FileFormatError, match=r"f\.json:4: n: 3, expected an integer >= 4") as info:
        fields.integer("n", minimum=4)
    assert (info.value.line, info.value.field) == (4, "n")
    with pytest.raises(FileFormatError, match="did you mean 'red'"):
        fields.choice("c", _Colour)
    nested = fields.table_of("t")
    assert nested is not None
    with pytest.raises(FileFormatError, match=r"t\.x: '1', expected an integer"):
        nested.integer("x")
    with pytest.raises(FileFormatError, match="unknown field"):
        fields.only(["n", "s"])
    with pytest.raises(FileFormatError, match=r"nothing: missing, expected a non-empty string$"):
        fields.string("nothing")
    with pytest.raises(FileFormatError, match="expected an integer"):
        Fields({"b": True}, "f").integer("b")  # a bool is no integer
    with pytest.raises(FileFormatError, match=r"f: file: a list, expected a table"):
        Fields([], "f")


def test_fields_cut_a_huge_value_in_the_message() -> None:
    with pytest.raises(FileFormatError) as info:
        Fields({"s": "x" * 100_000}, "f").integer("s")
    assert len(str(info.value)) < 200


@pytest.mark.fuzz
@given(st.binary(max_size=512))
def test_fuzz_parse_json_and_toml_raise_only_the_typed_error(data: bytes) -> None:
    for parse in (parse_json, parse_toml):
        with contextlib.suppress(FileFormatError):
            parse(data, "fuzz")


@pytest.mark.fuzz
@given(st.integers(min_value=1, max_value=200), st.sampled_from("[{"))
def test_fuzz_nesting_of_any_depth_is_parsed_or_refused(depth: int, opener: str) -> None:
    closer = {"[": "]", "{": "}"}[opener]
    body = (opener + ('"k": ' if opener == "{" else "")) * depth + "1" + closer * depth
    try:
        parse_json(body, "fuzz")
    except FileFormatError as exc:
        assert depth > NESTING_MAX - 1 and "deeper" in str(exc)
    assert INT_DIGITS_MAX >= 20
