"""Fuzz the device runtime seam with random call sequences on NULL, MOCKKFD+AMD and MOCKUSB+AMD.

Each example is a short sequence of calls (alloc of any size, free and double free, copyin / copyout / copyout_into
at any offset and size, fill with any value, copy, exec with any grid, local size and arguments, synchronize,
timestamp) with arguments that are often wrong. Every call must succeed or raise a :class:`~tinyhil.TinyHilError`
(``InvalidArgument`` is also a ``ValueError``, ``OutOfMemory`` a ``MemoryError``, ``CapabilityMissing`` a
``NotImplementedError``): never another exception. A rejected call leaves the device's buffers as they were, the
bytes read back always equal what was written (a shadow copy of each buffer is kept), and after every example a
valid round trip still works. One device per target serves every example, so a call that broke the device breaks
the next example too.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinyhil import Buffer, Device, Program, TinyHilError, open_target
from tinyhil.device import DeviceBase

pytestmark = pytest.mark.fuzz

TARGETS = ["NULL", "MOCKKFD+AMD", "MOCKUSB+AMD"]
NOOP = """
void noop(unsigned long long *args, const unsigned *group_id, const unsigned *group_size) {
    (void)args; (void)group_id; (void)group_size;
}
"""
MAX_BYTES = 4096  # buffers that succeed stay small: examples are cheap


@dataclass
class Shadow:
    """What a buffer must read back: its bytes, and which of them are known (fresh allocations are undefined)."""

    data: np.ndarray
    known: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.known = np.zeros(self.data.size, bool)


@dataclass
class Session:
    """A device under test and what the test knows about it."""

    device: DeviceBase
    keeps_data: bool
    programs: list[Program]
    shadows: dict[int, Shadow] = field(default_factory=dict)  # by buffer handle
    buffers: list[Buffer] = field(default_factory=list)  # every buffer an example allocated, freed ones included


@pytest.fixture(scope="module", params=TARGETS)
def session(request: pytest.FixtureRequest) -> Iterator[Session]:
    target: str = request.param
    options = {"allow_copyout": True} if target == "NULL" else {}
    with open_target(target, **options) as device:
        assert isinstance(device, DeviceBase)
        compiled = device.compile(NOOP, "noop") if "compile" in device.capabilities else Program("noop", b"\0")
        programs = [compiled, Program("noop", b"not a shared object")]  # the second cannot load on the AMD targets
        yield Session(device, target != "NULL", programs)


# --- argument strategies: mostly sensible, often wrong ---
def _mostly(likely: st.SearchStrategy[Any], wrong: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.tuples(st.integers(0, 3), likely, wrong).map(lambda drawn: drawn[1] if drawn[0] else drawn[2])


junk = st.one_of(st.none(), st.floats(allow_nan=True), st.text(max_size=3), st.booleans(), st.just([1]))
sizes = _mostly(st.integers(0, MAX_BYTES), st.one_of(st.integers(-(2**64), -1), st.integers(2**47 + 1, 2**65), junk))
offsets = _mostly(st.integers(0, 64), st.one_of(st.integers(0, MAX_BYTES), st.integers(-(2**64), 2**64), junk))
counts = _mostly(st.one_of(st.none(), st.integers(0, 256)), st.one_of(st.integers(-(2**64), 2**64), junk))
values = _mostly(st.integers(0, 255), st.one_of(st.integers(-(2**64), 2**64), junk))
# Which buffer: an index into the buffers the example allocated (freed ones too), or past them: a stray object.
refs = _mostly(st.integers(0, 2), st.integers(0, 15))
small_dims = st.one_of(st.integers(1, 4), st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple))
bad_dims = st.one_of(
    st.sampled_from([0, -1, 2**32, (65536, 65536, 1), (2**22 + 1,), 1025, (32, 64), (1, 1, 1, 1), (), (2, 0)]),
    st.integers(-(2**64), 2**64),
    junk,
    st.just(iter([1])),
)
grids = _mostly(small_dims, bad_dims)
locals_ = _mostly(st.one_of(st.integers(1, 64), st.tuples(st.integers(1, 8), st.integers(1, 8))), bad_dims)
kernel_args = _mostly(
    st.lists(st.one_of(refs.map(lambda r: ("buffer", r)), st.integers(-(2**63), 2**64 - 1)), max_size=4),
    st.one_of(junk, st.lists(st.one_of(st.integers(-(2**65), 2**65), junk), min_size=1, max_size=3)),
)
calls = st.one_of(
    st.tuples(st.just("alloc"), sizes),
    st.tuples(st.just("free"), refs),
    st.tuples(st.just("copyin"), refs, st.binary(max_size=256), offsets),
    st.tuples(st.just("copyout"), refs, counts, offsets),
    st.tuples(st.just("copyout_into"), refs, st.integers(0, 256), offsets, st.sampled_from(["bytearray", "u32", "ro"])),
    st.tuples(st.just("fill"), refs, values, counts, offsets),
    st.tuples(st.just("copy"), refs, refs, counts),
    st.tuples(st.just("exec"), st.integers(0, 1), grids, locals_, kernel_args),
    st.tuples(st.just("synchronize")),
    st.tuples(st.just("timestamp")),
)


def _buffer(session: Session, ref: int) -> Any:
    """The ``ref``-th buffer an example allocated (live or freed), or a stray object when there is none."""
    if ref < len(session.buffers):
        return session.buffers[ref]
    return [None, 0x1000, Buffer(session.device.name, 0x1000, 16, 10**9), "buffer"][ref % 4]


def _read_check(session: Session, buf: Any, offset: Any, data: bytes) -> None:
    """Bytes read back from ``buf`` at ``offset`` equal what the test wrote there (where it knows)."""
    if not session.keeps_data:
        assert not any(data), "NULL reads zeros"
        return
    shadow = session.shadows[buf.handle]
    got = np.frombuffer(data, np.uint8)
    known = shadow.known[offset : offset + got.size]
    assert np.array_equal(got[known], shadow.data[offset : offset + got.size][known]), "copyout returned wrong bytes"


def _span(buf: Buffer, nbytes: int | None, offset: int) -> slice:
    return slice(offset, buf.nbytes if nbytes is None else offset + nbytes)


def _apply(session: Session, call: tuple[Any, ...]) -> None:
    """Make one call; update the shadows only once it has succeeded."""
    device, shadows = session.device, session.shadows
    match call:
        case ("alloc", nbytes):
            buf = device.alloc(nbytes)
            session.buffers.append(buf)
            shadows[buf.handle] = Shadow(np.zeros(buf.nbytes, np.uint8))
        case ("free", ref):
            buf = _buffer(session, ref)
            device.free(buf)
            del shadows[buf.handle]
        case ("copyin", ref, data, offset):
            buf = _buffer(session, ref)
            device.copyin(buf, data, offset)
            shadow = shadows[buf.handle]
            shadow.data[offset : offset + len(data)] = np.frombuffer(data, np.uint8)
            shadow.known[offset : offset + len(data)] = True
        case ("copyout", ref, nbytes, offset):
            buf = _buffer(session, ref)
            _read_check(session, buf, offset, bytes(device.copyout(buf, nbytes, offset)))
        case ("copyout_into", ref, nbytes, offset, kind):
            buf = _buffer(session, ref)
            out: Any = {"bytearray": bytearray(nbytes), "u32": np.zeros(nbytes // 4, np.uint32), "ro": bytes(nbytes)}
            device.copyout_into(buf, out[kind], offset)
            _read_check(session, buf, offset, bytes(memoryview(out[kind]).cast("B")))
        case ("fill", ref, value, nbytes, offset):
            buf = _buffer(session, ref)
            device.fill(buf, value, nbytes, offset)
            span = _span(buf, nbytes, offset)
            shadows[buf.handle].data[span] = value
            shadows[buf.handle].known[span] = True
        case ("copy", dst_ref, src_ref, nbytes):
            dst, src = _buffer(session, dst_ref), _buffer(session, src_ref)
            device.copy(dst, src, nbytes)
            span = _span(src, nbytes, 0)
            source = shadows[src.handle]
            data, known = source.data[span].copy(), source.known[span].copy()
            shadows[dst.handle].data[span] = data
            shadows[dst.handle].known[span] = known
        case ("exec", which, grid, local, args):
            resolved = args
            if isinstance(args, list):
                resolved = [_buffer(session, a[1]) if isinstance(a, tuple) else a for a in args]
            device.exec(session.programs[which], grid, local, resolved)
        case ("synchronize",):
            device.synchronize()
        case ("timestamp",):
            if "timestamps" in device.capabilities:
                assert device.timestamp() >= 0
            else:
                device.timestamp()


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    first=st.lists(st.integers(1, MAX_BYTES).map(lambda n: ("alloc", n)), min_size=1, max_size=3),
    sequence=st.lists(calls, min_size=1, max_size=8),
)
def test_random_runtime_calls_succeed_or_raise_typed_errors_and_leave_the_device_usable(
    session: Session, first: list[tuple[Any, ...]], sequence: list[tuple[Any, ...]]
) -> None:
    device = session.device
    try:
        for call in [*first, *sequence]:
            before = dict(device._live)
            try:
                _apply(session, call)
            except TinyHilError:
                assert dict(device._live) == before, f"{call[0]} was rejected but changed the device's buffers"
        device.synchronize()
    finally:
        for buf in session.buffers:
            if buf.handle in session.shadows:
                device.free(buf)
        session.buffers.clear()
        session.shadows.clear()
    _round_trip(device, session.keeps_data)


def _round_trip(device: Device, keeps_data: bool) -> None:
    buf = device.alloc(64)
    device.copyin(buf, bytes(range(64)))
    device.fill(buf, 7, 8, 8)
    expected = bytes(range(8)) + b"\7" * 8 + bytes(range(16, 64)) if keeps_data else bytes(64)
    assert device.copyout(buf) == expected
    device.free(buf)
