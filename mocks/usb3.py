"""``MockUSB3``: the USB3 transport over an emulated ASM2464 board, the laptop stand-in for a real bridge.

It *is* a :class:`~tinyhil.usb.transport.Usb3Transport` (the same class the real backend returns), opened through the
same discovery as a real board (:func:`~tinyhil.usb.backend.open_bridge_handle`: VID:PID, product string,
configuration 1, interface 0), over the emulated ``usb1`` stack of :mod:`tinyhil.mocks.usb`. So a driver written
against the transport runs unchanged on both::

    with MockUSB3() as usb:                              # fresh board, sync mode, default quirks, seed 0
        Asm2464Controller(usb).xdata_write(0x5000, b"hi")
        usb.bridge.memory                                # the emulator behind it, for assertions
        usb.gpu                                          # the emulated AMD GPU at 4:00.0 behind the bridges

    MockUSB3(vram_bytes=64 << 20, gfx_target_version=110000)   # choose the GPU
    MockUSB3(function=PlainEndpoint())                  # or any other PCIe function (sharing usb.kernel)

    MockUSB3(mode="timed", quirks=Quirks(full_window_corruption=True), faults=plan, seed=7)

Modes (spec/asm24.md "Async transfers"): ``"sync"`` (default) completes asynchronous transfers at submit, so
``bulk_wait`` returns at once; ``"timed"`` completes them on the virtual clock by the board's timing model and
reads an OUT payload at completion, so a driver that reuses a staging buffer before reaping sends the new bytes.
"""

from __future__ import annotations

from typing import Any

from tinyhil.emulators.amdgpu import DEFAULT_GFX_TARGET_VERSION, AmdGpu, AmdGpuFunction, GpuTiming
from tinyhil.emulators.asm2464 import Asm2464, Quirks
from tinyhil.emulators.faults import FaultPlan
from tinyhil.emulators.kernel import EventKernel
from tinyhil.emulators.pcie.function import PcieFunction
from tinyhil.emulators.timing import DEFAULT_PRESET, TimingModel
from tinyhil.errors import InvalidArgument, StateError
from tinyhil.mocks.usb.context import EmulatedUsbContext, TransferMode
from tinyhil.spec.amdgpu import DEFAULT_VRAM_BYTES
from tinyhil.usb.backend import open_bridge_handle
from tinyhil.usb.transport import Usb3Transport

__all__ = ["MockUSB3"]


class MockUSB3(Usb3Transport):
    """A :class:`Usb3Transport` to a fresh emulated board (or to ``bridge=`` when given).

    Keyword arguments: ``mode`` (``"sync"`` or ``"timed"``), ``quirks``, ``faults`` (a :class:`FaultPlan`),
    ``seed``, ``timing`` (a :class:`TimingModel`), ``function`` (the PCIe function behind the bridges; default: an
    emulated AMD GPU, :class:`~tinyhil.emulators.amdgpu.AmdGpuFunction`, of ``vram_bytes`` (default 256 MB) and
    ``gfx_target_version`` (default 110000, gfx1100) on the board's kernel), ``kernel`` (share a virtual clock),
    ``usb3`` (``False``: a USB2 link) build the board; ``bridge=`` plugs in one built by the caller instead (then
    none of those may be given). ``transport_options`` go to :class:`Usb3Transport`.

    Attributes:
        bridge: the :class:`~tinyhil.emulators.asm2464.Asm2464` emulator behind the handle.
        context: the emulated ``usb1`` context (its ``kernel`` is the virtual clock).
    """

    def __init__(
        self,
        *,
        mode: TransferMode | str = TransferMode.SYNC,
        bridge: Asm2464 | None = None,
        quirks: Quirks | None = None,
        faults: FaultPlan | None = None,
        seed: int = 0,
        timing: TimingModel | None = None,
        function: PcieFunction | None = None,
        kernel: EventKernel | None = None,
        usb3: bool = True,
        vram_bytes: int | None = None,
        gfx_target_version: int | None = None,
        **transport_options: Any,
    ) -> None:
        gpu_options = {
            name: value
            for name, value in (("vram_bytes", vram_bytes), ("gfx_target_version", gfx_target_version))
            if value is not None
        }
        if gpu_options and (function is not None or bridge is not None):
            raise InvalidArgument(
                f"MockUSB3({', '.join(gpu_options)}=..., {'function' if function is not None else 'bridge'}=...): "
                "GPU options apply only to the default emulated GPU, expected either them or a function/bridge"
            )
        if bridge is None:
            if function is None:
                kernel = kernel if kernel is not None else EventKernel(seed)
                board_timing = timing if timing is not None else TimingModel.preset(DEFAULT_PRESET)
                function = AmdGpuFunction(
                    kernel=kernel,
                    timing=GpuTiming(system_bytes_per_us=max(1, board_timing.gpu_copy_bytes_per_s // 1_000_000)),
                    vram_bytes=DEFAULT_VRAM_BYTES if vram_bytes is None else vram_bytes,
                    gfx_target_version=(
                        DEFAULT_GFX_TARGET_VERSION if gfx_target_version is None else gfx_target_version
                    ),
                )
            bridge = Asm2464(
                quirks=quirks, faults=faults, seed=seed, timing=timing, function=function, kernel=kernel, usb3=usb3
            )
        else:
            given = {
                name: value
                for name, value in (("quirks", quirks), ("faults", faults), ("timing", timing), ("function", function))
                if value is not None
            }
            if given or kernel is not None or seed != 0 or not usb3:
                raise InvalidArgument(
                    f"MockUSB3(bridge=..., {', '.join(given) or 'seed/kernel/usb3'}=...): options that build a board "
                    "cannot apply to a board passed in, expected either bridge= or the board options"
                )
            if not isinstance(bridge, Asm2464):
                raise InvalidArgument(f"bridge={bridge!r}, expected an Asm2464")
        self.bridge = bridge
        self.context = EmulatedUsbContext(bridge, mode=mode)
        handle, context = open_bridge_handle(context=self.context)
        try:
            super().__init__(handle, context, on_close=context.close, **transport_options)
        except BaseException:
            handle.close()
            context.close()
            raise

    @property
    def kernel(self) -> EventKernel:
        """The virtual clock the board (and everything on its bus) runs on."""
        return self.bridge.kernel

    @property
    def gpu(self) -> AmdGpu:
        """The emulated AMD GPU behind the bridge (the default function).

        Raises:
            StateError: the function behind the bridge is not an :class:`AmdGpuFunction` (``function=`` chose another).
        """
        function = self.bridge.function
        if not isinstance(function, AmdGpuFunction):
            raise StateError(
                f"MockUSB3.gpu: the PCIe function behind the bridge is {function!r}, expected an AmdGpuFunction "
                "(the default when neither function= nor bridge= is given)"
            )
        return function.gpu

    @property
    def mode(self) -> TransferMode:
        return self.context.mode

    def __repr__(self) -> str:
        return f"<MockUSB3 {self.mode.value} {self.state.value} on {self.bridge!r}>"
