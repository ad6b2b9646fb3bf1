"""Hypothesis strategies for MOCKKFD fault plans, the KFD counterpart of :mod:`tinyhil.fixtures.strategies`.

Only tests import this module (hypothesis is a development dependency); :mod:`tinyhil.mocks.kfd` never does.
Plans shrink toward the empty plan, rules toward the first occurrence on any GPU::

    @given(plan=kfd_fault_plans(gpus=2, vas=[buffer_va]))
    def test_only_typed_errors(plan: KfdFaultPlan) -> None: ...
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st

from tinyhil.align import round_down
from tinyhil.mocks.kfd.faults import AllocFailure, KfdFault, KfdFaultPlan, MemoryFaultAt, QueueHang
from tinyhil.mocks.kfd.state import GPUVM_BASE, MemKind
from tinyhil.spec.amdgpu import PAGE_BYTES, QueueKind

__all__ = ["kfd_fault_plans", "kfd_fault_rules"]

_ALLOC_DOMAINS = (MemKind.VRAM, MemKind.GTT, MemKind.USERPTR)


@st.composite
def kfd_fault_rules(
    draw: st.DrawFn, *, gpus: int = 2, max_occurrence: int = 8, vas: Sequence[int] = (), max_pages: int = 4
) -> KfdFault:
    """One rule: a failing allocation, a hung queue, or a faulting page range (at one of ``vas`` when given, page
    aligned, else a page of the GPUVM aperture); ``gpu`` is ``None`` or an index below ``gpus``."""
    gpu = draw(st.none() | st.integers(0, gpus - 1))
    kind = draw(st.sampled_from(("alloc", "hang", "memory")))
    if kind == "alloc":
        domain = draw(st.none() | st.sampled_from(_ALLOC_DOMAINS))
        return AllocFailure(draw(st.integers(1, max_occurrence)), gpu, domain)
    if kind == "hang":
        queue_kind = draw(st.none() | st.sampled_from(tuple(QueueKind)))
        return QueueHang(draw(st.integers(1, max_occurrence)), gpu, queue_kind)
    pages = st.sampled_from([round_down(va, PAGE_BYTES) for va in vas]) if vas else st.just(GPUVM_BASE)
    return MemoryFaultAt(draw(pages), draw(st.integers(1, max_pages)) * PAGE_BYTES, gpu)


@st.composite
def kfd_fault_plans(
    draw: st.DrawFn, *, gpus: int = 2, max_rules: int = 3, max_occurrence: int = 8, vas: Sequence[int] = ()
) -> KfdFaultPlan:
    """Plans of up to ``max_rules`` distinct rules for a machine of ``gpus`` GPUs; shrinks toward none."""
    rules = draw(
        st.lists(kfd_fault_rules(gpus=gpus, max_occurrence=max_occurrence, vas=vas), max_size=max_rules, unique=True)
    )
    return KfdFaultPlan(tuple(rules))
