"""Reproduction bundles: ``--hil-repro-dir`` leaves one per failing test, ``tinyhil repro`` runs it again."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tinyhil.cli import main
from tinyhil.cli import repro as repro_cli
from tinyhil.device_farm.reports.html import render_report
from tinyhil.device_farm.reports.summary import PairReport, farm_summary
from tinyhil.fixtures.summary import write_summary
from tinyhil.trace import load_trace
from tinyhil.trace.bundle import BUNDLE_FILE, BUNDLE_TRACE, BundleError, bundle_dir_name, check_nodeid, load_bundle

TESTS = """
import os

import numpy as np


def test_wrong_value(hil_device):
    value = 41 if os.environ.get("TINYHIL_TEST_WRONG", "1") == "1" else 42
    buf = hil_device.alloc(4096)
    hil_device.copyin(buf, np.full(4096, value, dtype=np.uint8))
    assert bytes(hil_device.copyout(buf))[0] == 42, "wrong value read back"


def test_right_value(hil_device):
    buf = hil_device.alloc(4096)
    hil_device.copyin(buf, np.full(4096, 42, dtype=np.uint8))
    assert bytes(hil_device.copyout(buf))[0] == 42
"""
FAILING = "test_hil.py::test_wrong_value[MOCKUSB+AMD]"


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:randomly", "--hil-target", "MOCKUSB+AMD", *args)


@pytest.fixture
def bundle(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The bundle a failing run leaves (the test writes 41 and expects 42 back)."""
    monkeypatch.delenv("TINYHIL_REPRO_DIR", raising=False)
    monkeypatch.setenv("TINYHIL_TEST_WRONG", "1")
    pytester.makepyfile(test_hil=TESTS)
    _run(pytester, "--hil-repro-dir", "bundles").assert_outcomes(passed=1, failed=1)
    directory = pytester.path / "bundles"
    assert sorted(p.name for p in directory.iterdir()) == [bundle_dir_name(FAILING, "MOCKUSB+AMD")]  # none pending
    return directory / bundle_dir_name(FAILING, "MOCKUSB+AMD")


def test_a_failing_test_leaves_a_bundle(bundle: Path, pytester: pytest.Pytester) -> None:
    data = json.loads((bundle / BUNDLE_FILE).read_text())
    assert (data["nodeid"], data["target"], data["outcome"], data["when"]) == (FAILING, "MOCKUSB+AMD", "failed", "call")
    assert data["reason"] == "AssertionError: wrong value read back"
    assert (data["seed"], data["faults"], data["quirks"], data["board"]) == (0, None, None, None)
    assert data["options"]["revision"] == "pipelined" and data["options"]["mode"] == "sync"
    assert data["versions"]["python"] and data["versions"]["numpy"] and data["versions"]["tinyhil"]
    assert data["rootdir"] == str(pytester.path) and data["trace"] == BUNDLE_TRACE
    trace = load_trace(bundle / BUNDLE_TRACE)
    assert trace.header.target == "MOCKUSB+AMD" and trace.records
    loaded, directory = load_bundle(bundle / BUNDLE_FILE)
    assert directory == bundle and loaded.nodeid == FAILING


def test_the_bundle_reproduces_on_replay_and_on_the_emulator(bundle: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["repro", str(bundle)]) == 0
    out = capsys.readouterr().out
    assert "rerun on REPLAY+AMD over its trace" in out
    assert "rerun:    failed: AssertionError: wrong value read back" in out
    assert "reproduces: the test failed again, with the same reason" in out
    assert main(["repro", "--on", "emulator", str(bundle)]) == 0
    assert "reproduces: the test failed again, with the same reason" in capsys.readouterr().out


def test_a_bundle_that_passes_on_rerun_says_where_it_diverged(
    bundle: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TINYHIL_TEST_WRONG", "0")  # the rerun writes 42: the test passes
    assert main(["repro", "--on", "emulator", str(bundle)]) == 1
    out = capsys.readouterr().out
    assert "rerun:    passed" in out
    records = load_trace(bundle / BUNDLE_TRACE).records
    seq = next(r.seq for r in records if r.op in ("bulk", "submit") and bytes(getattr(r, "data", b"")[:4]) == b")" * 4)
    assert "does not reproduce: the test passed on rerun; first divergence from the recorded trace: request" in out
    assert f"(record seq {seq}) differs; data differs first at byte 0x0" in out
    assert "recorded: bulk OUT ep=0x02 length=" in out and "data=29292929" in out and "data=2a2a2a2a" in out
    # On the replay the driver's write departs from the trace: the test fails with the mismatch, not the assertion.
    assert main(["repro", str(bundle)]) == 1
    out = capsys.readouterr().out
    assert "does not reproduce: the rerun diverged from the recorded trace:" in out
    assert "ReplayMismatch" in out and f"(record seq {seq})" in out


CONFTEST = """
import os

import pytest

from tinyhil.emulators.asm2464 import Quirks


@pytest.hookimpl(tryfirst=True)
def pytest_hil_open_device(target, request, options):
    if os.environ.get("TINYHIL_TEST_QUIRKY") != "1":
        return None
    return target.open(quirks=Quirks(full_window_corruption=True), seed=5, **options)
"""
QUIRKY_TEST = """
import numpy as np

from tinyhil.spec.copyin import CHUNK_BYTES


def test_full_window(hil_device):
    data = np.arange(CHUNK_BYTES, dtype=np.uint8)
    buf = hil_device.alloc(data.nbytes)
    hil_device.copyin(buf, data)
    assert bytes(hil_device.copyout(buf)) == data.tobytes()
"""


def test_a_site_plugin_gets_the_trace_options_and_the_bundle_keeps_its_options(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TINYHIL_TEST_QUIRKY", "1")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_quirky=QUIRKY_TEST)
    _run(pytester, "--hil-repro-dir", "bundles").assert_outcomes(failed=1)
    (found,) = (pytester.path / "bundles").iterdir()
    loaded, _ = load_bundle(found)
    # the conftest's hook opened the board with its own options and the plugin's record=: both are in the trace
    assert loaded.quirks is not None and loaded.quirks["full_window_corruption"] is True and loaded.seed == 5
    assert "DrainError" in loaded.reason and loaded.trace == BUNDLE_TRACE
    monkeypatch.setenv("TINYHIL_TEST_QUIRKY", "0")  # the hook steps aside: only the bundle's options bring the quirk
    assert main(["repro", "--on", "emulator", str(found)]) == 0
    assert "reproduces: the test failed again, with the same reason" in capsys.readouterr().out


def test_a_passing_run_leaves_no_bundle_and_no_pending_trace(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TINYHIL_TEST_WRONG", "0")
    pytester.makepyfile(test_hil=TESTS)
    monkeypatch.setenv("TINYHIL_REPRO_DIR", str(pytester.path / "from-env"))
    _run(pytester).assert_outcomes(passed=2)
    assert list((pytester.path / "from-env").iterdir()) == []


def _write(directory: Path, data: object) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / BUNDLE_FILE).write_text(data if isinstance(data, str) else json.dumps(data))
    return directory


def _good(tmp_path: Path) -> dict[str, object]:
    return {"format": "tinyhil-repro", "version": 1, "nodeid": "t.py::t[NULL]", "target": "NULL", "options": {},
            "outcome": "failed", "when": "call", "reason": "boom", "rootdir": str(tmp_path),
            "invocation_dir": str(tmp_path)}  # fmt: skip


MISSING = object()
BAD_BUNDLES = [
    ("not JSON", "{", "file", "not JSON"),
    ("a list", [], "file", "a list, expected a table"),
    ("deep nesting", "[" * 5000 + "]" * 5000, "file", "nested deeper than"),
    ("a huge int", '{"seed": ' + "9" * 5000 + "}", "file", "digits, expected at most"),
    ("wrong format", {"format": "other"}, "format", "'other', expected 'tinyhil-repro'"),
    ("wrong version", {"version": 2}, "version", "2, expected 1"),
    ("missing field", {"nodeid": MISSING}, "nodeid", "missing"),
    ("mistyped field", {"nodeid": 3}, "nodeid", "3, expected a non-empty string"),
    ("mistyped seed", {"seed": "7"}, "seed", "'7', expected an integer"),
    ("mistyped options", {"options": []}, "options", "[], expected a table"),
    ("unknown field", {"colour": "red"}, "colour", "unknown field"),
    ("not a failure", {"outcome": "passed"}, "outcome", "'passed', expected one of failed, error"),
    ("no phase", {"when": "later"}, "when", "'later', expected one of setup, call, teardown"),
    ("trace missing", {"trace": "gone.hiltrace.jsonl"}, "trace", "no such file"),
    ("trace outside", {"trace": "../x.hiltrace.jsonl"}, "trace", "no such file"),
    ("an option as node id", {"nodeid": "--basetemp=/tmp/x"}, "nodeid", "does not start with a test file's path"),
    ("a plugin as node id", {"nodeid": "-pevil"}, "nodeid", "does not start with a test file's path"),
    ("a node id escaping the root", {"nodeid": "tests/../../x.py::t"}, "nodeid", "'..', '.' or empty parts"),
    ("an absolute node id", {"nodeid": "/etc/t.py::t"}, "nodeid", "an absolute path"),
    ("a directory as node id", {"nodeid": "tests"}, "nodeid", "not the path of a .py file"),
    ("no test name", {"nodeid": "t.py"}, "nodeid", "no '::' and test name"),
    ("a test name that is no name", {"nodeid": "t.py::-x"}, "nodeid", "no Python name"),
    ("an unclosed parametrize id", {"nodeid": "t.py::t[NULL"}, "nodeid", "does not end with ']'"),
    ("escapes in the node id", {"nodeid": "t.py::t\x1b]0;x\x07"}, "nodeid", "holds control characters"),
    ("an option as target", {"target": "--basetemp=/tmp/x"}, "target", "target string '--basetemp=/tmp/x'"),
    ("a relative rootdir", {"rootdir": "somewhere"}, "rootdir", "'somewhere', expected an absolute path"),
    ("a missing rootdir", {"rootdir": "/nonexistent/tinyhil"}, "rootdir", "no such directory"),
    ("a relative test path", {"test_path": "t.py"}, "test_path", "expected an absolute path"),
    ("a test path that is no module", {"test_path": "/bin/sh"}, "test_path", "expected the absolute path of a .py"),
]


@pytest.mark.parametrize(("case", "change", "field", "message"), BAD_BUNDLES, ids=[b[0] for b in BAD_BUNDLES])
def test_bad_bundles_are_typed_errors_naming_the_file_and_field(
    tmp_path: Path, case: str, change: object, field: str, message: str
) -> None:
    merged = {**_good(tmp_path), **change} if isinstance(change, dict) else {}
    data = change if not isinstance(change, dict) else {k: v for k, v in merged.items() if v is not MISSING}
    directory = _write(tmp_path / "b", data)
    with pytest.raises(BundleError) as caught:
        load_bundle(directory)
    assert caught.value.field == field and caught.value.path == str(directory / BUNDLE_FILE)
    assert message in str(caught.value) and str(directory / BUNDLE_FILE) in str(caught.value)
    assert "\n" not in str(caught.value) and "\x1b" not in str(caught.value)


def test_a_rootdir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    directory = _write(tmp_path / "b", {**_good(tmp_path), "rootdir": str(tmp_path / "afile")})
    with pytest.raises(BundleError, match=r"rootdir: .*afile'?: no such directory") as caught:
        load_bundle(directory)
    assert caught.value.field == "rootdir"


@pytest.mark.parametrize(
    "nodeid",
    ["t.py::t", "tests/sub/test_x.py::TestA::test_b", "t.py::t[NULL]", "t.py::t[MOCKUSB+AMD-1-a b \\(x\\) [y]]",
     "t.py::test_café[é]"],
)  # fmt: skip
def test_real_node_ids_are_accepted(nodeid: str) -> None:
    assert check_nodeid(nodeid) == nodeid


def _snapshot(directory: Path) -> dict[str, bytes | None]:
    """Every file (its bytes) and folder (``None``) under ``directory``."""
    return {str(p.relative_to(directory)): (p.read_bytes() if p.is_file() else None) for p in directory.rglob("*")}


def _hostile(tmp_path: Path, nodeid: str) -> tuple[Path, Path]:
    """A bundle whose rootdir holds a test and a module that marks its import; and a sentinel folder outside it."""
    root, sentinel = tmp_path / "root", tmp_path / "sentinel"
    for folder in (root, sentinel / "inner"):
        folder.mkdir(parents=True)
    (root / "test_t.py").write_text("def test_t():\n    assert False\n")
    (root / "evil.py").write_text(f"open({str(tmp_path / 'MARKER')!r}, 'w').write('ran')\n")
    (sentinel / "inner" / "keep.txt").write_text("keep")
    (sentinel / "report.xml").write_text("<keep/>")
    good = {**_good(root), "nodeid": nodeid.replace("SENTINEL", str(sentinel))}
    return _write(tmp_path / "bundle", good), sentinel


HOSTILE_NODE_IDS = ["--basetemp=SENTINEL", "--junitxml=SENTINEL/report.xml", "-pevil", "-p evil", "../sentinel/x.py::t",
                    "SENTINEL/x.py::t", "test_t.py::test_t --basetemp=SENTINEL"]  # fmt: skip


@pytest.mark.parametrize("nodeid", HOSTILE_NODE_IDS)
def test_a_hostile_node_id_changes_nothing_and_is_one_line(
    tmp_path: Path, nodeid: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle, sentinel = _hostile(tmp_path, nodeid)
    before = _snapshot(sentinel)
    with pytest.raises(BundleError) as caught:
        load_bundle(bundle)
    assert caught.value.field == "nodeid"
    assert main(["repro", "--on", "emulator", str(bundle)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tinyhil repro: ") and "nodeid: node id" in err
    assert _snapshot(sentinel) == before and sentinel.is_dir()
    assert not (tmp_path / "MARKER").exists(), "a module the bundle named was imported"


@pytest.mark.parametrize("rootdir", ["missing", "afile"])
def test_a_rootdir_that_is_no_directory_is_one_line_and_exit_2(
    tmp_path: Path, rootdir: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "afile").write_text("")
    bundle = _write(tmp_path / "b", {**_good(tmp_path), "rootdir": str(tmp_path / rootdir)})
    assert main(["repro", "--on", "emulator", str(bundle)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rootdir: " in err and "no such directory" in err and "Traceback" not in err


def test_nothing_from_the_bundle_becomes_a_pytest_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The rerun's command line: the node id after ``--``, every bundle value an ``=`` option's value."""
    commands: list[list[str]] = []

    def run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        commands.append(command)
        return subprocess.CompletedProcess(command, 5, "", "")

    monkeypatch.setattr(repro_cli.subprocess, "run", run)
    bundle = _write(tmp_path / "b", {**_good(tmp_path), "nodeid": "t.py::t[NULL]", "reason": "\x1b]0;title\x07x"})
    assert main(["repro", "--on", "emulator", str(bundle)]) == 2  # no summary: the rerun ran no such test
    (command,) = commands
    split = command.index("--")
    assert command[split + 1 :] == ["t.py::t[NULL]"]
    assert all(arg.startswith("-") for arg in command[3:split] if arg not in ("pytest", "no:cacheprovider"))
    assert "--hil-target=NULL" in command and f"--hil-bundle-options={bundle}" in command
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "recorded: failed in call: \\x1b]0;title\\x07x" in out


def test_repro_help_says_it_runs_the_test_code(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["repro", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "Replaying a bundle runs the test code it names" in help_text


def test_a_missing_bundle_and_the_cli_give_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(BundleError, match="file: no such bundle"):
        load_bundle(tmp_path / "nothing")
    assert main(["repro", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("tinyhil repro: ") and "no such bundle" in err and "\n" not in err
    no_trace = _write(tmp_path / "nt", _good(tmp_path))
    assert main(["repro", "--on", "replay", str(no_trace)]) == 2
    assert "the bundle holds no trace (NULL records none), expected --on emulator" in capsys.readouterr().err


def test_farm_reports_link_a_failing_pairs_bundle(tmp_path: Path) -> None:
    final = {"nodeid": "t.py::t", "target": "MOCKUSB+AMD", "board": "b1", "host": "h", "attempt": 1,
             "outcome": "failed", "reason": "boom", "bundle": str(tmp_path / "bundle-dir")}  # fmt: skip
    passed = {**final, "nodeid": "t.py::u", "outcome": "passed", "bundle": str(tmp_path / "stale")}
    reports = [PairReport(final), PairReport(passed)]
    write_summary(tmp_path / "summary.json", farm_summary(reports, {"run_id": "r", "exitstatus": 1, "targets": []}))
    results = json.loads((tmp_path / "summary.json").read_text())["results"]
    assert [r["bundle"] for r in results] == [str(tmp_path / "bundle-dir"), None]
    page = render_report(reports, {"run_id": "r"})
    assert page.count('class="bundle"') == 1
    assert f'data-bundle="{tmp_path / "bundle-dir"}"' in page and f"tinyhil repro {tmp_path / 'bundle-dir'}" in page


def test_a_farm_shard_puts_the_board_entry_in_the_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TINYHIL_TEST_WRONG", "1")
    suite = tmp_path / "test_farm_hil.py"
    suite.write_text(TESTS)
    bundles = tmp_path / "bundles"
    status = main(["run", "--target", "MOCKUSB+AMD", "--suite", str(suite), "--report", str(tmp_path / "report"),
                   "--workers", "1", "--", "-k", "wrong", "--hil-repro-dir", str(bundles)])  # fmt: skip
    assert status == 1
    (found,) = bundles.iterdir()
    loaded, _ = load_bundle(found)
    assert (
        loaded.board is not None and loaded.board["board"] == "mockusb-amd" and loaded.board["target"] == "MOCKUSB+AMD"
    )
    assert loaded.test_path == str(suite)
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    failed = [r for r in summary["results"] if r["outcome"] == "failed"]
    assert [r["bundle"] for r in failed] == [str(found)]  # the farm's report links the bundle the shard wrote
    assert loaded.trace is not None  # MOCKUSB+AMD records: the bundle keeps the trace, and the reports name both
    artifacts = {"bundle": str(found), "trace": str(found / loaded.trace)}
    assert [r["artifacts"] for r in failed] == [artifacts]
    cases = ET.parse(tmp_path / "report" / "junit.xml").getroot().iter("testcase")
    failing = [c for c in cases if c.find("failure") is not None]
    properties = [{p.get("name"): p.get("value") for p in c.iter("property")} for c in failing]
    assert [{k: v for k, v in found_.items() if k in artifacts} for found_ in properties] == [artifacts]
    assert f'data-bundle="{found}"' in (tmp_path / "report" / "report.html").read_text()
    capsys.readouterr()
    assert main(["repro", str(found)]) == 0  # the shard's rootdir does not hold the test: its path does
    assert "reproduces" in capsys.readouterr().out


def test_a_bad_bundle_option_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_hil=TESTS)
    result = _run(pytester, "--hil-bundle-options", "nowhere")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--hil-bundle-options: nowhere: file: no such bundle*"])
