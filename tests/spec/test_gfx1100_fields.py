"""RegFields (a register's named fields) and the gfx1100 layouts: values by name equal the spec's raw values, and
an unknown field, a value that does not fit or a register without a layout is a typed error."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tinyhil.errors import InvalidArgument
from tinyhil.spec.amdgpu import Field, RegFields
from tinyhil.spec.gfx1100_fields import REGISTER_FIELDS, fields_of
from tinyhil.spec.gfx1100_regs import SDMA1_REGISTER_STRIDE, Reg

RB_CNTL = fields_of(Reg.SDMA0_QUEUE0_RB_CNTL)


# (register, fields by name, the raw value docs/gfx1100.md writes out: sections 4, 8, 9, 10)
SPEC_VALUES = [
    (Reg.SDMA0_QUEUE0_RB_CNTL, {"rb_enable": 1, "rb_size": 22, "f32_wptr_poll_enable": 1, "rptr_writeback_enable": 1,
                                "rptr_writeback_timer": 4, "rb_priv": 1, "rb_vmid": 0}, 0x0084_182D),
    (Reg.SDMA0_QUEUE0_DOORBELL, {"enable": 1}, 1 << 28),
    (Reg.SDMA0_QUEUE0_DOORBELL_OFFSET, {"offset": 0x800 >> 2}, 0x800),
    (Reg.CP_HQD_PQ_DOORBELL_CONTROL, {"doorbell_offset": 0x18 >> 2, "doorbell_en": 1}, 0x4000_0018),
    (Reg.CP_HQD_PQ_CONTROL, {"queue_size": 21, "rptr_block_size": 5}, 0x515),
    (Reg.CP_HQD_IB_CONTROL, {"min_ib_avail_size": 3}, 0x30_0000),
    (Reg.CP_MQD_CONTROL, {"priv_state": 1}, 0x100),
    (Reg.CP_HQD_EOP_CONTROL, {"eop_size": 9}, 9),
    (Reg.SH_MEM_CONFIG, {"address_mode": 0, "alignment_mode": 3, "initial_inst_prefetch": 3}, 0xC00C),
    (Reg.SH_MEM_BASES, {"private_base": 2, "shared_base": 1}, 0x0001_0002),
    (Reg.GCVM_INVALIDATE_ENG17_REQ, {"per_vmid_invalidate_req": 1, "invalidate_l2_ptes": 1, "invalidate_l2_pde0": 1,
                                     "invalidate_l2_pde1": 1, "invalidate_l2_pde2": 1, "invalidate_l1_ptes": 1},
     0x00F8_0001),
    (Reg.MMVM_CONTEXT0_CNTL, {"enable_context": 1, "page_table_depth": 3, "page_table_block_size": 0,
                              "protection_fault_enables": 0xFFFF}, 0x01FF_FE07),
    (Reg.GRBM_GFX_CNTL, {"meid": 1, "pipeid": 0, "queueid": 0}, 0x4),
    (Reg.RLC_SAFE_MODE, {"cmd": 1, "message": 1}, 3),
]  # fmt: skip


@pytest.mark.parametrize(("reg", "values", "raw"), SPEC_VALUES, ids=[reg.name for reg, _, _ in SPEC_VALUES])
def test_fields_by_name_encode_the_spec_s_raw_values(reg: Reg, values: dict[str, int], raw: int) -> None:
    assert fields_of(reg).encode(**values) == raw


def test_both_engines_and_both_hubs_share_a_layout() -> None:
    assert fields_of(Reg.SDMA0_QUEUE0_RB_CNTL + SDMA1_REGISTER_STRIDE) is RB_CNTL
    assert SDMA1_REGISTER_STRIDE == 0x600
    assert fields_of(Reg.GCVM_CONTEXT0_CNTL) is fields_of(Reg.MMVM_CONTEXT0_CNTL)


def test_merge_replaces_only_the_named_fields_and_mask_covers_them() -> None:
    assert RB_CNTL.merge(0xFFFF_FFFF, rb_size=0) == 0xFFFF_FFC1
    assert RB_CNTL.merge(0x0084_182D, rb_enable=0) == 0x0084_182C
    assert RB_CNTL.mask("rb_enable", "rb_size") == 0x3F


BAD_CALLS: dict[str, tuple[Callable[[], Any], str]] = {
    "unknown field": (lambda: RB_CNTL.encode(rb_enabled=1), r"SDMA\*_QUEUE0_RB_CNTL has no field 'rb_enabled'"),
    "too wide": (lambda: RB_CNTL.encode(rb_size=32), r"rb_size=32, expected an int in 0..0x1f \(5 bits\)"),
    "negative": (lambda: RB_CNTL.encode(rb_enable=-1), r"rb_enable=-1"),
    "bool": (lambda: RB_CNTL.encode(rb_enable=True), r"rb_enable=True"),
    "not an int": (lambda: RB_CNTL.encode(rb_size=2.0), r"rb_size=2.0"),  # type: ignore[arg-type]
    "mask of unknown": (lambda: RB_CNTL.mask("nope"), r"has no field 'nope'"),
    "no layout": (lambda: fields_of(Reg.CP_STAT), r"register CP_STAT has no field layout"),
    "no register": (lambda: fields_of(0x7), r"register dword 0x7 has no field layout"),
    "overlap": (lambda: RegFields("R", (Field("a", 0, 4), Field("b", 3, 2))), r"R: field b .* repeats a name or a bit"),
    "same name": (lambda: RegFields("R", (Field("a", 0, 1), Field("a", 1, 1))), r"R: field a .* repeats"),
}


@pytest.mark.parametrize("case", BAD_CALLS)
def test_bad_input_raises_invalid_argument_naming_the_register(case: str) -> None:
    call, message = BAD_CALLS[case]
    with pytest.raises(InvalidArgument, match=message):
        call()


def test_every_layout_s_fields_are_distinct_and_named() -> None:
    for reg, fields in REGISTER_FIELDS.items():
        assert fields.fields and all(f.name for f in fields.fields), hex(reg)
        assert sum(f.width for f in fields.fields) == bin(fields.mask(*fields.by_name)).count("1")
