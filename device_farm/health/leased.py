"""Probes under the board's lease: a probe is work on the board (it powers PCIe, writes SRAM), so it runs while the
probing process holds a slot of the board's lease, like a test, or it does not run at all.

:class:`LeasedProbe` wraps a probe (``probe_board`` by default): it takes the board's lease, waiting as long as it
is told (a busy board raises :class:`~tinyhil.device_farm.leases.LeaseTimeout`, and nothing is recorded: waiting is
not a fault), runs the board's ``power_cycle`` command first when the board is BAD (its output appended to
``power-cycle/<board>.log`` in the farm's state directory), probes, and gives the lease back.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tinyhil.device_farm.health.probes import probe_board
from tinyhil.device_farm.health.states import HealthBook, HealthState, ProbeResult
from tinyhil.device_farm.inventory.hwmap import Board
from tinyhil.device_farm.leases import BoardLock, Holder, acquire, describe_holders

__all__ = ["POWER_CYCLE_DIR", "POWER_CYCLE_TIMEOUT_S", "PROBE_HOLDER_TEST", "LeasedProbe", "power_cycle"]

PROBE_HOLDER_TEST: Final = "(health probe)"  # what a lease's holder record says a probe runs
POWER_CYCLE_DIR: Final = "power-cycle"
POWER_CYCLE_TIMEOUT_S: Final = 120.0
_OUTPUT_TAIL_CHARS: Final = 64 << 10  # of each stream, per run of the command


def power_cycle(board: Board, state_dir: Path, *, timeout_s: float = POWER_CYCLE_TIMEOUT_S) -> str:
    """Run ``board.power_cycle`` (an argument list, no shell) and append what it printed to
    ``state_dir/power-cycle/<board>.log``; returns one line saying how it ended (it never raises: the probe after it
    decides the board's health)."""
    log = state_dir / POWER_CYCLE_DIR / f"{board.id}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(list(board.power_cycle), capture_output=True, timeout=timeout_s, check=False,
                              stdin=subprocess.DEVNULL)  # fmt: skip
        ended = f"exit status {done.returncode}"
        out, err = done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        ended, out, err = f"killed after {timeout_s:g} s", exc.stdout or b"", exc.stderr or b""
    except OSError as exc:
        ended, out, err = f"could not start: {exc.strerror or exc}", b"", b""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    with log.open("a", encoding="utf-8", errors="backslashreplace") as kept:
        kept.write(f"--- {stamp} {list(board.power_cycle)!r}: {ended}\n")
        kept.write(out[-_OUTPUT_TAIL_CHARS:].decode(errors="replace"))
        kept.write(err[-_OUTPUT_TAIL_CHARS:].decode(errors="replace"))
    return f"power_cycle {ended} (output in {log})"


@dataclass(frozen=True, slots=True)
class LeasedProbe:
    """``probe`` run under ``board``'s lease in ``lock_dir``, for the run ``run_id``.

    ``wait_s`` bounds the wait for a busy board (``None``: as long as it takes; ``0``: not at all); ``on_wait(board,
    holders)`` is called once when the wait begins. With ``book`` and ``state_dir``, a BAD board with a
    ``power_cycle`` command is power-cycled first.
    """

    lock_dir: Path
    run_id: str
    probe: Callable[[Board], ProbeResult] = probe_board
    wait_s: float | None = 0.0
    on_wait: Callable[[Board, str], None] | None = None
    book: HealthBook | None = None
    state_dir: Path | None = None

    def __call__(self, board: Board) -> ProbeResult:
        """Probe ``board`` under its lease.

        Raises:
            LeaseTimeout: the board stayed busy for ``wait_s``: no probe ran.
        """

        def waiting(held: list[Holder | None]) -> None:
            if self.on_wait is not None:
                self.on_wait(board, describe_holders(held))

        holder = Holder.here(self.run_id, PROBE_HOLDER_TEST, board.id)
        with acquire(self.lock_dir, BoardLock.of(board, self.run_id), holder, timeout_s=self.wait_s,
                     on_wait=waiting):  # fmt: skip
            cycled = ""
            bad = self.book is not None and self.book.state(board.id) is HealthState.BAD
            if bad and board.power_cycle and self.state_dir is not None:
                cycled = power_cycle(board, self.state_dir)
            result = self.probe(board)
        return ProbeResult(result.ok, f"{result.detail}; after {cycled}") if cycled else result
