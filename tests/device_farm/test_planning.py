"""The planner: routing by target and capability, unroutable pairs with reasons, longest-first sharding."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinyhil.device_farm.inventory.hwmap import Board, BoardKind, EmulatedLocator, UsbLocator
from tinyhil.device_farm.planning import Lane, Pair, plan
from tinyhil.errors import InvalidArgument


def _board(board_id: str, targets: tuple[str, ...], capabilities: set[str], slots: int = 1) -> Board:
    if slots > 1 or targets[0].startswith("MOCK"):
        locator: EmulatedLocator | UsbLocator = EmulatedLocator(targets[0], slots)
        kind = BoardKind.EMULATED
    else:
        locator, kind = UsbLocator("add1:0001", serial=board_id), BoardKind.USB_BRIDGE
    return Board(board_id, kind, locator, targets, frozenset(capabilities), "here")


EMU = _board("emu", ("MOCKUSB+AMD",), {"copyin", "copyout", "usb3"}, slots=3)
BRIDGE = _board("bridge", ("USB+AMD",), {"copyin", "usb3", "real-hardware"})


def test_pairs_go_only_to_boards_that_serve_their_target_with_the_capabilities_they_need() -> None:
    pairs = [
        Pair("t::a", "MOCKUSB+AMD", frozenset({"copyout"})),
        Pair("t::b", "USB+AMD", frozenset({"real-hardware"})),
        Pair("t::c", "USB+AMD", frozenset({"copyout"})),
        Pair("t::d", "KFD+AMD"),
    ]
    result = plan(pairs, [EMU, BRIDGE])
    placed = {pair.node_id: lane.board for lane, shard in result.shards.items() for pair in shard}
    assert placed == {"t::a": "emu", "t::b": "bridge"}
    assert [(u.pair.node_id, u.reason) for u in result.unroutable] == [
        ("t::c", "no schedulable board serving USB+AMD has capabilities copyout"),
        ("t::d", "no schedulable board serves KFD+AMD"),
    ]


def test_longest_first_onto_the_least_loaded_lane_with_recorded_durations() -> None:
    pairs = [Pair(f"t::{n}", "MOCKUSB+AMD") for n in range(5)]
    durations = {"t::0@MOCKUSB+AMD": 1.0, "t::1@MOCKUSB+AMD": 9.0, "t::2@MOCKUSB+AMD": 4.0}
    result = plan(pairs, [EMU], durations=durations, default_duration_s=2.0)
    lanes = [Lane("emu", slot) for slot in range(3)]
    shards = [[p.node_id for p in result.shards[lane]] for lane in lanes]
    assert shards == [["t::1"], ["t::2", "t::0"], ["t::3", "t::4"]]  # 9 | 4 then 1 | 2 then 2 (ties: first lane)
    assert [result.loads[lane] for lane in lanes] == [9.0, 5.0, 4.0] and result.makespan_s == 9.0


def test_workers_cap_the_lanes_of_an_emulated_board() -> None:
    result = plan([Pair(f"t::{n}", "MOCKUSB+AMD") for n in range(6)], [EMU], workers=2)
    assert sorted(result.loads) == [Lane("emu", 0), Lane("emu", 1)]
    assert sorted(len(shard) for shard in result.shards.values()) == [3, 3]


def test_workers_bound_the_lanes_across_boards_that_run_the_same_pairs() -> None:
    boards = [_board(f"emu{n}", ("MOCKUSB+AMD",), set(), slots=2) for n in range(5)]
    result = plan([Pair(f"t::{n}", "MOCKUSB+AMD") for n in range(10)], boards, workers=2)
    busy = [lane for lane, shard in result.shards.items() if shard]
    assert len(busy) == 2 and sum(len(result.shards[lane]) for lane in busy) == 10
    standing_by = {lane for lane, shard in result.shards.items() if not shard}  # they take retries only
    assert standing_by == {Lane(b.id, 0) for b in boards if b.id not in {lane.board for lane in busy}}


def test_every_board_some_pair_needs_keeps_a_lane_whatever_the_workers() -> None:
    targets = ("MOCKUSB+AMD", "MOCKKFD+AMD", "MOCKUSB+AMD:x", "MOCKKFD+AMD:y")
    boards = [_board(f"b{n}", (target,), set(), slots=2) for n, target in enumerate(targets)]
    result = plan([Pair(f"t::{n}", target) for n, target in enumerate(targets * 3)], boards, workers=2)
    assert sorted(result.shards) == [Lane(b.id, 0) for b in boards]
    assert all(len(shard) == 3 for shard in result.shards.values())


def test_lanes_beyond_the_cover_go_where_the_most_seconds_per_lane_wait() -> None:
    busy, quiet = _board("busy", ("MOCKUSB+AMD",), set(), slots=5), _board("quiet", ("MOCKKFD+AMD",), set(), slots=5)
    pairs = [Pair(f"t::{n}", "MOCKUSB+AMD") for n in range(8)] + [Pair(f"u::{n}", "MOCKKFD+AMD") for n in range(2)]
    result = plan(pairs, [busy, quiet], workers=5)
    assert Counter(lane.board for lane in result.shards) == {"busy": 4, "quiet": 1}  # 8 s over 4 lanes, 2 s over 1
    assert result.makespan_s == 2.0


@settings(max_examples=60, deadline=None)
@given(
    durations=st.lists(st.floats(min_value=0.0, max_value=100.0), min_size=1, max_size=60),
    slots=st.integers(min_value=1, max_value=6),
)
def test_every_pair_runs_once_on_a_least_loaded_lane_within_grahams_bound(durations: list[float], slots: int) -> None:
    board = _board("emu", ("MOCKUSB+AMD",), set(), slots=slots)
    pairs = [Pair(f"t::{n}", "MOCKUSB+AMD") for n in range(len(durations))]
    known = {pair.key: seconds for pair, seconds in zip(pairs, durations, strict=True)}
    result = plan(pairs, [board], durations=known)
    placed = Counter(pair for shard in result.shards.values() for pair in shard)
    assert placed == Counter(pairs) and not result.unroutable
    for lane, shard in result.shards.items():
        assert result.loads[lane] == pytest.approx(sum(known[p.key] for p in shard))
    # Graham's bound for any least-loaded-first list schedule, from the inputs alone.
    assert result.makespan_s <= sum(durations) / slots + (1 - 1 / slots) * max(durations) + 1e-9
    # The rule itself: every lane's last pair went there when that lane was the least loaded.
    for lane, shard in result.shards.items():
        before_last = result.loads[lane] - known[shard[-1].key]
        assert all(before_last <= load + 1e-9 for other, load in result.loads.items() if other != lane)
    again = plan(pairs, [board], durations=known)
    assert again.shards == result.shards  # reproducible


def test_pairs_that_share_lanes_across_groups_balance_over_both() -> None:
    any_board = [_board(f"b{n}", ("USB+AMD",), {"usb3"} | ({"special"} if n == 0 else set())) for n in range(3)]
    pairs = [Pair(f"s::{n}", "USB+AMD", frozenset({"special"})) for n in range(2)]
    pairs += [Pair(f"g::{n}", "USB+AMD") for n in range(6)]
    result = plan(pairs, any_board)
    assert {p.node_id for p in result.shards[Lane("b0", 0)]} >= {"s::0", "s::1"}
    assert all(p.node_id.startswith("g::") for lane in (Lane("b1", 0), Lane("b2", 0)) for p in result.shards[lane])
    assert result.makespan_s == 3.0  # 8 one-second pairs on 3 lanes: the general ones fill around the special ones


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"default_duration_s": 0}, "default_duration_s=0, expected seconds > 0"),
        ({"workers": 0}, "workers=0, expected an integer >= 1"),
        ({"durations": {"t::a@X": -1.0}}, "duration of 't::a@X' is -1.0, expected seconds >= 0"),
    ],
)
def test_bad_arguments_are_named(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message.replace("(", r"\(")):
        plan([], [EMU], **kwargs)  # type: ignore[arg-type]
