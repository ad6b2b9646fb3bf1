"""The device runtime seam's one table of bad inputs and their typed errors (checked on NULL, which validates
through the same DeviceBase every device target uses; opened with copyout allowed, so copyout is validated too)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tinyhil import Buffer, InvalidArgument, Program, StateError, open_target
from tinyhil.device import DeviceBase

Call = Callable[[DeviceBase, Buffer], Any]


def _readonly(nbytes: int) -> np.ndarray:
    array = np.zeros(nbytes, np.uint8)
    array.flags.writeable = False
    return array


def _exec(grid: Any, local: Any) -> Call:
    return lambda d, b: d.exec(Program("k", b"\0"), grid, local)


BAD_INPUTS: list[tuple[str, Call, type[Exception], str]] = [
    ("alloc negative", lambda d, b: d.alloc(-1), InvalidArgument, r"nbytes=-1, expected an int >= 0"),
    ("alloc float", lambda d, b: d.alloc(1.5), InvalidArgument, r"nbytes=1.5, expected an int"),
    ("alloc bool", lambda d, b: d.alloc(True), InvalidArgument, r"nbytes=True, expected an int"),
    ("free non-buffer", lambda d, b: d.free(0x1000), InvalidArgument, r"buf=4096, expected a Buffer"),
    ("copyin str", lambda d, b: d.copyin(b, "abc"), InvalidArgument, r"data=str object, expected a bytes-like"),
    ("copyin overrun", lambda d, b: d.copyin(b, bytes(65)), ValueError, r"0x41 bytes at offset 0x0 overruns"),
    ("copyin negative offset", lambda d, b: d.copyin(b, b"x", -1), InvalidArgument, r"offset=-1"),
    ("copyin offset overrun", lambda d, b: d.copyin(b, b"xx", 63), ValueError, r"overruns"),
    ("copyout past end", lambda d, b: d.copyout(b, 10, 60), InvalidArgument, r"copyout range 0x3c\+0xa ends at 0x46"),
    ("copyout_into str", lambda d, b: d.copyout_into(b, "abc"), InvalidArgument, r"out=str object, expected a writ"),
    ("copyout_into bytes", lambda d, b: d.copyout_into(b, bytes(4)), InvalidArgument, r"out is a read-only bytes"),
    (
        "copyout_into read-only array",
        lambda d, b: d.copyout_into(b, _readonly(4)),
        InvalidArgument,
        r"out is a read-only ndarray buffer",
    ),
    (
        "copyout_into strided",
        lambda d, b: d.copyout_into(b, np.zeros(8, np.uint8)[::2]),
        InvalidArgument,
        r"out is a non-contiguous buffer, expected a C-contiguous",
    ),
    (
        "copyout_into overrun",
        lambda d, b: d.copyout_into(b, np.zeros(17, np.uint32)),
        InvalidArgument,
        r"copyout_into of 0x44 bytes at offset 0x0 overruns",
    ),
    ("copyout_into offset overrun", lambda d, b: d.copyout_into(b, bytearray(2), 63), ValueError, r"overruns"),
    ("copyout_into negative offset", lambda d, b: d.copyout_into(b, bytearray(1), -1), InvalidArgument, r"offset=-1"),
    (
        "copyout_into freed",
        lambda d, b: d.copyout_into(Buffer("NULL", 1, 1, 999), bytearray(1)),
        InvalidArgument,
        r"buf=.*not a live",
    ),
    ("fill 256", lambda d, b: d.fill(b, 256), InvalidArgument, r"value=256, expected an int <= 255"),
    ("fill past end", lambda d, b: d.fill(b, 1, 10, 60), InvalidArgument, r"fill range 0x3c\+0xa ends at 0x46"),
    ("fill offset past end", lambda d, b: d.fill(b, 1, None, 65), InvalidArgument, r"fill nbytes=-1"),
    ("copy too long", lambda d, b: d.copy(b, b, 65), InvalidArgument, r"copy source range 0x0\+0x41"),
    ("copy non-buffer", lambda d, b: d.copy(b, "src"), InvalidArgument, r"src='src', expected a Buffer"),
    ("exec non-program", lambda d, b: d.exec("prog", 1, 1), InvalidArgument, r"program='prog', expected a Program"),
    (
        "exec zero grid",
        lambda d, b: d.exec(Program("k", b"\0"), 0, 1),
        InvalidArgument,
        r"grid=0, expected an int >= 1",
    ),
    ("exec 4-d grid", lambda d, b: d.exec(Program("k", b"\0"), (1, 1, 1, 1), 1), InvalidArgument, r"1 to 3 ints"),
    ("exec bad arg", lambda d, b: d.exec(Program("k", b"\0"), 1, 1, [1 << 64]), InvalidArgument, r"args\[0\]"),
    *[
        (f"exec {what}", _exec(grid, local), InvalidArgument, message)
        for what, grid, local, message in [
            ("float grid", 1.5, 1, r"grid=1.5, expected an int or a tuple of 1 to 3 ints"),
            ("str grid", "12", 1, r"grid='12', expected an int or a tuple of 1 to 3 ints"),
            ("iterator grid", iter([1]), 1, r"grid=<list_iterator .*>, expected an int or a tuple of 1 to 3 ints"),
            ("float local", 1, (2, 0.5), r"local=0.5, expected an int"),
            ("zero local", 1, (2, 0), r"local=0, expected an int >= 1"),
            ("2**32 work-items", (65536, 65536, 1), 1, r"0x100000000 work-items, expected at most 0xffffffff \(GR"),
            ("grid past a dimension", 1 << 32, 1, r"expected each dimension <= 0xffffffff \(GRID_MAX_DIM\)"),
            ("work-items past a dimension", (1, 1 << 31), (1, 2), r"0x100000000 work-items along y, expected at most"),
            ("local past a dimension", 1, 1025, r"local=1025, expected each dimension <= 0x400 \(WORKGROUP_MAX_DIM\)"),
            ("local past 1024 threads", 1, (32, 64), r"2048 threads per workgroup, expected at most 1024 \(WO"),
            ("workgroups past the cap", (65535, 65535), 1, r"workgroups, expected at most 0x400000 per launch \(HOST_"),
        ]
    ],
    ("exec int args", lambda d, b: d.exec(Program("k", b"\0"), 1, 1, 5), InvalidArgument, r"args=int object, expect"),
    (
        "exec freed arg",
        lambda d, b: d.exec(Program("k", b"\0"), 1, 1, [Buffer("NULL", 1, 1, 999)]),
        InvalidArgument,
        r"args\[0\].*not a live",
    ),
    ("compile int", lambda d, b: d.compile(3, "k"), InvalidArgument, r"source=int object"),
]


@pytest.mark.parametrize(
    ("call", "error", "message"), [case[1:] for case in BAD_INPUTS], ids=[case[0] for case in BAD_INPUTS]
)
def test_bad_input_raises_a_typed_error_naming_it(call: Call, error: type[Exception], message: str) -> None:
    with open_target("NULL", allow_copyout=True) as device:
        assert isinstance(device, DeviceBase)
        buf = device.alloc(64)
        before = (dict(device._live), len(device.profile_events))
        with pytest.raises(error, match=message):
            call(device, buf)
        assert (dict(device._live), len(device.profile_events)) == before, "a rejected call changed state"


def test_program_validates_its_fields() -> None:
    with pytest.raises(InvalidArgument, match="entry-point name"):
        Program("", b"x")
    with pytest.raises(InvalidArgument, match="binary=bytearray object, expected bytes"):
        Program("k", bytearray(b"x"))  # type: ignore[arg-type]


def test_close_frees_every_buffer_and_blocks_further_use() -> None:
    device = open_target("NULL")
    assert isinstance(device, DeviceBase)
    for size in (1, 2, 3):
        device.alloc(size)
    with device:
        pass
    assert device.closed and not device._live
    with pytest.raises(StateError, match=r"NullDevice\(NULL\)\.copyin\(\) called, but it is closed"):
        device.copyin(Buffer("NULL", 0, 1, 1), b"x")


def test_compile_error_survives_pickling_with_its_compiler_and_message() -> None:
    import pickle

    from tinyhil.errors import CompileError

    error = pickle.loads(pickle.dumps(CompileError("cc", "x.c:1: error: expected ';'")))
    assert (error.compiler, error.message) == ("cc", "x.c:1: error: expected ';'")
    assert "x.c:1" in str(error)


def test_a_launch_at_the_limits_is_accepted_and_one_past_them_is_refused_naming_the_limit() -> None:
    from tinyhil.device import HOST_NATIVE_MAX_WORKGROUPS, WORKGROUP_MAX_SIZE

    with open_target("NULL") as device:
        program = Program("k", b"\0")
        device.exec(program, (HOST_NATIVE_MAX_WORKGROUPS // 4, 2, 2), (WORKGROUP_MAX_SIZE // 4, 2))
        with pytest.raises(InvalidArgument, match="HOST_NATIVE_MAX_WORKGROUPS"):
            device.exec(program, HOST_NATIVE_MAX_WORKGROUPS + 1, 1)
        with pytest.raises(InvalidArgument, match="WORKGROUP_MAX_SIZE"):
            device.exec(program, 1, (WORKGROUP_MAX_SIZE // 2, 3))
        device.exec(program, 1, 1)  # a valid follow-up runs
        assert [event.name for event in device.profile_events] == ["k", "k"]
