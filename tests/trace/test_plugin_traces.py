"""``--hil-record DIR`` writes one trace per test and target; ``--hil-replay`` runs the same tests on REPLAY+AMD."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.usage_errors import assert_one_usage_error

from tinyhil.mocks.replay import ENV_REPLAY
from tinyhil.trace import load_trace, trace_file_name

TESTS = """
import numpy as np
import pytest


@pytest.mark.hil(requires=["copyin", "copyout"])
def test_round_trip(hil_device):
    data = np.arange(300_000, dtype=np.uint32).view(np.uint8)[:300_000]
    buf = hil_device.alloc(data.nbytes)
    hil_device.copyin(buf, data)
    assert bytes(hil_device.copyout(buf)) == data.tobytes()


@pytest.mark.hil(requires=["fill", "copyout"])
def test_fill(hil_device):
    buf = hil_device.alloc(4096)
    hil_device.fill(buf, 7)
    assert bytes(hil_device.copyout(buf)) == bytes([7]) * 4096
"""


def test_record_then_replay_the_same_tests(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_REPLAY, raising=False)
    pytester.makepyfile(test_hil=TESTS)
    recorded = pytester.runpytest_subprocess("-p", "no:randomly", "--hil-target", "MOCKUSB+AMD",
                                             "--hil-record", "rec")  # fmt: skip
    recorded.assert_outcomes(passed=2)
    names = sorted(p.name for p in (pytester.path / "rec").iterdir())
    tests = ("test_fill", "test_round_trip")
    expected = sorted(trace_file_name(f"test_hil.py::{t}[MOCKUSB+AMD]", "MOCKUSB+AMD") for t in tests)
    assert names == expected
    trace = load_trace(pytester.path / "rec" / expected[1])
    assert trace.header.target == "MOCKUSB+AMD" and trace.records
    replayed = pytester.runpytest_subprocess("-p", "no:randomly", "-v", "--hil-replay", "rec")
    replayed.assert_outcomes(passed=2)
    replayed.stdout.fnmatch_lines(["*test_round_trip?REPLAY+AMD? PASSED*", "*test_fill?REPLAY+AMD? PASSED*"])
    assert ENV_REPLAY not in os.environ


def test_a_test_without_a_trace_is_skipped_naming_the_file(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(test_hil=TESTS)
    (pytester.path / "empty").mkdir()
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-rs", "--hil-replay", "empty")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*no trace of test_hil.py::test_fill?REPLAY+AMD? recorded in *empty*"])


def test_a_replay_of_another_test_fails_with_the_mismatch(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_hil=TESTS)
    pytester.runpytest_subprocess("-p", "no:randomly", "--hil-target", "MOCKUSB+AMD", "--hil-record", "rec")
    fill = next((pytester.path / "rec").glob("*test_fill*"))
    result = pytester.runpytest_subprocess("-p", "no:randomly", "--hil-replay", str(fill), "-k", "round_trip")
    result.assert_outcomes(failed=1, errors=1)
    result.stdout.fnmatch_lines(["*ReplayMismatch: replay of *test_fill*: call * differs from the recording*"])


def test_a_missing_replay_path_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_hil=TESTS)
    result = pytester.runpytest_subprocess("--hil-replay", "nowhere.hiltrace.jsonl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--hil-replay 'nowhere.hiltrace.jsonl': no such file or directory*"])


@pytest.mark.parametrize("as_directory", [False, True], ids=["file", "directory"])
def test_a_corrupt_replay_trace_is_one_usage_error_at_session_start(
    pytester: pytest.Pytester, recorded: Path, monkeypatch: pytest.MonkeyPatch, as_directory: bool
) -> None:
    monkeypatch.delenv(ENV_REPLAY, raising=False)
    pytester.makepyfile(test_hil=TESTS)
    folder = pytester.path / "rec"
    folder.mkdir()
    lines = recorded.read_bytes().splitlines(keepends=True)
    bad = folder / trace_file_name("test_hil.py::test_fill[REPLAY+AMD]", "REPLAY+AMD")
    bad.write_bytes(b"".join([*lines[:3], b'{"seq": 1' + b"0" * 5000 + b"}\n", *lines[4:]]))
    result = pytester.runpytest("-p", "no:randomly", "--hil-replay", str(folder if as_directory else bad))
    assert_one_usage_error(
        result, f"--hil-replay: {bad}: line 4: not a JSON object: not JSON: an integer of 5001 digits"
    )


def test_a_record_path_that_is_a_file_is_one_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_hil=TESTS)
    (pytester.path / "afile").write_text("")
    result = pytester.runpytest("--hil-target", "MOCKUSB+AMD", "--hil-record", "afile")
    assert_one_usage_error(result, "--hil-record 'afile': not a directory, expected a directory for the traces")


def test_recording_on_a_target_that_cannot_record_says_so_once(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_hil=TESTS)
    result = pytester.runpytest("-p", "no:randomly", "--hil-target", "MOCKKFD+AMD", "--hil-record", "rec")
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert out.count("--hil-record: target MOCKKFD+AMD cannot record a USB trace") == 1, out
    assert not list((pytester.path / "rec").iterdir())
