"""BAR5 and BAR0 of a gfx1100 over the bridge, by dword register address (docs/gfx1100.md, "The USB-path driver").

Registers below the 1 MB BAR5 are one 32-bit TLP each; registers beyond it go through ``BIF_BX_PF0_RSMU_INDEX``
(a byte address) and ``BIF_BX_PF0_RSMU_DATA``. :meth:`Gfx1100Registers.write_fields` and
:meth:`~Gfx1100Registers.update_fields` write a register by field name, through its layout in
:mod:`tinyhil.spec.gfx1100_fields` (the fields the model decodes). The HDP flush writes 0 at the BAR5 byte offset
``BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL`` holds. Polls and pauses go through the transport (wall time on a board, virtual
time on an emulated one). Bus mastering is the GPU function's PCI ``COMMAND.MASTER``, a config access through the
bridge.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final

from tinyhil.asm2464.controller import Asm2464Controller
from tinyhil.errors import DeviceTimeout, StateError
from tinyhil.spec.gfx1100_fields import fields_of
from tinyhil.spec.gfx1100_reg_updates import FieldUpdate, RegUpdate
from tinyhil.spec.gfx1100_regs import BAR5_DWORDS, Reg
from tinyhil.spec.pci import Command, Config

__all__ = ["Gfx1100Registers"]

_DWORD: Final = struct.Struct("<I")
_U32: Final = 0xFFFF_FFFF
_FLUSH_BYTES: Final = b"\0\0\0\0"
_COMMAND_BYTES: Final = 2


class Gfx1100Registers:
    """BAR5 and BAR0 of a gfx1100 over the bridge: ``read(reg)`` / ``write(reg, value)`` by dword address."""

    def __init__(
        self,
        controller: Asm2464Controller,
        bar5: int,
        bar0: int,
        *,
        poll_s: float,
        timeout_s: float,
        function: tuple[int, int, int] | None = None,
    ) -> None:
        self.controller = controller
        self.bar5 = bar5
        self.bar0 = bar0
        self.poll_s = poll_s
        self.timeout_s = timeout_s
        self.function = function  # the GPU's (bus, device, function), for config accesses
        self._hdp_flush: int | None = None

    def read(self, reg: int) -> int:
        """A register read (through RSMU_INDEX / RSMU_DATA beyond the 1 MB BAR, section 2.3)."""
        if reg >= BAR5_DWORDS:
            self.write(Reg.BIF_BX_PF0_RSMU_INDEX, reg * 4)
            reg = Reg.BIF_BX_PF0_RSMU_DATA
        return int(_DWORD.unpack(self.controller.pcie_mem_read(self.bar5 + reg * 4, 4))[0])

    def write(self, reg: int, value: int) -> None:
        """A register write (through RSMU_INDEX / RSMU_DATA beyond the 1 MB BAR)."""
        if reg >= BAR5_DWORDS:
            self.write(Reg.BIF_BX_PF0_RSMU_INDEX, reg * 4)
            reg = Reg.BIF_BX_PF0_RSMU_DATA
        self.controller.pcie_mem_write(self.bar5 + reg * 4, _DWORD.pack(value & _U32))

    def write_pair(self, name: str, value: int, lo: str = "_LO32", hi: str = "_HI32") -> None:
        """Write the low and high dwords of ``value`` to registers ``name + lo`` and ``name + hi``."""
        self.write(Reg[name + lo], value & _U32)
        self.write(Reg[name + hi], value >> 32)

    def update(self, reg: int, value: int, mask: int = _U32) -> None:
        """Set the bits of ``mask`` to ``value``'s and keep the others (read back first unless ``mask`` is full)."""
        self.write(reg, value if mask == _U32 else self.read(reg) & ~mask | value & mask)

    def write_fields(self, reg: int, **values: int) -> None:
        """Write ``reg`` with the named fields set to ``values`` and every other bit 0.

        Raises:
            InvalidArgument: ``reg`` has no field layout, a field name is not one of it, or a value does not fit.
        """
        self.write(reg, fields_of(reg).encode(**values))

    def update_fields(self, reg: int, **values: int) -> None:
        """Set the named fields of ``reg`` to ``values`` and keep its other bits (read back first).

        Raises:
            InvalidArgument: as :meth:`write_fields`.
        """
        fields = fields_of(reg)
        self.update(reg, fields.encode(**values), fields.mask(*values))

    def merge_fields(self, reg: int, dword: int, **values: int) -> int:
        """``dword`` (a value of ``reg``) with the named fields replaced by ``values``: no register access.

        Raises:
            InvalidArgument: as :meth:`write_fields`.
        """
        return fields_of(reg).merge(dword, **values)

    def apply(self, updates: tuple[RegUpdate | FieldUpdate, ...], **names: str | int) -> None:
        """Each :class:`RegUpdate` / :class:`FieldUpdate` of ``updates`` in order, its register name filled in from
        ``names``."""
        for update in updates:
            reg = Reg[update.register.format(**names)]
            if isinstance(update, RegUpdate):
                self.update(reg, update.value, update.mask)
            elif update.whole:
                self.write_fields(reg, **update.values)
            else:
                self.update_fields(reg, **update.values)

    def vram_write(self, offset: int, data: bytes | memoryview) -> None:
        self.controller.pcie_mem_write(self.bar0 + offset, data)

    def vram_read(self, offset: int, nbytes: int) -> bytes:
        return bytes(self.controller.pcie_mem_read(self.bar0 + offset, nbytes))

    def hdp_flush(self) -> None:
        """Section 4: write 0 at the BAR5 byte offset ``BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL`` holds (read once)."""
        if self._hdp_flush is None:
            self._hdp_flush = self.read(Reg.BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL)
        self.controller.pcie_mem_write(self.bar5 + self._hdp_flush, _FLUSH_BYTES)

    def set_bus_master(self, on: bool) -> None:
        """Set or clear ``COMMAND.MASTER`` of the GPU function (section 1: AM clears it around a mode-1 reset).

        Raises:
            StateError: these registers were opened without the function's address.
        """
        if self.function is None:
            raise StateError("Gfx1100Registers.set_bus_master: no PCI function given, expected function=(bus, dev, fn)")
        command = self.controller.pcie_cfg_read(*self.function, Config.COMMAND, _COMMAND_BYTES)
        master = int(Command.MASTER)  # plain ints: the complement of a flag would drop the bits it does not name
        command = command | master if on else command & ~master
        self.controller.pcie_cfg_write(*self.function, Config.COMMAND, command, _COMMAND_BYTES)

    def pause(self, seconds: float) -> None:
        """Wait ``seconds`` through the transport (a settle time the sequence asks for)."""
        self.controller.transport.pause(seconds)

    def poll(self, condition: Callable[[], bool], what: str, *, timeout_s: float | None = None) -> None:
        """Poll ``condition`` (pausing ``poll_s`` between reads) for up to ``timeout_s`` (default the driver's).

        Raises:
            DeviceTimeout: naming ``what``.
        """
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        polls = int(timeout_s / self.poll_s) + 1
        for poll in range(polls):
            if condition():
                return
            if poll + 1 < polls:
                self.controller.transport.pause(self.poll_s)
        raise DeviceTimeout(f"gfx1100 boot: {what}: not reached after {polls} polls over {timeout_s}s", op="boot")

    def poll_reg(self, reg: int, mask: int, value: int, what: str) -> int:
        """Poll until ``read(reg) & mask == value``; the last value read."""
        seen = [0]

        def holds() -> bool:
            seen[0] = self.read(reg)
            return seen[0] & mask == value

        self.poll(holds, f"{what} ({Reg(reg).name} & {mask:#x} == {value:#x}, last read {seen[0]:#x})")
        return seen[0]
