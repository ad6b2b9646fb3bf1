"""``--option KEY=VALUE`` strings become the target's options; bad ones are refused naming them."""

from __future__ import annotations

import pytest

from tinyhil.errors import InvalidArgument
from tinyhil.mocks.serve.kfd import open_served_machine
from tinyhil.mocks.serve.options import parse_options


def test_integers_in_any_base_and_strings() -> None:
    assert parse_options(["gpus=3", "vram_bytes=0x200000", "name=x=y"]) == {
        "gpus": 3, "vram_bytes": 0x200000, "name": "x=y"
    }  # fmt: skip


@pytest.mark.parametrize(
    ("options", "message"),
    [(["gpus"], "expected KEY=VALUE"), (["=3"], "expected KEY=VALUE"), (["seed=1", "seed=2"], "given twice")],
)
def test_malformed_options_are_refused(options: list[str], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        parse_options(options)


@pytest.mark.parametrize(
    ("target", "options", "message"),
    [("MOCKUSB+AMD", {}, "serves MOCKKFD"), ("MOCKKFD+AMD", {"gpu": 2}, "did you mean 'gpus'"),
     ("MOCKKFD:2+AMD", {"gpus": 2}, "GPU index 2")],
)  # fmt: skip
def test_bad_targets_and_options_are_refused(target: str, options: dict[str, int], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        open_served_machine(target, options)


def test_the_machine_has_the_options_gpus_and_a_target_index_enough_of_them() -> None:
    kfd, _ = open_served_machine("MOCKKFD+AMD", {"gpus": 3})
    assert len(kfd.gpus) == 3
    kfd, _ = open_served_machine("MOCKKFD:4+AMD", {})
    assert len(kfd.gpus) == 5
