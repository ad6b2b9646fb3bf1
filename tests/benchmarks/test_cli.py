"""Every benchmark script exits quietly when its reader closes stdout early (``... | head -1``): benchmarks/_cli.py."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from support.scripts import BENCHMARKS, load_benchmark

SCRIPTS = sorted(BENCHMARKS.glob("bench_*.py"))


CLI = load_benchmark("_cli")


def test_a_reader_that_closes_after_one_line_gets_no_traceback() -> None:
    """Unbuffered, so each line is its own write: the memory line comes after the reader has gone."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, str(BENCHMARKS / "bench_usb_copy.py"), "--mb", "1", "--repeats", "1"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as bench:
        assert bench.stdout is not None and bench.stderr is not None
        first = bench.stdout.readline()
        bench.stdout.close()
        stderr = bench.stderr.read().decode()
        status = bench.wait(timeout=300)
    assert first.startswith(b"MOCKUSB+AMD copyin 1 MB: ")
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr
    assert stderr == ""
    assert status == CLI.BROKEN_PIPE_EXIT_STATUS == 0


@pytest.mark.parametrize(("main", "status"), [(lambda: 0, 0), (lambda: None, 0), (lambda: 3, 3)])
def test_run_main_exits_with_mains_status(main: Callable[[], int | None], status: int) -> None:
    with pytest.raises(SystemExit) as exited:
        CLI.run_main(main)
    assert exited.value.code == status


def test_on_a_broken_pipe_run_main_exits_quietly_with_stdout_on_devnull(capfd: pytest.CaptureFixture[str]) -> None:
    def main() -> int:
        raise BrokenPipeError(32, "Broken pipe")

    saved = os.dup(sys.stdout.fileno())
    try:
        with pytest.raises(SystemExit) as exited:
            CLI.run_main(main)
        on_devnull = os.path.samestat(os.fstat(sys.stdout.fileno()), os.stat(os.devnull))
    finally:
        os.dup2(saved, sys.stdout.fileno())
        os.close(saved)
    assert exited.value.code == CLI.BROKEN_PIPE_EXIT_STATUS
    assert on_devnull, "the interpreter's final flush must go nowhere rather than raise again"
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize("script", SCRIPTS, ids=[script.stem for script in SCRIPTS])
def test_every_benchmark_script_runs_its_main_through_run_main(script: Path) -> None:
    """The one place that handles a closed stdout; a script with its own ``sys.exit(main())`` would lose it."""
    tail = script.read_text().rstrip().splitlines()[-4:]
    assert tail == [
        'if __name__ == "__main__":',
        "    from _cli import run_main  # this script's folder is on sys.path when it runs as a script",
        "",
        "    run_main(main)",
    ], f"{script.name} must end by running main through benchmarks/_cli.py's run_main"
