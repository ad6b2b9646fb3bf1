"""The farm worker's plugin: it offers the GOOD boards of its host, and offers anew when a probe changes that."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.cluster import emulated_board, needs_dask

from tinyhil.device_farm.cluster.dask_cluster import WorkerSettings
from tinyhil.device_farm.health.states import ProbeResult
from tinyhil.device_farm.inventory.hwmap import Board

pytestmark = needs_dask


class _Loop:
    def __init__(self) -> None:
        self.offers: list[dict[str, float]] = []

    def add_callback(self, function: Any, **resources: float) -> None:
        assert function.__name__ == "set_resources"
        self.offers.append(resources)


class _Worker:
    def __init__(self) -> None:
        self.loop = _Loop()

    async def set_resources(self, **resources: float) -> None:
        """Stands in for Dask's coroutine; the loop records the call instead of running it."""


def _plugin(tmp_path: Path, verdicts: dict[str, bool]) -> Any:
    from tinyhil.device_farm.cluster.dask_worker import FarmWorkerPlugin

    class Probed(FarmWorkerPlugin):
        def probe(self, board: Board) -> ProbeResult:
            return ProbeResult(verdicts[board.id], "ok" if verdicts[board.id] else "bridge gone")

    hwmap = tmp_path / "map.toml"
    hwmap.write_text(emulated_board("usb-a", "MOCKUSB+AMD", "host-a", slots=2)
                     + emulated_board("kfd-a", "MOCKKFD+AMD", "host-a")
                     + emulated_board("usb-elsewhere", "MOCKUSB+AMD", "host-z"))  # fmt: skip
    return Probed(WorkerSettings(str(hwmap), str(tmp_path / "state"), "host-a", refresh_s=3600))


def test_only_this_hosts_good_boards_are_offered_and_a_bad_one_drops_to_zero(tmp_path: Path) -> None:
    verdicts = {"usb-a": True, "kfd-a": True}
    plugin, worker = _plugin(tmp_path, verdicts), _Worker()
    plugin.setup(worker)
    try:
        assert sorted(plugin.boards) == ["kfd-a", "usb-a"]  # the map's other host keeps its board
        first = worker.loop.offers[-1]
        assert first == {"board:usb-a": 2.0, "board:kfd-a": 1.0, "emu": 3.0, "usb3": 2.0}
        verdicts["usb-a"] = False
        assert plugin.probe_now(plugin.boards["usb-a"]).ok is False
        dropped = worker.loop.offers[-1]
        assert dropped["board:usb-a"] == 0.0 and dropped["usb3"] == 0.0 and dropped["emu"] == 1.0
        assert plugin.offered == frozenset({"kfd-a"})
        assert plugin.refresh() is False  # nothing changed since: no new offer
        verdicts["usb-a"] = True
        plugin.probe_now(plugin.boards["usb-a"])
        assert worker.loop.offers[-1] == first and plugin.offered == frozenset({"kfd-a", "usb-a"})
    finally:
        plugin.teardown(worker)


def test_the_worker_settings_round_trip_through_the_environment_form() -> None:
    settings = WorkerSettings("/lab/hwmap.toml", "/var/lib/tinyhil", "lab-1", 12.5)
    assert WorkerSettings.from_json(settings.to_json()) == settings


def test_describe_reports_the_host_name_and_the_offered_boards(tmp_path: Path) -> None:
    from tinyhil.device_farm.cluster.dask_worker import PLUGIN_NAME, describe_worker

    plugin, worker = _plugin(tmp_path, {"usb-a": True, "kfd-a": False}), _Worker()
    plugin.setup(worker)
    try:
        worker.plugins = {PLUGIN_NAME: plugin}  # type: ignore[attr-defined]
        described = describe_worker(dask_worker=worker)
        assert described["host"] == "host-a" and [b.id for b in described["boards"]] == ["usb-a"]
    finally:
        plugin.teardown(worker)
