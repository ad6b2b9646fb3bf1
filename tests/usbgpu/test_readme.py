"""The README's "Reproducing the full-window question in emulation" example runs as written, with its quirk switch
on (the pipelined revision breaks, detectably) and off (both revisions are correct), so it cannot rot."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).parents[2] / "README.md"
MARKER = "<!-- readme-example: full-window -->"
SWITCH = "Quirks(full_window_corruption=True)"


def example() -> str:
    text = README.read_text(encoding="utf-8")
    found = re.search(re.escape(MARKER) + r"\s*```python\n(.*?)```", text, re.DOTALL)
    assert found is not None, f"README.md lost the fenced python block after {MARKER}"
    return found.group(1)


@pytest.mark.parametrize("quirk", [True, False], ids=["quirk-on", "quirk-off"])
def test_readme_full_window_example(quirk: bool, capsys: pytest.CaptureFixture[str]) -> None:
    code = example()
    assert SWITCH in code
    if not quirk:
        code = code.replace(SWITCH, "Quirks()")
    exec(compile(code, f"{README}:{MARKER}", "exec"), {"__name__": "readme_example"})
    lines = capsys.readouterr().out.splitlines()
    if quirk:
        assert len(lines) == 2
        assert lines[0].startswith("pipelined: GPU failed to drain chunk 0 (seq 0): ")
        assert lines[1] == "sentinel-sector: correct"
    else:
        assert lines == ["pipelined: correct", "sentinel-sector: correct"]
