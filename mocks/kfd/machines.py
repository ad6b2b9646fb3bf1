"""The MOCKKFD machines that ``MOCKKFD+AMD`` opens devices on: one per configuration, shared by every open of it.

A board's amdkfd keeps a process's KFD state for the life of the process, so a client that opens ``/dev/kfd`` or a
render node a second time in one process meets the state its first open left (``ACQUIRE_VM`` from another render
node file is ``EBUSY``). ``MOCKKFD+AMD`` keeps that visible in process: each open of one configuration (GPU count,
arch, VRAM size, seed) reuses that configuration's machine, whose KFD process, and the client's session on it,
outlive the device. Machines are per thread (MOCKKFD serves one thread at a time), and a target opened with a fault
plan gets a machine of its own, ended with its last device, so the plan's counters count from that open.

:func:`exit_processes` is what the process's exit does to these machines: the client's sessions on them end, their
KFD processes exit, and the machines are let go (the next open builds a fresh one). A suite calls it between tests
that need a fresh process (docs/mockkfd.md "Process lifetime"); a test that opens a device twice never needs it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable

from tinyhil.kfd.session import end_session
from tinyhil.mocks.kfd.device import MockKFD

__all__ = ["exit_processes", "shared_machine"]

_LOCAL = threading.local()


def _machines() -> dict[Hashable, MockKFD]:
    machines: dict[Hashable, MockKFD] | None = getattr(_LOCAL, "machines", None)
    if machines is None:
        machines = _LOCAL.machines = {}
    return machines


def shared_machine(configuration: Hashable, build: Callable[[], MockKFD]) -> MockKFD:
    """This thread's machine of ``configuration``, built by ``build`` on first use."""
    machines = _machines()
    machine = machines.get(configuration)
    if machine is None:
        machine = machines[configuration] = build()
    return machine


def exit_processes() -> None:
    """What the process's exit does to this thread's shared machines: the KFD client's sessions on them end, their
    KFD processes exit, and the machines are let go. Devices still open on them stop working; close them first."""
    machines = _machines()
    while machines:
        machine = machines.popitem()[1]
        end_session(machine.fileio)
        machine.close()
