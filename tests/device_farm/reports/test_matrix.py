"""The test x target matrix."""

from __future__ import annotations

from tinyhil.device_farm.reports.matrix import render_matrix


def test_rows_are_tests_and_columns_are_targets() -> None:
    results = [
        {"nodeid": "t.py::test_a[NULL]", "target": "NULL", "outcome": "passed"},
        {"nodeid": "t.py::test_a[MOCKUSB+AMD]", "target": "MOCKUSB+AMD", "outcome": "failed"},
        {"nodeid": "t.py::test_b[NULL-512]", "target": "NULL", "outcome": "skipped"},
        {"nodeid": "t.py::test_plain", "target": None, "outcome": "passed"},
    ]
    lines = render_matrix(results, ["NULL", "MOCKUSB+AMD"]).splitlines()
    header = lines[0].split()
    assert header == ["test", "NULL", "MOCKUSB+AMD", "(no", "target)"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:]}
    assert rows["test_a"] == ["pass", "FAIL", "-"]
    assert rows["test_b[512]"] == ["skip", "-", "-"]
    assert rows["test_plain"] == ["-", "-", "pass"]
