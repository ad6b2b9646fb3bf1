"""The options ``tinyhil run`` and ``tinyhil farm run`` share, and how each makes its run from its command line.

``--deadline D`` (``2h``, ``30m``, ``90s``, ``1h30m`` or plain seconds): past it the run starts no further test, ends
the running shards, and writes its reports marked incomplete (exit as the results say; ``--resume`` finishes it).
``--reruns N``: a failing test runs up to ``N`` more times; one that then passes is reported flaky with every attempt.
``--resume DIR``: the run in ``DIR`` again, as its journal's header says it was (suite, map, targets, pytest
arguments, the options that shape its pairs); an option given again must agree with the header, and ``--workers``,
``--state``, ``--deadline`` and the Dask scheduler may be new.
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from tinyhil.cli.farm_boards import lease_options
from tinyhil.cli.farm_history import history_options
from tinyhil.device_farm.cluster.security import FarmTLS, check_scheme
from tinyhil.device_farm.inventory.hwmap import HardwareMap, emulated_inventory, load_hwmap
from tinyhil.device_farm.planning import parse_subset
from tinyhil.device_farm.quarantine import load_quarantine
from tinyhil.device_farm.run import COMMANDS, DaskOptions, FarmRun, choose_targets, new_run
from tinyhil.device_farm.run_header import RunChanged, RunHeader, check_given, resume_header
from tinyhil.device_farm.state import farm_state_dir
from tinyhil.errors import InvalidArgument
from tinyhil.registry import TargetRegistry

__all__ = [
    "DASK_SHARDS",
    "LOCAL_SHARDS",
    "add_run_options",
    "farm_run_from_args",
    "given_options",
    "parse_duration",
    "resumed_header",
    "resumed_suite",
]

_UNITS: Final = {"h": 3600.0, "m": 60.0, "s": 1.0}
_DURATION: Final = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?")
LOCAL_SHARDS: Final = 2  # `farm run --workers`' default
DASK_SHARDS: Final = 64  # Dask's resources limit each board to its slots; this caps the shards one run keeps in flight


def parse_duration(text: str) -> float:
    """``2h``, ``30m``, ``90s``, ``1h30m`` or plain seconds (``5400``, ``0.5``) as seconds.

    Raises:
        InvalidArgument: anything else, or a duration that is not > 0.
    """
    try:
        seconds = float(text)
    except ValueError:
        found = _DURATION.fullmatch(text.strip())
        if found is None or not any(found.groups()):
            raise InvalidArgument(f"--deadline {text!r}, expected a duration such as 2h, 30m, 90s, 1h30m or "
                                  "seconds") from None  # fmt: skip
        seconds = sum(float(n) * _UNITS[u] for n, u in zip(found.groups(), "hms", strict=True) if n)
    if not 0 < seconds < float("inf"):
        raise InvalidArgument(f"--deadline {text!r}, expected a duration > 0")
    return seconds


def add_run_options(parser: Any, where: Any) -> None:
    """Add ``--deadline``, ``--reruns`` and ``--test-timeout`` to a run command's parser, and ``--resume`` to
    ``where`` (the group that makes it exclusive with ``--report``)."""
    parser.add_argument("--deadline", metavar="D",
                        help="stop the run D from now (2h, 30m, 90s, 1h30m or seconds): no further test starts, "
                             "the running ones are ended, the reports are marked incomplete; --resume finishes "
                             "it")  # fmt: skip
    parser.add_argument("--reruns", type=int, metavar="N",
                        help="run a failing test up to N more times; one that then passes is reported flaky, with "
                             "every attempt (default 0: failures are never rerun)")  # fmt: skip
    parser.add_argument("--test-timeout", type=float, default=0.0, metavar="S",
                        help="stop a test after S seconds with a stack dump, reported as its failure; its board is "
                             "probed (@pytest.mark.hil(timeout=S) overrides it per test; default: no "
                             "limit)")  # fmt: skip
    where.add_argument("--resume", metavar="DIR",
                       help="resume the run in DIR as its journal's header says it was (its suite, map, targets, "
                            "pytest arguments and pair options): run only what has no result")  # fmt: skip


def resumed_header(run_dir: Path, command: str) -> RunHeader:
    """The header of the run in ``run_dir``, checked (:func:`~tinyhil.device_farm.run_header.resume_header`) and
    started by ``command``.

    Raises:
        FileFormatError: no journal there, or one without a header.
        RunChanged: the run changed, or another command started it.
    """
    header = resume_header(run_dir)
    if header.command != command:
        raise RunChanged(f"--resume {run_dir}: `tinyhil {header.command}` started this run; resume it with "
                         f"`tinyhil {header.command} --resume {run_dir}`")  # fmt: skip
    return header


def given_options(args: argparse.Namespace, header: RunHeader, registry: TargetRegistry) -> dict[str, tuple[Any, Any]]:
    """The options both commands share that the resume command line gives, each with the header's value."""
    given: dict[str, tuple[Any, Any]] = {}
    if args.suite:
        given["--suite"] = (tuple(str(Path(e).resolve()) if Path(e).exists() else e for e in args.suite), header.suite)
    if args.target:
        given["--target"] = (choose_targets(registry, args.target, environment=False).names, header.targets)
    if args.pytest_args:
        given["pytest arguments"] = (tuple(args.pytest_args), header.pytest_args)
    if args.reruns is not None:
        given["--reruns"] = (args.reruns, header.reruns)
    return given


def _dask(args: argparse.Namespace, tls: FarmTLS | None, header: RunHeader | None) -> DaskOptions | None:
    """The Dask options of the command line, else (resuming) the header's; ``None``: the local engine."""
    if args.engine == "dask" or args.scheduler:
        if args.engine != "dask":
            raise InvalidArgument(f"--scheduler {args.scheduler}: the local engine has no scheduler; add --engine dask")
        if not args.scheduler:
            raise InvalidArgument("--engine dask needs --scheduler ADDRESS, such as tcp://127.0.0.1:8786")
        return DaskOptions(check_scheme(args.scheduler, tls), args.board_grace, args.scheduler_grace)
    if header is not None and header.dask is not None:  # a new scheduler may be named; the header's otherwise
        return DaskOptions(check_scheme(str(header.dask["scheduler"]), tls), float(header.dask["board_grace_s"]),
                           float(header.dask["scheduler_grace_s"]))  # fmt: skip
    if tls is not None:
        raise InvalidArgument("--tls-*/--config: the local engine opens no connection; TLS is for --engine dask")
    return None


def farm_run_from_args(args: argparse.Namespace, registry: TargetRegistry, tls: FarmTLS | None) -> FarmRun:
    """The run ``tinyhil farm run`` asks for: a new one, or with ``--resume`` the header's.

    Raises:
        InvalidArgument: a bad option, or one that contradicts the resumed run's header (:class:`RunChanged`).
        FileFormatError: a bad map, quarantine file or journal.
    """
    deadline_s = parse_duration(args.deadline) if args.deadline else None
    if args.resume:
        return _resumed_farm_run(args, registry, tls, deadline_s)
    dask = _dask(args, tls, None)
    workers = args.workers if args.workers is not None else (DASK_SHARDS if dask else LOCAL_SHARDS)
    hwmap: HardwareMap | Callable[[int], HardwareMap] | None
    if args.hwmap:
        hwmap = load_hwmap(args.hwmap, registry=registry)
    else:  # on Dask, what the workers offer
        hwmap = None if dask else (lambda slots: emulated_inventory(registry, slots=slots))
    run_dir = Path(args.report or f"tinyhil-farm-{time.strftime('%Y%m%d-%H%M%S')}")
    # The farm runs a target wherever a board serves it: whether it can run on this host is the boards' to say.
    targets = choose_targets(registry, args.target, environment=False, default=())
    return new_run(hwmap, args.suite or (), run_dir, farm_state_dir(args.state), workers, pytest_args=args.pytest_args,
                   targets=targets.names, allow_unavailable=bool(args.allow_unavailable),
                   quarantine=load_quarantine(args.quarantine) if args.quarantine else None,
                   subset=parse_subset(args.subset) if args.subset else None, subset_seed=args.seed or 0,
                   quarantine_verify=bool(args.quarantine_verify), dask=dask, reruns=args.reruns or 0,
                   deadline_s=deadline_s, command=COMMANDS[0], command_line=args.command_line,
                   **history_options(args), **lease_options(args),
                   test_timeout_s=args.test_timeout)  # fmt: skip


def _resumed_farm_run(args: argparse.Namespace, registry: TargetRegistry, tls: FarmTLS | None,
                      deadline_s: float | None) -> FarmRun:  # fmt: skip
    run_dir = Path(args.resume)
    header = resumed_header(run_dir, COMMANDS[0])
    given = given_options(args, header, registry)
    for option, value, recorded in (
        ("--hwmap", args.hwmap and str(Path(args.hwmap).resolve()), header.hwmap),
        ("--quarantine", args.quarantine and str(Path(args.quarantine).resolve()), header.quarantine),
        ("--quarantine-verify", args.quarantine_verify, header.quarantine_verify),
        ("--subset", args.subset and parse_subset(args.subset), header.subset),
        ("--seed", args.seed, header.seed),
        ("--allow-unavailable", args.allow_unavailable, header.allow_unavailable),
    ):
        if value is not None:
            given[option] = (value, recorded)
    check_given(header, given)
    dask = _dask(args, tls, header)
    hwmap: HardwareMap | Callable[[int], HardwareMap] | None
    if header.hwmap is not None:
        hwmap = load_hwmap(header.hwmap, registry=registry)
    else:
        hwmap = None if dask else (lambda slots: emulated_inventory(registry, slots=slots))
    state = farm_state_dir(args.state) if args.state else Path(header.state)
    return new_run(hwmap, resumed_suite(header), run_dir, state, args.workers or header.workers,
                   pytest_args=header.pytest_args, targets=header.targets, allow_unavailable=header.allow_unavailable,
                   quarantine=load_quarantine(header.quarantine) if header.quarantine else None, resume=True,
                   subset=header.subset, subset_seed=header.seed, quarantine_verify=header.quarantine_verify,
                   dask=dask, reruns=header.reruns, deadline_s=deadline_s, command=COMMANDS[0],
                   command_line=args.command_line, **history_options(args), **lease_options(args),
                   test_timeout_s=args.test_timeout)  # fmt: skip


def resumed_suite(header: RunHeader) -> Sequence[str]:
    """The suite argument that makes the header's suite again (``()``: the portable suite, as packages)."""
    return () if header.pyargs else header.suite
