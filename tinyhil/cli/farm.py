"""``tinyhil farm ...``: the farm's own commands.

tinyhil farm discover [--hwmap FILE] [--root DIR] [--no-usb] [--host NAME] [--json]
    what boards this host has (the map's emulated boards on this host too, each probed: they need no hardware),
    the map entries that would add the new ones, and the drift between the map and the host (missing, new,
    changed); exit 1 when there is drift, 0 when the map and the host agree.
tinyhil farm run [--hwmap FILE] [--workers N] [--target T] [--quarantine FILE [--quarantine-verify]]
                 [--subset i/N [--seed S]] [--report DIR | --resume DIR] [--suite PATH] [--allow-unavailable]
                 [--deadline D] [--reruns N] [--engine local|dask --scheduler ADDRESS [TLS]] [--history PATH|none]
                 [--last-failed] [--on-finish CMD] [-- PYTEST_ARGS]
    collect the suite once, probe the boards, plan by recorded durations, run the shards under leases (on this
    host, or with ``--engine dask`` on the farm workers of a Dask cluster), journal every result, and write
    junit.xml, summary.json and report.html (docs/farm.md). ``--resume DIR`` runs the run in DIR again as its
    journal's header says (no --suite or --hwmap needed), refusing one whose suite, map or pairs changed.
tinyhil farm scheduler [--host H] [--port P] [--no-workers-timeout S] [--allowed-failures N] [--dashboard] [TLS]
    a Dask scheduler with the farm's settings, for runs across hosts (needs the farm extra).
tinyhil farm worker --scheduler ADDRESS [--hwmap FILE] [--name NAME] [--state DIR] [--host H] [--port P]
                    [--nanny-port P] [--contact-address ADDRESS] [--connect-timeout S] [--dashboard] [TLS]
    a Dask worker on this host that probes the host's boards and advertises the GOOD ones as resources; exit 3
    when no scheduler answers at ADDRESS within the connect timeout.
tinyhil farm certs DIR [--host NAME ...] [--days N] [--force]
    a private CA for the lab (kept in DIR) and a certificate and key per host, for the farm's mutual TLS.
tinyhil farm history [QUESTION] [--history PATH] [--runs N] [--json] [--export FILE]
    what the run history says: new, known and fixed failures, flake rates, boards, durations
    (:mod:`tinyhil.cli.farm_history`).
tinyhil farm status|probe|set ...
    the boards' health and every lease held on this host; probe boards now; take a board out of service or
    return it (:mod:`tinyhil.cli.farm_boards`).

Every farm process listens on 127.0.0.1 unless ``--host`` says otherwise, with no HTTP server unless
``--dashboard`` (then on 127.0.0.1); anywhere else needs TLS, given as ``--tls-ca FILE --tls-cert FILE --tls-key
FILE`` or ``--config farm.toml`` (its ``[security]`` table), or ``--insecure`` (unsafe; docs/farm.md, "Security").

The farm's state (health record, durations) lives in ``--state``, default ``$TINYHIL_FARM_STATE``, else
``~/.local/state/tinyhil/farm``; the boards' leases in the host-wide lock directory, whatever ``--state`` says
(``--lock-dir``, else ``$TINYHIL_LOCK_DIR``, else ``/run/lock/tinyhil``; docs/farm.md, "Leases").
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Final

from tinyhil.cli.farm_boards import add_board_commands, add_lease_options
from tinyhil.cli.farm_history import add_history_command, add_history_options
from tinyhil.cli.run_options import DASK_SHARDS, LOCAL_SHARDS, add_run_options, farm_run_from_args
from tinyhil.cli.usage import (
    EXIT_DEADLINE,
    EXIT_ENGINE_LOST,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_NO_TESTS,
    EXIT_OK,
    EXIT_OUTPUT_CLOSED,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    add_command_group,
    add_subcommand,
    description,
)
from tinyhil.device_farm.cluster.dask_cluster import (
    DEFAULT_ALLOWED_FAILURES,
    DEFAULT_BOARD_GRACE_S,
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_DASHBOARD_PORT,
    DEFAULT_NO_WORKERS_TIMEOUT_S,
    DEFAULT_REFRESH_S,
    DEFAULT_SCHEDULER_GRACE_S,
    WORKER_ENV,
    WORKER_PRELOAD,
    Listening,
    SchedulerSettings,
    SchedulerUnreachable,
    WorkerSettings,
    reach_scheduler,
    scheduler_command,
    worker_command,
)
from tinyhil.device_farm.cluster.resources import worker_resources
from tinyhil.device_farm.cluster.security import LOOPBACK, FarmTLS, check_scheme, client_config, farm_tls, listen_host
from tinyhil.device_farm.collection import CollectionFailed
from tinyhil.device_farm.health.leased import LeasedProbe
from tinyhil.device_farm.health.probes import probe_board
from tinyhil.device_farm.health.states import HealthBook, ProbeResult
from tinyhil.device_farm.inventory.discovery import Discovery, FoundBoard, discover
from tinyhil.device_farm.inventory.hwmap import (
    Board,
    BoardKind,
    EmulatedLocator,
    HardwareMap,
    emulated_inventory,
    load_hwmap,
)
from tinyhil.device_farm.inventory.map_drift import Drift, compare, map_entry
from tinyhil.device_farm.run import run_farm
from tinyhil.device_farm.state import LOCK_DIR_ENV, STATE_ENV, farm_state_dir, lock_dir
from tinyhil.errors import InvalidArgument
from tinyhil.printable import printable
from tinyhil.registry import TargetRegistry

__all__ = ["DASK_SHARDS", "LOCAL_SHARDS", "add_farm_command"]

# What a farm run can exit with (it runs tests); the other farm commands give fewer.
_RUN_STATUSES: Final = (EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNAVAILABLE, EXIT_ENGINE_LOST, EXIT_NO_TESTS,
                        EXIT_DEADLINE, EXIT_INTERRUPTED, EXIT_OUTPUT_CLOSED)  # fmt: skip


def _hwmap(path: str | None, registry: TargetRegistry, host: str | None = None) -> HardwareMap:
    return load_hwmap(path, registry=registry, host=host) if path else emulated_inventory(registry, host=host)


def _where(locator: Any) -> str:
    return " ".join(f"{name} {value}" for name, value in asdict(locator).items() if value is not None)


def _found_line(board: FoundBoard) -> str:
    return printable(
        f"  {board.kind.value:<10}  {_where(board.locator):<48}  {board.description} ({board.source})", newlines=False
    )


def _board_line(board: Board) -> str:
    return printable(f"  {board.id} ({board.kind.value}, {_where(board.locator)})", newlines=False)


def _probe_emulated(hwmap: HardwareMap | None, host: str, registry: TargetRegistry) -> list[tuple[Board, ProbeResult]]:
    """The map's emulated boards on ``host``, each probed: they need no hardware, so they are present wherever the
    map says they run, and a probe tells whether their target opens with the map's options."""
    boards = [] if hwmap is None else [b for b in hwmap.boards if b.kind is BoardKind.EMULATED and b.host == host]
    return [(board, probe_board(board, registry=registry)) for board in boards]


def _emulated_line(board: Board, probed: ProbeResult) -> str:
    said = "probe passed" if probed.ok else f"probe failed: {probed.detail}"
    target = board.locator.target if isinstance(board.locator, EmulatedLocator) else ", ".join(board.targets)
    where = f"target {target}, {board.slots} slot{'s' * (board.slots != 1)}"
    return printable(f"  {board.kind.value:<10}  {board.id} ({where}): present, {said}", newlines=False)


def _print_text(
    found: Discovery, emulated: list[tuple[Board, ProbeResult]], drift: Drift | None, host: str, map_path: str | None
) -> None:
    count = len(found.boards) + len(emulated)
    print(f"found on {host}: {count} board{'s' * (count != 1)}")
    for board in found.boards:
        print(_found_line(board))
    for entry, probed in emulated:
        print(_emulated_line(entry, probed))
    for note in found.notes:
        print(f"  note: {printable(note, newlines=False)}")
    new = found.boards if drift is None else drift.new
    if drift is not None:
        if not drift:
            print(f"no drift: {map_path} and {host} agree")
        for missing in drift.missing:
            print(f"missing (in {map_path}, not found):{_board_line(missing)[1:]}")
        for change in drift.changed:
            print(f"changed: {change}")
    if new:
        print(f"map entries that would add the {'new ' if drift is not None else ''}boards:")
        for board in new:
            print()
            print(map_entry(board), end="")


def _found_json(board: FoundBoard) -> dict[str, Any]:
    return {"kind": board.kind.value, "locator": asdict(board.locator), "description": board.description,
            "source": board.source, "map_entry": map_entry(board)}  # fmt: skip


def _discover(args: argparse.Namespace, registry: TargetRegistry) -> int:
    host = args.host or socket.gethostname()
    hwmap = load_hwmap(args.hwmap, registry=registry, host=host) if args.hwmap else None
    found = discover(args.root, usb=not args.no_usb)
    drift = compare(hwmap, found, host) if hwmap is not None else None
    emulated = _probe_emulated(hwmap, host, registry)
    if args.json:
        document: dict[str, Any] = {"host": host, "found": [_found_json(b) for b in found.boards]}
        document["emulated"] = [{"board": b.id, "locator": asdict(b.locator), "probe": asdict(probed)}
                                for b, probed in emulated]  # fmt: skip
        document["notes"] = list(found.notes)
        if drift is not None:
            changed = [{"board": c.board.id, "differences": [list(d) for d in c.differences]} for c in drift.changed]
            missing = [b.id for b in drift.missing]
            document["drift"] = {"missing": missing, "new": [asdict(b.locator) for b in drift.new], "changed": changed}
        print(json.dumps(document, indent=1))
    else:
        _print_text(found, emulated, drift, host, args.hwmap)
    return 1 if drift else 0


def _tls(args: argparse.Namespace) -> FarmTLS | None:
    return farm_tls(args.config, args.tls_ca, args.tls_cert, args.tls_key)


def _run(args: argparse.Namespace, registry: TargetRegistry) -> int:
    tls = _tls(args)
    run = farm_run_from_args(args, registry, tls)
    where = f"{len(run.hwmap.boards)} boards from {run.hwmap.path}" if run.hwmap else "the boards farm workers offer"
    resumed = "resuming the run" if run.resume else "run"
    print(f"tinyhil farm run: {where}, {run.workers} shards at once, {resumed} in {run.run_dir}")
    with client_config(tls):  # the run's Dask client, the only one it makes, speaks the farm's TLS
        try:
            return run_farm(run)
        except CollectionFailed as exc:
            if exc.exitstatus != EXIT_NO_TESTS:
                raise  # pytest refused the suite or its arguments: a usage error
            print(f"tinyhil farm run: {exc}; no report written", file=sys.stderr)
            return EXIT_NO_TESTS


def _warn(command: str, warning: str | None) -> None:
    if warning is not None:
        print(f"tinyhil farm {command}: {warning}", file=sys.stderr, flush=True)


def _http(port: int | None) -> str:
    return "no HTTP server" if port is None else f"dashboard on http://{LOOPBACK}:{port}"


def _transport(tls: FarmTLS | None) -> str:
    return "mutual TLS" if tls is not None else "plain TCP"


def _scheduler(args: argparse.Namespace, registry: TargetRegistry) -> int:
    tls = _tls(args)
    warning = listen_host(args.host, tls, insecure=args.insecure)
    dashboard = args.dashboard_port if args.dashboard else None
    settings = SchedulerSettings(args.host, args.port, args.no_workers_timeout, args.allowed_failures, dashboard, tls)
    command = scheduler_command(settings)
    _warn("scheduler", warning)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # a connection per worker, nanny and client: as
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, hard // 2), hard))  # Dask's own scheduler command does
    print(f"tinyhil farm scheduler: Dask's scheduler on {settings.host}:{settings.port}, no-workers timeout "
          f"{settings.no_workers_timeout_s:g} s, {settings.allowed_failures} allowed failures, {_transport(tls)}, "
          f"{_http(dashboard)}", flush=True)  # fmt: skip
    os.execvpe(command[0], command, settings.environment())  # the scheduler replaces this process: signals reach it


def _worker(args: argparse.Namespace, registry: TargetRegistry) -> int:
    tls = _tls(args)
    check_scheme(args.scheduler, tls)
    warning = listen_host(args.host, tls, insecure=args.insecure)
    listening = Listening(args.host, args.port, args.dashboard_port if args.dashboard else None)
    if not args.connect_timeout > 0:
        raise InvalidArgument(f"--connect-timeout {args.connect_timeout:g}, expected seconds > 0")
    host = args.name or socket.gethostname()
    hwmap = _hwmap(args.hwmap, registry, host)
    state = farm_state_dir(args.state)  # this host's own arguments first, then the network
    _warn("worker", warning)
    try:
        reach_scheduler(args.scheduler, timeout_s=args.connect_timeout, tls=tls)
    except SchedulerUnreachable as exc:
        print(f"tinyhil farm worker: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    book = HealthBook(hwmap.boards, clock=time.time, state_dir=state)
    probe = LeasedProbe(lock_dir(), f"worker-{host}", lambda b: probe_board(b, registry=registry), book=book,
                        state_dir=state)  # fmt: skip
    good = []
    for board in hwmap.boards:
        if board.host != host:
            continue
        if book.ready_unless_busy(board, probe):
            good.append(board)
        else:
            record = book.record(board.id)
            print(f"tinyhil farm worker: board {board.id}: {record.state.value} ({record.reason}); not offered")
    resources = worker_resources(good)
    command = worker_command(args.scheduler, resources, name=host, preload=WORKER_PRELOAD, listening=listening,
                             nanny_port=args.nanny_port, contact_address=args.contact_address, tls=tls)  # fmt: skip
    offered = ", ".join(f"{k}={v:g}" for k, v in sorted(resources.items())) or "no board"
    print(f"tinyhil farm worker: {host} -> {args.scheduler}, offering {offered}; listening on {args.host}, "
          f"{_transport(tls)}, {_http(listening.dashboard_port)}", flush=True)  # fmt: skip
    hwmap_path = str(Path(args.hwmap).resolve()) if args.hwmap else None
    settings = WorkerSettings(hwmap_path, str(state.resolve()), host, args.refresh)
    env = {**os.environ, WORKER_ENV: settings.to_json(), **(tls.environment() if tls else {})}
    os.execvpe(command[0], command, env)  # the worker replaces this process: signals reach it


def _certs(args: argparse.Namespace, registry: TargetRegistry) -> int:
    from tinyhil.device_farm.cluster.certs import DEFAULT_DAYS, make_certs  # the farm extra (cryptography): only here

    made = make_certs(Path(args.directory), args.host or [socket.gethostname()], force=args.force,
                      days=DEFAULT_DAYS if args.days is None else args.days)  # fmt: skip
    print(f"tinyhil farm certs: {'made the CA' if made.new_ca else 'signed with the CA'} {made.ca} "
          f"(its key {made.ca.with_suffix('.key')} stays off the farm hosts)")  # fmt: skip
    for host, (cert, key) in made.hosts.items():
        print(f"  {host}: --tls-ca {made.ca} --tls-cert {cert} --tls-key {key}")
    return 0


def _listen_options(parser: Any, *, port: int, port_help: str, dashboard_port: int) -> None:
    """``--host``, ``--port``, ``--dashboard``, ``--dashboard-port`` and the TLS options of a listening command."""
    parser.add_argument("--host", default=LOOPBACK,
                        help=f"address to listen on (default {LOOPBACK}; anything else needs TLS)")  # fmt: skip
    parser.add_argument("--port", type=int, default=port, help=port_help)
    parser.add_argument("--dashboard", action=argparse.BooleanOptionalAction, default=False,
                        help=f"serve Dask's HTTP dashboard and routes on {LOOPBACK} (default: no HTTP)")  # fmt: skip
    parser.add_argument("--dashboard-port", type=int, default=dashboard_port, metavar="P",
                        help=f"the dashboard's port (default {dashboard_port}; 0: any free)")  # fmt: skip
    _security_options(parser, listens=True)


def _security_options(parser: Any, *, listens: bool) -> None:
    """Add ``--tls-ca/--tls-cert/--tls-key``, ``--config`` and, for a command that ``listens``, ``--insecure``."""
    parser.add_argument("--tls-ca", metavar="FILE", help="the lab's CA certificate (PEM): turns on mutual TLS")
    parser.add_argument("--tls-cert", metavar="FILE", help="this host's certificate (PEM), signed by the CA")
    parser.add_argument("--tls-key", metavar="FILE", help="this host's private key (PEM)")
    parser.add_argument("--config", metavar="FILE", help="farm config (TOML) whose [security] has ca, cert, key")
    if listens:
        parser.add_argument("--insecure", action="store_true",
                            help="UNSAFE: listen beyond loopback without TLS; anyone who reaches the port runs "
                                 "code as this user")  # fmt: skip


def add_farm_command(commands: Any) -> None:
    """Add ``farm`` and its subcommands to the ``tinyhil`` parser's subcommands."""
    sub = add_command_group(
        commands,
        "farm",
        "the device farm: discover boards, run suites on them (locally or on Dask), history, status, scheduler, "
        "worker, certs",
        *_RUN_STATUSES,
        details=description(__doc__),
        dest="farm_command",
        metavar="FARM_COMMAND",
    )
    found = add_subcommand(
        sub,
        "discover",
        "list this host's boards and the drift against a hardware map",
        EXIT_OK,
        EXIT_FAILED,
        EXIT_USAGE,
    )
    found.add_argument("--hwmap", metavar="FILE", help="hardware map to compare with (hwmap.toml)")
    found.add_argument(
        "--root", default="/", metavar="DIR", help="host root to read sysfs and procfs under (default /)"
    )
    found.add_argument("--no-usb", action="store_true", help="skip libusb enumeration (a fake --root has no USB bus)")
    found.add_argument("--host", metavar="NAME", help="this host's name in the map (default: the hostname)")
    found.add_argument("--json", action="store_true", help="print JSON for machines")
    found.set_defaults(handler=_discover)
    run = add_subcommand(
        sub, "run", "run a suite on the farm's boards: plan, shards under leases, journal, reports", *_RUN_STATUSES
    )
    run.add_argument("--hwmap", metavar="FILE", help="hardware map (default: every available emulated target)")
    run.add_argument("--workers", type=int, metavar="N",
                     help=f"shards at once (default {LOCAL_SHARDS}; with --engine dask {DASK_SHARDS})")  # fmt: skip
    run.add_argument("--engine", choices=("local", "dask"), default="local",
                     help="where shards run: this host (default) or a Dask cluster's farm workers")  # fmt: skip
    run.add_argument("--scheduler", metavar="ADDRESS", help="the Dask scheduler, tcp://HOST:PORT (--engine dask)")
    run.add_argument("--board-grace", type=float, default=DEFAULT_BOARD_GRACE_S, metavar="S",
                     help="Dask: a board no worker offers for S seconds leaves the run "
                          f"(default {DEFAULT_BOARD_GRACE_S:g})")  # fmt: skip
    run.add_argument("--scheduler-grace", type=float, default=DEFAULT_SCHEDULER_GRACE_S, metavar="S",
                     help="Dask: a scheduler unreachable for S seconds ends the run "
                          f"(default {DEFAULT_SCHEDULER_GRACE_S:g})")  # fmt: skip
    run.add_argument("--target", action="append", metavar="T", help="run only on boards serving T (repeatable)")
    run.add_argument("--quarantine", metavar="FILE", help="quarantine file (TOML)")
    run.add_argument("--quarantine-verify", action="store_true", default=None,
                     help="run only the tests the quarantine names")  # fmt: skip
    run.add_argument("--subset", metavar="i/N", help="run the i-th of N parts of the suite (for parallel CI jobs)")
    run.add_argument("--seed", type=int, help="seed of the --subset shuffle (default 0)")
    where = run.add_mutually_exclusive_group()
    where.add_argument("--report", metavar="DIR", help="the run's directory (default: tinyhil-farm-DATE-TIME)")
    run.add_argument("--suite", action="append", metavar="PATH", help="tests to run (default: the portable suite)")
    run.add_argument("--state", metavar="DIR", help=f"farm state directory (default: ${STATE_ENV} or ~/.local/state)")
    run.add_argument("--allow-unavailable", action="store_true", default=None,
                     help="run even if a --target has no GOOD board")  # fmt: skip
    add_run_options(run, where)
    add_lease_options(run, locks=f"the host-wide lease directory (default: ${LOCK_DIR_ENV}, else /run/lock/tinyhil)")
    _security_options(run, listens=False)
    add_history_options(run)
    run.add_argument("pytest_args", nargs="*", metavar="-- PYTEST_ARGS", help="extra arguments passed to pytest")
    run.set_defaults(handler=_run)
    certs = add_subcommand(
        sub, "certs", "make a private CA and per-host certificates for the farm's mutual TLS", EXIT_OK, EXIT_USAGE
    )
    certs.add_argument("directory", metavar="DIR", help="where the CA and the certificates go (made 0700)")
    certs.add_argument("--host", action="append", metavar="NAME",
                       help="a host that needs a certificate (repeatable; default: this host's name)")  # fmt: skip
    certs.add_argument("--days", type=int, metavar="N", help="validity in days (default 825)")
    certs.add_argument("--force", action="store_true", help="replace existing files (and make a new CA)")
    certs.set_defaults(handler=_certs)
    scheduler = add_subcommand(
        sub, "scheduler", "a Dask scheduler with the farm's settings (the farm extra)", EXIT_USAGE, EXIT_INTERRUPTED
    )
    _listen_options(scheduler, port=8786, port_help="port (default 8786; 0: any free port)",
                    dashboard_port=DEFAULT_DASHBOARD_PORT)  # fmt: skip
    scheduler.add_argument("--no-workers-timeout", type=float, default=DEFAULT_NO_WORKERS_TIMEOUT_S, metavar="S",
                           help="fail a task no worker can serve after S seconds")  # fmt: skip
    scheduler.add_argument("--allowed-failures", type=int, default=DEFAULT_ALLOWED_FAILURES, metavar="N",
                           help="worker deaths a task may cause before it stops")  # fmt: skip
    scheduler.set_defaults(handler=_scheduler)
    worker = add_subcommand(
        sub,
        "worker",
        "a Dask worker offering this host's GOOD boards (the farm extra)",
        EXIT_USAGE,
        EXIT_UNAVAILABLE,
        EXIT_INTERRUPTED,
    )
    worker.add_argument("--scheduler", required=True, metavar="ADDRESS",
                        help="tcp://HOST:PORT of the scheduler (tls://HOST:PORT with TLS)")  # fmt: skip
    _listen_options(worker, port=0, port_help="the worker's port (default 0: any free port)", dashboard_port=0)
    worker.add_argument("--nanny-port", type=int, default=0, metavar="P",
                        help="the port of the worker's nanny (default 0: any free port)")  # fmt: skip
    worker.add_argument(
        "--contact-address",
        metavar="ADDRESS",
        help="the address others reach the worker at, when not --host:--port (NAT, containers)",
    )
    worker.add_argument("--connect-timeout", type=float, default=DEFAULT_CONNECT_TIMEOUT_S, metavar="S",
                        help=f"give up (exit {EXIT_UNAVAILABLE}) when no scheduler answers in S seconds "
                             f"(default {DEFAULT_CONNECT_TIMEOUT_S:g})")  # fmt: skip
    worker.add_argument("--hwmap", metavar="FILE", help="hardware map (default: every available emulated target)")
    worker.add_argument("--name", help="this host's name in the map and the reports (default: the hostname)")
    worker.add_argument("--refresh", type=float, default=DEFAULT_REFRESH_S, metavar="S",
                        help=f"re-probe and re-offer boards every S s (default {DEFAULT_REFRESH_S:g})")  # fmt: skip
    worker.add_argument(
        "--state", metavar="DIR", help=f"farm state directory (default: ${STATE_ENV} or ~/.local/state)"
    )
    worker.set_defaults(handler=_worker)
    add_board_commands(sub)
    add_history_command(sub)
