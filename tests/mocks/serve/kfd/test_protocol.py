"""The Python and C halves of the protocol declare the same numbers and sizes."""

from __future__ import annotations

import re

from tinyhil.mocks.serve.kfd.build import interposer_source
from tinyhil.mocks.serve.kfd.protocol import MAX_PAYLOAD_BYTES, REPLY, REQUEST, ArgFlag, Op


def c_enum_values() -> dict[str, int]:
    source = interposer_source().decode()
    return {name: int(value) for name, value in re.findall(r"\b(OP_\w+|ARG_\w+) = (\d+)", source)}


def test_op_codes_and_argument_flags_match_the_c_side() -> None:
    declared = c_enum_values()
    assert {name: value for name, value in declared.items() if name.startswith("OP_")} == {
        f"OP_{op.name}": op.value for op in Op
    }
    assert {name: value for name, value in declared.items() if name.startswith("ARG_")} == {
        f"ARG_{flag.name}": flag.value for flag in ArgFlag
    }


def test_header_layouts_and_payload_limit_match_the_c_side() -> None:
    source = interposer_source().decode()
    assert "struct request { uint32_t op, fd; uint64_t a, b, c; uint32_t len, flags; };" in source
    assert "struct reply { uint32_t op; int32_t err; uint64_t a, b; uint32_t len, pad; };" in source
    assert (REQUEST.size, REPLY.size) == (4 + 4 + 3 * 8 + 4 + 4, 4 + 4 + 2 * 8 + 4 + 4)
    assert f"#define MAX_PAYLOAD ({MAX_PAYLOAD_BYTES >> 10}u << 10)" in source
