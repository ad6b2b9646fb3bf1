"""Fault plans: frozen, hashable, validated values whose repr reads like the code that built them."""

from __future__ import annotations

import pytest
from hypothesis import given

from tinyhil.emulators.faults import Fault, FaultKind, FaultPlan, FaultRule, Operation, Transfer
from tinyhil.errors import InvalidArgument
from tinyhil.fixtures.strategies import fault_plans
from tinyhil.spec.asm2464 import CplStatus, RetStatus


@given(fault_plans())
def test_repr_rebuilds_the_plan_and_plans_hash(plan: FaultPlan) -> None:
    namespace = {
        "FaultPlan": FaultPlan,
        "FaultRule": FaultRule,
        "Operation": Operation,
        "Fault": Fault,
        "RetStatus": RetStatus,
        "CplStatus": CplStatus,
    }
    rebuilt = eval(repr(plan), namespace)
    assert rebuilt == plan and hash(rebuilt) == hash(plan)


def test_repr_reads_like_code() -> None:
    plan = FaultPlan.single(Operation.control_out(0xF2), 3, Fault.timeout(partial_bytes=16))
    assert repr(plan) == "FaultPlan((FaultRule(Operation.control_out(0xf2), 3, Fault.timeout(partial_bytes=16)),))"
    assert repr(FaultPlan()) == "FaultPlan(())"


def test_fault_for_finds_the_rule_of_that_occurrence() -> None:
    plan = FaultPlan(
        (FaultRule(Operation.bulk_out(), 2, Fault.stall()), FaultRule(Operation.bulk_in(), 2, Fault.no_device()))
    )
    assert plan.fault_for(Operation.bulk_out(), 2) == Fault.stall()
    assert plan.fault_for(Operation.bulk_out(), 1) is None and plan.fault_for(Operation.tlp(), 2) is None
    assert Fault.stall().kind is FaultKind.STALL and Operation.tlp().transfer is Transfer.TLP


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: Operation.control_out(0x100), "request"),
        (lambda: Operation(Transfer.BULK_OUT, 0xF2), "expected None"),
        (lambda: Fault(FaultKind.STALL, partial_bytes=3), "expected 0"),
        (lambda: Fault.timeout(partial_bytes=-1), "partial_bytes"),
        (lambda: Fault.ret_status(0), "RetStatus"),
        (lambda: Fault.cpl_status(CplStatus.SC), "CplStatus"),
        (lambda: FaultRule(Operation.bulk_out(), 0, Fault.stall()), "occurrence"),
        (lambda: FaultRule(Operation.bulk_in(), 1, Fault.short_write(4)), "short_write on bulk OUT only"),
        (lambda: FaultRule(Operation.control_out(0xF2), 1, Fault.drop()), "drop on bulk OUT only"),
        (lambda: FaultRule(Operation.bulk_out(), 1, Fault.babble()), r"babble\(\) on Operation\.bulk_out\(\), .*IN"),
        (lambda: FaultRule(Operation.control_out(0xF2), 1, Fault.babble()), r"on Operation\.control_out\(0xf2\)"),
        (lambda: FaultRule(Operation.tlp(), 1, Fault.babble()), "ret_status/cpl_status"),
        (lambda: Fault(FaultKind.BABBLE, partial_bytes=8), "expected 0"),
        (lambda: FaultRule(Operation.tlp(), 1, Fault.stall()), "ret_status/cpl_status"),
        (lambda: FaultRule(Operation.bulk_out(), 1, Fault.ret_status(RetStatus.ERROR)), "ret_status/cpl_status"),
        (lambda: FaultRule("bulk_out", 1, Fault.stall()), "expected an Operation"),  # type: ignore[arg-type]
        (lambda: FaultPlan([]), "tuple"),  # type: ignore[arg-type]
        (lambda: FaultPlan((FaultRule(Operation.bulk_out(), 1, Fault.stall()),) * 2), "two rules"),
        (lambda: FaultPlan((fault_plans(),)), "not a strategy"),  # type: ignore[arg-type]
    ],
)
def test_bad_plans_are_rejected_at_construction(build, match: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidArgument, match=match):
        build()


def test_a_babble_fits_in_transfers_only() -> None:
    fits = {transfer for transfer in Transfer if FaultKind.BABBLE.allows(transfer)}
    assert fits == {Transfer.BULK_IN, Transfer.CONTROL_IN}
    rule = FaultRule(Operation.control_in(0xE4), 2, Fault.babble())
    assert repr(rule) == "FaultRule(Operation.control_in(0xe4), 2, Fault.babble())"
    plan = FaultPlan.from_data([{"operation": "bulk_in", "occurrence": 1, "fault": "babble"}])
    assert plan.fault_for(Operation.bulk_in(), 1) == Fault.babble()
    with pytest.raises(InvalidArgument, match=r"faults rule 1: Fault\.babble\(\) on Operation\.bulk_out"):
        FaultPlan.from_data([{"operation": "bulk_out", "occurrence": 1, "fault": "babble"}])
