"""``--on-finish``: the command split without a shell, run once with the summary's path, its failure a warning."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from tinyhil.device_farm.finish_hook import on_finish_command, run_on_finish
from tinyhil.errors import InvalidArgument


def test_the_command_gets_the_summarys_path_last_and_no_shell(tmp_path: Path) -> None:
    seen = tmp_path / "seen.txt"
    script = "import sys; open(sys.argv[1], 'w').write(repr(sys.argv[2:]))"
    argv = on_finish_command(f"{sys.executable} -c {script!r} {seen} '$HOME; echo no'")
    err = io.StringIO()
    run_on_finish(argv, tmp_path / "summary.json", err)
    assert err.getvalue() == ""
    assert seen.read_text() == repr(["$HOME; echo no", str(tmp_path / "summary.json")])


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (f"{sys.executable} -c 'raise SystemExit(3)'", "exit status 3; the run's status is the tests'"),
        ("/no/such/notifier --to ops", "No such file or directory; the run's status is the tests'"),
    ],
)
def test_a_failing_command_is_one_warning_line(tmp_path: Path, command: str, expected: str) -> None:
    err = io.StringIO()
    run_on_finish(on_finish_command(command), tmp_path / "summary.json", err)
    (line,) = err.getvalue().splitlines()
    assert line.startswith("tinyhil: --on-finish ") and line.endswith(expected)


@pytest.mark.parametrize(
    ("text", "message"), [("", "empty"), ("   ", "empty"), ("notify 'half", "No closing quotation")]
)
def test_a_bad_command_line_is_refused(text: str, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        on_finish_command(text)
