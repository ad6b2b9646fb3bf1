"""The gfx1100 register file: every register a store unless a block answers it, HQD registers banked.

Section 10 of ``docs/gfx1100.md``: a register the model does not interpret stores what the driver writes
and reads it back (unwritten: its reset value, 0 unless a block sets one). A block (PSP, SMU, GMC, the queues)
claims a register with :meth:`RegisterFile.on_read` / :meth:`RegisterFile.on_write`; a write handler sees the
value after it is stored. ``GRBM_GFX_CNTL`` selects the bank the HQD registers (me, pipe, queue) and
``SH_MEM_CONFIG`` / ``SH_MEM_BASES`` (vmid) hit (section 9).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from tinyhil.emulators.observe import Observed
from tinyhil.spec.gfx1100_regs import (
    GRBM_GFX_CNTL_MEID,
    GRBM_GFX_CNTL_PIPEID,
    GRBM_GFX_CNTL_QUEUEID,
    GRBM_GFX_CNTL_VMID,
    HQD_BANKED_FIRST,
    HQD_BANKED_LAST,
    SH_MEM_BANKED,
    Reg,
)

__all__ = ["HqdBank", "RegisterFile"]

_U32: Final = 0xFFFF_FFFF
HqdBank = tuple[int, int, int]  # (me, pipe, queue)
_PLAIN: Final = -1  # the bank key of unbanked registers


class RegisterFile:
    """Dword-addressed registers (absolute addresses, :class:`tinyhil.spec.gfx1100_regs.Reg`).

    | registers | storage |
    |---|---|
    | ``CP_MQD_BASE_ADDR`` .. ``CP_HQD_DEQUEUE_STATUS`` | one copy per (me, pipe, queue) of ``GRBM_GFX_CNTL`` |
    | ``SH_MEM_CONFIG``, ``SH_MEM_BASES`` | one copy per ``GRBM_GFX_CNTL.vmid`` |
    | everything else | one copy |

    Every host access is reported to the GPU's observers as ``gpu_register(address, value, write)``.
    """

    def __init__(self, observed: Observed) -> None:
        self.observed = observed
        self._readers: dict[int, Callable[[], int]] = {}
        self._writers: dict[int, Callable[[int], None]] = {}
        self._resets: dict[int, int] = {}
        # Counts host writes and resets: what blocks derive from stored registers (the front end's doorbell routes)
        # stays valid while it is unchanged, since only the host changes the registers those answers read.
        self.generation = 0
        self.reset()

    def reset(self) -> None:
        """Power-on state: every register at its reset value (blocks' handlers stay installed)."""
        self._plain: dict[int, int] = dict(self._resets)
        self._banked: dict[tuple[int, int], int] = {}  # (bank key, address)
        self.generation += 1

    # --- blocks ---
    def on_read(self, address: int, reader: Callable[[], int]) -> None:
        """Answer reads of ``address`` with ``reader()`` instead of the stored value."""
        self._readers[address] = reader

    def on_write(self, address: int, writer: Callable[[int], None]) -> None:
        """Call ``writer(value)`` after each host write of ``address`` is stored."""
        self._writers[address] = writer

    def set_reset_value(self, address: int, value: int) -> None:
        """The value ``address`` holds at power-on (and now)."""
        self._resets[address] = value & _U32
        self._plain[address] = value & _U32
        self.generation += 1

    def hqd_bank(self) -> HqdBank:
        """The (me, pipe, queue) ``GRBM_GFX_CNTL`` selects now."""
        select = self._plain.get(Reg.GRBM_GFX_CNTL, 0)
        return GRBM_GFX_CNTL_MEID.get(select), GRBM_GFX_CNTL_PIPEID.get(select), GRBM_GFX_CNTL_QUEUEID.get(select)

    def _key(self, address: int) -> int:
        if HQD_BANKED_FIRST <= address <= HQD_BANKED_LAST:
            me, pipe, queue = self.hqd_bank()
            return me << 8 | pipe << 4 | queue
        if address in SH_MEM_BANKED:
            return GRBM_GFX_CNTL_VMID.get(self._plain.get(Reg.GRBM_GFX_CNTL, 0))
        return _PLAIN

    # --- the stored values (no handlers, not observed): what blocks use ---
    def stored(self, address: int, bank: HqdBank | None = None) -> int:
        """The stored value of ``address`` (HQD registers: of ``bank``, default the selected one)."""
        key = self._key(address) if bank is None else bank[0] << 8 | bank[1] << 4 | bank[2]
        if key == _PLAIN:
            return self._plain.get(address, 0)
        return self._banked.get((key, address), 0)

    def pair(self, lo: int, hi: int, bank: HqdBank | None = None) -> int:
        """``lo | hi << 32`` of two stored registers."""
        return self.stored(lo, bank) | self.stored(hi, bank) << 32

    def store(self, address: int, value: int) -> None:
        """Set the stored value of ``address`` (in the selected bank) as the device does: no handler runs."""
        key = self._key(address)
        if key == _PLAIN:
            self._plain[address] = value & _U32
        else:
            self._banked[(key, address)] = value & _U32

    # --- host accesses ---
    def read(self, address: int) -> int:
        """A host read of the register at dword ``address``."""
        reader = self._readers.get(address)
        value = reader() & _U32 if reader is not None else self.stored(address)
        observer = self.observed.observer
        if observer is not None:
            observer.gpu_register(address, value, False)
        return value

    def write(self, address: int, value: int) -> None:
        """A host write of ``value`` to the register at dword ``address``."""
        value &= _U32
        observer = self.observed.observer
        if observer is not None:
            observer.gpu_register(address, value, True)
        self.store(address, value)
        writer = self._writers.get(address)
        if writer is not None:
            writer(value)
        self.generation += 1
