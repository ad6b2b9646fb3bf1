"""The ctypes KFD ABI (``tinyhil.spec.kfd_*``) matches ``linux/kfd_ioctl.h`` byte for byte: sizes, field offsets,
request numbers, constants.

A C program compiled against the installed header prints what the C compiler computes; the Python side must agree.
On a header of another KFD minor version, structures may only have grown at the end (the kernel's ABI rule), so
then every Python field must sit at the header's offset and no Python structure may be larger than the header's.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from collections.abc import Iterator
from enum import IntEnum
from pathlib import Path

import pytest

from tinyhil.spec import kfd_events, kfd_ioctls, kfd_process, kfd_queues, kfd_topology
from tinyhil.spec.kfd_events import EventType, HwExceptionResetCause, HwExceptionResetType, MemErrorType, WaitResult
from tinyhil.spec.kfd_ioctls import (
    AMDKFD_COMMAND_END,
    AMDKFD_COMMAND_START,
    AMDKFD_IOCTL_BASE,
    KFD_IOCTL_MINOR_VERSION,
    STRUCTS,
    KfdIoctl,
)
from tinyhil.spec.kfd_memory import AllocMemFlags, CachePolicy, MmioRemap
from tinyhil.spec.kfd_queues import QueueType
from tinyhil.spec.linux_ioctl import ioc_nr, ioc_size

HEADER = Path("/usr/include/linux/kfd_ioctl.h")
COMPILER = shutil.which("cc") or shutil.which("gcc")
SCALARS = {
    "KFD_IOCTL_MAJOR_VERSION": kfd_ioctls.KFD_IOCTL_MAJOR_VERSION,
    "KFD_IOCTL_MINOR_VERSION": kfd_ioctls.KFD_IOCTL_MINOR_VERSION,
    "KFD_MAX_QUEUE_PERCENTAGE": kfd_queues.KFD_MAX_QUEUE_PERCENTAGE,
    "KFD_MAX_QUEUE_PRIORITY": kfd_queues.KFD_MAX_QUEUE_PRIORITY,
    "KFD_MIN_QUEUE_RING_SIZE": kfd_queues.KFD_MIN_QUEUE_RING_SIZE,
    "NUM_OF_SUPPORTED_GPUS": kfd_topology.NUM_OF_SUPPORTED_GPUS,
    "KFD_INVALID_FD": kfd_process.KFD_INVALID_FD,
    "KFD_SIGNAL_EVENT_LIMIT": kfd_events.KFD_SIGNAL_EVENT_LIMIT,
}
ENUMS: tuple[type[IntEnum], ...] = (
    QueueType,
    CachePolicy,
    EventType,
    WaitResult,
    HwExceptionResetType,
    HwExceptionResetCause,
    MemErrorType,
    MmioRemap,
)
EXTRA_MACROS = {"AMDKFD_IOCTL_BASE": AMDKFD_IOCTL_BASE, "AMDKFD_COMMAND_START": AMDKFD_COMMAND_START}


def _fields(struct: type[ctypes.Structure]) -> Iterator[tuple[str, int]]:
    """(field name as C spells it, offset) for every field, members of anonymous unions inlined."""
    anonymous = getattr(struct, "_anonymous_", ())
    for name, ctype in struct._fields_:
        if name in anonymous:
            for member, _ in ctype._fields_:
                yield member, getattr(struct, member).offset
        else:
            yield name, getattr(struct, name).offset


def _constants() -> dict[str, int]:
    found = dict(SCALARS)
    for enum in (*ENUMS, AllocMemFlags):
        found.update({member.name: int(member) for member in enum})  # type: ignore[attr-defined]
    return found | EXTRA_MACROS


def _probe_source() -> str:
    lines = [
        "#include <stddef.h>",
        "#include <stdio.h>",
        f"#include <{HEADER.parent.name}/{HEADER.name}>",
        "int main(void) {",
    ]
    for name, struct in STRUCTS.items():
        lines.append(f'printf("size {name} %zu\\n", sizeof(struct {name}));')
        for field, _ in _fields(struct):
            lines.append(f'printf("offset {name}.{field} %zu\\n", offsetof(struct {name}, {field}));')
    for request in KfdIoctl:
        lines.append(f'printf("request {request.name} %lu\\n", (unsigned long)({request.name}));')
    for name in _constants():  # every constant is a u32 field value; (1 << 31) is a negative int in C
        lines.append(f'printf("const {name} %u\\n", (unsigned int)({name}));')
    lines.append('printf("const AMDKFD_COMMAND_END %llu\\n", (unsigned long long)(AMDKFD_COMMAND_END));')
    lines += ["return 0;", "}"]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def header_abi(tmp_path_factory: pytest.TempPathFactory) -> dict[str, int]:
    if not HEADER.exists():
        pytest.skip(f"{HEADER} is not installed (Debian/Ubuntu: apt-get install linux-libc-dev)")
    if COMPILER is None:
        pytest.skip("no C compiler (cc or gcc) on PATH to build the ABI probe (Debian package gcc)")
    folder = tmp_path_factory.mktemp("kfd_abi")
    source, binary = folder / "probe.c", folder / "probe"
    source.write_text(_probe_source())
    # kfd_ioctl.h includes <drm/drm.h> only for the __u32/__u64 types; Debian ships that header in libdrm-dev, not
    # linux-libc-dev, so a stand-in that provides exactly those types is searched after the system directories.
    shim = folder / "shim" / "drm"
    shim.mkdir(parents=True)
    (shim / "drm.h").write_text("#include <linux/types.h>\n")
    command = [COMPILER, "-std=c11", "-Wall", "-Werror", "-idirafter", str(shim.parent), "-o", str(binary), str(source)]
    subprocess.run(command, check=True)
    output = subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout
    values: dict[str, int] = {}
    for line in output.splitlines():
        kind, name, value = line.split()
        values[f"{kind} {name}"] = int(value)
    return values


def _same_version(header_abi: dict[str, int]) -> bool:
    return header_abi["const KFD_IOCTL_MINOR_VERSION"] == KFD_IOCTL_MINOR_VERSION


@pytest.mark.parametrize("name", sorted(STRUCTS))
def test_struct_layout_matches_the_header(header_abi: dict[str, int], name: str) -> None:
    struct = STRUCTS[name]
    for field, offset in _fields(struct):
        assert offset == header_abi[f"offset {name}.{field}"], f"{name}.{field} at {offset}, header says otherwise"
    c_size, py_size = header_abi[f"size {name}"], ctypes.sizeof(struct)
    if _same_version(header_abi):
        assert py_size == c_size, f"sizeof(struct {name}) is {c_size} in C, {py_size} in Python"
    else:
        assert py_size <= c_size, f"struct {name} is {py_size} bytes in Python but only {c_size} in the header"


@pytest.mark.parametrize("request_", list(KfdIoctl), ids=lambda r: r.name)
def test_request_numbers_match_the_header(header_abi: dict[str, int], request_: KfdIoctl) -> None:
    c_request = header_abi[f"request {request_.name}"]
    if _same_version(header_abi) or ioc_size(c_request) == ioc_size(request_):
        assert request_ == c_request, f"{request_.name} = {int(request_):#x}, header says {c_request:#x}"
    else:
        assert (request_ ^ c_request) & ~(0x3FFF << 16) == 0, f"{request_.name} differs beyond its size field"


def test_named_constants_match_the_header(header_abi: dict[str, int]) -> None:
    wrong = {
        name: (value, header_abi[f"const {name}"])
        for name, value in _constants().items()
        if name != "KFD_IOCTL_MINOR_VERSION" and header_abi[f"const {name}"] != value
    }
    assert not wrong, f"(python, header) values differ: {wrong}"


def test_the_dispatch_range_covers_every_request_the_header_defines_here(header_abi: dict[str, int]) -> None:
    assert min(ioc_nr(r) for r in KfdIoctl) >= AMDKFD_COMMAND_START
    if _same_version(header_abi):
        assert header_abi["const AMDKFD_COMMAND_END"] == AMDKFD_COMMAND_END
        assert max(ioc_nr(r) for r in KfdIoctl) == AMDKFD_COMMAND_END - 1
