"""docs/security.md's table of loader caps says what tinyhil.loading.LIMITS holds, row for row."""

from __future__ import annotations

import re
from pathlib import Path

from tinyhil.loading import LIMITS

DOC = Path(__file__).resolve().parent.parent / "docs" / "security.md"
_ROW = re.compile(
    r"^\| `(?P<name>[a-z-]+)` \| (?P<what>[^|]+) \| (?P<size>\d+) (?P<unit>KiB|MiB)(?P<line> per line)? \|$"
)


def _table() -> dict[str, tuple[str, int, bool]]:
    text = DOC.read_text()
    body = text.split("<!-- limits-table:", 1)[1].split("<!-- end limits-table -->", 1)[0]
    rows = {}
    for line in body.splitlines():
        found = _ROW.match(line)
        if found:
            size = int(found["size"]) << (10 if found["unit"] == "KiB" else 20)
            rows[found["name"]] = (found["what"].strip(), size, bool(found["line"]))
    return rows


def test_the_documented_caps_are_the_loaders_caps() -> None:
    documented = _table()
    actual = {name: (limit.what, limit.max_bytes, limit.per_line) for name, limit in LIMITS.items()}
    assert documented == actual
