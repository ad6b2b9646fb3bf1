"""The common configuration-space store: 4 KB of registers with per-bit write masks and write-1-to-clear bits.

Subclasses (:class:`~tinyhil.emulators.pcie.type0.Type0Config`, :class:`~tinyhil.emulators.pcie.type1.Type1Config`)
lay out their header in ``_build`` and react to writes in ``_written``. Byte enables are honoured: only the lanes a
write enables change, and within a lane only the writable bits (read-only bits keep their value, write-1-to-clear bits
clear where a 1 is written).
"""

from __future__ import annotations

from typing import Final

from tinyhil._check import check_int
from tinyhil.errors import InvalidArgument
from tinyhil.spec.pci import CONFIG_SPACE_BYTES, Command, Config, Status

__all__ = ["ConfigSpace", "new_generation"]

_DWORD_MASK: Final = 0xFFFFFFFF
_LANES: Final = 4
_BYTE_ENABLE_ALL: Final = 0xF
# COMMAND bits a driver may set (IO, MEMORY, MASTER, PARITY, SERR, INTX_DISABLE); the rest read as zero.
_COMMAND_WRITABLE: Final = int(
    Command.IO | Command.MEMORY | Command.MASTER | Command.PARITY | Command.SERR | Command.INTX_DISABLE
)
_STATUS_W1C: Final = int(
    Status.SIG_TARGET_ABORT
    | Status.REC_TARGET_ABORT
    | Status.REC_MASTER_ABORT
    | Status.SIG_SYSTEM_ERROR
    | Status.DETECTED_PARITY
)


def new_generation() -> list[int]:
    """A fresh routing-generation cell: a one-item list that every config space of one topology shares and bumps on
    each change, so ``cell[0]`` unchanged means no config space on that topology has changed (what the routing and
    DMA caches key on). Each topology owns its own, so boards in one process never invalidate each other."""
    return [0]


class ConfigSpace:
    """One function's 4 KB configuration space (PCIe extended config space, little-endian registers).

    ==============  =====================================  ==================
    offset          meaning                                source
    ==============  =====================================  ==================
    0x00-0x0F       vendor/device, COMMAND/STATUS, class   PCI 3.0 6.2
    0x10-0x3F       header-type specific (BARs / windows)  subclasses
    0x100-0xFFF     extended capabilities                  subclasses
    ==============  =====================================  ==================

    Raises (every method): :class:`~tinyhil.errors.InvalidArgument` for an unaligned or out-of-range register, a
    byte enable outside ``0..0xF`` or a value that is not a u32.
    """

    def __init__(self, *, vendor_id: int, device_id: int, class_code: int, header_type: int, revision: int = 0) -> None:
        self.vendor_id = check_int("vendor_id", vendor_id, min_value=0, max_value=0xFFFF)
        self.device_id = check_int("device_id", device_id, min_value=0, max_value=0xFFFF)
        self.class_code = check_int("class_code", class_code, min_value=0, max_value=0xFFFFFF)
        self.header_type = check_int("header_type", header_type, min_value=0, max_value=0xFF)
        self.revision = check_int("revision", revision, min_value=0, max_value=0xFF)
        self.generation = new_generation()  # kept across resets: a reset is one more change on the same topology
        self.reset()

    def share_generation(self, cell: list[int]) -> None:
        """Bump ``cell`` (a topology's :func:`new_generation`) from now on, and count joining it as a change."""
        self.generation = cell
        cell[0] += 1

    def reset(self) -> None:
        """Return every register to its power-on value (fundamental reset)."""
        self.generation[0] += 1
        self._regs = bytearray(CONFIG_SPACE_BYTES)
        self._writable = bytearray(CONFIG_SPACE_BYTES)
        self._w1c = bytearray(CONFIG_SPACE_BYTES)
        self._build()

    # --- layout helpers for subclasses ---
    def _set(self, offset: int, value: int, nbytes: int) -> None:
        self._regs[offset : offset + nbytes] = value.to_bytes(nbytes, "little")
        self.generation[0] += 1

    def _set_writable(self, offset: int, mask: int, nbytes: int) -> None:
        self._writable[offset : offset + nbytes] = mask.to_bytes(nbytes, "little")

    def _build(self) -> None:
        self._set(Config.VENDOR_ID, self.vendor_id, 2)
        self._set(Config.DEVICE_ID, self.device_id, 2)
        self._set(Config.REVISION_ID, self.revision, 1)
        self._set(Config.CLASS_PROG, self.class_code, 3)
        self._set(Config.HEADER_TYPE, self.header_type, 1)
        self._set_writable(Config.COMMAND, _COMMAND_WRITABLE, 2)
        self._w1c[Config.STATUS : Config.STATUS + 2] = _STATUS_W1C.to_bytes(2, "little")
        self._set_writable(Config.CACHE_LINE_SIZE, 0xFF, 1)
        self._set_writable(Config.INTERRUPT_LINE, 0xFF, 1)

    def _written(self, reg: int, byte_enable: int) -> None:
        """Hook: the dword at ``reg`` was written through ``byte_enable``."""

    # --- the config-request interface ---
    def read(self, offset: int, nbytes: int) -> int:
        """Read ``nbytes`` (1, 2 or 4) at ``offset`` as a little-endian integer (no side effects)."""
        check_int("nbytes", nbytes, min_value=1, max_value=_LANES)
        check_int("offset", offset, min_value=0, max_value=CONFIG_SPACE_BYTES - nbytes)
        return int.from_bytes(self._regs[offset : offset + nbytes], "little")

    def config_read(self, reg: int) -> int:
        """Read the dword at ``reg`` (a multiple of 4 below 0x1000)."""
        self._check_reg(reg)
        return int.from_bytes(self._regs[reg : reg + _LANES], "little")

    def config_write(self, reg: int, value: int, byte_enable: int = _BYTE_ENABLE_ALL) -> None:
        """Write the lanes of ``value`` (a u32, lane i = bits 8i..8i+7) that ``byte_enable`` selects."""
        self._check_reg(reg)
        check_int("value", value, min_value=0, max_value=_DWORD_MASK)
        check_int("byte_enable", byte_enable, min_value=0, max_value=_BYTE_ENABLE_ALL)
        for lane in range(_LANES):  # per-lane semantics (byte enables) over one dword: not a data path
            if not byte_enable >> lane & 1:
                continue
            offset = reg + lane
            new = value >> (8 * lane) & 0xFF
            writable, w1c = self._writable[offset], self._w1c[offset]
            self._regs[offset] = (self._regs[offset] & ~writable | new & writable) & ~(new & w1c) & 0xFF
        if byte_enable:
            self.generation[0] += 1
            self._written(reg, byte_enable)

    def write(self, offset: int, value: int, nbytes: int) -> None:
        """Write ``nbytes`` (1, 2 or 4) at ``offset`` within one dword, as a config write with byte enables."""
        check_int("nbytes", nbytes, min_value=1, max_value=_LANES)
        check_int("offset", offset, min_value=0, max_value=CONFIG_SPACE_BYTES - nbytes)
        lane = offset & 3
        if lane + nbytes > _LANES:
            raise InvalidArgument(f"offset={offset:#x} nbytes={nbytes}, expected an access within one dword")
        check_int("value", value, min_value=0, max_value=(1 << (8 * nbytes)) - 1)
        self.config_write(offset - lane, value << (8 * lane), ((1 << nbytes) - 1) << lane)

    @property
    def command(self) -> Command:
        """The COMMAND register."""
        return Command(self.read(Config.COMMAND, 2) & _COMMAND_WRITABLE)

    def snapshot(self) -> bytes:
        """The 4 KB of registers as bytes (for state digests and dumps)."""
        return bytes(self._regs)

    @staticmethod
    def _check_reg(reg: int) -> None:
        check_int("reg", reg, min_value=0, max_value=CONFIG_SPACE_BYTES - _LANES)
        if reg & 3:
            raise InvalidArgument(f"reg={reg:#x}, expected a dword-aligned config offset (a multiple of 4)")
