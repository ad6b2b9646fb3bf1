"""The probe of a served board: the real target's probe, run under ``tinyhil serve`` as the board's shards run.

A served board (:mod:`~tinyhil.device_farm.inventory.served_boards`) is probed as the board it presents: a child
process under ``tinyhil serve usb|kfd`` (:func:`~tinyhil.device_farm.shard.served.served_command`) runs the
``usb-bridge`` probe over libusb (``USB+AMD``) or the ``amd-kfd`` probe over ``/dev/kfd`` (``KFD+AMD``) and prints
its result as one JSON line; the board's ``record`` option is left out (a probe writes no trace). A machine without
what ``tinyhil serve`` needs fails the probe, naming the Debian package, before anything starts.

``python -m tinyhil.device_farm.health.served_probe usb|kfd`` is the child's side.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Final

from tinyhil.device_farm.health.states import ProbeResult
from tinyhil.device_farm.inventory.hwmap import Board, BoardKind, KfdLocator, Locator, UsbLocator
from tinyhil.device_farm.inventory.served_boards import SERVE_ROUTES, ServedLocator, ServeKind
from tinyhil.device_farm.shard.served import served_command, served_unavailable_reason

__all__ = ["PROBE_TIMEOUT_S", "probe_served"]

PROBE_TIMEOUT_S: Final = 300.0  # starting the server, a Python child and its probe; a build of the interposer
_TAIL_CHARS: Final = 300  # of the child's stderr, in a failed probe's detail
# The board each serve kind presents, as its real probe finds it (the only such board the child sees).
_PRESENTED: Final[dict[ServeKind, tuple[BoardKind, Locator]]] = {
    ServeKind.USB: (BoardKind.USB_BRIDGE, UsbLocator("add1:0001")),
    ServeKind.KFD: (BoardKind.AMD_KFD, KfdLocator()),
}


def probe_served(board: Board) -> ProbeResult:
    """Probe the served ``board``: its real target's probe, under ``tinyhil serve``; never raises."""
    locator = board.locator
    if not isinstance(locator, ServedLocator):
        return ProbeResult(False, f"{board.id}: a {board.kind.value} board, expected a served one")
    reason = served_unavailable_reason(locator)
    if reason is not None:
        return ProbeResult(False, reason)
    command = served_command(board, [sys.executable, "-m", __name__, locator.serve.value], record=False)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return ProbeResult(False, f"{board.id}: the probe under tinyhil serve {locator.serve.value}: {exc}")
    lines = done.stdout.strip().splitlines()
    try:
        said = json.loads(lines[-1])
        return ProbeResult(bool(said["ok"]), f"served {locator.serve.value}: {said['detail']}")
    except (IndexError, ValueError, TypeError, KeyError):
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])[-_TAIL_CHARS:]
        return ProbeResult(False, f"{board.id}: tinyhil serve {locator.serve.value} exited {done.returncode}: {tail}")


def _main(argv: list[str]) -> int:
    from tinyhil.device_farm.health.probes import probe_board

    serve = ServeKind(argv[0])
    kind, locator = _PRESENTED[serve]
    presented = Board(f"served-{serve.value}", kind, locator, (SERVE_ROUTES[serve].real,), frozenset(), "")
    result = probe_board(presented)
    print(json.dumps({"ok": result.ok, "detail": result.detail}))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
