"""A test double of the CUDA driver seam (``tinyhil.nv.driver_api.CudaDriver``): not a target, a checker.

Every call is recorded (``double.calls``) and checked against what the CUDA driver API documentation says the
call accepts, answering a bad argument with the ``CUresult`` the driver documents for it (as a ``CudaError``, the
seam's vocabulary). Device memory is host memory, so a kernel's **host-C build** (the portable kernel form,
``tinyhil.portable_kernel``) runs on it: :class:`DoubleCompiler` builds each source twice, with NVRTC (when the
wheel is installed; else a stand-in image) and with the host C compiler, and registers the pair.

Documented behaviour it models (CUDA Driver API reference, "API synchronization behavior" and each function):

- ``cuInit`` first (else ``CUDA_ERROR_NOT_INITIALIZED``), ``Flags`` 0; a current context for memory, module,
  stream and event calls (else ``CUDA_ERROR_INVALID_CONTEXT``).
- Stream work runs in order when the stream is synchronised (``cuStreamSynchronize``, ``cuEventSynchronize`` of
  an event on it) or by a call the documentation makes synchronous: a device-to-pageable-host copy returns once
  it is complete, ``cuMemFree`` waits for the device. A host-to-device copy from pageable memory reads the source
  during the call (it is staged), so the caller may reuse it at once.
- ``cuLaunchKernel``: blocks of at most ``MAX_THREADS_PER_BLOCK`` threads within ``MAX_BLOCK_DIM_*``, a grid within
  ``MAX_GRID_DIM_*``, exactly one of ``kernelParams`` and ``extra``; ``kernelParams`` holds one pointer per kernel
  parameter and each parameter's bytes are copied during the call.
- ``cuEventElapsedTime`` needs two timing events that have completed (else ``CUDA_ERROR_NOT_READY``; one never
  recorded: ``CUDA_ERROR_INVALID_HANDLE``).
- A sticky error (``STICKY_RESULTS``) poisons the context: every later call returns it, except releasing the
  primary context (which is how a process recovers).

Time is virtual: each operation advances an integer nanosecond clock by a fixed model, so timestamps are exact.
"""

from __future__ import annotations

import ctypes
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np

from tinyhil.compiler import HostCCompiler
from tinyhil.nv.cubin import kernel_params
from tinyhil.nv.cuda_spec import STICKY_RESULTS, CUdevice_attribute, CUresult
from tinyhil.nv.errors import CudaError
from tinyhil.nv.nvrtc import NvrtcCompiler, nvrtc_unavailable_reason
from tinyhil.portable_kernel import TH_ARGS_BYTES

A = CUdevice_attribute
R = CUresult
# An H200's answers (cuDeviceGetAttribute on compute capability 9.0).
H200_ATTRIBUTES: Final = {
    A.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: 1024,
    A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: 1024,
    A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: 1024,
    A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: 64,
    A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: 0x7FFF_FFFF,
    A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: 65535,
    A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: 65535,
    A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: 9,
    A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: 0,
}
ALLOC_ALIGN: Final = 256  # cuMemAlloc: "suitably aligned for any kind of variable"; real drivers give 512
UNDEFINED_BYTE: Final = 0xCD  # fresh allocations are not zero: a test that relied on it would fail
COPY_NS_PER_KIB: Final = 20  # the virtual cost model: about 50 GB/s, 2 us per launch, 1 us per fill or copy call
LAUNCH_NS: Final = 2_000
CALL_NS: Final = 1_000
_STAND_IN_MAGIC: Final = b"TINYHIL-NV-DOUBLE\0"
_KERNEL = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
_NO_CONTEXT_CALLS: Final = frozenset({"cuInit", "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetName",
                                      "cuDeviceGetAttribute", "cuDevicePrimaryCtxRetain",
                                      "cuDevicePrimaryCtxRelease", "cuCtxGetCurrent",
                                      "cuCtxSetCurrent"})  # fmt: skip


@dataclass(frozen=True, slots=True)
class CudaFault:
    """The ``nth`` call (from 1) of ``call`` returns ``result`` instead of running (sticky results poison)."""

    call: str
    nth: int
    result: CUresult


@dataclass(slots=True)
class HostImage:
    """A registered module image: the host build that runs it and its kernels' parameter sizes."""

    library: ctypes.CDLL
    params: dict[str, tuple[int, ...]]


@dataclass(slots=True)
class _Event:
    flags: int
    ctx: int
    recorded: bool = False
    time_ns: int | None = None  # set when the stream reaches it


@dataclass(slots=True)
class _Stream:
    ctx: int  # the context that created it (0: the legacy stream, every context's)
    work: list[Callable[[], None]] = field(default_factory=list)


class CudaDouble:
    """The CUDA driver seam over host memory, for ``gpus`` GPUs with ``attributes`` (an H200's by default)."""

    def __init__(self, *, gpus: int = 1, attributes: dict[CUdevice_attribute, int] | None = None,
                 faults: Sequence[CudaFault] = (), name: str = "NVIDIA H200 (test double)",
                 run_kernels: bool = True) -> None:  # fmt: skip
        self.gpus = gpus
        self.attributes = dict(H200_ATTRIBUTES if attributes is None else attributes)
        self.faults = list(faults)
        self.name = name
        self.run_kernels = run_kernels  # False: launches are checked and recorded, never run (huge grids)
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.counts: dict[str, int] = {}
        self.clock_ns = 0
        self.images: dict[bytes, HostImage] = {}
        self.initialized = False
        self.current = 0
        self.retains: dict[int, int] = {}
        self.allocations: dict[int, np.ndarray] = {}
        self.allocation_contexts: dict[int, int] = {}  # with unified addressing any context may copy from them
        self.modules: dict[int, HostImage] = {}
        self.functions: dict[int, tuple[HostImage, str]] = {}
        self.streams: dict[int, _Stream] = {0: _Stream(0)}  # 0: the legacy default stream
        self.events: dict[int, _Event] = {}
        self.sticky: CudaError | None = None
        self.launched_words: list[np.ndarray] = []  # each launch's th_args, as copied from kernelParams
        self.freed_by_reset = 0  # allocations a context reset released (a clean close leaves none for it)
        self._handles = iter(range(0x1000, 1 << 62, 0x10))

    # --- bookkeeping -----------------------------------------------------------------------------------------
    def register(self, image: bytes, host: HostImage) -> None:
        """Make ``image`` loadable: ``cuModuleLoadData(image)`` runs ``host``'s kernels."""
        self.images[image] = host

    def live(self) -> dict[str, int]:
        """What is still held: a clean close leaves every count 0."""
        return {"allocations": len(self.allocations), "modules": len(self.modules), "events": len(self.events),
                "streams": len(self.streams) - 1, "retains": sum(self.retains.values())}  # fmt: skip

    def calls_to(self, name: str) -> list[tuple[Any, ...]]:
        return [args for call, args in self.calls if call == name]

    def _enter(self, call: str, *args: Any) -> None:
        self.calls.append((call, args))
        self.counts[call] = count = self.counts.get(call, 0) + 1
        if self.sticky is not None and call != "cuDevicePrimaryCtxRelease":
            raise CudaError(call, self.sticky.code)
        for fault in self.faults:
            if fault.call == call and fault.nth == count:
                error = CudaError(call, fault.result)
                if fault.result in STICKY_RESULTS:
                    self.sticky = error
                raise error
        if call != "cuInit" and not self.initialized:
            raise CudaError(call, R.CUDA_ERROR_NOT_INITIALIZED)
        if call not in _NO_CONTEXT_CALLS and self.current == 0:
            raise CudaError(call, R.CUDA_ERROR_INVALID_CONTEXT)

    @staticmethod
    def _fail(call: str, result: CUresult, detail: str) -> CudaError:
        return CudaError(call, result, detail)

    def _device(self, call: str, dev: int) -> None:
        if not (isinstance(dev, int) and 0 <= dev < self.gpus):
            raise self._fail(call, R.CUDA_ERROR_INVALID_DEVICE, f"dev={dev!r}")

    def _span(self, call: str, dptr: int, nbytes: int) -> np.ndarray:
        """The bytes ``[dptr, dptr + nbytes)`` of the one allocation holding them."""
        if not (isinstance(nbytes, int) and nbytes >= 0):
            raise self._fail(call, R.CUDA_ERROR_INVALID_VALUE, f"ByteCount={nbytes!r}")
        for base, memory in self.allocations.items():
            if base <= dptr and dptr + nbytes <= base + memory.size:
                return memory[dptr - base : dptr - base + nbytes]
        raise self._fail(call, R.CUDA_ERROR_INVALID_VALUE, f"{dptr:#x}+{nbytes:#x} is not inside one allocation")

    def _stream(self, call: str, h_stream: int) -> _Stream:
        stream = self.streams.get(h_stream)
        if stream is None:
            raise self._fail(call, R.CUDA_ERROR_INVALID_HANDLE, f"hStream={h_stream!r}")
        if stream.ctx not in (0, self.current):
            raise self._fail(call, R.CUDA_ERROR_INVALID_HANDLE, f"hStream={h_stream!r} is another context's")
        return stream

    def _host(self, call: str, view: Any, nbytes: int, *, writable: bool) -> memoryview:
        if not isinstance(view, memoryview) or view.nbytes < nbytes or (writable and view.readonly):
            raise self._fail(call, R.CUDA_ERROR_INVALID_VALUE, f"host buffer {view!r} for {nbytes} bytes")
        return view

    def _drain(self, stream: _Stream) -> None:
        while stream.work:
            stream.work.pop(0)()

    def _drain_all(self) -> None:
        for stream in self.streams.values():
            self._drain(stream)

    def _tick(self, ns: int) -> None:
        self.clock_ns += ns

    # --- context ---------------------------------------------------------------------------------------------
    def cuInit(self, Flags: int) -> None:
        self._enter("cuInit", Flags)
        if Flags != 0:
            raise self._fail("cuInit", R.CUDA_ERROR_INVALID_VALUE, "Flags must be 0")
        self.initialized = True

    def cuDeviceGetCount(self) -> int:
        self._enter("cuDeviceGetCount")
        return self.gpus

    def cuDeviceGet(self, ordinal: int) -> int:
        self._enter("cuDeviceGet", ordinal)
        self._device("cuDeviceGet", ordinal)
        return ordinal

    def cuDeviceGetName(self, dev: int) -> str:
        self._enter("cuDeviceGetName", dev)
        self._device("cuDeviceGetName", dev)
        return self.name

    def cuDeviceGetAttribute(self, attrib: int, dev: int) -> int:
        self._enter("cuDeviceGetAttribute", attrib, dev)
        self._device("cuDeviceGetAttribute", dev)
        if attrib not in self.attributes:
            raise self._fail("cuDeviceGetAttribute", R.CUDA_ERROR_INVALID_VALUE, f"attrib={attrib!r}")
        return self.attributes[CUdevice_attribute(attrib)]

    def cuDevicePrimaryCtxRetain(self, dev: int) -> int:
        self._enter("cuDevicePrimaryCtxRetain", dev)
        self._device("cuDevicePrimaryCtxRetain", dev)
        self.retains[dev] = self.retains.get(dev, 0) + 1
        return 0x7000 + dev

    def cuDevicePrimaryCtxRelease(self, dev: int) -> None:
        self._enter("cuDevicePrimaryCtxRelease", dev)
        self._device("cuDevicePrimaryCtxRelease", dev)
        if self.retains.get(dev, 0) == 0:
            raise self._fail("cuDevicePrimaryCtxRelease", R.CUDA_ERROR_INVALID_CONTEXT, "released more than retained")
        self.retains[dev] -= 1
        if self.retains[dev] == 0:  # the last release resets the context: its memory goes with it
            ctx = 0x7000 + dev
            owned = [addr for addr, owner in self.allocation_contexts.items() if owner == ctx]
            for addr in owned:
                del self.allocations[addr], self.allocation_contexts[addr]
            self.freed_by_reset += len(owned)
            self.sticky = None
            self.current = 0 if self.current == ctx else self.current

    def cuCtxGetCurrent(self) -> int:
        self._enter("cuCtxGetCurrent")
        return self.current

    def cuCtxSetCurrent(self, ctx: int) -> None:
        self._enter("cuCtxSetCurrent", ctx)
        if ctx != 0 and self.retains.get(ctx - 0x7000, 0) == 0:
            raise self._fail("cuCtxSetCurrent", R.CUDA_ERROR_INVALID_CONTEXT, f"ctx={ctx:#x} is not retained")
        self.current = ctx

    # --- memory ----------------------------------------------------------------------------------------------
    def cuMemAlloc(self, bytesize: int) -> int:
        self._enter("cuMemAlloc", bytesize)
        if not (isinstance(bytesize, int) and bytesize > 0):
            raise self._fail("cuMemAlloc", R.CUDA_ERROR_INVALID_VALUE, f"bytesize={bytesize!r} (0 is refused)")
        raw = np.full(bytesize + ALLOC_ALIGN, UNDEFINED_BYTE, np.uint8)
        start = -raw.ctypes.data % ALLOC_ALIGN
        memory = raw[start : start + bytesize]
        self.allocations[memory.ctypes.data] = memory
        self.allocation_contexts[memory.ctypes.data] = self.current
        return int(memory.ctypes.data)

    def cuMemFree(self, dptr: int) -> None:
        self._enter("cuMemFree", dptr)
        if dptr not in self.allocations:
            raise self._fail("cuMemFree", R.CUDA_ERROR_INVALID_VALUE, f"dptr={dptr:#x} is not an allocation's start")
        self._drain_all()  # cuMemFree synchronises with the device
        del self.allocations[dptr], self.allocation_contexts[dptr]

    def cuMemcpyHtoDAsync(self, dstDevice: int, srcHost: memoryview, ByteCount: int, hStream: int) -> None:
        self._enter("cuMemcpyHtoDAsync", dstDevice, srcHost, ByteCount, hStream)
        target = self._span("cuMemcpyHtoDAsync", dstDevice, ByteCount)
        staged = bytes(self._host("cuMemcpyHtoDAsync", srcHost, ByteCount, writable=False)[:ByteCount])

        def land() -> None:
            target[:] = np.frombuffer(staged, np.uint8)
            self._tick(ByteCount * COPY_NS_PER_KIB // 1024)

        self._stream("cuMemcpyHtoDAsync", hStream).work.append(land)

    def cuMemcpyDtoHAsync(self, dstHost: memoryview, srcDevice: int, ByteCount: int, hStream: int) -> None:
        self._enter("cuMemcpyDtoHAsync", dstHost, srcDevice, ByteCount, hStream)
        source = self._span("cuMemcpyDtoHAsync", srcDevice, ByteCount)
        out = self._host("cuMemcpyDtoHAsync", dstHost, ByteCount, writable=True)
        stream = self._stream("cuMemcpyDtoHAsync", hStream)
        self._drain(stream)  # to pageable memory: returns once the copy is complete
        out[:ByteCount] = source.tobytes()
        self._tick(ByteCount * COPY_NS_PER_KIB // 1024)

    def cuMemcpyDtoDAsync(self, dstDevice: int, srcDevice: int, ByteCount: int, hStream: int) -> None:
        self._enter("cuMemcpyDtoDAsync", dstDevice, srcDevice, ByteCount, hStream)
        target = self._span("cuMemcpyDtoDAsync", dstDevice, ByteCount)
        source = self._span("cuMemcpyDtoDAsync", srcDevice, ByteCount)

        def copy() -> None:
            target[:] = source
            self._tick(CALL_NS + ByteCount * COPY_NS_PER_KIB // 1024)

        self._stream("cuMemcpyDtoDAsync", hStream).work.append(copy)

    def cuMemsetD8Async(self, dstDevice: int, uc: int, N: int, hStream: int) -> None:
        self._enter("cuMemsetD8Async", dstDevice, uc, N, hStream)
        if not (isinstance(uc, int) and 0 <= uc <= 0xFF):
            raise self._fail("cuMemsetD8Async", R.CUDA_ERROR_INVALID_VALUE, f"uc={uc!r} is not an unsigned char")
        target = self._span("cuMemsetD8Async", dstDevice, N)

        def fill() -> None:
            target[:] = uc
            self._tick(CALL_NS)

        self._stream("cuMemsetD8Async", hStream).work.append(fill)

    # --- modules and launches --------------------------------------------------------------------------------
    def cuModuleLoadData(self, image: bytes) -> int:
        self._enter("cuModuleLoadData", image)
        host = self.images.get(bytes(image)) if isinstance(image, bytes | bytearray) else None
        if host is None:
            raise self._fail("cuModuleLoadData", R.CUDA_ERROR_INVALID_IMAGE, "not an image this double registered")
        handle = next(self._handles)
        self.modules[handle] = host
        return handle

    def cuModuleUnload(self, hmod: int) -> None:
        self._enter("cuModuleUnload", hmod)
        if self.modules.pop(hmod, None) is None:
            raise self._fail("cuModuleUnload", R.CUDA_ERROR_INVALID_HANDLE, f"hmod={hmod!r}")

    def cuModuleGetFunction(self, hmod: int, name: str) -> int:
        self._enter("cuModuleGetFunction", hmod, name)
        host = self.modules.get(hmod)
        if host is None:
            raise self._fail("cuModuleGetFunction", R.CUDA_ERROR_INVALID_HANDLE, f"hmod={hmod!r}")
        if name not in host.params or not hasattr(host.library, name):
            raise self._fail("cuModuleGetFunction", R.CUDA_ERROR_NOT_FOUND, f"no kernel {name!r} in the module")
        handle = next(self._handles)
        self.functions[handle] = (host, name)
        return handle

    def _check_dims(self, what: str, dims: tuple[int, ...], attributes: tuple[CUdevice_attribute, ...]) -> None:
        for size, attribute in zip(dims, attributes, strict=True):
            if not (isinstance(size, int) and 1 <= size <= self.attributes[attribute]):
                raise self._fail("cuLaunchKernel", R.CUDA_ERROR_INVALID_VALUE, f"{what}={dims!r} ({attribute.name})")

    def cuLaunchKernel(self, f: int, gridDimX: int, gridDimY: int, gridDimZ: int, blockDimX: int, blockDimY: int,
                       blockDimZ: int, sharedMemBytes: int, hStream: int, kernelParams: int,
                       extra: int) -> None:  # fmt: skip
        grid, block = (gridDimX, gridDimY, gridDimZ), (blockDimX, blockDimY, blockDimZ)
        self._enter("cuLaunchKernel", f, *grid, *block, sharedMemBytes, hStream, kernelParams, extra)
        if f not in self.functions:
            raise self._fail("cuLaunchKernel", R.CUDA_ERROR_INVALID_HANDLE, f"f={f!r}")
        self._check_dims("grid", grid, (A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y,
                                        A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z))  # fmt: skip
        self._check_dims("block", block, (A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y,
                                          A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z))  # fmt: skip
        if blockDimX * blockDimY * blockDimZ > self.attributes[A.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK]:
            raise self._fail("cuLaunchKernel", R.CUDA_ERROR_INVALID_VALUE, f"block={block!r}: too many threads")
        if sharedMemBytes != 0:  # the runtime declares no dynamic shared memory
            raise self._fail("cuLaunchKernel", R.CUDA_ERROR_INVALID_VALUE, f"sharedMemBytes={sharedMemBytes!r}")
        if (kernelParams != 0) == (extra != 0):
            raise self._fail("cuLaunchKernel", R.CUDA_ERROR_INVALID_VALUE, "exactly one of kernelParams, extra")
        host, name = self.functions[f]
        sizes = host.params[name]
        pointers = np.frombuffer(ctypes.string_at(kernelParams, 8 * len(sizes)), np.uint64) if sizes else []
        values = [ctypes.string_at(int(p), size) for p, size in zip(pointers, sizes, strict=True)]  # copied now
        if sizes != (TH_ARGS_BYTES,):
            raise self._fail("cuLaunchKernel", R.CUDA_ERROR_INVALID_VALUE, f"{name} takes {sizes}, not th_args")
        words = np.frombuffer(values[0], np.uint64).copy()
        self.launched_words.append(words)
        function = _KERNEL((name, host.library))
        stream = self._stream("cuLaunchKernel", hStream)
        if self.run_kernels:
            stream.work.append(lambda: self._run(function, words, grid, block))

    def _run(self, function: Any, words: np.ndarray, grid: tuple[int, int, int], block: tuple[int, int, int]) -> None:
        """The host-native executor's loop: the host build once per block (its TH_THREADS loops the threads)."""
        group_id, group_size = (ctypes.c_uint32 * 3)(), (ctypes.c_uint32 * 3)(*block)
        for z in range(grid[2]):
            group_id[2] = z
            for y in range(grid[1]):
                group_id[1] = y
                for x in range(grid[0]):
                    group_id[0] = x
                    function(words.ctypes.data, ctypes.addressof(group_id), ctypes.addressof(group_size))
        self._tick(LAUNCH_NS)

    # --- streams and events ----------------------------------------------------------------------------------
    def cuStreamCreate(self, Flags: int) -> int:
        self._enter("cuStreamCreate", Flags)
        if Flags not in (0, 1):  # CU_STREAM_DEFAULT, CU_STREAM_NON_BLOCKING
            raise self._fail("cuStreamCreate", R.CUDA_ERROR_INVALID_VALUE, f"Flags={Flags!r}")
        handle = next(self._handles)
        self.streams[handle] = _Stream(self.current)
        return handle

    def cuStreamDestroy(self, hStream: int) -> None:
        self._enter("cuStreamDestroy", hStream)
        if hStream == 0 or hStream not in self.streams:
            raise self._fail("cuStreamDestroy", R.CUDA_ERROR_INVALID_HANDLE, f"hStream={hStream!r}")
        self._drain(self.streams.pop(hStream))  # pending work still completes

    def cuStreamSynchronize(self, hStream: int) -> None:
        self._enter("cuStreamSynchronize", hStream)
        self._drain(self._stream("cuStreamSynchronize", hStream))

    def cuEventCreate(self, Flags: int) -> int:
        self._enter("cuEventCreate", Flags)
        if Flags & ~0xF:
            raise self._fail("cuEventCreate", R.CUDA_ERROR_INVALID_VALUE, f"Flags={Flags!r}")
        handle = next(self._handles)
        self.events[handle] = _Event(Flags, self.current)
        return handle

    def _event(self, call: str, h_event: int) -> _Event:
        event = self.events.get(h_event)
        if event is None:
            raise self._fail(call, R.CUDA_ERROR_INVALID_HANDLE, f"hEvent={h_event!r}")
        if event.ctx != self.current:
            raise self._fail(call, R.CUDA_ERROR_INVALID_HANDLE, f"hEvent={h_event!r} is another context's")
        return event

    def cuEventDestroy(self, hEvent: int) -> None:
        self._enter("cuEventDestroy", hEvent)
        self._event("cuEventDestroy", hEvent)
        del self.events[hEvent]

    def cuEventRecord(self, hEvent: int, hStream: int) -> None:
        self._enter("cuEventRecord", hEvent, hStream)
        event = self._event("cuEventRecord", hEvent)
        stream = self._stream("cuEventRecord", hStream)
        event.recorded, event.time_ns = True, None

        def reach() -> None:
            event.time_ns = self.clock_ns

        stream.work.append(reach)

    def cuEventSynchronize(self, hEvent: int) -> None:
        self._enter("cuEventSynchronize", hEvent)
        event = self._event("cuEventSynchronize", hEvent)
        if event.recorded and event.time_ns is None:
            self._drain_all()

    def cuEventElapsedTime(self, hStart: int, hEnd: int) -> float:
        self._enter("cuEventElapsedTime", hStart, hEnd)
        start, end = self._event("cuEventElapsedTime", hStart), self._event("cuEventElapsedTime", hEnd)
        if not (start.recorded and end.recorded) or (start.flags | end.flags) & 0x2:  # CU_EVENT_DISABLE_TIMING
            raise self._fail("cuEventElapsedTime", R.CUDA_ERROR_INVALID_HANDLE, "an event was never recorded")
        if start.time_ns is None or end.time_ns is None:
            raise self._fail("cuEventElapsedTime", R.CUDA_ERROR_NOT_READY, "an event has not completed")
        return (end.time_ns - start.time_ns) / 1e6


class DoubleCompiler:
    """The compiler seam for the double: NVRTC's cubin when the wheel works (else a stand-in image) plus the host
    build of the same source, registered with ``double`` under that image."""

    def __init__(self, double: CudaDouble, workdir: Path, arch: str = "sm_90") -> None:
        self.double = double
        self.workdir = workdir
        self.nvrtc = NvrtcCompiler(arch) if nvrtc_unavailable_reason() is None else None
        self.host = HostCCompiler()
        self.name = f"DOUBLE:{arch}"
        self._built: dict[str, bytes] = {}

    def compile(self, source: bytes) -> bytes:
        digest = hashlib.sha256(source).hexdigest()
        if digest in self._built:  # a loaded library's file is never rewritten (the loader maps it)
            return self._built[digest]
        shared_object = self.host.compile(source)
        path = self.workdir / f"kernel-{digest[:16]}.so"
        path.write_bytes(shared_object)
        library = ctypes.CDLL(str(path))
        if self.nvrtc is not None:
            image = self.nvrtc.compile(source)
            params = kernel_params(image)
        else:  # no NVRTC here: every exported kernel takes th_args, as the portable form declares it
            image = _STAND_IN_MAGIC + digest.encode()
            params = _ExportedKernels(library)
        self.double.register(image, HostImage(library, params))
        self._built[digest] = image
        return image


class _ExportedKernels(dict[str, tuple[int, ...]]):
    """Parameter sizes by kernel name, for a stand-in image: any symbol of the host build, one th_args each."""

    def __init__(self, library: ctypes.CDLL) -> None:
        super().__init__()
        self._library = library

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and hasattr(self._library, name)

    def __getitem__(self, name: str) -> tuple[int, ...]:
        if name not in self:
            raise KeyError(name)
        return (TH_ARGS_BYTES,)
