"""The drift check allocates nothing a trace merely asks for: what it holds in flight is bounded by the host's own
budget (tinyhil.trace.limits.INFLIGHT_MAX_BYTES, INFLIGHT_MAX_URBS), checked before a buffer is made, in both trace
forms; the peak memory is measured in a child process (rss_child.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

import pytest

from tinyhil.mocks.trace_drift import drift
from tinyhil.trace import TraceFormatError, load_trace
from tinyhil.trace.convert import write_trace
from tinyhil.trace.limits import INFLIGHT_MAX_BYTES, INFLIGHT_MAX_URBS, TRANSFER_MAX_BYTES

RSS_CHILD: Final = Path(__file__).with_name("rss_child.py")
MIB: Final = 1 << 20
# 300 submits of the most one transfer may ask for would be 4.7 GiB; refused, the check costs no more than this.
RSS_BOUND: Final = 250 * MIB
SUBMITS: Final = 300


def _submits(count: int, length: int) -> list[dict[str, Any]]:
    return [{"seq": tag, "t_ns": tag * 1000, "op": "submit", "tag": tag, "ep": 0x81, "length": length, "data": "",
             "timeout": 1000} for tag in range(count)]  # fmt: skip


def _jsonl(path: Path, recorded: Path, records: list[dict[str, Any]]) -> Path:
    with open(recorded, "rb") as file:
        header = json.loads(file.readline())
    lines = [json.dumps(header), *(json.dumps(r) for r in records), json.dumps({"op": "end", "count": len(records)})]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(params=["jsonl", "pcapng"])
def hostile(request: pytest.FixtureRequest, tmp_path: Path, recorded: Path) -> Path:
    """300 submits of 16 MiB each, none completed, as JSONL (34 KB) or as pcapng."""
    path = _jsonl(tmp_path / "inflight.hiltrace.jsonl", recorded, _submits(SUBMITS, TRANSFER_MAX_BYTES))
    if request.param == "pcapng":
        trace = load_trace(path)
        path = tmp_path / "inflight.pcapng"
        write_trace(trace.header, trace.records, path)
    return path


def test_submits_past_the_in_flight_budget_are_refused_before_allocating(hostile: Path) -> None:
    done = subprocess.run([sys.executable, str(RSS_CHILD), "trace", "drift", str(hostile)], capture_output=True,
                          text=True, timeout=600, check=False)  # fmt: skip
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["status"] not in (0, 1), done.stderr  # a usage error, not a crash or a drift
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert f"{hostile}: record seq 1: field 'length'" in done.stderr
    assert f"at most {INFLIGHT_MAX_BYTES:#x} bytes" in done.stderr
    assert result["rss_bytes"] < RSS_BOUND


def test_many_small_submits_are_bounded_by_the_urbs_in_flight(tmp_path: Path, recorded: Path) -> None:
    path = _jsonl(tmp_path / "many.hiltrace.jsonl", recorded, _submits(INFLIGHT_MAX_URBS + 1, 0))
    with pytest.raises(TraceFormatError) as caught:
        drift(load_trace(path), path=str(path))
    assert caught.value.where == f"record seq {INFLIGHT_MAX_URBS}" and caught.value.field == "length"
    assert str(caught.value).startswith(f"{path}: ")


def test_a_transfer_of_the_largest_size_alone_is_walked(tmp_path: Path, recorded: Path) -> None:
    records = _submits(1, TRANSFER_MAX_BYTES)
    records.append({"seq": 1, "t_ns": 5000, "op": "complete", "tag": 0, "status": "COMPLETED", "actual": 0,
                    "data": ""})  # fmt: skip
    path = _jsonl(tmp_path / "one.hiltrace.jsonl", recorded, records)
    drift(load_trace(path), path=str(path))  # a divergence or none, but no refusal
