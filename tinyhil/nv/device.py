"""The NV device runtime: :class:`~tinyhil.device.Device` over the CUDA driver seam (``tinyhil.nv.driver_api``).

One primary context and one stream per device; every operation is queued on that stream, so work runs in
submission order. ``copyin`` and ``copyout`` return once their bytes have arrived (a stream synchronisation);
``fill``, ``copy`` and ``exec`` are asynchronous until :meth:`synchronize`. Each operation is bracketed by two
CUDA events: once the stream has passed them, ``cuEventElapsedTime`` from an origin event recorded at open gives
the profile range in nanoseconds, and ``timestamp()`` is one more event.

A launch is ``grid`` blocks of ``local`` threads (CUDA's ``gridDim`` and ``blockDim``), checked against the
device's own limits (``cuDeviceGetAttribute``: 1024 threads per block, block z <= 64, grid y and z <= 65535 on
every current GPU); the kernel's one parameter is the launch's arguments as :data:`TH_MAX_ARGS` 64-bit words
(``tinyhil.portable_kernel``). A sticky CUDA error (``CUDA_ERROR_ILLEGAL_ADDRESS``, ...) loses the context: the
call that saw it raises :class:`~tinyhil.nv.errors.CudaError`, and every later call a ``StateError`` naming it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from tinyhil._check import GRID_MAX_SIZE
from tinyhil.compiler import Compiler
from tinyhil.device import Buffer, DeviceBase, Dim3, KernelArg, Program
from tinyhil.errors import InvalidArgument, StateError
from tinyhil.nv.cuda_spec import CU_EVENT_DEFAULT, CU_STREAM_DEFAULT, STICKY_RESULTS, CUdevice_attribute
from tinyhil.nv.driver_api import CudaDriver
from tinyhil.nv.errors import CudaError
from tinyhil.nv.nvrtc import NvrtcCompiler
from tinyhil.portable_kernel import TH_MAX_ARGS

__all__ = ["NV_CAPABILITIES", "CudaLimits", "NvDevice"]

NV_CAPABILITIES: Final = frozenset({"copyin", "copyout", "copy", "fill", "compile", "exec", "timestamps"})
_NS_PER_MS: Final = 1_000_000
_U64_MASK: Final = (1 << 64) - 1
_A = CUdevice_attribute


@dataclass(frozen=True, slots=True)
class CudaLimits:
    """A device's launch limits and compute capability, as ``cuDeviceGetAttribute`` reports them."""

    max_threads_per_block: int
    max_block_dim: tuple[int, int, int]
    max_grid_dim: tuple[int, int, int]
    compute_capability: tuple[int, int]

    @classmethod
    def read(cls, driver: CudaDriver, dev: int) -> CudaLimits:
        def get(attribute: CUdevice_attribute) -> int:
            return driver.cuDeviceGetAttribute(attribute, dev)

        block = (get(_A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X), get(_A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y),
                 get(_A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z))  # fmt: skip
        grid = (get(_A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X), get(_A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y),
                get(_A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z))  # fmt: skip
        capability = (get(_A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                      get(_A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR))  # fmt: skip
        return cls(get(_A.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK), block, grid, capability)

    @property
    def arch(self) -> str:
        """The NVRTC architecture of the device (``sm_90`` for compute capability 9.0)."""
        return f"sm_{self.compute_capability[0]}{self.compute_capability[1]}"

    def check_launch(self, grid: Dim3, local: Dim3) -> None:
        """Check ``grid`` blocks of ``local`` threads against these limits.

        Raises:
            InvalidArgument: naming the value, the axis and the limit (with its attribute name).
        """
        threads = local[0] * local[1] * local[2]
        if threads > self.max_threads_per_block:
            limit = self.max_threads_per_block
            raise InvalidArgument(f"local={local!r} is {threads} threads per block, expected at most {limit} "
                                  "(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)")  # fmt: skip
        for what, dims, limits, attribute in (("local", local, self.max_block_dim, "MAX_BLOCK_DIM"),
                                              ("grid", grid, self.max_grid_dim, "MAX_GRID_DIM")):  # fmt: skip
            for axis, size, limit in zip("XYZ", dims, limits, strict=True):
                if size > limit:
                    raise InvalidArgument(f"{what}={dims!r} has {size} along {axis.lower()}, expected at most {limit} "
                                          f"(CU_DEVICE_ATTRIBUTE_{attribute}_{axis})")  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Pending:
    """An operation whose two events the stream has not been seen to pass yet."""

    name: str
    queue: str
    key: str | None
    start: int
    end: int
    args: tuple[tuple[str, Any], ...]


class NvDevice(DeviceBase):
    """An NVIDIA GPU (``ordinal``) through ``driver``; ``compiler`` defaults to NVRTC for the device's arch."""

    max_workgroups = GRID_MAX_SIZE  # CUDA's own limits are checked per axis by CudaLimits.check_launch

    def __init__(self, name: str, driver: CudaDriver, *, ordinal: int = 0, compiler: Compiler | None = None,
                 capabilities: Iterable[str] = ()) -> None:  # fmt: skip
        super().__init__(name, NV_CAPABILITIES | frozenset(capabilities))
        self.driver = driver
        self.failure: CudaError | None = None
        self.context = self.stream = self._origin = 0
        self._pending: list[_Pending] = []
        self._spare_events: list[int] = []
        self._modules: dict[bytes, int] = {}
        self._functions: dict[tuple[bytes, str], int] = {}
        self._last_ns = 0
        driver.cuInit(0)
        count = driver.cuDeviceGetCount()
        if not 0 <= ordinal < count:
            raise InvalidArgument(f"NV:{ordinal}: GPU {ordinal}, expected 0..{count - 1} (CUDA sees {count} GPUs here)")
        self.ordinal = ordinal
        self.cu_device = driver.cuDeviceGet(ordinal)
        self.device_name = driver.cuDeviceGetName(self.cu_device)
        self.limits = CudaLimits.read(driver, self.cu_device)
        self.compiler: Compiler = NvrtcCompiler(self.limits.arch) if compiler is None else compiler
        self.context = driver.cuDevicePrimaryCtxRetain(self.cu_device)
        try:
            self._make_current()
            self.stream = driver.cuStreamCreate(CU_STREAM_DEFAULT)
            self._origin = driver.cuEventCreate(CU_EVENT_DEFAULT)
            driver.cuEventRecord(self._origin, self.stream)
            driver.cuEventSynchronize(self._origin)
        except BaseException:
            self._release(strict=False)
            raise

    def __repr__(self) -> str:
        return f"<NvDevice {self.name} ({self.device_name}, {self.limits.arch}, {len(self._live)} buffers)>"

    # --- errors ---------------------------------------------------------------------------------------------
    def _check_usable(self) -> None:
        if self.failure is not None:
            raise StateError(f"{self.name}: the CUDA context stopped after an earlier error ({self.failure}); "
                             "reopen the device")  # fmt: skip

    def _make_current(self) -> None:
        """Make this device's context the calling thread's current one, unless it already is (the current context
        is per thread, and another device of this process, or other CUDA code, may have changed it)."""
        if self.driver.cuCtxGetCurrent() != self.context:
            self.driver.cuCtxSetCurrent(self.context)

    @contextmanager
    def _cuda(self) -> Iterator[None]:
        """Run driver calls on a usable context, made current; a sticky error marks the context lost."""
        self._check_usable()
        try:
            self._make_current()
            yield
        except CudaError as error:
            error.target = self.name
            if error.code in STICKY_RESULTS:
                self.failure = error
            raise

    # --- events and profiling -------------------------------------------------------------------------------
    def _event(self) -> int:
        return self._spare_events.pop() if self._spare_events else self.driver.cuEventCreate(CU_EVENT_DEFAULT)

    def _ns(self, event: int) -> int:
        return round(self.driver.cuEventElapsedTime(self._origin, event) * _NS_PER_MS)

    @contextmanager
    def _profiled(self, name: str, queue: str, key: str | None = None, **args: Any) -> Iterator[None]:
        start, end = self._event(), self._event()
        self.driver.cuEventRecord(start, self.stream)
        try:
            yield
        except BaseException:
            self._spare_events += (start, end)
            raise
        self.driver.cuEventRecord(end, self.stream)
        self._pending.append(_Pending(name, queue, key, start, end, tuple(sorted(args.items()))))

    def _stream_synchronize(self) -> None:
        """Wait for the stream, then turn every passed pair of events into a profile range."""
        self.driver.cuStreamSynchronize(self.stream)
        for entry in self._pending:
            start_ns, end_ns = self._ns(entry.start), self._ns(entry.end)
            self._record_range(entry.name, start_ns, end_ns, key=entry.key, queue=entry.queue, **dict(entry.args))
            self._spare_events += (entry.start, entry.end)
        self._pending.clear()

    # --- hooks ----------------------------------------------------------------------------------------------
    def _alloc(self, nbytes: int) -> int:
        with self._cuda():
            return self.driver.cuMemAlloc(max(nbytes, 1))  # cuMemAlloc refuses 0 bytes

    def _free(self, buf: Buffer) -> None:
        if self.failure is None:  # a lost context takes its memory with it when it is released
            with self._cuda():
                self.driver.cuMemFree(buf.addr)

    def _copyin(self, buf: Buffer, data: memoryview, offset: int) -> None:
        with self._cuda():
            if data.nbytes:
                with self._profiled("copyin", "copy", nbytes=data.nbytes):
                    self.driver.cuMemcpyHtoDAsync(buf.addr + offset, data, data.nbytes, self.stream)
            self._stream_synchronize()  # the bytes are on the device (and data may be reused) when this returns

    def _copyout(self, buf: Buffer, out: memoryview, offset: int) -> None:
        with self._cuda():
            with self._profiled("copyout", "copy", nbytes=out.nbytes):
                self.driver.cuMemcpyDtoHAsync(out, buf.addr + offset, out.nbytes, self.stream)
            self._stream_synchronize()

    def _fill(self, buf: Buffer, value: int, nbytes: int, offset: int) -> None:
        with self._cuda(), self._profiled("fill", "copy", nbytes=nbytes):
            self.driver.cuMemsetD8Async(buf.addr + offset, value, nbytes, self.stream)

    def _copy(self, dst: Buffer, src: Buffer, nbytes: int) -> None:
        with self._cuda(), self._profiled("copy", "copy", nbytes=nbytes):
            self.driver.cuMemcpyDtoDAsync(dst.addr, src.addr, nbytes, self.stream)

    def _compile(self, source: bytes, name: str) -> bytes:
        return self.compiler.compile(source)

    def _function(self, program: Program) -> int:
        """The ``CUfunction`` of ``program``, its module loaded on first use (cached by the binary's content)."""
        key = (program.binary, program.name)
        function = self._functions.get(key)
        if function is None:
            module = self._modules.get(program.binary)
            if module is None:
                module = self._modules[program.binary] = self.driver.cuModuleLoadData(program.binary)
            function = self._functions[key] = self.driver.cuModuleGetFunction(module, program.name)
        return function

    def _exec(self, program: Program, grid: Dim3, local: Dim3, args: tuple[KernelArg, ...]) -> None:
        self.limits.check_launch(grid, local)
        if len(args) > TH_MAX_ARGS:
            raise InvalidArgument(f"args has {len(args)} items, expected at most {TH_MAX_ARGS} (TH_MAX_ARGS)")
        words = np.zeros(TH_MAX_ARGS, np.uint64)  # the kernel's one parameter: th_args (docs/kernels.md)
        words[: len(args)] = [arg.addr if isinstance(arg, Buffer) else arg & _U64_MASK for arg in args]
        params = np.array([words.ctypes.data], np.uint64)  # kernelParams: one pointer per kernel parameter
        with self._cuda():
            function = self._function(program)
            with self._profiled(program.name, "compute", key=program.key, grid=list(grid), local=list(local)):
                self.driver.cuLaunchKernel(function, *grid, *local, 0, self.stream, int(params.ctypes.data), 0)

    def _synchronize(self) -> None:
        with self._cuda():
            self._stream_synchronize()

    def _now_ns(self) -> int:
        with self._cuda():
            event = self._event()
            try:
                self.driver.cuEventRecord(event, self.stream)
                self.driver.cuEventSynchronize(event)
                now = self._ns(event)
            finally:
                self._spare_events.append(event)
        self._last_ns = max(self._last_ns, now)  # the events' 0.5 us resolution must not run time backwards
        return self._last_ns

    def _close(self) -> None:
        self._release(strict=self.failure is None)

    def _release(self, *, strict: bool) -> None:
        """Destroy events, modules and the stream, and release the primary context; with ``strict``, the first
        driver error is raised once everything was tried (a lost context returns its error from every call)."""
        driver = self.driver
        calls: list[tuple[Any, int]] = [(driver.cuEventDestroy, e) for e in self._spare_events]
        calls += [(driver.cuEventDestroy, e) for p in self._pending for e in (p.start, p.end)]
        calls += [(driver.cuEventDestroy, self._origin)] if self._origin else []
        calls += [(driver.cuModuleUnload, m) for m in self._modules.values()]
        calls += [(driver.cuStreamDestroy, self.stream)] if self.stream else []
        calls += [(driver.cuDevicePrimaryCtxRelease, self.cu_device)] if self.context else []
        self._spare_events, self._pending, self._modules, self._functions = [], [], {}, {}
        first: CudaError | None = None
        try:
            if self.context:
                self._make_current()  # its handles are its context's (another device's may be current)
        except CudaError as error:
            first = error
        for call, handle in calls:
            try:
                call(handle)
            except CudaError as error:
                first = first or error
        if strict and first is not None:
            raise first
