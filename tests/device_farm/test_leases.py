"""Board leases: exclusive per slot, holders recorded, and freed at once when the holder is SIGKILLed."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tinyhil.device_farm.inventory.hwmap import parse_hwmap, target_inventory
from tinyhil.device_farm.leases import (
    BoardLock,
    Holder,
    LeaseTimeout,
    acquire,
    held_slots,
    holders,
    lock_key,
    read_holder,
)
from tinyhil.errors import InvalidArgument
from tinyhil.loading import LIMITS, FileFormatError
from tinyhil.registry import default_registry

HWMAP = parse_hwmap(
    '[[board]]\nid = "one"\nkind = "emulated"\nemulated = { target = "NULL" }\n\n'
    '[[board]]\nid = "two"\nkind = "emulated"\nemulated = { target = "NULL", slots = 2 }\n'
)
ONE, TWO = (BoardLock.of(board) for board in HWMAP.boards)


def test_a_lease_is_exclusive_and_names_its_holder(tmp_path: Path) -> None:
    first = acquire(tmp_path, ONE, Holder.here("run-1", "test_a"))
    assert holders(tmp_path, ONE) == [first.holder]
    with pytest.raises(LeaseTimeout) as raised:
        acquire(tmp_path, ONE, Holder.here("run-2"))
    assert f"board 'one': no lease within 0 s, held by pid {os.getpid()}" in str(raised.value)
    assert "(run run-1) running test_a" in str(raised.value)
    first.update("test_b")
    assert holders(tmp_path, ONE) == [first.holder] and first.holder.test == "test_b"
    first.release()
    assert holders(tmp_path, ONE) == [None] and not first.held
    with acquire(tmp_path, ONE, Holder.here("run-2")) as second:
        assert second.held
    assert holders(tmp_path, ONE) == [None]


def test_an_emulated_board_has_as_many_leases_as_slots(tmp_path: Path) -> None:
    a = acquire(tmp_path, TWO, Holder.here("r", "a"))
    b = acquire(tmp_path, TWO, Holder.here("r", "b"))
    assert (a.slot, b.slot) == (0, 1)
    with pytest.raises(LeaseTimeout):
        acquire(tmp_path, TWO, Holder.here("r", "c"))
    b.release()
    assert acquire(tmp_path, TWO, Holder.here("r", "c")).slot == 1


def test_waiting_polls_until_the_timeout_on_the_given_clock(tmp_path: Path) -> None:
    held = acquire(tmp_path, ONE, Holder.here("r"))
    now = [0.0]
    naps: list[float] = []

    def sleep(seconds: float) -> None:
        naps.append(seconds)
        now[0] += seconds

    with pytest.raises(LeaseTimeout, match="no lease within 1 s"):
        acquire(tmp_path, ONE, Holder.here("r"), timeout_s=1.0, poll_s=0.25, clock=lambda: now[0], sleep=sleep)
    assert naps == [0.25] * 4
    held.release()


def test_a_sigkilled_holder_frees_the_board_at_once(tmp_path: Path) -> None:
    child = textwrap.dedent(
        f"""
        import sys, time
        from tinyhil.device_farm.inventory.hwmap import parse_hwmap
        from tinyhil.device_farm.leases import BoardLock, Holder, acquire
        board = BoardLock.of(parse_hwmap({HWMAP_TEXT!r}).boards[0])
        lease = acquire({str(tmp_path)!r}, board, Holder.here("victim", "test_hang"))
        print("held", flush=True)
        time.sleep(600)
        """
    )
    process = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline() == "held\n"
        holder = holders(tmp_path, ONE)[0]
        assert holder is not None and (holder.pid, holder.run_id, holder.test) == (process.pid, "victim", "test_hang")
        with pytest.raises(LeaseTimeout, match="held by pid"):
            acquire(tmp_path, ONE, Holder.here("next"))
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert holders(tmp_path, ONE) == [None]  # its holder file is stale: the lock says free
    with acquire(tmp_path, ONE, Holder.here("next")) as lease:  # no wait: the kernel released the flock
        assert lease.holder.run_id == "next"


def test_bad_arguments_are_named(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="timeout_s=-1, expected seconds >= 0"):
        acquire(tmp_path, ONE, Holder.here("r"), timeout_s=-1)
    with pytest.raises(InvalidArgument, match="poll_s=0, expected seconds > 0"):
        acquire(tmp_path, ONE, Holder.here("r"), poll_s=0)


HWMAP_TEXT = '[[board]]\nid = "one"\nkind = "emulated"\nemulated = { target = "NULL" }\n'


def _holder_json(**fields: object) -> str:
    return json.dumps({"host": "lab-1", "pid": 7, "run_id": "r", "test": "t", "since": 1.0, **fields})


@pytest.mark.parametrize(
    ("text", "field", "why"),
    [
        (_holder_json(pid="7"), "pid", "'7', expected an integer >= 0"),
        (_holder_json(host=["lab"]), "host", "['lab'], expected a non-empty string"),
        (_holder_json(since="noon"), "since", "'noon', expected a number >= 0"),
        (_holder_json(colour=1), "colour", "unknown field"),
        (_holder_json(pid=2**64), "pid", "an integer past 64 bits"),
        (_holder_json(pid=None).replace("null", "9" * 5000), "file", "not JSON: an integer of 5000 digits"),
        ('{"host": ' + "[" * 5000 + "]" * 5000 + "}", "file", "nested deeper than 32 levels"),
        ('{"host": "a"', "file", "not JSON: "),
        ("[]", "file", "a list, expected a table"),
    ],
)
def test_a_damaged_holder_file_is_one_typed_error_and_reads_as_unknown(
    tmp_path: Path, text: str, field: str, why: str
) -> None:
    path = tmp_path / f"{ONE.lock_key}.0.holder"
    path.write_text(text)
    with pytest.raises(FileFormatError) as raised:
        read_holder(path)
    assert (raised.value.path, raised.value.field) == (str(path), field) and raised.value.why.startswith(why)
    with acquire(tmp_path, ONE, Holder.here("run-1")):
        path.write_text(text)  # the holder's own record, damaged while it holds the lock
        assert holders(tmp_path, ONE) == [None]  # who holds it is unknown; no traceback


def test_a_holder_file_over_its_cap_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "one.0.holder"
    path.write_bytes(b" " * (LIMITS["lease"].max_bytes + 1))
    with pytest.raises(FileFormatError, match=r"one\.0\.holder: file: larger than 65536 bytes"):
        read_holder(path)


KEYED_MAP = """
[[board]]
id = "bridge-a"
kind = "usb-bridge"
usb = { vid_pid = "add1:0001", serial = "A1B2" }
targets = ["USB+AMD"]

[[board]]
id = "by-port"
kind = "usb-bridge"
usb = { vid_pid = "add1:0001", port = "1-2.3" }
targets = ["USB+AMD"]

[[board]]
id = "gpu-kfd"
kind = "amd-kfd"
kfd = { pci = "0000:03:00.0", gpu_id = 7 }
targets = ["KFD+AMD"]

[[board]]
id = "gpu-nv"
kind = "nv"
nv = { uuid = "GPU-1234" }

[[board]]
id = "nv-by-pci"
kind = "nv"
nv = { pci_bus_id = "0000:03:00.0" }

[[board]]
id = "odd-serial"
kind = "usb-bridge"
usb = { vid_pid = "add1:0001", serial = "A/B C" }
targets = ["USB+AMD"]

[[board]]
id = "emu"
kind = "emulated"
emulated = { target = "NULL" }
host = "lab-1"
"""


def test_a_lock_key_is_the_boards_physical_identity_whatever_its_map_calls_it() -> None:
    boards = {board.id: board for board in parse_hwmap(KEYED_MAP).boards}
    keys = {board_id: lock_key(board) for board_id, board in boards.items()}
    assert keys["bridge-a"] == "usb-add1:0001-serial-A1B2" and keys["by-port"] == "usb-port-1-2.3"
    assert keys["gpu-kfd"] == keys["nv-by-pci"] == "pci-0000:03:00.0"  # one PCI device, one lock, any kind
    assert keys["gpu-nv"] == "nv-GPU-1234" and keys["emu"] == "emulated-lab-1-emu"
    assert keys["odd-serial"].startswith("usb-add1:0001-serial-A-B-C-")  # a character a file name may not hold
    renamed = parse_hwmap(KEYED_MAP.replace('id = "bridge-a"', 'id = "other-name"')).board("other-name")
    assert lock_key(renamed) == keys["bridge-a"]  # another map, another id: the same board, the same lock
    other_serial = parse_hwmap(KEYED_MAP.replace('"A/B C"', '"A-B C"')).board("odd-serial")
    assert lock_key(other_serial) != keys["odd-serial"]  # two serials never share a key after the file-name fix


def test_a_board_a_run_made_for_itself_is_that_runs_own() -> None:
    [null] = target_inventory([default_registry().resolve("NULL")], slots=2).boards
    assert lock_key(null, "run-1") != lock_key(null, "run-2")  # separate runs: separate emulated instances
    assert BoardLock.of(null, "run-1") == BoardLock(lock_key(null, "run-1"), null.id, 2)


def test_waiting_has_no_bound_by_default_and_says_so_once(tmp_path: Path) -> None:
    held = acquire(tmp_path, ONE, Holder.here("other-run", "test_long"))
    now = [0.0]
    heard: list[list[Holder | None]] = []

    def sleep(seconds: float) -> None:  # the other run's test holds the board for 150 s of this clock
        now[0] += seconds
        if now[0] >= 150.0 and held.held:
            held.release()

    lease = acquire(tmp_path, ONE, Holder.here("r"), timeout_s=None, poll_s=1.0, clock=lambda: now[0], sleep=sleep,
                    on_wait=heard.append)  # fmt: skip
    assert lease.held and now[0] == 150.0
    assert len(heard) == 1 and heard[0][0] is not None and heard[0][0].test == "test_long"
    lease.release()


def test_held_slots_lists_every_lock_held_in_the_directory(tmp_path: Path) -> None:
    a = acquire(tmp_path, ONE, Holder.here("run-a", "t1", "one"))
    b = acquire(tmp_path, TWO, Holder.here("run-b", "t2", "two"))
    acquire(tmp_path, TWO, Holder.here("run-c")).release()  # a free lock file is not listed
    found = held_slots(tmp_path)
    assert [(h.key, h.slot, h.holder) for h in found] == sorted(
        [(ONE.lock_key, 0, a.holder), (TWO.lock_key, 0, b.holder)], key=lambda row: (row[0], row[1])
    )
    a.release()
    b.release()
    assert held_slots(tmp_path) == [] and held_slots(tmp_path / "missing") == []


def test_a_lease_timeout_crosses_processes_whole() -> None:
    error = LeaseTimeout("one", 0.5, [Holder("h", 1, "r", "t", 1.0, "one")])
    again = pickle.loads(pickle.dumps(error))  # a Dask worker's probe raises it on the run's side
    assert (type(again), str(again), again.holders) == (LeaseTimeout, str(error), error.holders)
