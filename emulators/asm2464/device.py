"""The emulated ASM2464 board: the blocks wired together, the vendor requests, the PCIe host side, ``reset()``."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from typing import Final

import numpy as np

from tinyhil._check import as_readonly_bytes, check_int, check_range
from tinyhil.emulators.asm2464.errors import UsbStall
from tinyhil.emulators.asm2464.front import UsbFront
from tinyhil.emulators.asm2464.link import LinkControl
from tinyhil.emulators.asm2464.memory import BridgeMemory
from tinyhil.emulators.asm2464.quirks import Quirks, UnknownRequests
from tinyhil.emulators.asm2464.sram import Arm, SramEngine
from tinyhil.emulators.asm2464.tlp import TlpEngine
from tinyhil.emulators.asm2464.urb import Urb
from tinyhil.emulators.faults import Fault, FaultPlan, Operation
from tinyhil.emulators.kernel import EventKernel
from tinyhil.emulators.observe import Observation, Observed, Observer
from tinyhil.emulators.pcie.endpoint import PlainEndpoint
from tinyhil.emulators.pcie.function import PcieFunction, PcieUnsupportedRequest
from tinyhil.emulators.pcie.topology import PcieTopology
from tinyhil.emulators.timing import DEFAULT_PRESET, TimingModel
from tinyhil.errors import InvalidArgument
from tinyhil.spec.asm2464 import (
    BRIDGE_VID_PIDS,
    CPL_RELEASE_OFFSET,
    PCIE_CQ_WINDOW,
    PCIE_SYS_BUF,
    PCIE_SYS_BUF_STABLE,
    SRAM_BYTES,
    STREAM_PACKET_BYTES_USB2,
    XDATA_BYTES,
    XDATA_READ_MAX_USB2,
    XDATA_READ_MAX_USB3,
    Request,
    Xdata,
)

__all__ = ["Asm2464"]

_DIRECTION_IN: Final = 0x80
_BYTE_MASK: Final = 0xFF
_DIRECTION_BIT: Final = 7  # bmRequestType bit 7: device-to-host
_CPL_RELEASE_ADDR: Final = PCIE_CQ_WINDOW + CPL_RELEASE_OFFSET
_CPL_RELEASE_BYTES: Final = 4  # the dword at 0x822000 + 12
_DMA_VIEWS_CACHED: Final = 4096  # distinct DMA ranges whose views are kept per routing state


def _handler_key(is_in: bool, request: int) -> int:
    """The handler table's key: bRequest above bmRequestType's direction bit (an int hashes faster than a tuple)."""
    return request << 1 | is_in


def _data_stall(request: Request, data: bytes) -> UsbStall:
    return UsbStall(f"{request.name} ({request:#x}) with {len(data)} data bytes, expected no data stage")


class Asm2464:
    """One emulated board: an ASM2464 running the custom firmware, with its PCIe tree and (by default) a plain
    endpoint behind it. All blocks run on ``kernel``'s virtual clock.

    ==========================  ==============================================  ===========================
    block                       class                                           docs/asm2464.md section
    ==========================  ==============================================  ===========================
    XDATA, SRAM, windows        :class:`BridgeMemory` (``memory``)              XDATA map
    0xF2 engine, pairing        :class:`SramEngine` (``engine``)                SRAM windows, 0xF2 engine
    0xF0 TLP engine             :class:`TlpEngine` (``tlp``)                    TLP engine
    PCIe power and link         :class:`LinkControl` (``link``)                 Identity and link
    bridges 0-3, endpoint slot  :class:`PcieTopology` (``topology``)            TLP engine (topology)
    USB endpoints, EP0, faults  :class:`UsbFront` (``front``)                   Vendor control requests
    ==========================  ==============================================  ===========================

    Vendor requests (bmRequestType 0x40 OUT / 0xC0 IN): 0xE4 IN read XDATA, 0xE5 OUT write one XDATA byte, 0xF0
    OUT issue a TLP / arm a stream, 0xF0 IN the last completion, 0xF2 OUT arm the SRAM engine, 0xF3 OUT PCIe power.
    A rejected request stalls and leaves :meth:`state_digest` unchanged. The board implements
    :class:`~tinyhil.emulators.pcie.function.PcieHost` for the function behind it.
    """

    def __init__(
        self,
        *,
        function: PcieFunction | None = None,
        quirks: Quirks | None = None,
        faults: FaultPlan | None = None,
        timing: TimingModel | None = None,
        kernel: EventKernel | None = None,
        seed: int = 0,
        vendor_id: int = BRIDGE_VID_PIDS[0][0],
        product_id: int = BRIDGE_VID_PIDS[0][1],
        serial: str = "TINYHIL0001",
        product: str = "custom ASM2464 (tinyhil emulator)",
        manufacturer: str = "tinyhil",
        usb3: bool = True,
    ) -> None:
        self.quirks = quirks if quirks is not None else Quirks()
        self.faults = faults if faults is not None else FaultPlan()
        if timing is None:
            timing = TimingModel.preset(DEFAULT_PRESET)
            if not usb3:  # stream modes move 512 B packets on USB2 (docs/asm2464.md "Vendor requests")
                timing = dataclasses.replace(timing, stream_packet_bytes=STREAM_PACKET_BYTES_USB2)
        self.timing = timing
        for name, value, kind in (
            ("quirks", self.quirks, Quirks),
            ("faults", self.faults, FaultPlan),
            ("timing", self.timing, TimingModel),
        ):
            if not isinstance(value, kind):
                raise InvalidArgument(f"{name}={value!r}, expected a {kind.__name__} (pass the value, not a strategy)")
        self.kernel = kernel if kernel is not None else EventKernel(seed)
        self.vendor_id = check_int("vendor_id", vendor_id, min_value=0, max_value=0xFFFF)
        self.product_id = check_int("product_id", product_id, min_value=0, max_value=0xFFFF)
        self.serial, self.product, self.manufacturer, self.usb3 = serial, product, manufacturer, usb3
        self.function: PcieFunction = function if function is not None else PlainEndpoint()
        self.memory = BridgeMemory()
        self.topology = PcieTopology(self.function)
        self._routing_generation = self.topology.generation  # the cell the DMA view cache keys on
        self.link = LinkControl(self.memory, self.kernel, self.quirks)
        self.observed = Observed()  # attached observers survive reset(): they watch the device, not part of it
        self.engine = SramEngine(self.memory, self.quirks, self.function.host_memory_written, self.observed)
        self.tlp = TlpEngine(
            self.memory,
            self.topology,
            self.engine,
            self.quirks,
            self.link,
            next_tlp_fault=self._next_tlp_fault,
            on_stream_request=self._stream_request,
            on_wedge=self._wedge,
        )
        self.front = UsbFront(self)
        self._handlers = self._build_handlers()
        self._generation = 0
        self._dma_generation = -1  # the PCIe routing generation memory.dma_views were cached under
        self.reset()
        self.function.attach_host(self)

    def reset(self) -> None:
        """Power-cycle the board: memories zero, bridges and the endpoint's config space unprogrammed (PCIe
        fundamental reset), PCIe off, no arms, not wedged, fault counters at zero; transfers in flight end with
        no-device. The endpoint's own memories and engines are the endpoint model's business."""
        self._generation += 1
        self.wedged = False
        self.memory.reset()
        self.topology.reset()
        self.function.config.reset()
        self.link.reset()
        self.engine.reset()
        self.tlp.reset()
        self.front.reset()

    def __repr__(self) -> str:
        link = "up" if self.link.up else "down"
        return (
            f"<Asm2464 {self.vendor_id:04x}:{self.product_id:04x} serial={self.serial!r} link={link} "
            f"wedged={self.wedged} gone={self.front.gone} t={self.kernel.now_ns} ns>"
        )

    def state_digest(self) -> str:
        """A SHA-256 over the whole device state (memories, config spaces, engines, link, USB state), not time."""
        digest = hashlib.sha256()
        digest.update(self.memory.xdata.tobytes())
        digest.update(self.memory.sram.tobytes())
        for bridge in self.topology.bridges:
            digest.update(bridge.snapshot())
        digest.update(self.function.config.snapshot())
        small = (self.engine.state(), self.tlp.state(), self.link.state(), self.front.state(), self.wedged)
        digest.update(repr(small).encode())
        return digest.hexdigest()

    # --- the USB side ---
    @property
    def xdata_read_max(self) -> int:
        return XDATA_READ_MAX_USB3 if self.usb3 else XDATA_READ_MAX_USB2

    def submit(self, urb: Urb) -> Urb:
        """Queue a transfer on its endpoint (see :class:`UsbFront`)."""
        return self.front.submit(urb)

    def vendor_request(
        self, request_type: int, request: int, value: int, index: int, data: bytes, length: int
    ) -> bytes:
        """Execute one vendor request; IN requests return their data stage.

        Raises:
            UsbStall: unknown (in ``strict`` mode) or malformed request; the state is unchanged.
        """
        handler = self._handlers.get(request << 1 | request_type >> _DIRECTION_BIT & 1)  # the _handler_key
        if handler is not None:
            return handler(value, index, data, length)
        is_in = bool(request_type & _DIRECTION_IN)
        if not is_in and self.quirks.unknown_requests is UnknownRequests.FIRMWARE:
            return b""  # the real firmware acks an unknown OUT request and ignores it
        direction = "IN" if is_in else "OUT"
        known_requests = ", ".join(f"{r.name}={r:#x}" for r in Request)
        raise UsbStall(
            f"unknown vendor request bmRequestType={request_type:#04x} bRequest={request:#04x} ({direction}); "
            f"known: {known_requests} (quirks.unknown_requests={self.quirks.unknown_requests.value})"
        )

    def _build_handlers(self) -> dict[int, Callable[[int, int, bytes, int], bytes]]:
        """The vendor requests keyed by direction and bRequest (docs/asm2464.md "Vendor requests")."""
        return {
            _handler_key(True, Request.XDATA_READ): self._op_xdata_read,
            _handler_key(True, Request.TLP): self._op_tlp_in,
            _handler_key(False, Request.XDATA_WRITE): self._no_data(Request.XDATA_WRITE, self._op_xdata_write),
            _handler_key(False, Request.SRAM_ARM): self._op_sram_arm,
            _handler_key(False, Request.PCIE_POWER): self._no_data(Request.PCIE_POWER, self.link._op_pcie_power),
            _handler_key(False, Request.TLP): self._op_tlp_out,
        }

    @staticmethod
    def _no_data(request: Request, op: Callable[[int, int], None]) -> Callable[[int, int, bytes, int], bytes]:
        """Wrap an OUT request that has no data stage: data is malformed (stall), else run ``op``."""

        def handler(value: int, index: int, data: bytes, length: int) -> bytes:
            if data:
                raise _data_stall(request, data)
            op(value, index)
            return b""

        return handler

    # the copy loops' requests are handlers themselves (no wrapper layers)
    def _op_sram_arm(self, value: int, index: int, data: bytes, length: int) -> bytes:
        if data:
            raise _data_stall(Request.SRAM_ARM, data)
        self.engine._op_sram_arm(value, index)
        self.front.bulk.poke()
        return b""

    def _op_tlp_out(self, value: int, index: int, data: bytes, length: int) -> bytes:
        self.tlp._op_tlp_out(value, index, data)
        self.front.bulk.poke()
        return b""

    def _op_tlp_in(self, value: int, index: int, data: bytes, length: int) -> bytes:
        return self.tlp._op_tlp_in(value, index, length)

    def _op_xdata_read(self, value: int, index: int, data: bytes, length: int) -> bytes:
        read_max = XDATA_READ_MAX_USB3 if self.usb3 else XDATA_READ_MAX_USB2
        if index or not 0 < length <= read_max or value + length > XDATA_BYTES:
            raise UsbStall(
                f"0xE4 read of {length} bytes at {value:#x} (wIndex={index:#x}), expected 1..{read_max} "
                f"bytes inside XDATA (0x0-{XDATA_BYTES - 1:#x}) and wIndex 0 (bank 0)"
            )
        return self.memory.xdata_read(value, length)

    def _op_xdata_write(self, value: int, index: int) -> None:
        if index > _BYTE_MASK:
            raise UsbStall(f"0xE5 write of wIndex={index:#x} at {value:#x}, expected the byte value in 0..0xFF")
        if value == Xdata.LTSSM:
            return  # the link state register is read-only
        self.memory.xdata_write(value, bytes([index]))
        pcie_addr = self.memory.xdata_to_pcie(value)
        if pcie_addr is not None:
            self.function.host_memory_written(pcie_addr, 1)

    def _next_tlp_fault(self) -> Fault | None:
        return self.front.next_fault(Operation.tlp())

    def _stream_request(self) -> None:
        self.engine.cancel_streams()
        self.front.bulk.cancel_streams()

    def _wedge(self) -> None:
        self.wedged = True

    def land(self, arm: Arm, offset: int, data: memoryview, *, whole_transfer: bool) -> None:
        """Bytes of a bulk OUT reached the 0xF2 engine: they land after the landing delay (quirk), in order."""
        delay = self.quirks.landing_delay_ns
        if self.quirks.landing_jitter_ns:
            delay += int(self.kernel.rng.integers(0, self.quirks.landing_jitter_ns + 1))
        if delay == 0:
            self.engine.land(arm, offset, data, whole_transfer=whole_transfer)
            self.engine.finished(arm)
            return
        copy = memoryview(bytes(data))  # the host may reuse its buffer before the bytes land
        generation = self._generation

        def landed() -> None:
            if generation == self._generation:  # a power cycle drops what had not landed
                self.engine.land(arm, offset, copy, whole_transfer=whole_transfer)
                self.engine.finished(arm)

        self.kernel.schedule(delay, landed, label="sram landing")

    # --- PcieHost: the function's DMA into the bridge's memory ---
    def _dma_view(self, pcie_addr: int, nbytes: int) -> memoryview:
        if type(pcie_addr) is not int or type(nbytes) is not int or pcie_addr < 0 or nbytes < 1:
            check_int("pcie_addr", pcie_addr, min_value=0)
            check_int("nbytes", nbytes, min_value=1)
        # The GPU reaches the same few ranges again and again (fence, polled sentinels, windows), so their views
        # are kept until a config space changes (routing) or the memories reset (a new cache).
        views = self.memory.dma_views
        generation = self._routing_generation[0]
        if generation != self._dma_generation:
            views.clear()
            self._dma_generation = generation
        key = (pcie_addr, nbytes)
        view = views.get(key)
        if view is not None and self.link.up:
            return view
        view = self._dma_route(pcie_addr, nbytes)
        if len(views) < _DMA_VIEWS_CACHED:
            views[key] = view
        return view

    def _dma_route(self, pcie_addr: int, nbytes: int) -> memoryview:
        """The writable bytes a DMA reaches, or why it is an unsupported request."""
        why = "" if self.link.up else "the PCIe link is down (0xF3 power on first)"
        why = why or self.topology.upstream_error(pcie_addr, nbytes)
        view = None if why else self.memory.pcie_view(pcie_addr, nbytes)
        if view is None:
            why = (
                why
                or "no SRAM or window there (SRAM 0x200000-0x27ffff, admin 0x800000-0x8001ff, "
                "sys_buf 0x820000-0x820fff, CQ 0x822000-0x8227ff)"
            )
            raise PcieUnsupportedRequest(f"DMA {pcie_addr:#x}+{nbytes:#x}: {why}", addr=pcie_addr, nbytes=nbytes)
        return view

    def dma_read(self, pcie_addr: int, nbytes: int) -> memoryview:
        """Read bridge memory at a PCIe address (a read-only view, valid until the bridge next changes)."""
        if type(pcie_addr) is int and type(nbytes) is int and self._routing_generation[0] == self._dma_generation:
            view = self.memory.dma_views.get((pcie_addr, nbytes))  # _dma_view's cache hit
            if view is not None and self.link.up:
                return view.toreadonly()
        return self._dma_view(pcie_addr, nbytes).toreadonly()

    def dma_write(self, pcie_addr: int, data: bytes | memoryview) -> None:
        """Write bridge memory at a PCIe address, with the sys_buf-collision quirk and the copyout release."""
        if type(data) is memoryview and data.format == "B" and data.ndim == 1 and data.c_contiguous:
            source = data  # the GPU passes flat byte views
        else:
            source = as_readonly_bytes("data", data)
        view = self._dma_view(pcie_addr, source.nbytes)
        view[:] = source
        end = pcie_addr + source.nbytes
        if (
            self.quirks.sys_buf_collision
            and self.engine.inflight
            and pcie_addr < PCIE_SYS_BUF_STABLE
            and end > PCIE_SYS_BUF
        ):
            lost_from, lost_to = max(pcie_addr, PCIE_SYS_BUF), min(end, PCIE_SYS_BUF_STABLE)
            # The engine owns the low sys_buf while it moves a transfer: the GPU's bytes there are clobbered.
            view[lost_from - pcie_addr : lost_to - pcie_addr] = bytes(lost_to - lost_from)
        if pcie_addr < _CPL_RELEASE_ADDR + _CPL_RELEASE_BYTES and end > _CPL_RELEASE_ADDR:
            self.engine.released = True
            self.front.bulk.poke()
        observer = self.observed.observer
        if observer is not None:
            observer.dma_write(pcie_addr, source.nbytes)

    def observe(self, observer: Observer) -> Observation:
        """Report this bridge's arms, transfers and GPU DMA writes to ``observer`` until the returned handle detaches
        (:mod:`tinyhil.emulators.observe`)."""
        return self.observed.attach(observer)

    # --- host-side backdoor for tests (no USB, no time) ---
    def read_sram(self, offset: int, nbytes: int) -> bytes:
        check_range("SRAM", offset, nbytes, SRAM_BYTES)
        return self.memory.sram[offset : offset + nbytes].tobytes()

    def write_sram(self, offset: int, data: bytes) -> None:
        check_range("SRAM", offset, len(data), SRAM_BYTES)
        self.memory.sram[offset : offset + len(data)] = np.frombuffer(data, dtype=np.uint8)

    def read_xdata(self, addr: int, nbytes: int) -> bytes:
        return self.memory.xdata_read(addr, nbytes)

    def write_xdata(self, addr: int, data: bytes) -> None:
        self.memory.xdata_write(addr, data)
