"""Text from files, made safe for a terminal: escapes shown, never sent raw."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tinyhil.printable import printable


def test_ansi_osc_and_bidi_controls_are_shown_as_escapes() -> None:
    hostile = "ok\x1b]52;c;aGk=\x07\x1b[2J\u202eevil\x9b"
    shown = printable(hostile)
    assert shown == "ok\\x1b]52;c;aGk=\\x07\\x1b[2J\\u202eevil\\x9b"
    assert printable("a\tb\nc") == "a\tb\nc"
    assert printable("a\tb\nc", newlines=False) == "a\\x09b\\x0ac"


@given(st.text())
def test_printable_output_holds_no_control_character(text: str) -> None:
    shown = printable(text, newlines=False)
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in shown)


@given(st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cf", "Zl", "Zp", "Cn", "Cs"))))
def test_text_without_controls_is_unchanged(text: str) -> None:
    assert printable(text) == text
