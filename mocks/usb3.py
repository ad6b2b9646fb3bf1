"""``MockUSB3``: the USB3 transport over an emulated ASM2464 board, the laptop stand-in for a real bridge.

It *is* a :class:`~tinyhil.usb.transport.Usb3Transport` (the same class the real backend returns), opened through the
same discovery as a real board (:func:`~tinyhil.usb.backend.open_bridge_handle`: VID:PID, product string,
configuration 1, interface 0), over the emulated ``usb1`` stack of :mod:`tinyhil.mocks.usb`. So a driver written
against the transport runs unchanged on both::

    with MockUSB3() as usb:                              # fresh board, sync mode, default quirks, seed 0
        Asm2464Controller(usb).xdata_write(0x5000, b"hi")
        usb.bridge.memory                                # the emulator behind it, for assertions
        usb.gpu                                          # the emulated AMD GPU at 4:00.0 behind the bridges

    MockUSB3(vram_bytes=64 << 20)                      # choose the GPU's VRAM (gfx1100, Navi 31, is the only GPU)
    MockUSB3.over(Asm2464(function=PlainEndpoint()))   # given parts: any PCIe function, kernel or bridge you built

    MockUSB3(mode="timed", quirks=Quirks(full_window_corruption=True), faults=plan, seed=7)

    (device, name), = MockUSB3.list_devices(0xADD1, 0x0001)  # as the real USB3 class finds a board: "usb:2-2"
    MockUSB3(device)                                       # and opens it (a fresh board with that identity)
    MockUSB3(strict=True)                                  # also refuse what a board tolerates but is likely a bug

It accepts the calls the USB3 class of the driver this project grew from accepts (docs/usb3-compat.md has the
table); ``strict=True`` reports, with ``InvalidArgument``, the misuse a board tolerates.

Modes (docs/asm2464.md "Modes: sync and timed"): ``"sync"`` (default) completes asynchronous transfers at submit, so
``bulk_wait`` returns at once; ``"timed"`` completes them on the virtual clock by the board's timing model and
reads an OUT payload at completion, so a driver that reuses a staging buffer before reaping sends the new bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from tinyhil.emulators.amdgpu import DEFAULT_GFX_TARGET_VERSION, AmdGpu, BridgedFunction, GpuTiming
from tinyhil.emulators.amdgpu.gfx1100 import Gfx1100Function
from tinyhil.emulators.asm2464 import Asm2464, Quirks
from tinyhil.emulators.faults import FaultPlan
from tinyhil.emulators.kernel import EventKernel
from tinyhil.emulators.pcie import DEFAULT_VRAM_BYTES
from tinyhil.emulators.timing import DEFAULT_PRESET, TimingModel
from tinyhil.errors import InvalidArgument, StateError
from tinyhil.mocks.usb.context import EmulatedUsbContext, TransferMode
from tinyhil.mocks.usb.device import FIRST_ADDRESS, SUPERSPEED_BUS
from tinyhil.spec.asm2464 import BRIDGE_VID_PIDS
from tinyhil.usb.backend import open_bridge_handle
from tinyhil.usb.transport import Usb3Transport

__all__ = ["MockUSB3", "MockUsbDevice", "fresh_board"]


@dataclass(frozen=True, slots=True)
class MockUsbDevice:
    """A board as :meth:`MockUSB3.list_devices` lists it (the real class lists libusb devices); ``MockUSB3(device)``
    opens a fresh board with this identity."""

    vendor_id: int
    product_id: int


# What builds a board's parts; the fresh form rejects them and names the given-parts form instead.
_PARTS_OPTIONS: Final = ("bridge", "function", "kernel")
# What builds a fresh board; :meth:`MockUSB3.over` rejects them (its bridge is built already).
_BOARD_OPTIONS: Final = ("seed", "faults", "quirks", "timing", "vram_bytes", "gfx_target_version", "usb3")


def fresh_board(
    *,
    seed: int = 0,
    faults: FaultPlan | None = None,
    quirks: Quirks | None = None,
    timing: TimingModel | None = None,
    vram_bytes: int | None = None,
    gfx_target_version: int | None = None,
    usb3: bool = True,
    vendor_id: int = BRIDGE_VID_PIDS[0][0],
    product_id: int = BRIDGE_VID_PIDS[0][1],
) -> Asm2464:
    """The board a fresh :class:`MockUSB3` opens: an :class:`Asm2464` on a new EventKernel seeded with ``seed``, an
    emulated gfx1100 of ``vram_bytes`` behind it (``tinyhil serve usb`` serves the same board).

    Raises:
        InvalidArgument: a ``gfx_target_version`` other than gfx1100's, or a bad board option.
    """
    kernel = EventKernel(seed)
    board_timing = timing if timing is not None else TimingModel.preset(DEFAULT_PRESET)
    gpu_timing = GpuTiming(system_bytes_per_us=max(1, board_timing.gpu_copy_bytes_per_s // 1_000_000))
    vram = DEFAULT_VRAM_BYTES if vram_bytes is None else vram_bytes
    if gfx_target_version is not None and gfx_target_version != DEFAULT_GFX_TARGET_VERSION:
        raise InvalidArgument(
            f"MockUSB3(gfx_target_version={gfx_target_version!r}): only gfx1100's register interface is modelled "
            f"on the USB path, expected gfx_target_version={DEFAULT_GFX_TARGET_VERSION} (or None); gfx1201 and "
            "gfx950 run on MOCKKFD+AMD"
        )
    function = Gfx1100Function(kernel=kernel, timing=gpu_timing, vram_bytes=vram)
    return Asm2464(quirks=quirks, faults=faults, seed=seed, timing=timing, function=function, kernel=kernel,
                   usb3=usb3, vendor_id=vendor_id, product_id=product_id)  # fmt: skip


class MockUSB3(Usb3Transport):
    """A :class:`Usb3Transport` to an emulated board, built in one of two forms.

    - A fresh board: ``MockUSB3(mode=, seed=, faults=, quirks=, timing=, vram_bytes=, gfx_target_version=, usb3=)``
      builds an :class:`~tinyhil.emulators.asm2464.Asm2464` on a new EventKernel seeded with ``seed``, with an
      emulated Navi 31 behind it (:class:`~tinyhil.emulators.amdgpu.gfx1100.Gfx1100Function` of ``vram_bytes``,
      default 256 MB: gfx1100's real register interface, docs/gfx1100.md). ``gfx_target_version`` may only be
      110000 (gfx1100): no other GPU's register interface is modelled on the USB path (gfx1201 and gfx950 run on
      MOCKKFD+AMD). ``faults`` is a :class:`FaultPlan`, ``timing`` a :class:`TimingModel`, ``usb3=False`` a USB2
      link.
    - A listed device: ``MockUSB3(device)``, ``device`` from :meth:`list_devices`, as the real class is opened; the
      same fresh board, with the device's VID:PID. Further positional arguments are ignored, as the real class
      ignores them (strict mode refuses them).
    - Given parts: :meth:`over` plugs in a bridge the caller built (``Asm2464(function=..., kernel=..., seed=...,
      faults=...)``), for another PCIe function or a virtual clock shared with other devices.

    ``mode`` (``"sync"`` or ``"timed"``), ``strict`` and ``transport_options`` (for :class:`Usb3Transport`) apply to
    every form.

    Attributes:
        bridge: the :class:`~tinyhil.emulators.asm2464.Asm2464` emulator behind the handle.
        context: the emulated ``usb1`` context (its ``kernel`` is the virtual clock).

    Raises:
        InvalidArgument: a parts option (``bridge``, ``function``, ``kernel``) given to the fresh form, a bad board
            option, a ``device`` that :meth:`list_devices` did not return, or (strict) extra positional arguments.
    """

    @classmethod
    def list_devices(cls, vendor: int, dev: int) -> list[tuple[MockUsbDevice, str]]:
        """The boards with USB ``vendor:dev`` as the real class lists them, ``[(device, "usb:BUS-ADDRESS")]``.

        A fresh board is one at ``BRIDGE_VID_PIDS[0]`` (``0xADD1:0x0001``), at the bus and address the emulated
        ``usb1`` stack gives the first board; any other ``vendor:dev`` lists nothing, as on a machine without it.
        """
        if (vendor, dev) != BRIDGE_VID_PIDS[0]:
            return []
        return [(MockUsbDevice(vendor, dev), f"usb:{SUPERSPEED_BUS}-{FIRST_ADDRESS}")]

    def __init__(
        self,
        device: MockUsbDevice | None = None,
        /,
        *ignored: object,
        mode: TransferMode | str = TransferMode.SYNC,
        strict: bool = False,
        seed: int = 0,
        faults: FaultPlan | None = None,
        quirks: Quirks | None = None,
        timing: TimingModel | None = None,
        vram_bytes: int | None = None,
        gfx_target_version: int | None = None,
        usb3: bool = True,
        **transport_options: Any,
    ) -> None:
        parts = [name for name in _PARTS_OPTIONS if name in transport_options]
        if parts:
            raise InvalidArgument(
                f"MockUSB3({', '.join(f'{name}=...' for name in parts)}): a fresh board takes no parts; build them "
                "and pass the bridge: MockUSB3.over(Asm2464(function=..., kernel=..., seed=..., faults=...), mode=...)"
            )
        if device is not None and not isinstance(device, MockUsbDevice):
            raise InvalidArgument(
                f"MockUSB3({device!r}): expected a device from MockUSB3.list_devices(vendor, dev), or none"
            )
        if strict and ignored:
            raise InvalidArgument(
                f"MockUSB3(device, {', '.join(map(repr, ignored))}): strict mode refuses positional arguments after "
                "the device, which the real class ignores; give board options by keyword (docs/usb3-compat.md)"
            )
        vendor_id, product_id = BRIDGE_VID_PIDS[0] if device is None else (device.vendor_id, device.product_id)
        bridge = fresh_board(seed=seed, faults=faults, quirks=quirks, timing=timing, vram_bytes=vram_bytes,
                             gfx_target_version=gfx_target_version, usb3=usb3, vendor_id=vendor_id,
                             product_id=product_id)  # fmt: skip
        self._attach(bridge, mode, {**transport_options, "strict": strict})

    @classmethod
    def over(
        cls,
        bridge: Asm2464,
        *,
        mode: TransferMode | str = TransferMode.SYNC,
        strict: bool = False,
        **transport_options: Any,
    ) -> MockUSB3:
        """The transport to a board the caller built (given parts): ``MockUSB3.over(Asm2464(function=fn))``.

        Raises:
            InvalidArgument: ``bridge`` is not an :class:`Asm2464`, or a fresh-board option was given with it.
        """
        if not isinstance(bridge, Asm2464):
            raise InvalidArgument(f"bridge={bridge!r}, expected an Asm2464 (a fresh board: MockUSB3(...))")
        board = [name for name in _BOARD_OPTIONS if name in transport_options]
        if board:
            raise InvalidArgument(
                f"MockUSB3.over(bridge, {', '.join(f'{name}=...' for name in board)}): the bridge is already built; "
                "give those to Asm2464(...) or its function, or build a fresh board with MockUSB3(...)"
            )
        usb = cls.__new__(cls)
        usb._attach(bridge, mode, {**transport_options, "strict": strict})
        return usb

    def _attach(self, bridge: Asm2464, mode: TransferMode | str, transport_options: dict[str, Any]) -> None:
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
            StateError: the function behind the bridge is not a GPU
                (:class:`~tinyhil.emulators.amdgpu.gfx1100.Gfx1100Function` or another
                :class:`~tinyhil.emulators.amdgpu.BridgedFunction`: :meth:`over` a bridge with another function).
        """
        function = self.bridge.function
        if not isinstance(function, BridgedFunction):
            raise StateError(
                f"MockUSB3.gpu: the PCIe function behind the bridge is {function!r}, expected a Gfx1100Function "
                "(what a fresh MockUSB3 has; MockUSB3.over(bridge) keeps the bridge's own function)"
            )
        return function.gpu

    @property
    def product(self) -> str:
        """The board's USB product string, as the real class reads it on opening (``custom...``)."""
        return self.bridge.product

    @property
    def mode(self) -> TransferMode:
        return self.context.mode

    def __repr__(self) -> str:
        return f"<MockUSB3 {self.mode.value} {self.state.value} on {self.bridge!r}>"
