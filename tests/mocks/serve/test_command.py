"""The served command runs as a wrapper runs it: it inherits the descriptors ``tinyhil serve`` inherited, gets the
signals ``tinyhil serve`` receives, and its exit status is its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from tinyhil.mocks.serve.command import run_command

TIMEOUT_S = 60
# tinyhil serve's side: run the rest of the command line as the served command.
WRAPPER = (
    "import os, sys; from tinyhil.mocks.serve.command import run_command; "
    "sys.exit(run_command(sys.argv[1:], os.environ))"
)


def test_an_inherited_descriptor_reaches_the_command_and_its_exit_status_is_its_own() -> None:
    read, write = os.pipe()
    try:
        writer = f"import os; os.write({write}, b'through'); raise SystemExit(7)"
        done = subprocess.run([sys.executable, "-c", WRAPPER, sys.executable, "-c", writer], pass_fds=(write,),
                              timeout=TIMEOUT_S, check=False)  # fmt: skip
        os.close(write)
        write = -1
        assert done.returncode == 7
        assert os.read(read, 64) == b"through"
    finally:
        os.close(read)
        if write >= 0:
            os.close(write)


def test_sigterm_to_the_wrapper_ends_the_command_and_the_status_says_so() -> None:
    read, write = os.pipe()
    sleeper = f"import os, time; os.write({write}, b'up'); time.sleep({TIMEOUT_S})"
    process = subprocess.Popen([sys.executable, "-c", WRAPPER, sys.executable, "-c", sleeper], pass_fds=(write,))
    os.close(write)
    try:
        assert os.read(read, 2) == b"up"  # the command runs: the wrapper's handlers are in place
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=TIMEOUT_S) == 128 + signal.SIGTERM
        assert os.read(read, 2) == b""  # the command exited too: no writer is left
    finally:
        os.close(read)
        if process.poll() is None:
            process.kill()


def test_a_command_killed_by_a_signal_is_128_plus_the_signal() -> None:
    assert run_command(["sh", "-c", "kill -KILL $$"], os.environ) == 128 + signal.SIGKILL
