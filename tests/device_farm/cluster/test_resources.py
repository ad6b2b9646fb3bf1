"""Boards as Dask worker resources, and the fail-fast check for shards no worker can serve."""

from __future__ import annotations

from tinyhil.device_farm.cluster.resources import board_resource, unservable, worker_resources
from tinyhil.device_farm.inventory.hwmap import parse_hwmap

HWMAP = parse_hwmap(
    '[[board]]\nid = "emu-usb"\nkind = "emulated"\nemulated = { target = "MOCKUSB+AMD", slots = 3 }\n\n'
    '[[board]]\nid = "emu-kfd"\nkind = "emulated"\nemulated = { target = "MOCKKFD+AMD" }\n\n'
    '[[board]]\nid = "bridge"\nkind = "usb-bridge"\nusb = { vid_pid = "add1:0001", serial = "A" }\n'
    'targets = ["USB+AMD"]\n\n'
    '[[board]]\nid = "nv-0"\nkind = "nv"\nnv = { uuid = "GPU-1" }\n'
)
EMU_USB, EMU_KFD, BRIDGE, NV = HWMAP.boards


def test_a_worker_offers_each_board_by_its_slots_and_counts_per_kind() -> None:
    assert worker_resources(HWMAP.boards) == {
        "board:emu-usb": 3.0,
        "board:emu-kfd": 1.0,
        "board:bridge": 1.0,
        "board:nv-0": 1.0,
        "emu": 4.0,  # the two emulated boards' slots
        "usb3": 4.0,  # the bridge and the emulated MOCKUSB board's three slots
        "nv": 1.0,
    }  # no real KFD board: no amd_kfd key
    assert board_resource(BRIDGE) == "board:bridge"


def test_shards_no_worker_can_serve_are_named_with_what_the_workers_offer() -> None:
    workers = {"tcp://127.0.0.1:4001": worker_resources([EMU_USB]), "tcp://127.0.0.1:4002": worker_resources([NV])}
    needs = {"s1": (EMU_USB, frozenset({"copyin"})), "s2": (BRIDGE, frozenset({"usb3", "copyin"}))}
    [problem] = unservable(needs, workers)
    assert problem.startswith("no board with capabilities ['copyin', 'usb3'] on any worker for shard s2 (board bridge;")
    assert "tcp://127.0.0.1:4001 offers board:emu-usb, emu, usb3" in problem
    assert unservable({"s1": (EMU_USB, frozenset())}, {}) == [
        "no board with capabilities [] on any worker for shard s1 (board emu-usb; workers: none online)"
    ]
    assert unservable(needs, {**workers, "tcp://127.0.0.1:4003": worker_resources([BRIDGE])}) == []
