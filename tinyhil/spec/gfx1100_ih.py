"""The gfx1100 interrupt handler (IH, OSSSYS 6.0.0) and VM protection-fault facts, shared by the model and a driver.

Sources (``docs/gfx1100.md``, "Facts looked up beyond the register interface"): the IH register fields are the
``osssys_6_0_0_sh_mask.h`` ones, the interrupt vector (IV) is the 8-dword entry Linux's ``amdgpu_ih_decode_iv_helper``
reads, client ids are ``soc21_ih_clientid.h``'s, source ids ``ivsrcid/gfx/irqsrcs_gfx_11_0_0.h`` and
``ivsrcid/vmc/irqsrcs_vmc_1_0.h``, the ring-id and src_data layouts are how ``gfx_v11_0.c``, ``sdma_v6_0.c``,
``gmc_v11_0.c`` and ``kfd_int_process_v11.c`` decode them, the fault registers' fields ``gc_11_0_0_sh_mask.h``'s, and
the UTCL2 client ids (``GCVM_L2_PROTECTION_FAULT_STATUS.CID``) ``gfxhub_v3_0.c``'s table.

IV layout (little-endian dwords):

| dword | bits | field |
|---|---|---|
| 0 | 7:0 client_id, 15:8 src_id, 23:16 ring_id, 27:24 vmid, 31 vmid_type (0 GC hub, 1 MM hub) | |
| 1 | 31:0 | timestamp bits 31:0 (the 100 MHz GPU counter) |
| 2 | 15:0 timestamp bits 47:32, 31 timestamp_src | |
| 3 | 15:0 pasid, 23:16 node_id | |
| 4-7 | | src_data[0..3] |
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import IntEnum
from types import MappingProxyType
from typing import Final

from tinyhil.errors import InvalidArgument

from .amdgpu import PAGE_SHIFT, Field
from .gfx1100_reg_updates import FieldUpdate, RegUpdate

__all__ = [
    "CP_CTXID0_DOORBELL_ID",
    "FAULT_CNTL_ALLOW_SUBSEQUENT_UPDATES",
    "FAULT_CNTL_CLEAR_STATUS_ADDR",
    "FAULT_SRC_DATA1_ADDR_HI",
    "FAULT_SRC_DATA1_RETRY",
    "FAULT_SRC_DATA1_WRITE",
    "FAULT_STATUS_CID",
    "FAULT_STATUS_MAPPING_ERROR",
    "FAULT_STATUS_MORE_FAULTS",
    "FAULT_STATUS_PERMISSION_FAULTS",
    "FAULT_STATUS_RW",
    "FAULT_STATUS_VMID",
    "FAULT_STATUS_WALKER_ERROR",
    "IH_ENABLE",
    "IH_INTERRUPT_CONTROLS",
    "IH_RB_BASE_HI_ADDR",
    "IH_RB_BASE_SHIFT",
    "IH_RB_CNTL_ENABLE_INTR",
    "IH_RB_CNTL_RB_ENABLE",
    "IH_RB_CNTL_RB_SIZE",
    "IH_RB_CNTL_WPTR_OVERFLOW_CLEAR",
    "IH_RB_CNTL_WPTR_OVERFLOW_ENABLE",
    "IH_RB_CNTL_WPTR_WRITEBACK_ENABLE",
    "IH_RB_SETUP",
    "IH_RB_SIZE",
    "IH_RB_WPTR_ADDR_HI_ADDR",
    "IH_RB_WPTR_ADDR_LO_ADDR",
    "IH_RB_WPTR_RB_OVERFLOW",
    "IH_RING_BYTES",
    "IV_BYTES",
    "PERMISSION_FAULT_VALID",
    "RING_ID_CP_ME",
    "RING_ID_CP_PIPE",
    "RING_ID_CP_QUEUE",
    "RING_ID_FAULT_READ",
    "RING_ID_FAULT_VALID",
    "RING_ID_FAULT_WRITE",
    "RING_ID_SDMA_INSTANCE",
    "RING_ID_SDMA_QUEUE",
    "VMC_SRCID_VM_FAULT",
    "IhClientId",
    "IhSourceId",
    "InterruptVector",
    "Utcl2ClientId",
    "fault_page",
    "fault_src_data",
]

IV_BYTES: Final = 32  # one IV: 8 dwords; IH_RB_WPTR / _RPTR advance by this
_IV: Final = struct.Struct("<8I")

# IH_RB_CNTL (osssys 6.0.0)
IH_RB_CNTL_RB_ENABLE: Final = Field("rb_enable", 0, 1)
IH_RB_CNTL_RB_SIZE: Final = Field("rb_size", 1, 5)  # log2(ring dwords)
IH_RB_CNTL_WPTR_WRITEBACK_ENABLE: Final = Field("wptr_writeback_enable", 8, 1)
IH_RB_CNTL_WPTR_OVERFLOW_ENABLE: Final = Field("wptr_overflow_enable", 16, 1)
IH_RB_CNTL_ENABLE_INTR: Final = Field("enable_intr", 17, 1)  # ring 0 only
IH_RB_CNTL_WPTR_OVERFLOW_CLEAR: Final = Field("wptr_overflow_clear", 31, 1)
IH_RB_WPTR_RB_OVERFLOW: Final = Field("rb_overflow", 0, 1)  # IH_RB_WPTR (and its write-back copy)
IH_RB_BASE_SHIFT: Final = 8  # IH_RB_BASE = MC address bits 39:8 ...
IH_RB_BASE_HI_ADDR: Final = Field("addr", 0, 8)  # ... IH_RB_BASE_HI bits 47:40
IH_RB_WPTR_ADDR_LO_ADDR: Final = Field("addr", 2, 30)  # raw value = the write-back address's low dword
IH_RB_WPTR_ADDR_HI_ADDR: Final = Field("addr", 0, 16)

# The IH rings of the bring-up (AM's values, tinygrad ``ip.py``, docs/gfx1100.md)
IH_RING_BYTES: Final = 256 << 10  # AM's IH ring size (both rings)
IH_RB_SIZE: Final = (IH_RING_BYTES // 4).bit_length() - 1  # IH_RB_CNTL.rb_size: log2(ring dwords) = 16

# Step 7 (section 10): IH_RB_CNTL of ring 0 / ring 1 (rb_enable last, below; no write-pointer write-back, as AM),
# then the storm / flood controls.
_IH_RB_CNTL_COMMON: Final = MappingProxyType({"mc_space": 4, "wptr_overflow_clear": 1, "mc_snoop": 1,
                                              "rb_size": IH_RB_SIZE, "wptr_writeback_enable": 0})  # fmt: skip
IH_RB_SETUP: Final[tuple[FieldUpdate, FieldUpdate]] = (
    FieldUpdate.of("IH_RB_CNTL", whole=True, **_IH_RB_CNTL_COMMON, wptr_overflow_enable=1, rptr_rearm=1),
    FieldUpdate.of("IH_RB_CNTL_RING1", whole=True, **_IH_RB_CNTL_COMMON, rb_full_drain_enable=1),
)
IH_INTERRUPT_CONTROLS: Final[tuple[RegUpdate, ...]] = (
    RegUpdate("IH_STORM_CLIENT_LIST_CNTL", 1 << 18, 1 << 18),  # client18_is_storm_client
    RegUpdate("IH_INT_FLOOD_CNTL", 1 << 3, 1 << 3),  # flood_cntl_enable
    RegUpdate("IH_MSI_STORM_CTRL", 3, 0xFFF),  # delay 3
)
IH_ENABLE: Final[tuple[FieldUpdate, ...]] = (
    FieldUpdate.of("IH_RB_CNTL", rb_enable=1, enable_intr=1),
    FieldUpdate.of("IH_RB_CNTL_RING1", rb_enable=1),
)

# IV dwords 0, 2, 3
_IV_CLIENT_ID: Final = Field("client_id", 0, 8)
_IV_SOURCE_ID: Final = Field("src_id", 8, 8)
_IV_RING_ID: Final = Field("ring_id", 16, 8)
_IV_VMID: Final = Field("vmid", 24, 4)
_IV_VMID_TYPE: Final = Field("vmid_type", 31, 1)
_IV_TIMESTAMP_HI: Final = Field("timestamp_hi", 0, 16)
_IV_TIMESTAMP_SRC: Final = Field("timestamp_src", 31, 1)
_IV_PASID: Final = Field("pasid", 0, 16)
_IV_NODE_ID: Final = Field("node_id", 16, 8)
_TIMESTAMP_BITS: Final = 48
_U32_MAX: Final = 0xFFFF_FFFF


class IhClientId(IntEnum):
    """``SOC21_IH_CLIENTID_*``. SOC21 has no SDMA clients: SDMA 6 sits in GC and reports as ``GFX``."""

    GFX = 0x0A
    VMC = 0x12  # the MM hub


class IhSourceId(IntEnum):
    """``GFX_11_0_0__SRCID__*`` (client GFX)."""

    UTCL2_FAULT = 0  # = UTCL2_1_0__SRCID__FAULT: a GC hub VM fault
    SDMA_TRAP = 0x31
    SDMA_QUEUE_HANG = 0x37  # "queue hang or command timeout"
    CP_EOP_INTERRUPT = 0xB5
    CP_BAD_OPCODE_ERROR = 0xB7
    CP_PRIV_REG_FAULT = 0xB8
    CP_PRIV_INSTR_FAULT = 0xB9


VMC_SRCID_VM_FAULT: Final = 0  # VMC_1_0__SRCID__VM_FAULT (client VMC)


class Utcl2ClientId(IntEnum):
    """``GCVM_L2_PROTECTION_FAULT_STATUS.CID`` of the GC hub clients (``gfxhub_v3_0.c`` ``gfxhub_client_ids``)."""

    CPF = 4
    CPC = 5
    TCP = 8
    SDMA0 = 13
    SDMA1 = 14


# ring_id: CP faults (gfx_v11_0_handle_priv_fault), SDMA (sdma_v6_0_process_trap_irq), VM faults (kfd v11)
RING_ID_CP_PIPE: Final = Field("pipe", 0, 2)
RING_ID_CP_ME: Final = Field("me", 2, 2)
RING_ID_CP_QUEUE: Final = Field("queue", 4, 3)
RING_ID_SDMA_QUEUE: Final = Field("queue", 0, 4)
RING_ID_SDMA_INSTANCE: Final = Field("instance", 4, 4)
RING_ID_FAULT_VALID: Final = Field("prot_valid", 3, 1)
RING_ID_FAULT_READ: Final = Field("prot_read", 4, 1)
RING_ID_FAULT_WRITE: Final = Field("prot_write", 5, 1)
CP_CTXID0_DOORBELL_ID: Final = Field("doorbell_id", 0, 10)  # CP fault src_data[0]: the queue's doorbell (dwords)
# VM fault src_data: [0] = page address bits 43:12; [1] bits 3:0 = address bits 47:44, write, retry (gmc_v11_0.c)
FAULT_SRC_DATA1_ADDR_HI: Final = Field("addr_hi", 0, 4)
FAULT_SRC_DATA1_WRITE: Final = Field("write", 5, 1)
FAULT_SRC_DATA1_RETRY: Final = Field("retry", 7, 1)
_FAULT_ADDR_HI_SHIFT: Final = 44

# *VM_L2_PROTECTION_FAULT_STATUS / _CNTL (gc 11.0.0, mmhub 3.0.0)
FAULT_STATUS_MORE_FAULTS: Final = Field("more_faults", 0, 1)
FAULT_STATUS_WALKER_ERROR: Final = Field("walker_error", 1, 3)
FAULT_STATUS_PERMISSION_FAULTS: Final = Field("permission_faults", 4, 4)
FAULT_STATUS_MAPPING_ERROR: Final = Field("mapping_error", 8, 1)
FAULT_STATUS_CID: Final = Field("cid", 9, 9)
FAULT_STATUS_RW: Final = Field("rw", 18, 1)
FAULT_STATUS_VMID: Final = Field("vmid", 20, 4)
PERMISSION_FAULT_VALID: Final = 1  # model reading: bit 0 of permission_faults = the valid (not-present) fault
FAULT_CNTL_CLEAR_STATUS_ADDR: Final = Field("clear_protection_fault_status_addr", 0, 1)
FAULT_CNTL_ALLOW_SUBSEQUENT_UPDATES: Final = Field("allow_subsequent_protection_fault_status_addr_updates", 1, 1)


def fault_src_data(va: int, *, write: bool = False) -> tuple[int, int, int, int]:
    """The src_data of a VM fault IV at GPU address ``va`` (its 4 KB page, bits 47:12)."""
    page = va >> PAGE_SHIFT
    high = FAULT_SRC_DATA1_ADDR_HI.put(va >> _FAULT_ADDR_HI_SHIFT & FAULT_SRC_DATA1_ADDR_HI.max_value)
    return page & _U32_MAX, high | FAULT_SRC_DATA1_WRITE.put(int(write)), 0, 0


def fault_page(src_data: tuple[int, int, int, int]) -> int:
    """The faulting page's GPU address from a VM fault IV's src_data (``gmc_v11_0_process_interrupt``)."""
    return src_data[0] << PAGE_SHIFT | FAULT_SRC_DATA1_ADDR_HI.get(src_data[1]) << _FAULT_ADDR_HI_SHIFT


@dataclass(frozen=True, slots=True)
class InterruptVector:
    """One IV (the module table); :meth:`pack` / :meth:`unpack` are the 32-byte ring entry.

    Raises:
        InvalidArgument: a field does not fit its bits, or src_data is not four u32s.
    """

    client_id: int
    source_id: int
    ring_id: int = 0
    vmid: int = 0
    vmid_type: int = 0
    timestamp: int = 0
    timestamp_src: int = 0
    pasid: int = 0
    node_id: int = 0
    src_data: tuple[int, int, int, int] = field(default=(0, 0, 0, 0))

    def __post_init__(self) -> None:
        for name, bits in (("client_id", _IV_CLIENT_ID), ("source_id", _IV_SOURCE_ID), ("ring_id", _IV_RING_ID),
                           ("vmid", _IV_VMID), ("vmid_type", _IV_VMID_TYPE), ("timestamp_src", _IV_TIMESTAMP_SRC),
                           ("pasid", _IV_PASID), ("node_id", _IV_NODE_ID)):  # fmt: skip
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= bits.max_value:
                raise InvalidArgument(f"{name}={value!r}, expected an int in 0..{bits.max_value:#x}")
        if (
            isinstance(self.timestamp, bool)
            or not isinstance(self.timestamp, int)
            or not 0 <= self.timestamp < 1 << _TIMESTAMP_BITS
        ):
            raise InvalidArgument(f"timestamp={self.timestamp!r}, expected a 48-bit counter value")
        data = self.src_data
        if len(data) != 4 or any(isinstance(d, bool) or not isinstance(d, int) or not 0 <= d <= _U32_MAX for d in data):
            raise InvalidArgument(f"src_data={data!r}, expected four u32s")

    def pack(self) -> bytes:
        """The 32-byte ring entry (little-endian)."""
        dw0 = (_IV_CLIENT_ID.put(self.client_id) | _IV_SOURCE_ID.put(self.source_id) | _IV_RING_ID.put(self.ring_id)
               | _IV_VMID.put(self.vmid) | _IV_VMID_TYPE.put(self.vmid_type))  # fmt: skip
        dw2 = _IV_TIMESTAMP_HI.put(self.timestamp >> 32) | _IV_TIMESTAMP_SRC.put(self.timestamp_src)
        dw3 = _IV_PASID.put(self.pasid) | _IV_NODE_ID.put(self.node_id)
        return _IV.pack(dw0, self.timestamp & _U32_MAX, dw2, dw3, *self.src_data)

    @classmethod
    def unpack(cls, data: bytes | bytearray | memoryview) -> InterruptVector:
        """Decode one 32-byte ring entry.

        Raises:
            InvalidArgument: ``data`` is not 32 bytes.
        """
        if len(data) != IV_BYTES:
            raise InvalidArgument(f"IV of {len(data)} bytes, expected {IV_BYTES}")
        dw0, dw1, dw2, dw3, *src = _IV.unpack(data)
        return cls(
            _IV_CLIENT_ID.get(dw0),
            _IV_SOURCE_ID.get(dw0),
            _IV_RING_ID.get(dw0),
            _IV_VMID.get(dw0),
            _IV_VMID_TYPE.get(dw0),
            dw1 | _IV_TIMESTAMP_HI.get(dw2) << 32,
            _IV_TIMESTAMP_SRC.get(dw2),
            _IV_PASID.get(dw3),
            _IV_NODE_ID.get(dw3),
            (src[0], src[1], src[2], src[3]),
        )
