"""The sentinel formula has one definition (``tinyhil.spec.copyin.sentinel``) for a seq and for an array of seqs; the
SDMA program the driver stamps polls for exactly what it gives, across the 24-bit wrap."""

from __future__ import annotations

import numpy as np

from tinyhil.spec.amdgpu_sdma import SdmaPollRegmemDw
from tinyhil.spec.copyin import SENTINEL_TAG, SEQ_MASK, sentinel
from tinyhil.usbgpu.copy import CopyRevision, chunk_plans
from tinyhil.usbgpu.program import copyin_program

SEQS = [0, 1, 0xFFFFFE, 0xFFFFFF, 0x1000000, 0x1000001, (1 << 62) + 0xFFFFFF]


def test_one_seq_and_an_array_of_seqs_give_the_same_sentinels() -> None:
    singles = [sentinel(seq) for seq in SEQS]
    assert sentinel(np.array(SEQS, dtype=np.uint64)).tolist() == singles
    assert all(
        value >> 24 == SENTINEL_TAG >> 24 and value & SEQ_MASK == seq & SEQ_MASK
        for value, seq in zip(singles, SEQS, strict=True)
    )
    assert singles[2:5] == [0x51FFFFFE, 0x51FFFFFF, 0x51000000]


def test_the_stamped_program_polls_for_the_sentinel_of_each_chunk() -> None:
    plans = chunk_plans(CopyRevision.PIPELINED, 6 * 0x40000, 0xFFFFFD)
    program = copyin_program(plans, 0x1000_0000)
    rows = program.reshape(len(plans), -1)
    assert rows[:, SdmaPollRegmemDw.REFERENCE].tolist() == [sentinel(plan.seq) for plan in plans]
