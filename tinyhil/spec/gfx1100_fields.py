"""The field layouts of the gfx1100 registers a driver writes by field name (:class:`~tinyhil.spec.amdgpu.RegFields`).

Each layout names every field of its register that a driver sets, with the :class:`~tinyhil.spec.amdgpu.Field`
objects of :mod:`tinyhil.spec.gfx1100_regs` and :mod:`tinyhil.spec.gfx1100_ih` where the model decodes that field
(the same object on both sides), and the register's other fields here. Layouts and bit positions are
``docs/gfx1100.md``'s (its register tables; the ``_sh_mask.h`` headers of gc 11.0.0, mmhub 3.0.0, nbio 4.3.0 and
osssys 6.0.0 beyond them). :func:`fields_of` finds the layout of a register by its dword address (both hubs' and
both SDMA engines' copies share one).
"""

from __future__ import annotations

from typing import Final

from tinyhil.errors import InvalidArgument

from .amdgpu import Field, RegFields
from .gfx1100_ih import (
    FAULT_CNTL_ALLOW_SUBSEQUENT_UPDATES,
    FAULT_CNTL_CLEAR_STATUS_ADDR,
    IH_RB_BASE_HI_ADDR,
    IH_RB_CNTL_ENABLE_INTR,
    IH_RB_CNTL_RB_ENABLE,
    IH_RB_CNTL_RB_SIZE,
    IH_RB_CNTL_WPTR_OVERFLOW_CLEAR,
    IH_RB_CNTL_WPTR_OVERFLOW_ENABLE,
    IH_RB_CNTL_WPTR_WRITEBACK_ENABLE,
    IH_RB_WPTR_ADDR_HI_ADDR,
    IH_RB_WPTR_ADDR_LO_ADDR,
)
from .gfx1100_regs import (
    CP_HQD_DEQUEUE_REQUEST_DEQUEUE_REQ,
    CP_HQD_PQ_CONTROL_QUEUE_SIZE,
    CP_HQD_PQ_DOORBELL_CONTROL_DOORBELL_EN,
    CP_HQD_PQ_DOORBELL_CONTROL_DOORBELL_OFFSET,
    CP_MEC_DOORBELL_RANGE,
    CP_MEC_RS64_CNTL_MEC_HALT,
    CP_MEC_RS64_CNTL_MEC_PIPE0_ACTIVE,
    CP_MEC_RS64_CNTL_MEC_PIPE0_RESET,
    GRBM_GFX_CNTL_MEID,
    GRBM_GFX_CNTL_PIPEID,
    GRBM_GFX_CNTL_QUEUEID,
    GRBM_GFX_CNTL_VMID,
    GRBM_SOFT_RESET_SOFT_RESET_CP,
    GRBM_SOFT_RESET_SOFT_RESET_CPC,
    GRBM_SOFT_RESET_SOFT_RESET_SDMA0,
    IH_RB_WPTR_OFFSET,
    INVALIDATE_ENG17_REQ_PER_VMID_INVALIDATE_REQ,
    MC_VM_SYSTEM_APERTURE_LOGICAL_ADDR,
    RCC_DOORBELL_APER_EN_BIF_DOORBELL_APER_EN,
    RLC_SAFE_MODE_CMD,
    S2A_DOORBELL_ENTRY_ENABLE,
    S2A_DOORBELL_ENTRY_RANGE_OFFSET,
    S2A_DOORBELL_ENTRY_RANGE_SIZE,
    SDMA0_F32_CNTL_HALT,
    SDMA0_QUEUE0_DOORBELL_ENABLE,
    SDMA0_QUEUE0_DOORBELL_OFFSET_OFFSET,
    SDMA0_QUEUE0_RB_CNTL_RB_ENABLE,
    SDMA0_QUEUE0_RB_CNTL_RB_SIZE,
    SDMA0_QUEUE0_RB_CNTL_RPTR_WRITEBACK_ENABLE,
    SDMA1_REGISTER_STRIDE,
    VM_CONTEXT0_CNTL_ENABLE_CONTEXT,
    VM_CONTEXT0_CNTL_PAGE_TABLE_BLOCK_SIZE,
    VM_CONTEXT0_CNTL_PAGE_TABLE_DEPTH,
    Reg,
)

__all__ = ["REGISTER_FIELDS", "fields_of"]

_HUBS: Final = ("GC", "MM")
_SDMA_ENGINES: Final = (0, 1)

# NBIO 4.3.0 (section 10)
_STRAP2: Final = RegFields("RCC_DEV0_EPF2_STRAP2", (Field("strap_no_soft_reset_dev0_f2", 7, 1),))
_DOORBELL_APER_EN: Final = RegFields("RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN", (RCC_DOORBELL_APER_EN_BIF_DOORBELL_APER_EN,))
_S2A_DOORBELL_ENTRY: Final = RegFields("S2A_DOORBELL_ENTRY_n_CTRL", (
    S2A_DOORBELL_ENTRY_ENABLE, Field("s2a_doorbell_port_awid", 1, 5), S2A_DOORBELL_ENTRY_RANGE_OFFSET,
    S2A_DOORBELL_ENTRY_RANGE_SIZE, Field("s2a_doorbell_port_awaddr_31_28_value", 28, 4),
))  # fmt: skip
# GC / MM hub (section 4)
_SYSTEM_APERTURE: Final = RegFields("*MC_VM_SYSTEM_APERTURE_LOW/HIGH_ADDR", (MC_VM_SYSTEM_APERTURE_LOGICAL_ADDR,))
_CONTEXT0_CNTL: Final = RegFields("*VM_CONTEXT0_CNTL", (
    VM_CONTEXT0_CNTL_ENABLE_CONTEXT, VM_CONTEXT0_CNTL_PAGE_TABLE_DEPTH, VM_CONTEXT0_CNTL_PAGE_TABLE_BLOCK_SIZE,
    # bits 24:9: the protection-fault interrupt / default enables; the spec names them as one group (section 4)
    Field("protection_fault_enables", 9, 16),
))  # fmt: skip
_INVALIDATE_REQ: Final = RegFields("*VM_INVALIDATE_ENG17_REQ", (
    INVALIDATE_ENG17_REQ_PER_VMID_INVALIDATE_REQ, Field("flush_type", 16, 3), Field("invalidate_l2_ptes", 19, 1),
    Field("invalidate_l2_pde0", 20, 1), Field("invalidate_l2_pde1", 21, 1), Field("invalidate_l2_pde2", 22, 1),
    Field("invalidate_l1_ptes", 23, 1),
))  # fmt: skip
_FAULT_CNTL: Final = RegFields("*VM_L2_PROTECTION_FAULT_CNTL", (FAULT_CNTL_CLEAR_STATUS_ADDR,
                                                                FAULT_CNTL_ALLOW_SUBSEQUENT_UPDATES))  # fmt: skip
# OSSSYS 6.0.0: IH (section 10)
_IH_RB_CNTL_FIELDS: Final = (
    IH_RB_CNTL_RB_ENABLE, IH_RB_CNTL_RB_SIZE, IH_RB_CNTL_WPTR_WRITEBACK_ENABLE, Field("rb_full_drain_enable", 9, 1),
    IH_RB_CNTL_WPTR_OVERFLOW_ENABLE, Field("mc_snoop", 20, 1), Field("rptr_rearm", 21, 1), Field("mc_space", 28, 3),
    IH_RB_CNTL_WPTR_OVERFLOW_CLEAR,
)  # fmt: skip
_IH_RB_CNTL: Final = RegFields("IH_RB_CNTL", (*_IH_RB_CNTL_FIELDS, IH_RB_CNTL_ENABLE_INTR))
_IH_RB_CNTL_RING1: Final = RegFields("IH_RB_CNTL_RING1", _IH_RB_CNTL_FIELDS)
_IH_RB_BASE_HI: Final = RegFields("IH_RB_BASE_HI", (IH_RB_BASE_HI_ADDR,))
_IH_RB_RPTR: Final = RegFields("IH_RB_RPTR", (IH_RB_WPTR_OFFSET,))
_IH_RB_WPTR_ADDR_LO: Final = RegFields("IH_RB_WPTR_ADDR_LO", (IH_RB_WPTR_ADDR_LO_ADDR,))
_IH_RB_WPTR_ADDR_HI: Final = RegFields("IH_RB_WPTR_ADDR_HI", (IH_RB_WPTR_ADDR_HI_ADDR,))
# GC 11.0.0: GRBM, CP, RLC (sections 9, 10)
_GRBM_GFX_CNTL: Final = RegFields("GRBM_GFX_CNTL", (GRBM_GFX_CNTL_PIPEID, GRBM_GFX_CNTL_MEID, GRBM_GFX_CNTL_VMID,
                                                    GRBM_GFX_CNTL_QUEUEID))  # fmt: skip
_GRBM_SOFT_RESET: Final = RegFields("GRBM_SOFT_RESET", (GRBM_SOFT_RESET_SOFT_RESET_CP, GRBM_SOFT_RESET_SOFT_RESET_CPC,
                                                        GRBM_SOFT_RESET_SOFT_RESET_SDMA0))  # fmt: skip
_RLC_SAFE_MODE: Final = RegFields("RLC_SAFE_MODE", (RLC_SAFE_MODE_CMD, Field("message", 1, 4)))
_SH_MEM_CONFIG: Final = RegFields("SH_MEM_CONFIG", (Field("address_mode", 0, 1), Field("alignment_mode", 2, 2),
                                                    Field("initial_inst_prefetch", 14, 2)))  # fmt: skip
_SH_MEM_BASES: Final = RegFields("SH_MEM_BASES", (Field("private_base", 0, 16), Field("shared_base", 16, 16)))
_MEC_RS64_CNTL: Final = RegFields(
    "CP_MEC_RS64_CNTL", (CP_MEC_RS64_CNTL_MEC_PIPE0_RESET, CP_MEC_RS64_CNTL_MEC_PIPE0_ACTIVE, CP_MEC_RS64_CNTL_MEC_HALT)
)
_MEC_DOORBELL_RANGE: Final = RegFields("CP_MEC_DOORBELL_RANGE_LOWER/UPPER", (CP_MEC_DOORBELL_RANGE,))
_HQD_ACTIVE: Final = RegFields("CP_HQD_ACTIVE", (Field("active", 0, 1),))
_HQD_DEQUEUE_REQUEST: Final = RegFields("CP_HQD_DEQUEUE_REQUEST", (CP_HQD_DEQUEUE_REQUEST_DEQUEUE_REQ,))
_SPI_COMPUTE_QUEUE_RESET: Final = RegFields("SPI_COMPUTE_QUEUE_RESET", (Field("reset", 0, 1),))
_HQD_PQ_DOORBELL_CONTROL: Final = RegFields(
    "CP_HQD_PQ_DOORBELL_CONTROL", (CP_HQD_PQ_DOORBELL_CONTROL_DOORBELL_OFFSET, CP_HQD_PQ_DOORBELL_CONTROL_DOORBELL_EN)
)
_HQD_PQ_CONTROL: Final = RegFields("CP_HQD_PQ_CONTROL", (CP_HQD_PQ_CONTROL_QUEUE_SIZE, Field("rptr_block_size", 8, 6)))
_HQD_IB_CONTROL: Final = RegFields("CP_HQD_IB_CONTROL", (Field("min_ib_avail_size", 20, 2),))
_MQD_CONTROL: Final = RegFields("CP_MQD_CONTROL", (Field("priv_state", 8, 1),))
_HQD_EOP_CONTROL: Final = RegFields("CP_HQD_EOP_CONTROL", (Field("eop_size", 0, 6),))
# GC 11.0.0: SDMA queue 0 and engine (sections 8, 10)
_SDMA_RB_CNTL: Final = RegFields("SDMA*_QUEUE0_RB_CNTL", (
    SDMA0_QUEUE0_RB_CNTL_RB_ENABLE, SDMA0_QUEUE0_RB_CNTL_RB_SIZE, Field("wptr_poll_enable", 8, 1),
    Field("f32_wptr_poll_enable", 11, 1), SDMA0_QUEUE0_RB_CNTL_RPTR_WRITEBACK_ENABLE,
    Field("rptr_writeback_timer", 16, 5), Field("rb_priv", 23, 1), Field("rb_vmid", 24, 4),
))  # fmt: skip
_SDMA_IB_CNTL: Final = RegFields("SDMA*_QUEUE0_IB_CNTL", (Field("ib_enable", 0, 1),))
_SDMA_DOORBELL: Final = RegFields("SDMA*_QUEUE0_DOORBELL", (SDMA0_QUEUE0_DOORBELL_ENABLE,))
_SDMA_DOORBELL_OFFSET: Final = RegFields("SDMA*_QUEUE0_DOORBELL_OFFSET", (SDMA0_QUEUE0_DOORBELL_OFFSET_OFFSET,))
_SDMA_MINOR_PTR_UPDATE: Final = RegFields("SDMA*_QUEUE0_MINOR_PTR_UPDATE", (Field("enable", 0, 1),))
_SDMA_F32_CNTL: Final = RegFields("SDMA*_F32_CNTL", (SDMA0_F32_CNTL_HALT, Field("th1_reset", 13, 1)))
_SDMA_CNTL: Final = RegFields("SDMA*_CNTL", (Field("trap_enable", 0, 1),))

_SDMA_QUEUE_FIELDS: Final = {
    Reg.SDMA0_QUEUE0_RB_CNTL: _SDMA_RB_CNTL,
    Reg.SDMA0_QUEUE0_IB_CNTL: _SDMA_IB_CNTL,
    Reg.SDMA0_QUEUE0_DOORBELL: _SDMA_DOORBELL,
    Reg.SDMA0_QUEUE0_DOORBELL_OFFSET: _SDMA_DOORBELL_OFFSET,
    Reg.SDMA0_QUEUE0_MINOR_PTR_UPDATE: _SDMA_MINOR_PTR_UPDATE,
}
REGISTER_FIELDS: Final[dict[int, RegFields]] = {
    Reg.RCC_DEV0_EPF2_STRAP2: _STRAP2,
    Reg.RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN: _DOORBELL_APER_EN,
    Reg.S2A_DOORBELL_ENTRY_0_CTRL: _S2A_DOORBELL_ENTRY,
    Reg.S2A_DOORBELL_ENTRY_2_CTRL: _S2A_DOORBELL_ENTRY,
    Reg.S2A_DOORBELL_ENTRY_3_CTRL: _S2A_DOORBELL_ENTRY,
    **{Reg[f"{hub}MC_VM_SYSTEM_APERTURE_{end}_ADDR"]: _SYSTEM_APERTURE for hub in _HUBS for end in ("LOW", "HIGH")},
    **{Reg[f"{hub}VM_CONTEXT0_CNTL"]: _CONTEXT0_CNTL for hub in _HUBS},
    **{Reg[f"{hub}VM_INVALIDATE_ENG17_REQ"]: _INVALIDATE_REQ for hub in _HUBS},
    **{Reg[f"{hub}VM_L2_PROTECTION_FAULT_CNTL"]: _FAULT_CNTL for hub in _HUBS},
    Reg.IH_RB_CNTL: _IH_RB_CNTL,
    Reg.IH_RB_CNTL_RING1: _IH_RB_CNTL_RING1,
    Reg.IH_RB_BASE_HI: _IH_RB_BASE_HI,
    Reg.IH_RB_BASE_HI_RING1: _IH_RB_BASE_HI,
    Reg.IH_RB_RPTR: _IH_RB_RPTR,
    Reg.IH_RB_WPTR_ADDR_LO: _IH_RB_WPTR_ADDR_LO,
    Reg.IH_RB_WPTR_ADDR_HI: _IH_RB_WPTR_ADDR_HI,
    Reg.GRBM_GFX_CNTL: _GRBM_GFX_CNTL,
    Reg.GRBM_SOFT_RESET: _GRBM_SOFT_RESET,
    Reg.RLC_SAFE_MODE: _RLC_SAFE_MODE,
    Reg.SH_MEM_CONFIG: _SH_MEM_CONFIG,
    Reg.SH_MEM_BASES: _SH_MEM_BASES,
    Reg.CP_MEC_RS64_CNTL: _MEC_RS64_CNTL,
    Reg.CP_MEC_DOORBELL_RANGE_LOWER: _MEC_DOORBELL_RANGE,
    Reg.CP_MEC_DOORBELL_RANGE_UPPER: _MEC_DOORBELL_RANGE,
    Reg.CP_HQD_ACTIVE: _HQD_ACTIVE,
    Reg.CP_HQD_DEQUEUE_REQUEST: _HQD_DEQUEUE_REQUEST,
    Reg.SPI_COMPUTE_QUEUE_RESET: _SPI_COMPUTE_QUEUE_RESET,
    Reg.CP_HQD_PQ_DOORBELL_CONTROL: _HQD_PQ_DOORBELL_CONTROL,
    Reg.CP_HQD_PQ_CONTROL: _HQD_PQ_CONTROL,
    Reg.CP_HQD_IB_CONTROL: _HQD_IB_CONTROL,
    Reg.CP_MQD_CONTROL: _MQD_CONTROL,
    Reg.CP_HQD_EOP_CONTROL: _HQD_EOP_CONTROL,
    **{reg + SDMA1_REGISTER_STRIDE * engine: fields for reg, fields in _SDMA_QUEUE_FIELDS.items()
       for engine in _SDMA_ENGINES},
    **{Reg[f"SDMA{engine}_F32_CNTL"]: _SDMA_F32_CNTL for engine in _SDMA_ENGINES},
    **{Reg[f"SDMA{engine}_CNTL"]: _SDMA_CNTL for engine in _SDMA_ENGINES},
}  # fmt: skip


def fields_of(reg: int) -> RegFields:
    """The field layout of the register at dword address ``reg``.

    Raises:
        InvalidArgument: no layout is known for ``reg`` (write it whole, or add its fields here).
    """
    fields = REGISTER_FIELDS.get(reg)
    if fields is None:
        name = Reg(reg).name if reg in Reg._value2member_map_ else f"dword {reg:#x}"
        raise InvalidArgument(f"register {name} has no field layout in tinyhil.spec.gfx1100_fields, expected one of "
                              f"the {len(REGISTER_FIELDS)} registers a driver writes by field name")  # fmt: skip
    return fields
