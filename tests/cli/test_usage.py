"""What ``tinyhil --help`` and each command's ``--help`` say: every command, and the exit statuses it can give."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from tinyhil.cli import EXIT_UNAVAILABLE, EXIT_USAGE, main, parser
from tinyhil.cli.usage import EXIT_STATUSES, description, exit_status_epilog
from tinyhil.device_farm.run import MANAGED_PYTEST_OPTIONS


def _subcommands(command: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    actions = [a for a in command._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(actions[0].choices) if actions else {}


def _every_command() -> list[tuple[str, argparse.ArgumentParser]]:
    found: list[tuple[str, argparse.ArgumentParser]] = []
    for name, command in _subcommands(parser()).items():
        found.append((name, command))
        found += [(f"{name} {sub}", subcommand) for sub, subcommand in _subcommands(command).items()]
    return found


def test_the_top_help_lists_every_command_with_a_summary_and_every_exit_status() -> None:
    top = parser()
    text = top.format_help()
    commands = _subcommands(top)
    assert set(commands) == {"targets", "run", "farm", "trace", "repro", "serve", "bench"}
    for action in next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))._choices_actions:
        assert action.help and action.dest in text, action.dest
    for status in EXIT_STATUSES:
        assert f"  {status:>3}  " in text, status


def test_farm_and_trace_name_all_their_subcommands_in_the_top_help() -> None:
    text = parser().format_help()
    for name in ("discover", "status", "scheduler", "worker", "certs"):
        assert name in text, name
    assert "drift" in text


@pytest.mark.parametrize(("name", "command"), _every_command(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_command_describes_itself_and_lists_its_exit_statuses(
    name: str, command: argparse.ArgumentParser
) -> None:
    text = command.format_help()
    assert command.description or _subcommands(command), name
    assert "exit status:" in text, name
    assert "``" not in text and ":func:" not in text, name


def test_the_epilog_lists_what_it_is_given_and_pytest_only_for_runs() -> None:
    lines = exit_status_epilog(0, EXIT_USAGE).splitlines()
    assert lines[0] == "exit status:" and lines[1].startswith("    0  ") and lines[-1].startswith("    2  ")
    assert " ".join(" ".join(lines[1:]).split()) == f"0 {EXIT_STATUSES[0]} 2 {EXIT_STATUSES[EXIT_USAGE]}"
    assert "pytest's own" in exit_status_epilog() and "pytest's own" not in exit_status_epilog(0, EXIT_USAGE)
    assert description("``a`` :func:`~x.y` b\n\nsecond", paragraphs=1) == "a x.y b"


@pytest.mark.parametrize("option", sorted(MANAGED_PYTEST_OPTIONS))
def test_a_managed_pytest_option_before_the_dashes_names_the_runs_own(
    option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["farm", "run", f"{option}=x"])
    assert exited.value.code == EXIT_USAGE
    assert f"{option} is the run's own: use {MANAGED_PYTEST_OPTIONS[option]}" in capsys.readouterr().err


def test_an_unknown_option_of_another_command_gets_no_pytest_hint(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["targets", "--bogus"])
    err = capsys.readouterr().err
    assert "unrecognized arguments: --bogus" in err and "pytest" not in err


def test_python_dash_m_runs_the_command_line() -> None:
    done = subprocess.run([sys.executable, "-m", "tinyhil.cli", "--help"], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and "usage: tinyhil" in done.stdout and f"  {EXIT_UNAVAILABLE:>3}  " in done.stdout
