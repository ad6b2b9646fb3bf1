"""Kernel executors: what DISPATCH_DIRECT hands a launch to (docs/amdgpu.md "Kernel executor").

The shipped :class:`HostNativeExecutor` runs host-native code objects (``tinyhil.spec.code_object``): it loads
each distinct shared object once per process (from memory: ``memfd_create`` + ``dlopen`` of
``/proc/self/fd/N``, no file left behind), translates each pointer argument through the GPU translation function
(the pointer must lie inside a mapping) and calls the entry point once per workgroup. Another executor of
host-native programs can plug in behind :class:`KernelExecutor`; GPU machine code goes to the RDNA3 wave executor
(``rdna3``, called by the PM4 engine with the dispatch's registers).

A host kernel runs in this process: a kernel that writes past its buffers corrupts (or crashes) the process, as a
real kernel would fault the GPU. Only the argument pointers are checked.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import tempfile
from dataclasses import dataclass
from typing import Any, Final, Protocol, runtime_checkable

import numpy as np

from tinyhil._check import HOST_NATIVE_MAX_WORKGROUPS, WORKGROUP_MAX_SIZE
from tinyhil.errors import InvalidArgument
from tinyhil.spec.code_object import (
    CODE_OBJECT_HEADER_BYTES,
    ArgKind,
    CodeObject,
    code_object_size,
    unpack_code_object,
)

from .errors import KernelError
from .memory import HostSpan

__all__ = ["HostNativeExecutor", "KernelExecutor", "KernelMemory", "Launch"]

_PROC_FD: Final = "/proc/self/fd"


@dataclass(frozen=True, slots=True)
class Launch:
    """One DISPATCH_DIRECT: program address, grid in workgroups, workgroup size in threads, argument buffer."""

    program_va: int
    grid: tuple[int, int, int]
    group_size: tuple[int, int, int]
    args_va: int

    @property
    def workgroups(self) -> int:
        x, y, z = self.grid
        return x * y * z

    @property
    def threads_per_workgroup(self) -> int:
        x, y, z = self.group_size
        return x * y * z


class KernelMemory(Protocol):
    """The GPU memory an executor sees: reads through the translation function, pointers for host code."""

    def read(self, va: int, nbytes: int) -> memoryview: ...

    def host_span(self, va: int) -> HostSpan: ...


@runtime_checkable
class KernelExecutor(Protocol):
    """Runs a launch; returns the GPU ranges ``(va, nbytes)`` the kernel may have written (their waiters wake).

    Raises:
        KernelError: the program cannot run (not a code object, unloadable, no such entry point).
        GpuMemoryFault: the program, the arguments or a pointer argument is unmapped.
    """

    def dispatch(self, memory: KernelMemory, launch: Launch) -> list[tuple[int, int]]: ...


@dataclass(frozen=True, slots=True)
class _Program:
    code: CodeObject
    function: Any  # a ctypes foreign function


# Shared objects loaded in this process, by SHA-256 of their bytes: (library, memfd kept open). A library cannot
# be unloaded, and keeping its fd open stops a later load from reusing the /proc/self/fd/N name, which the dynamic
# loader would take for the library already loaded under that name.
_LIBRARIES: dict[bytes, tuple[ctypes.CDLL, int]] = {}


def _load_library(shared_object: bytes) -> ctypes.CDLL:
    digest = hashlib.sha256(shared_object).digest()
    if digest in _LIBRARIES:
        return _LIBRARIES[digest][0]
    name = f"tinyhil-kernel-{digest.hex()[:16]}"
    try:
        if hasattr(os, "memfd_create") and os.path.isdir(_PROC_FD):
            fd = os.memfd_create(name, os.MFD_CLOEXEC)
            with open(fd, "wb", closefd=False) as out:
                out.write(shared_object)
            library = ctypes.CDLL(f"{_PROC_FD}/{fd}")
        else:  # no memfd (macOS): a temporary file, deleted as soon as it is loaded
            fd = -1
            with tempfile.NamedTemporaryFile(prefix=name, suffix=".so") as out:
                out.write(shared_object)
                out.flush()
                library = ctypes.CDLL(out.name)
    except OSError as error:
        raise KernelError(f"the code object's shared object does not load: {error}") from None
    _LIBRARIES[digest] = (library, fd)
    return library


class HostNativeExecutor:
    """Runs host-native code objects; see the module docstring.

    ``programs_loaded`` counts the distinct programs this executor has resolved (loaded or found in the
    process-wide library cache); ``dispatches`` counts launches.
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._programs: dict[bytes, _Program] = {}
        self.programs_loaded = 0
        self.dispatches = 0

    def _program(self, memory: KernelMemory, va: int) -> _Program:
        try:
            size = code_object_size(memory.read(va, CODE_OBJECT_HEADER_BYTES))
            container = bytes(memory.read(va, size))
            key = hashlib.sha256(container).digest()
            if key in self._programs:
                return self._programs[key]
            code = unpack_code_object(container)
        except InvalidArgument as error:
            raise KernelError(f"program at {va:#x} is not a host-native code object: {error}") from None
        library = _load_library(code.shared_object)
        try:
            function = getattr(library, code.entry)
        except AttributeError:
            raise KernelError(f"program at {va:#x}: entry point {code.entry!r} is not in its shared object") from None
        function.restype = None
        function.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
        program = self._programs[key] = _Program(code, function)
        self.programs_loaded += 1
        return program

    def dispatch(self, memory: KernelMemory, launch: Launch) -> list[tuple[int, int]]:
        if launch.workgroups > HOST_NATIVE_MAX_WORKGROUPS:
            raise KernelError(
                f"grid {launch.grid} is {launch.workgroups:#x} workgroups, more than the host-native executor runs "
                f"({HOST_NATIVE_MAX_WORKGROUPS:#x}, HOST_NATIVE_MAX_WORKGROUPS)"
            )
        if launch.threads_per_workgroup > WORKGROUP_MAX_SIZE:
            raise KernelError(
                f"workgroup size {launch.group_size} is {launch.threads_per_workgroup} threads, expected at most "
                f"{WORKGROUP_MAX_SIZE} (WORKGROUP_MAX_SIZE)"
            )
        program = self._program(memory, launch.program_va)
        signature = program.code.signature
        raw = np.frombuffer(bytes(memory.read(launch.args_va, 8 * len(signature))), "<u8")
        args = (ctypes.c_uint64 * max(len(signature), 1))()
        written: list[tuple[int, int]] = []
        for slot, kind in enumerate(signature):
            value = int(raw[slot])
            if kind is ArgKind.POINTER:
                span = memory.host_span(value)
                written.append((span.va, span.nbytes))
                value = span.address
            args[slot] = value
        group_id = (ctypes.c_uint32 * 3)()
        group_size = (ctypes.c_uint32 * 3)(*launch.group_size)
        grid_x, grid_y, grid_z = launch.grid
        self.dispatches += 1
        for z in range(grid_z):
            group_id[2] = z
            for y in range(grid_y):
                group_id[1] = y
                for x in range(grid_x):
                    group_id[0] = x
                    program.function(args, group_id, group_size)
        return written
