"""A driver process on the served board: tinyhil's own USB+AMD runtime over the real ``usb1`` (libusb), as on a board.

    python usb_amd_client.py NBYTES SEED

brings the gfx1100 up (open), copies NBYTES of seeded random bytes in with the pipelined copyin, copies them out,
and prints one JSON line: the SHA-256 of the bytes it sent and of the bytes it read back.
"""

from __future__ import annotations

import hashlib
import json
import sys

import numpy as np

from tinyhil.registry import open_target


def main() -> int:
    nbytes, seed = int(sys.argv[1]), int(sys.argv[2])
    data = np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8)
    with open_target("USB+AMD", revision="pipelined") as device:
        buf = device.alloc(nbytes)
        device.copyin(buf, data)
        out = np.zeros_like(data)
        device.copyout_into(buf, out)
        device.synchronize()
    print(json.dumps({"sent": hashlib.sha256(data).hexdigest(), "back": hashlib.sha256(out).hexdigest()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
