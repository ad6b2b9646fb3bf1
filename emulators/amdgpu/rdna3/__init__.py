"""The RDNA3 (gfx1100) wave executor: decode LLVM-built machine code and run a dispatch's waves together.

See docs/rdna3.md for what is implemented, the execution model and its limits.
"""

from __future__ import annotations

from typing import Final

from .decode import DecodeError, Inst, decode, disassemble
from .executor import HANDLERS, DispatchSetup, DispatchStats, ProgramCache, run_dispatch
from .opcodes import OPCODES, Enc

__all__ = [
    "EXECUTED_ARCHS",
    "HANDLERS",
    "OPCODES",
    "DecodeError",
    "DispatchSetup",
    "DispatchStats",
    "Enc",
    "Inst",
    "ProgramCache",
    "decode",
    "disassemble",
    "run_dispatch",
]

# The processors whose machine code the executor decodes (a code object for another is refused at load).
EXECUTED_ARCHS: Final = ("gfx1100",)
