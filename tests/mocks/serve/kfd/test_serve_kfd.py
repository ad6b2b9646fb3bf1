"""``tinyhil serve kfd`` end to end: a C program and tinyhil's own KFD client, neither importing MOCKKFD, reach it
through ``/dev/kfd``, the render nodes and sysfs."""

from __future__ import annotations

import ctypes
import errno
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tinyhil.cli import main
from tinyhil.compiler_amdgpu import llvm_unavailable_reason
from tinyhil.mocks.kfd import MockKFD
from tinyhil.mocks.serve.kfd import build_interposer
from tinyhil.mocks.serve.kfd.build import COMPILER_PACKAGE, compiler
from tinyhil.spec.kfd_events import (
    KFD_EVENT_TIMEOUT_INFINITE,
    EventType,
    WaitResult,
    kfd_event_data,
    kfd_ioctl_create_event_args,
    kfd_ioctl_wait_events_args,
)
from tinyhil.spec.kfd_ioctls import KFD_IOCTL_MAJOR_VERSION, KFD_IOCTL_MINOR_VERSION, KfdIoctl
from tinyhil.spec.kfd_topology import KFD_TOPOLOGY_PATH

HERE = Path(__file__).resolve().parent
UAPI_HEADER = Path("/usr/include/linux/kfd_ioctl.h")
SERVE_TIMEOUT_S = 300  # a guard against a hang, never an expectation

pytestmark = pytest.mark.skipif(
    compiler() is None, reason=f"no C compiler (cc or gcc) to build the interposer: install {COMPILER_PACKAGE}"
)


def serve(*command: str, options: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """``tinyhil serve kfd [--option ...] -- command`` in a process of its own."""
    flags = [arg for option in options for arg in ("--option", option)]
    argv = [sys.executable, "-m", "tinyhil.cli", "serve", "kfd", *flags, "--", *command]
    return subprocess.run(argv, capture_output=True, text=True, timeout=SERVE_TIMEOUT_S, check=False)


def key_values(text: str) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in text.splitlines() if " " in line)


@pytest.fixture(scope="module")
def sdma_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The C client, built against the kernel's own uapi header."""
    if not UAPI_HEADER.is_file():
        pytest.skip(f"{UAPI_HEADER} is missing: install the Debian package linux-libc-dev")
    cc = compiler()
    assert cc is not None  # the module is skipped without one
    work = tmp_path_factory.mktemp("sdma-copy")
    includes = []
    if not any(Path(root, "drm", "drm.h").is_file() for root in ("/usr/include", "/usr/local/include")):
        # kfd_ioctl.h includes <drm/drm.h> for the kernel's integer types and ioctl macros only; Debian ships the
        # header with libdrm-dev, so a two-line stand-in gives the same definitions without it.
        (work / "drm").mkdir()
        (work / "drm" / "drm.h").write_text("#include <linux/types.h>\n#include <linux/ioctl.h>\n")
        includes = ["-I", str(work)]
    program = work / "sdma_copy"
    build = [cc, "-O1", "-Wall", "-Werror", "-pthread", *includes, "-o", str(program), str(HERE / "sdma_copy.c")]
    done = subprocess.run(build, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return program


def test_a_c_program_copies_through_an_sdma_queue_and_waits_on_its_event(sdma_copy: Path) -> None:
    done = serve(str(sdma_copy))
    assert done.returncode == 0, done.stderr
    report = key_values(done.stdout)
    reference = MockKFD()  # the machine the default target serves, built in-process
    assert report["version"] == f"{KFD_IOCTL_MAJOR_VERSION}.{KFD_IOCTL_MINOR_VERSION}"
    assert int(report["gpus"]) == len(reference.gpus)
    assert int(report["gpu_id"]) == reference.gpus[0].gpu_id
    assert int(report["rptr"]) > 0  # the engine consumed the ring and wrote its read pointer back
    assert int(report["copied"]) > 0  # the program compared the copied bytes itself before printing this


def test_an_infinite_wait_wakes_when_another_thread_rings_the_doorbell(sdma_copy: Path) -> None:
    """The kernel's wait blocks until signalled: the server holds the ioctl while the client's other thread rings."""
    done = serve(str(sdma_copy), "--ring-from-thread")
    assert done.returncode == 0, done.stderr
    assert int(key_values(done.stdout)["copied"]) > 0


def test_a_client_that_polls_the_fence_in_memory_sees_its_copy_complete(sdma_copy: Path) -> None:
    """No WAIT_EVENTS at all: between the client's calls the served GPU runs on, as a board's does."""
    done = serve(str(sdma_copy), "--poll")
    assert done.returncode == 0, done.stderr
    assert int(key_values(done.stdout)["copied"]) > 0


def test_target_options_shape_the_served_machine(sdma_copy: Path) -> None:
    done = serve(str(sdma_copy), options=("gpus=1", "seed=3"))
    assert done.returncode == 0, done.stderr
    assert int(key_values(done.stdout)["gpus"]) == len(MockKFD(gpus=1, seed=3).gpus)


def test_sysfs_reads_and_listings_see_mockkfds_topology() -> None:
    script = (
        "import os, sys\n"
        f"root = {KFD_TOPOLOGY_PATH!r}\n"
        "print(sorted(os.listdir(root + '/nodes')))\n"
        "print(open(root + '/nodes/1/properties').read(), end='')\n"
        "print(os.path.realpath('/sys/class/drm/renderD128/device'))\n"
        "print(os.stat('/dev/kfd').st_mode)\n"
        "print(os.lstat('/dev/dri/renderD128').st_mode)\n"
        "try:\n"
        "    os.readlink('/dev/kfd')\n"
        "except OSError as exc:\n"
        "    print(exc.errno)\n"
    )
    done = serve(sys.executable, "-c", script)
    assert done.returncode == 0, done.stderr
    sysfs = MockKFD().sysfs
    lines = done.stdout.splitlines()
    assert lines[0] == str(sorted(sysfs.dirs[f"{KFD_TOPOLOGY_PATH}/nodes"]))
    properties = sysfs.files[f"{KFD_TOPOLOGY_PATH}/nodes/1/properties"]
    assert properties is not None
    assert "\n".join(lines[1:-4]) + "\n" == properties.decode()
    assert re.fullmatch(r"/sys/devices/tinyhil-pci/0000:[0-9a-f]{2}:00\.0", lines[-4])
    character_device = str(os.stat(os.devnull).st_mode)
    assert lines[-3:] == [character_device, character_device, str(errno.EINVAL)]  # device nodes, never links


def outcomes(text: str, target: str) -> dict[str, str]:
    """pytest's ``-rA`` lines (``OUTCOME id``) keyed by the id without the target's name, so one test run on two
    targets has one key."""
    found = {}
    for line in text.splitlines():
        parts = line.split(" ", 1)
        if len(parts) == 2 and parts[0] in ("PASSED", "FAILED", "ERROR") and "::" in parts[1]:
            found[parts[1].replace(f"[{target}-", "[").replace(f"[{target}]", "")] = parts[0]
    return found


@pytest.mark.parametrize("processes", [(), ("-p", "fork_each_test")], ids=["one-process", "fork-each-test"])
def test_tinyhils_kfd_client_runs_the_portable_suite_served_as_mockkfd_runs_it_in_process(
    processes: tuple[str, ...],
) -> None:
    """The suite on KFD+AMD (tinyhil's KFD client over os.open / fcntl.ioctl / mmap) served, and on MOCKKFD+AMD in
    process: every test both run has the same outcome. One process opens and closes a device per test on one KFD
    process, as on a board; with fork_each_test.py each test runs in a fork, a KFD process of its own."""
    pytest_args = [
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-n",
        "0",
        "-q",
        "-rA",
        "--pyargs",
        "tinyhil.fixtures.suite",
    ]
    in_process = subprocess.run([sys.executable, *pytest_args, "--hil-target", "MOCKKFD+AMD"], capture_output=True,
                                text=True, timeout=SERVE_TIMEOUT_S, check=False)  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))}
    argv = [sys.executable, "-m", "tinyhil.cli", "serve", "kfd", "--", sys.executable, *pytest_args, *processes,
            "--hil-target", "KFD+AMD"]  # fmt: skip
    served = subprocess.run(argv, capture_output=True, text=True, timeout=SERVE_TIMEOUT_S, check=False, env=env)
    expected, got = outcomes(in_process.stdout, "MOCKKFD+AMD"), outcomes(served.stdout, "KFD+AMD")
    assert served.returncode == 0, served.stdout[-3000:] + served.stderr[-2000:]
    both = sorted(set(expected) & set(got))
    assert len(both) >= len(got) - 1, "only tests MOCKKFD+AMD skips may run on KFD+AMD alone"
    assert {test_id: got[test_id] for test_id in both} == {test_id: expected[test_id] for test_id in both}
    assert set(got.values()) == {"PASSED"}


def test_a_missing_compiler_is_one_line_naming_the_package_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CC", "tinyhil-no-such-compiler")
    assert main(["serve", "kfd", "--", "true"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"install the Debian package {COMPILER_PACKAGE}" in err
    assert "tinyhil-no-such-compiler" in err


def test_the_commands_exit_status_is_returned_and_a_missing_command_is_127() -> None:
    assert serve(sys.executable, "-c", "raise SystemExit(7)").returncode == 7
    done = serve("/nonexistent/tinyhil-command")
    assert done.returncode == 127
    assert "/nonexistent/tinyhil-command" in done.stderr


def test_the_interposer_is_built_once_and_exports_the_calls_it_interposes() -> None:
    first = build_interposer()
    assert build_interposer() == first
    library = ctypes.CDLL(str(first))  # loaded, not preloaded: nothing of this process is interposed
    interposed = (
        "open",
        "open64",
        "openat",
        "__open_2",
        "__openat64_2",
        "fopen",
        "close",
        "ioctl",
        "mmap",
        "mmap64",
        "stat",
        "lstat",
        "fstatat",
        "__xstat",
        "statx",
        "access",
        "opendir",
        "scandir",
        "lgetxattr",
        "listxattr",
        "readlink",
        "realpath",
    )
    for name in interposed:
        assert hasattr(library, name), name


def test_an_llvm_compiled_gfx1100_dispatch_completes_through_the_served_device() -> None:
    reason = llvm_unavailable_reason("LLVM", "gfx1100")
    if reason is not None:
        pytest.skip(f"no LLVM for gfx1100 code objects: {reason}")
    done = serve(sys.executable, str(HERE / "vector_add_llvm.py"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["equal", "True"]


def test_served_files_refuse_writing_as_mockkfd_does() -> None:
    script = (
        "import errno, os\n"
        f"path = {KFD_TOPOLOGY_PATH!r} + '/nodes/1/name'\n"
        "for flags in (os.O_WRONLY, os.O_RDWR, os.O_RDONLY | os.O_TRUNC):\n"
        "    try:\n"
        "        os.open(path, flags)\n"
        "    except OSError as exc:\n"
        "        print(errno.errorcode[exc.errno])\n"
    )
    done = serve(sys.executable, "-c", script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["EACCES"] * 3  # MockFileIO.open's answer for writing a sysfs file


PROCESSES_SCRIPT = """
import errno, fcntl, os, subprocess, sys
kfd = os.open("/dev/kfd", os.O_RDWR)
get_version = 0xC0084B01  # AMDKFD_IOC_GET_VERSION: _IOR('K', 0x01, 8 bytes)
fcntl.ioctl(kfd, get_version, bytearray(8))
child = os.fork()
if child == 0:  # the parent's KFD file is not the child's
    try:
        fcntl.ioctl(kfd, get_version, bytearray(8))
        os._exit(0)
    except OSError as exc:
        os._exit(exc.errno)
print("forked", errno.errorcode.get(os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]), "OK"))
other = subprocess.run([sys.executable, "-c", "import os; os.open('/dev/kfd', os.O_RDWR)"], capture_output=True,
                       text=True)
print("concurrent", "EBUSY" if "Errno 16" in other.stderr else other.returncode)
os.close(kfd)
after = subprocess.run([sys.executable, "-c", "import os; os.open('/dev/kfd', os.O_RDWR)"])
print("after", after.returncode)
"""


def test_a_forked_child_and_a_second_process_are_refused_as_amdkfd_would() -> None:
    """After fork the child's KFD descriptor is not its own (EBADF, amdkfd's wrong-process answer). While the process
    holding the served KFD process keeps a served file open, another process gets EBUSY (docs/serve.md: a board would
    serve both); once it keeps none, the other process takes the KFD process over."""
    done = serve(sys.executable, "-c", PROCESSES_SCRIPT)
    assert done.returncode == 0, done.stderr
    assert key_values(done.stdout) == {"forked": "EBADF", "concurrent": "EBUSY", "after": "0"}


def test_one_threads_endless_wait_wakes_when_another_thread_sets_the_event() -> None:
    """amdkfd serves a process's threads at once: SET_EVENT from one wakes another blocked in WAIT_EVENTS. The client
    is plain Python (fcntl.ioctl); the layouts and request numbers it packs come from tinyhil.spec here."""
    event_id_offset = kfd_event_data.event_id.offset
    script = f"""
import ctypes, fcntl, os, struct, threading, time
kfd = os.open("/dev/kfd", os.O_RDWR)
create = bytearray(struct.pack("<QIIIIII", 0, 0, {int(EventType.KFD_IOC_EVENT_SIGNAL)}, 1, 0, 0, 0))
fcntl.ioctl(kfd, {int(KfdIoctl.AMDKFD_IOC_CREATE_EVENT)}, create)
event_id = struct.unpack_from("<I", create, {kfd_ioctl_create_event_args.event_id.offset})[0]
data = (ctypes.c_char * {ctypes.sizeof(kfd_event_data)})()
struct.pack_into("<I", data, {event_id_offset}, event_id)
def set_later():
    time.sleep(0.2)
    fcntl.ioctl(kfd, {int(KfdIoctl.AMDKFD_IOC_SET_EVENT)}, bytearray(struct.pack("<II", event_id, 0)))
threading.Thread(target=set_later).start()
wait = bytearray(struct.pack("<QIIII", ctypes.addressof(data), 1, 1, {KFD_EVENT_TIMEOUT_INFINITE}, 0))
fcntl.ioctl(kfd, {int(KfdIoctl.AMDKFD_IOC_WAIT_EVENTS)}, wait)
print("wait_result", struct.unpack_from("<I", wait, {kfd_ioctl_wait_events_args.wait_result.offset})[0])
"""
    done = serve(sys.executable, "-c", script)
    assert done.returncode == 0, done.stderr
    assert int(key_values(done.stdout)["wait_result"]) == WaitResult.KFD_IOC_WAIT_RESULT_COMPLETE
