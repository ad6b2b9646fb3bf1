"""``tinyhil farm scheduler``: Dask's scheduler on loopback, with the farm's settings in its config."""

from __future__ import annotations

import importlib.util
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tinyhil.device_farm.cluster.dask_cluster import SchedulerSettings, scheduler_command
from tinyhil.errors import InvalidArgument

needs_dask = pytest.mark.skipif(
    importlib.util.find_spec("distributed") is None, reason="needs Dask distributed (pip install 'tinyhil[farm]')"
)


@needs_dask
def test_the_scheduler_listens_on_loopback_with_the_farm_settings() -> None:
    from distributed import Client

    command = [sys.executable, "-m", "tinyhil.cli", "farm", "scheduler", "--port", "0",
               "--no-workers-timeout", "4", "--allowed-failures", "1"]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith("tinyhil farm scheduler: Dask's scheduler on 127.0.0.1:0, no-workers timeout 4 s")
        address = None
        deadline = time.monotonic() + 60
        while address is None and time.monotonic() < deadline:
            found = re.search(r"Scheduler at:\s+(tcp://127\.0\.0\.1:\d+)", process.stdout.readline())
            address = found.group(1) if found else None
        assert address is not None, "the scheduler never said where it listens"
        with Client(address, timeout=30) as client:

            def settings() -> tuple[object, object]:
                import dask

                return (dask.config.get("distributed.scheduler.no-workers-timeout"),
                        dask.config.get("distributed.scheduler.allowed-failures"))  # fmt: skip

            timeout, failures = client.run_on_scheduler(settings)
        assert (str(timeout), int(failures)) == ("4s", 1)  # type: ignore[call-overload]
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"port": 70000}, "port=70000, expected 0..65535"),
        ({"no_workers_timeout_s": 0}, "no_workers_timeout_s=0, expected seconds > 0"),
        ({"allowed_failures": -1}, "allowed_failures=-1, expected an integer >= 0"),
    ],
)
def test_bad_settings_are_named(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        SchedulerSettings(**kwargs)  # type: ignore[arg-type]


def _address(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = re.search(r"Scheduler at:\s+(tcp://127\.0\.0\.1:\d+)", process.stdout.readline())
        if found:
            return found.group(1)
    raise AssertionError("the scheduler never said where it listens")


def _stop(*processes: subprocess.Popen[str]) -> None:
    for process in processes:
        process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


WORKER_MAP = """
[[board]]
id = "emu-usb"
kind = "emulated"
emulated = { target = "MOCKUSB+AMD", slots = 2 }

[[board]]
id = "emu-sick"
kind = "emulated"
emulated = { target = "MOCKUSB+AMD", options = { faults = [
    { operation = "control_in", request = 0xE4, occurrence = 1, fault = "stall" } ] } }
"""


@needs_dask
def test_a_worker_offers_only_its_good_boards_as_resources(tmp_path: Path) -> None:
    from distributed import Client

    (tmp_path / "hwmap.toml").write_text(WORKER_MAP)
    cli = [sys.executable, "-m", "tinyhil.cli", "farm"]
    scheduler = subprocess.Popen([*cli, "scheduler", "--port", "0"], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)  # fmt: skip
    worker: subprocess.Popen[str] | None = None
    try:
        address = _address(scheduler)
        worker = subprocess.Popen([*cli, "worker", "--scheduler", address, "--hwmap", str(tmp_path / "hwmap.toml"),
                                   "--name", "host-a", "--state", str(tmp_path / "state")],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
        assert worker.stdout is not None
        said = [worker.stdout.readline() for _ in range(2)]
        assert said[0].startswith("tinyhil farm worker: board emu-sick: BAD (probe failed: bridge probe: USBErrorPipe")
        assert said[1].startswith("tinyhil farm worker: host-a -> tcp://127.0.0.1:")
        with Client(address, timeout=30) as client:
            client.wait_for_workers(1, timeout=60)
            [info] = client.scheduler_info()["workers"].values()
        assert info["name"] == "host-a" and info["nthreads"] == 2
        offered = {name: units for name, units in info["resources"].items() if units}
        assert offered == {"board:emu-usb": 2.0, "emu": 2.0, "usb3": 2.0}  # the BAD board is not offered
        assert info["resources"].get("board:emu-sick", 0.0) == 0.0  # (the plugin keeps it at 0 until it recovers)
    finally:
        _stop(*(p for p in (worker, scheduler) if p is not None))


def _after(command: list[str], option: str) -> str:
    return command[command.index(option) + 1]


@needs_dask
def test_the_commands_run_the_farms_classes_on_loopback_with_no_http_unless_asked() -> None:
    from tinyhil.device_farm.cluster.dask_cluster import Listening, worker_command

    spec = json.loads(_after(scheduler_command(SchedulerSettings(port=0)), "--spec"))
    assert spec["cls"] == "tinyhil.device_farm.cluster.dask_servers.FarmScheduler"
    assert spec["opts"] == {"host": "127.0.0.1", "port": 0, "protocol": "tcp", "dashboard": False,
                            "dashboard_address": None}  # fmt: skip
    asked = json.loads(_after(scheduler_command(SchedulerSettings(host="::1", dashboard_port=0)), "--spec"))["opts"]
    assert (asked["host"], asked["dashboard"], asked["dashboard_address"]) == ("[::1]", True, "127.0.0.1:0")
    plain = worker_command("tcp://127.0.0.1:8786", {"board:a": 1.0}, name="h")
    assert _after(plain, "--worker-class") == "tinyhil.device_farm.cluster.dask_servers.FarmWorker"
    listen = (_after(plain, "--host"), _after(plain, "--worker-port"), _after(plain, "--nanny-port"))
    assert listen == ("127.0.0.1", "0", "0")
    assert "--no-dashboard" in plain and "--dashboard" not in plain
    wide = worker_command("tcp://10.0.0.1:8786", {}, name="h", listening=Listening("0.0.0.0", 9000, 0),
                          nanny_port=9001, contact_address="tcp://192.0.2.7:9000")  # fmt: skip
    assert _after(wide, "--listen-address") == "tcp://0.0.0.0:9000" and "--host" not in wide
    assert _after(wide, "--contact-address") == "tcp://192.0.2.7:9000" and _after(wide, "--nanny-port") == "9001"
    assert _after(wide, "--dashboard-address") == "127.0.0.1:0"  # a dashboard is on loopback whatever --host is
    with pytest.raises(InvalidArgument, match=re.escape("--contact-address 192.0.2.7:9000: expected tcp://HOST:PORT")):
        worker_command("tcp://10.0.0.1:8786", {}, name="h", contact_address="192.0.2.7:9000")
