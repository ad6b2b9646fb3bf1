"""The facts a ``runs`` row keeps: the suite's key, the revision of the suite's checkout, the hardware map's hash."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tinyhil.device_farm.history.facts import map_hash, revision, run_facts, suite_key
from tinyhil.device_farm.inventory.hwmap import HardwareMap


def _git(where: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_the_revision_is_the_checkouts_commit(tmp_path: Path) -> None:
    suite = tmp_path / "checkout" / "tests"
    suite.mkdir(parents=True)
    (suite / "test_a.py").write_text("def test_a(): pass\n")
    assert revision([str(suite)]) is None  # not a checkout yet
    _git(tmp_path / "checkout", "init", "-q")
    _git(tmp_path / "checkout", "-c", "user.name=lab", "-c", "user.email=lab@example.org", "add", ".")
    _git(tmp_path / "checkout", "-c", "user.name=lab", "-c", "user.email=lab@example.org", "commit", "-qm", "suite")
    head = _git(tmp_path / "checkout", "rev-parse", "HEAD")
    assert revision([str(suite)]) == head
    assert revision([str(suite / "test_a.py")]) == head
    assert revision(["no_such_package_anywhere"]) is None


def test_the_map_hash_follows_the_file(tmp_path: Path) -> None:
    hwmap = tmp_path / "hwmap.toml"
    hwmap.write_text("# one lab\n")
    first = map_hash(HardwareMap(str(hwmap), ()))
    hwmap.write_text("# another lab\n")
    second = map_hash(HardwareMap(str(hwmap), ()))
    assert first and second and first != second
    assert map_hash(HardwareMap("(emulated targets)", ())) is None


@pytest.mark.parametrize("suite", [("/lab/a",), ("/lab/a", "/lab/b"), ("tinyhil.fixtures.suite",)])
def test_a_run_row_names_its_suite_by_its_entries(suite: tuple[str, ...], tmp_path: Path) -> None:
    facts = run_facts("r1", suite, HardwareMap("(emulated)", ()), tmp_path / "report.html", started=1.0,
                      finished=2.0, exitstatus=0, complete=True)  # fmt: skip
    assert facts.suite == suite_key(suite) and facts.suite.splitlines() == list(suite)
    assert facts.report == str(tmp_path / "report.html") and facts.hosts == ()
