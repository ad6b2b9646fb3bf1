"""Run each test of a pytest selection in a process of its own and print one ``OUTCOME test-id`` line per test.

Usage: ``python each_test_in_a_process.py TARGET PYTEST-SELECTION...``. Under ``tinyhil serve kfd`` each test then
has a KFD process of its own, as each test has a fresh MOCKKFD in-process (amdkfd keeps a process's VM bound to its
first render node file until the process exits, so a second device open in one process gets ``EBUSY``).
"""

from __future__ import annotations

import subprocess
import sys

_OUTCOMES = ("PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL", "XPASS")


def _pytest(*args: str) -> str:
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "-q", *args]
    return subprocess.run(command, capture_output=True, text=True, check=False).stdout


def main(argv: list[str]) -> int:
    target, *selection = argv
    listing = _pytest("--collect-only", "--hil-target", target, *selection)
    ids = [line.strip() for line in listing.splitlines() if "::" in line]
    for test_id in ids:
        report = _pytest("-rA", "--hil-target", target, test_id)
        outcome = next((line.split()[0] for line in report.splitlines() if line.startswith(_OUTCOMES)), "NONE")
        print(outcome, test_id, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
