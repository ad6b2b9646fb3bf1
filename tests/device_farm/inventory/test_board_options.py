"""Target options of emulated map entries as data: fault rules as tables, checked by the target like open_target's."""

from __future__ import annotations

import pytest

from tinyhil.device_farm.inventory.board_options import target_options
from tinyhil.device_farm.inventory.hwmap import EmulatedLocator, HwmapError, parse_hwmap
from tinyhil.emulators.faults import Fault, FaultPlan, FaultRule, Operation
from tinyhil.errors import InvalidArgument


def test_fault_rules_as_tables_build_the_plan_the_code_would() -> None:
    plan = FaultPlan.from_data(
        [
            {"operation": "control_in", "request": 0xE4, "occurrence": 1, "fault": "stall"},
            {"operation": "bulk_out", "occurrence": 3, "fault": "timeout", "partial_bytes": 512},
        ]
    )
    assert plan == FaultPlan(
        (
            FaultRule(Operation.control_in(0xE4), 1, Fault.stall()),
            FaultRule(Operation.bulk_out(), 3, Fault.timeout(partial_bytes=512)),
        )
    )


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ({"operation": "bulk_out"}, "faults={'operation': 'bulk_out'}, expected a list of rule tables"),
        ([1], "faults rule 1: 1, expected a table"),
        (
            [{"operation": "bulk", "occurrence": 1, "fault": "stall"}],
            "faults rule 1: operation 'bulk', expected one of",
        ),
        ([{"operation": "bulk_out", "occurrence": 1, "fault": "melt"}], "faults rule 1: fault 'melt', expected one of"),
        ([{"operation": "bulk_out", "occurrence": 0, "fault": "stall"}], "faults rule 1: "),
        ([{"operation": "bulk_out", "occurrence": 1, "fault": "stall", "when": 2}], "faults rule 1: unknown field"),
        ([{"operation": "control_in", "occurrence": 1, "fault": "stall"}], "faults rule 1: "),
    ],
)
def test_a_bad_rule_names_its_number_and_field(rules: object, message: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        FaultPlan.from_data(rules)
    assert str(raised.value).startswith(message), str(raised.value)


def test_options_are_checked_by_the_target() -> None:
    assert target_options("MOCKUSB+AMD", {"seed": 3}) == {"seed": 3}
    with pytest.raises(InvalidArgument, match=r"unknown option 'sed' \(did you mean 'seed'\?\)"):
        target_options("MOCKUSB+AMD", {"sed": 3})
    with pytest.raises(InvalidArgument, match="faults on NULL: a map entry's faults are the bridge's fault plans"):
        target_options("NULL", {"faults": []})


def test_a_map_entry_carries_its_options_and_a_bad_one_names_the_line() -> None:
    text = ('[[board]]\nid = "u"\nkind = "emulated"\n'
            'emulated = { target = "MOCKUSB+AMD", options = { seed = 3, mode = "timed" } }\n')  # fmt: skip
    locator = parse_hwmap(text).boards[0].locator
    assert isinstance(locator, EmulatedLocator) and locator.options == {"seed": 3, "mode": "timed"}
    bad = text.replace("seed = 3", "sed = 3")
    with pytest.raises(HwmapError, match=r"^hwmap\.toml:4: board 'u' emulated\.options: unknown option 'sed'"):
        parse_hwmap(bad)
