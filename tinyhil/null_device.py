"""The NULL device: accepts every operation, executes nothing.

Allocations are bookkeeping in a large virtual address space, copyin validates and discards, programs "run" for a
fixed virtual duration, and compilation really happens with the target's compiler. Copyout (``copyout``,
``copyout_into``) raises unless the device was opened with ``allow_copyout=True`` (then the bytes read are zeros:
NULL keeps no data). It is the cheapest target, the one for harness self-tests and for compile-only targets such as
``NULL:QCOMCL:a630``.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from tinyhil.allocator import RangeAllocator
from tinyhil.compiler import Compiler
from tinyhil.device import Buffer, DeviceBase, Dim3, KernelArg, Program
from tinyhil.errors import CapabilityMissing

__all__ = ["NULL_ADDRESS_SPACE_BYTES", "NULL_EXEC_DURATION_NS", "NULL_OP_DURATION_NS", "NullDevice"]

NULL_EXEC_DURATION_NS: Final = 10_000  # every program "runs" for 10 us of virtual time
NULL_OP_DURATION_NS: Final = 1_000  # every other operation advances the clock by 1 us
NULL_ADDRESS_SPACE_BYTES: Final = 1 << 47
_NULL_BASE: Final = 0x1_0000_0000
NULL_CAPABILITIES: Final = frozenset({"copyin", "fill", "copy", "exec", "timestamps", "null"})


class NullDevice(DeviceBase):
    """A device that runs nothing; see the module docstring."""

    def __init__(self, name: str = "NULL", compiler: Compiler | None = None, *, allow_copyout: bool = False) -> None:
        capabilities = set(NULL_CAPABILITIES)
        if compiler is not None:
            capabilities.add("compile")
        if allow_copyout:
            capabilities.add("copyout")
        super().__init__(name, frozenset(capabilities))
        self.compiler = compiler
        self.allow_copyout = allow_copyout
        self._space = RangeAllocator(_NULL_BASE, NULL_ADDRESS_SPACE_BYTES)
        self._clock_ns = 0

    def _require(self, capability: str) -> None:
        if capability == "copyout" and not self.allow_copyout:
            raise CapabilityMissing(
                self.name,
                "copyout",
                "NULL keeps no data; open it with allow_copyout=True to get zeros instead of this error",
            )
        super()._require(capability)

    def _tick(self, duration_ns: int = NULL_OP_DURATION_NS) -> tuple[int, int]:
        start = self._clock_ns
        self._clock_ns += duration_ns
        return start, self._clock_ns

    def _alloc(self, nbytes: int) -> int:
        return self._space.alloc(nbytes)

    def _free(self, buf: Buffer) -> None:
        self._space.free(buf.addr)

    def _copyin(self, buf: Buffer, data: memoryview, offset: int) -> None:
        start, end = self._tick()
        self._record_range("copyin", start, end, queue="copy", nbytes=data.nbytes)

    def _copyout(self, buf: Buffer, out: memoryview, offset: int) -> None:
        self._tick()
        np.frombuffer(out, np.uint8)[:] = 0  # NULL keeps no data: it reads as zeros

    def _fill(self, buf: Buffer, value: int, nbytes: int, offset: int) -> None:
        self._tick()

    def _copy(self, dst: Buffer, src: Buffer, nbytes: int) -> None:
        start, end = self._tick()
        self._record_range("copy", start, end, queue="copy", nbytes=nbytes)

    def _compile(self, source: bytes, name: str) -> bytes:
        assert self.compiler is not None  # guaranteed: "compile" is only a capability when a compiler is set
        return self.compiler.compile(source)

    def _exec(self, program: Program, grid: Dim3, local: Dim3, args: tuple[KernelArg, ...]) -> None:
        start, end = self._tick(NULL_EXEC_DURATION_NS)
        self._record_range(program.name, start, end, key=program.key, grid=list(grid), local=list(local))

    def _now_ns(self) -> int:
        return self._clock_ns
