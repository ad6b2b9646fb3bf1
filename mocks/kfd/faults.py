"""MOCKKFD fault plans: which allocation fails, which queue hangs, which GPU addresses fault, as frozen values.

A plan is data, like the USB bridge's :class:`~tinyhil.emulators.faults.FaultPlan`: a test can parametrize over it,
hypothesis can generate and shrink it (:func:`tinyhil.mocks.kfd.strategies.kfd_fault_plans`), and its ``repr`` reads
like the code that built it::

    KfdFaultPlan((AllocFailure(3, domain=MemKind.VRAM), QueueHang(1), MemoryFaultAt(0x7000_0000_0000)))

- :class:`AllocFailure`: the ``occurrence``-th ``AMDKFD_IOC_ALLOC_MEMORY_OF_GPU`` (counting the attempts on ``gpu``
  and of ``domain`` when given) fails with ``ENOMEM``, as when the kernel runs out of that memory.
- :class:`QueueHang`: the ``occurrence``-th queue created (on ``gpu``, of ``kind`` when given) never runs: its
  doorbell rings are lost, so its read pointer and signals never advance and waits on it time out.
- :class:`MemoryFaultAt`: GPU ``gpu`` (every GPU when ``None``) has no page behind ``[va, va + nbytes)`` even where a
  buffer is mapped, so an engine access there raises the GPU's page fault and KFD's memory-exception event.

Occurrences count from 1 since the MockKFD was built or last closed; every attempt counts, including attempts that
fail for other reasons.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

from tinyhil._check import check_int
from tinyhil.errors import InvalidArgument
from tinyhil.mocks.kfd.state import MemKind
from tinyhil.spec.amdgpu import PAGE_BYTES, QueueKind

__all__ = ["AllocFailure", "KfdFault", "KfdFaultPlan", "KfdFaults", "MemoryFaultAt", "QueueHang"]

_VA_LIMIT: Final = 1 << 48  # the GPU's virtual address space (gfx9+)


def _check_gpu(owner: str, gpu: int | None) -> None:
    if gpu is not None:
        check_int(f"{owner}.gpu", gpu, min_value=0)


def _check_enum(name: str, value: object, enum: type[MemKind] | type[QueueKind]) -> None:
    if value is not None and not isinstance(value, enum):
        raise InvalidArgument(f"{name}={value!r}, expected None or a {enum.__name__} ({', '.join(enum.__members__)})")


def _where(gpu: int | None, extra: str = "") -> str:
    parts = [part for part in (f"gpu={gpu}" if gpu is not None else "", extra) if part]
    return "".join(f", {part}" for part in parts)


@dataclass(frozen=True, slots=True)
class AllocFailure:
    """The ``occurrence``-th (from 1) allocation on GPU index ``gpu`` of memory ``domain`` fails with ENOMEM."""

    occurrence: int
    gpu: int | None = None
    domain: MemKind | None = None

    def __post_init__(self) -> None:
        check_int("AllocFailure.occurrence", self.occurrence, min_value=1)
        _check_gpu("AllocFailure", self.gpu)
        _check_enum("AllocFailure.domain", self.domain, MemKind)

    def matches(self, gpu: int, domain: MemKind) -> bool:
        return self.gpu in (None, gpu) and self.domain in (None, domain)

    def __repr__(self) -> str:
        domain = "" if self.domain is None else f"domain=MemKind.{self.domain.name}"
        return f"AllocFailure({self.occurrence}{_where(self.gpu, domain)})"


@dataclass(frozen=True, slots=True)
class QueueHang:
    """The ``occurrence``-th (from 1) queue created on GPU index ``gpu`` of ``kind`` never makes progress."""

    occurrence: int
    gpu: int | None = None
    kind: QueueKind | None = None

    def __post_init__(self) -> None:
        check_int("QueueHang.occurrence", self.occurrence, min_value=1)
        _check_gpu("QueueHang", self.gpu)
        _check_enum("QueueHang.kind", self.kind, QueueKind)

    def matches(self, gpu: int, kind: QueueKind) -> bool:
        return self.gpu in (None, gpu) and self.kind in (None, kind)

    def __repr__(self) -> str:
        kind = "" if self.kind is None else f"kind=QueueKind.{self.kind.name}"
        return f"QueueHang({self.occurrence}{_where(self.gpu, kind)})"


@dataclass(frozen=True, slots=True)
class MemoryFaultAt:
    """GPU accesses to ``[va, va + nbytes)`` (page aligned) on GPU index ``gpu`` (``None``: all) page-fault."""

    va: int
    nbytes: int = PAGE_BYTES
    gpu: int | None = None

    def __post_init__(self) -> None:
        check_int("MemoryFaultAt.va", self.va, min_value=0, max_value=_VA_LIMIT - PAGE_BYTES)
        check_int("MemoryFaultAt.nbytes", self.nbytes, min_value=PAGE_BYTES, max_value=_VA_LIMIT - self.va)
        if self.va % PAGE_BYTES or self.nbytes % PAGE_BYTES:
            raise InvalidArgument(
                f"MemoryFaultAt(va={self.va:#x}, nbytes={self.nbytes:#x}), expected both multiples of the "
                f"{PAGE_BYTES:#x}-byte page (a GPU faults on whole pages)"
            )
        _check_gpu("MemoryFaultAt", self.gpu)

    @property
    def end(self) -> int:
        return self.va + self.nbytes

    def __repr__(self) -> str:
        size = "" if self.nbytes == PAGE_BYTES else f"nbytes={self.nbytes:#x}"
        return f"MemoryFaultAt({self.va:#x}{_where(self.gpu, size)})"


KfdFault = AllocFailure | QueueHang | MemoryFaultAt
_RULE_TYPES: Final = (AllocFailure, QueueHang, MemoryFaultAt)


@dataclass(frozen=True, slots=True)
class KfdFaultPlan:
    """A set of MOCKKFD fault rules; at most one rule per (kind, occurrence, filter). ``KfdFaultPlan()`` injects
    nothing."""

    rules: tuple[KfdFault, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.rules, tuple):
            raise InvalidArgument(f"rules={self.rules!r}, expected a tuple of AllocFailure, QueueHang, MemoryFaultAt")
        seen: set[KfdFault] = set()
        for rule in self.rules:
            if not isinstance(rule, _RULE_TYPES):
                raise InvalidArgument(f"rule {rule!r}, expected an AllocFailure, QueueHang or MemoryFaultAt")
            if rule in seen:
                raise InvalidArgument(f"rule {rule!r} appears twice, expected each rule once")
            seen.add(rule)

    def check_gpus(self, count: int) -> None:
        """Raises InvalidArgument: a rule names a GPU index the machine of ``count`` GPUs does not have."""
        for rule in self.rules:
            if rule.gpu is not None and rule.gpu >= count:
                raise InvalidArgument(f"{rule!r}: gpu={rule.gpu}, expected < {count} (the machine's GPU count)")

    def __repr__(self) -> str:
        inner = ", ".join(repr(rule) for rule in self.rules)
        return f"KfdFaultPlan(({inner},))" if len(self.rules) == 1 else f"KfdFaultPlan(({inner}))"


@dataclass(slots=True)
class KfdFaults:
    """A plan as one MockKFD applies it: attempt counters per rule, and the unmapped holes per GPU."""

    plan: KfdFaultPlan
    _counts: dict[KfdFault, int] = field(default_factory=dict)

    def reset(self) -> None:
        self._counts.clear()

    def _count(self, rule: KfdFault) -> bool:
        """Count one attempt against ``rule``; whether this is the occurrence it hits."""
        seen = self._counts.get(rule, 0) + 1
        self._counts[rule] = seen
        assert not isinstance(rule, MemoryFaultAt)
        return seen == rule.occurrence

    def alloc_fails(self, gpu: int, domain: MemKind) -> AllocFailure | None:
        """Count an allocation attempt; the rule that makes it fail, if any."""
        hit = None
        for rule in self.plan.rules:
            if isinstance(rule, AllocFailure) and rule.matches(gpu, domain) and self._count(rule):
                hit = rule
        return hit

    def queue_hangs(self, gpu: int, kind: QueueKind) -> QueueHang | None:
        """Count a queue creation; the rule that hangs this queue, if any."""
        hit = None
        for rule in self.plan.rules:
            if isinstance(rule, QueueHang) and rule.matches(gpu, kind) and self._count(rule):
                hit = rule
        return hit

    def mapped_pieces(self, gpu: int, va: int, nbytes: int) -> Iterator[tuple[int, int]]:
        """The ``(offset, nbytes)`` pieces of ``[va, va + nbytes)`` to map on GPU ``gpu``: all but the holes."""
        holes = sorted((r.va, r.end) for r in self.plan.rules if isinstance(r, MemoryFaultAt) and r.gpu in (None, gpu))
        cursor, end = va, va + nbytes
        for start, stop in holes:
            if stop <= cursor or start >= end:
                continue
            if start > cursor:
                yield cursor - va, start - cursor
            cursor = max(cursor, stop)
        if cursor < end:
            yield cursor - va, end - cursor
