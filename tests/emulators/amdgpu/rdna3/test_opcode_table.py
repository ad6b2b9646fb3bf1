"""docs/rdna3-opcodes.md is exactly what the generator makes of the executor's decode table and handlers."""

from __future__ import annotations

from pathlib import Path

from tinyhil.emulators.amdgpu.rdna3 import HANDLERS, OPCODES, Enc
from tinyhil.emulators.amdgpu.rdna3.opcode_table import opcode_table

DOC = Path(__file__).parents[4] / "docs" / "rdna3-opcodes.md"


def test_the_opcode_doc_is_the_generated_table() -> None:
    assert DOC.read_text() == opcode_table(), (
        "docs/rdna3-opcodes.md is stale: run python -m tinyhil.emulators.amdgpu.rdna3.opcode_table > "
        "docs/rdna3-opcodes.md"
    )


def test_every_decoded_opcode_has_a_row_saying_whether_it_runs() -> None:
    table = opcode_table()
    for enc in (Enc.SOP2, Enc.VOP3, Enc.DS):
        for op, name in OPCODES[enc].items():
            runs = "yes" if name in HANDLERS else "no"
            assert f"| {op} | `{name}` | {runs} |" in table
