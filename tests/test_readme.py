"""Every Python block of the README runs as written; the pytest example passes with plain ``pytest`` and on every
available target (``--hil-target all``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).parents[1] / "README.md"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
_HEADING = re.compile(r"^#+ (.*)$", re.MULTILINE)


def _blocks() -> list[tuple[str, str]]:
    """(id, code) of every fenced Python block; the id is the section heading and the block's line number."""
    text = README.read_text(encoding="utf-8")
    found = []
    for match in _BLOCK.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        headings = _HEADING.findall(text, 0, match.start())
        found.append((f"{headings[-1] if headings else 'top'} (line {line})", match.group(1)))
    return found


def _is_pytest_file(code: str) -> bool:
    return bool(re.search(r"^def test_\w+\(hil_", code, re.MULTILINE))


BLOCKS = _blocks()
SCRIPTS = [pytest.param(code, id=name) for name, code in BLOCKS if not _is_pytest_file(code)]
PYTEST_FILES = [pytest.param(code, id=name) for name, code in BLOCKS if _is_pytest_file(code)]


def test_the_readme_has_its_examples() -> None:
    assert len(SCRIPTS) >= 4, "README.md lost its Python examples"
    assert PYTEST_FILES, "README.md lost its pytest example"


@pytest.mark.parametrize("code", SCRIPTS)
def test_every_python_block_runs_as_written(
    code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # blocks may write files (a Perfetto trace)
    exec(compile(code, str(README), "exec"), {"__name__": "readme_example"})
    capsys.readouterr()


@pytest.mark.parametrize("code", PYTEST_FILES)
@pytest.mark.parametrize("args", [(), ("--hil-target", "all")], ids=["plain", "all-targets"])
def test_the_pytest_example_passes(
    code: str, args: tuple[str, ...], pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DEV", raising=False)
    pytester.makepyfile(test_readme_example=code)
    result = pytester.runpytest("-p", "no:cacheprovider", *args)
    outcomes = result.parseoutcomes()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert outcomes.get("passed", 0) >= 1 and not outcomes.get("failed") and not outcomes.get("errors")
