"""``tinyhil farm status|probe|set``: the boards of a map, their health and who holds them.

tinyhil farm status [--hwmap FILE] [--state DIR] [--lock-dir DIR] [--probe] [--json]
    every board of the map (default: the emulated targets) with its health and its leases' holders, then every
    lease held on this host, whichever run, map or state directory took it; ``--probe`` first probes every board
    whose probe is due (under its lease; a busy board is left as it is).
tinyhil farm probe [BOARD ...] [--hwmap FILE] [--state DIR] [--lock-dir DIR] [--wait S]
    probe the boards (default: all of the map's) now, each under its lease, and record what each probe saw: a
    BAD board whose fault is gone returns to GOOD; a BAD board with a ``power_cycle`` command in the map is power
    cycled first. A busy board is waited for up to ``--wait`` seconds (default 0), else left unprobed. Exit 1 when
    a probe failed or a board stayed busy.
tinyhil farm set BOARD good|maintenance|retired --reason TEXT [--hwmap FILE] [--state DIR]
    an operator's decision, recorded with who made it (user@host) and why in the health record and its journal
    (``health.jsonl``): maintenance and retired take the board out of scheduling whatever its probes say; good
    returns it to service (probed before its next work). A board the map itself holds out is changed in the map.

The health record lives in ``--state`` (default ``$TINYHIL_FARM_STATE``, else ``~/.local/state/tinyhil/farm``); the
leases in the host-wide lock directory (``--lock-dir``, else ``$TINYHIL_LOCK_DIR``, else ``/run/lock/tinyhil``;
docs/farm.md, "Leases").
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import socket
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Final

from tinyhil.cli.usage import EXIT_FAILED, EXIT_OK, EXIT_USAGE, add_subcommand, description
from tinyhil.device_farm.health.leased import LeasedProbe
from tinyhil.device_farm.health.probes import probe_board
from tinyhil.device_farm.health.states import DEFAULT_BAD_AFTER, HealthBook, HealthState
from tinyhil.device_farm.inventory.hwmap import EmulatedLocator, HardwareMap, emulated_inventory, load_hwmap
from tinyhil.device_farm.leases import BoardLock, LeaseTimeout, held_slots, holders
from tinyhil.device_farm.state import LOCK_DIR_ENV, STATE_ENV, farm_state_dir, lock_dir
from tinyhil.errors import InvalidArgument
from tinyhil.printable import printable
from tinyhil.registry import TargetRegistry

__all__ = ["SETTABLE_STATES", "add_board_commands", "add_lease_options", "lease_options", "operator"]

SETTABLE_STATES: Final = ("good", "maintenance", "retired")
_PROBE_RUN_ID: Final = "farm-probe"  # the run id a `farm probe` lease's holder record shows


def operator() -> str:
    """Who is running this command, as the health journal records it: ``user@host``."""
    try:
        user = getpass.getuser()
    except OSError:  # no name for this uid (a container): the uid says who
        user = f"uid-{os.getuid()}"
    return f"{user}@{socket.gethostname()}"


def _hwmap(path: str | None, registry: TargetRegistry) -> HardwareMap:
    return load_hwmap(path, registry=registry) if path else emulated_inventory(registry)


def _book(args: argparse.Namespace, hwmap: HardwareMap) -> tuple[HealthBook, Path]:
    state = farm_state_dir(args.state)
    return HealthBook(hwmap.boards, clock=time.time, state_dir=state), state


def _status(args: argparse.Namespace, registry: TargetRegistry) -> int:
    hwmap = _hwmap(args.hwmap, registry)
    book, state = _book(args, hwmap)
    locks = lock_dir(args.lock_dir)
    if args.probe:
        probe = LeasedProbe(locks, _PROBE_RUN_ID, lambda b: probe_board(b, registry=registry), book=book,
                            state_dir=state)  # fmt: skip
        for board in hwmap.boards:
            book.ready_unless_busy(board, probe)  # a busy board is not probed: a probe never overlaps its work
    rows: list[dict[str, Any]] = []
    held_by = {}
    for board in hwmap.boards:
        per_run = isinstance(board.locator, EmulatedLocator) and board.locator.per_run
        held_by[board.id] = [] if per_run else holders(locks, BoardLock.of(board))
        record = book.record(board.id)
        rows.append({"board": board.id, "kind": board.kind.value, "targets": list(board.targets), "host": board.host,
                     "health": record.state.value, "reason": record.reason, "per_run": per_run,
                     "leases": [None if h is None else asdict(h) for h in held_by[board.id]]})  # fmt: skip
    taken_here = held_slots(locks)
    held = [{"key": h.key, "slot": h.slot, "holder": None if h.holder is None else asdict(h.holder)}
            for h in taken_here]  # fmt: skip
    if args.json:
        print(json.dumps({"hwmap": hwmap.path, "state": str(state), "lock_dir": str(locks), "boards": rows,
                          "held": held}, indent=1))  # fmt: skip
        return EXIT_OK
    print(f"{len(rows)} board{'s' * (len(rows) != 1)} in {hwmap.path}; state in {state}; leases in {locks}")
    width = max((len(r["board"]) for r in rows), default=5)
    for row, board in zip(rows, hwmap.boards, strict=True):
        # Holders and reasons come from files anyone on the host may write: printed with control characters escaped.
        taken = [f"slot {n}: {printable(str(h), newlines=False)}" for n, h in enumerate(held_by[board.id]) if h]
        free = "each run its own" if row["per_run"] else f"free ({board.slots} slot{'s' * (board.slots != 1)})"
        print(f"  {row['board']:<{width}}  {row['kind']:<10}  {row['health']:<11}  {'; '.join(taken) or free}")
        reason = printable(row["reason"], newlines=False)
        print(f"  {'':<{width}}  {', '.join(row['targets']) or '(no target)'}: {reason}")
    print(f"held on this host: {len(held) or 'none'}")
    for slot in taken_here:
        said = "holder record gone" if slot.holder is None else f"board {slot.holder.board or '?'}, {slot.holder}"
        print(printable(f"  {slot.key}.{slot.slot}: {said}", newlines=False))
    return EXIT_OK


def _probe(args: argparse.Namespace, registry: TargetRegistry) -> int:
    hwmap = _hwmap(args.hwmap, registry)
    boards = [hwmap.board(board_id) for board_id in args.boards] if args.boards else list(hwmap.boards)
    if not args.wait >= 0:
        raise InvalidArgument(f"--wait {args.wait:g}, expected seconds >= 0")
    book, state = _book(args, hwmap)

    def waiting(board: Any, said: str) -> None:
        print(printable(f"board {board.id}: busy, held by {said}; waiting up to {args.wait:g} s", newlines=False),
              flush=True)  # fmt: skip

    probe = LeasedProbe(lock_dir(args.lock_dir), _PROBE_RUN_ID, lambda b: probe_board(b, registry=registry),
                        wait_s=args.wait, on_wait=waiting, book=book, state_dir=state)  # fmt: skip
    status = EXIT_OK
    for board in boards:
        before = book.state(board.id)
        try:
            result = probe(board)
        except LeaseTimeout as exc:
            print(printable(f"board {board.id}: not probed, busy ({exc})", newlines=False))
            status = EXIT_FAILED
            continue
        record = book.record_probe(board.id, result)
        said = "passed" if result.ok else "failed"
        moved = f"{before.value} -> {record.state.value}" if record.state is not before else record.state.value
        print(printable(f"board {board.id}: probe {said}: {result.detail}; {moved}", newlines=False))
        status = status if result.ok else EXIT_FAILED
    return status


def _set(args: argparse.Namespace, registry: TargetRegistry) -> int:
    hwmap = _hwmap(args.hwmap, registry)
    hwmap.board(args.board)
    book, _ = _book(args, hwmap)
    before = book.state(args.board)
    record = book.set_state(args.board, HealthState(args.state_name.upper()), args.reason, operator())
    print(printable(f"board {args.board}: {before.value} -> {record.state.value} ({record.reason})", newlines=False))
    return EXIT_OK


def _common(parser: Any, *, locks: bool = True) -> None:
    parser.add_argument("--hwmap", metavar="FILE", help="hardware map (default: every emulated target)")
    parser.add_argument("--state", metavar="DIR",
                        help=f"farm state directory (default: ${STATE_ENV} or ~/.local/state)")  # fmt: skip
    if locks:
        parser.add_argument(
            "--lock-dir",
            metavar="DIR",
            help=f"the host-wide lease directory (default: ${LOCK_DIR_ENV}, else /run/lock/tinyhil)",
        )


def add_lease_options(parser: Any, *, locks: str | None = None) -> None:
    """``--lease-wait``, ``--bad-after`` and (with its help text ``locks``) ``--lock-dir`` of a command that runs
    tests on boards (:func:`lease_options` reads them back)."""
    parser.add_argument("--lease-wait", type=float, metavar="S",
                        help="wait at most S seconds for a busy board, then run without it (default: as long as it "
                             "takes; waiting is never counted against a board)")  # fmt: skip
    parser.add_argument("--bad-after", type=int, default=DEFAULT_BAD_AFTER, metavar="N",
                        help="N infrastructure failures in a row make a board BAD at once and move its work "
                             f"elsewhere (default {DEFAULT_BAD_AFTER})")  # fmt: skip
    if locks is not None:
        parser.add_argument("--lock-dir", metavar="DIR", help=locks)


def lease_options(args: argparse.Namespace) -> dict[str, Any]:
    """The :class:`~tinyhil.device_farm.run.FarmRun` fields :func:`add_lease_options`' options give.

    Raises:
        InvalidArgument: a negative ``--lease-wait`` or a ``--bad-after`` below 1.
    """
    if args.lease_wait is not None and not args.lease_wait >= 0:
        raise InvalidArgument(f"--lease-wait {args.lease_wait:g}, expected seconds >= 0")
    if args.bad_after < 1:
        raise InvalidArgument(f"--bad-after {args.bad_after}, expected an integer >= 1")
    given = getattr(args, "lock_dir", None)
    return {"lease_wait_s": args.lease_wait, "bad_after": args.bad_after,
            "lock_dir": lock_dir(given) if given else None}  # fmt: skip


def add_board_commands(sub: Any) -> None:
    """Add ``status``, ``probe`` and ``set`` to the ``farm`` command's subcommands."""
    details = description(__doc__)
    status = add_subcommand(sub, "status", "boards with their health, and every lease held on this host", EXIT_OK,
                            EXIT_USAGE, details=details)  # fmt: skip
    _common(status)
    status.add_argument("--probe", action="store_true", help="probe every board whose probe is due first")
    status.add_argument("--json", action="store_true", help="print JSON for machines")
    status.set_defaults(handler=_status)
    probe = add_subcommand(sub, "probe", "probe boards now, each under its lease, and record what the probe saw",
                           EXIT_OK, EXIT_FAILED, EXIT_USAGE, details=details)  # fmt: skip
    probe.add_argument("boards", nargs="*", metavar="BOARD", help="board ids (default: every board of the map)")
    _common(probe)
    probe.add_argument("--wait", type=float, default=0.0, metavar="S",
                       help="wait up to S seconds for a busy board (default 0: leave it unprobed)")  # fmt: skip
    probe.set_defaults(handler=_probe)
    setter = add_subcommand(sub, "set", "take a board out of service (maintenance, retired) or return it (good)",
                            EXIT_OK, EXIT_USAGE, details=details)  # fmt: skip
    setter.add_argument("board", metavar="BOARD", help="the board's id in the map")
    setter.add_argument("state_name", choices=SETTABLE_STATES, metavar="good|maintenance|retired")
    setter.add_argument("--reason", required=True, metavar="TEXT", help="why (kept with who set it, user@host)")
    _common(setter, locks=False)
    setter.set_defaults(handler=_set)
