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
    assert rows["t.py::test_a"] == ["pass", "FAIL", "-"]
    assert rows["t.py::test_b[512]"] == ["skip", "-", "-"]
    assert rows["t.py::test_plain"] == ["-", "-", "pass"]


def test_tests_of_one_name_in_two_files_are_two_rows() -> None:
    results = [
        {"nodeid": "test_a.py::test_same[NULL]", "target": "NULL", "outcome": "passed"},
        {"nodeid": "test_b.py::test_same[NULL]", "target": "NULL", "outcome": "failed"},
    ]
    rows = {line.split()[0]: line.split()[1:] for line in render_matrix(results, ["NULL"]).splitlines()[2:]}
    assert rows == {"test_a.py::test_same": ["pass"], "test_b.py::test_same": ["FAIL"]}


def test_rows_are_sorted_by_test_id_whatever_order_results_arrive_in() -> None:
    nodeids = ["t_b.py::test_z[NULL]", "t_a.py::test_y[NULL-2]", "t_b.py::test_a[NULL]", "t_a.py::test_y[NULL-1]"]
    finished = [{"nodeid": nodeid, "target": "NULL", "outcome": "passed"} for nodeid in nodeids]
    orders = [render_matrix(results, ["NULL"]) for results in (finished, finished[::-1], finished[1:] + finished[:1])]
    assert orders[0] == orders[1] == orders[2]
    names = [line.split()[0] for line in orders[0].splitlines()[2:]]
    assert len(names) == len(nodeids) and names == sorted(names)


def test_long_ids_fold_so_the_target_columns_stay_on_screen() -> None:
    targets = ["NULL", "MOCKKFD+AMD:LLVM:gfx1100", "MOCKUSB+AMD"]
    long_id = "tests/copy/test_sizes.py::test_copy[" + "-".join(f"size{n}" for n in range(30)) + "]"
    results = [{"nodeid": long_id, "target": t, "outcome": "passed"} for t in targets]
    results.append({"nodeid": "t.py::test_short", "target": "NULL", "outcome": "failed", "kind": "quarantined"})
    width = 80
    lines = render_matrix(results, targets, width=width).splitlines()
    assert max(map(len, lines)) <= width
    column = lines[0].index("NULL")  # every cell sits under its target's heading
    cells = [line for line in lines[2:] if len(line) > column and line[column] != " "]
    assert sorted(line[column:].split()[0] for line in cells) == ["pass", "quar"]
    folded = [line.strip() for line in lines[2:] if "t.py::test_short" not in line]
    assert "".join(line.split("  ")[0] for line in folded) == long_id  # the pieces give back the whole id
    assert any(line.startswith(long_id) for line in render_matrix(results, targets).splitlines())  # no width: whole
