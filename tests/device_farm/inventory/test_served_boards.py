"""A ``kind = "served"`` board: its table checked like every locator, the real target it presents, its capabilities
without ``real-hardware``, and its options carried to ``tinyhil serve`` as values that read back the same."""

from __future__ import annotations

import pytest

from tinyhil.capabilities import REAL_HARDWARE
from tinyhil.device_farm.inventory.hwmap import BoardKind, HwmapError, parse_hwmap
from tinyhil.device_farm.inventory.served_boards import SERVE_ROUTES, ServedLocator, ServeKind, serve_arguments
from tinyhil.mocks.serve.options import parse_options
from tinyhil.registry import default_registry


def _map(table: str, extra: str = "") -> str:
    return f'[[board]]\nid = "s"\nkind = "served"\nserved = {{ {table} }}\n{extra}'


@pytest.mark.parametrize("serve", list(ServeKind))
def test_a_served_board_presents_the_real_target_of_its_serve_kind(serve: ServeKind) -> None:
    route = SERVE_ROUTES[serve]
    board = parse_hwmap(_map(f'serve = "{serve.value}", target = "{route.emulated}"'), "lab.toml").boards[0]
    assert board.kind is BoardKind.SERVED
    assert isinstance(board.locator, ServedLocator)
    assert board.targets == (route.real,)
    real = default_registry().resolve(route.real).capabilities
    assert REAL_HARDWARE in real
    assert board.capabilities == real - {REAL_HARDWARE}
    assert board.slots == 1


def test_options_reach_tinyhil_serve_as_values_it_reads_back_unchanged() -> None:
    usb = _map('serve = "usb", target = "MOCKUSB+AMD", options = { mode = "timed", seed = 3, '
               'faults = [{ operation = "bulk_out", occurrence = 2, fault = "stall" }] }')  # fmt: skip
    kfd = _map('serve = "kfd", target = "MOCKKFD+AMD", options = { gpus = 1, vram_bytes = 0x10000000 }')
    for text, read_back in ((usb, parse_options), (kfd, parse_options)):
        locator = parse_hwmap(text, "lab.toml").boards[0].locator
        assert isinstance(locator, ServedLocator)
        arguments = serve_arguments(locator)
        assert arguments[:3] == [locator.serve.value, "--target", locator.target]
        assert read_back(arguments[4::2]) == locator.options


@pytest.mark.parametrize(
    ("table", "extra", "message"),
    [
        ('serve = "pci", target = "MOCKKFD+AMD"', "", "served.serve: 'pci', expected one of usb, kfd"),
        ('target = "MOCKKFD+AMD"', "", "served.serve: missing, expected one of usb, kfd"),
        ('serve = "kfd"', "", "served.target: missing"),
        (
            'serve = "kfd", target = "MOCKUSB+AMD"',
            "",
            "served.target: 'MOCKUSB+AMD' for serve = 'kfd', expected a MOCKKFD+AMD target",
        ),
        ('serve = "usb", target = "USB+AMD"', "", "served.target: 'USB+AMD' for serve = 'usb', expected a MOCKUSB+AMD"),
        (
            'serve = "kfd", target = "MOCKKFD+AMD", command = "sh"',
            "",
            "served.command: unknown field, expected one of serve, target, options",
        ),
        ('serve = "kfd", target = "MOCKKFD+AMD", options = { gpus = "two" }', "", "served.options: gpus='two'"),
        (
            'serve = "kfd", target = "MOCKKFD+AMD", options = { shell = 1 }',
            "",
            "served.options: unknown option 'shell'",
        ),
        (
            'serve = "usb", target = "MOCKUSB+AMD", options = { revision = "naive" }',
            "",
            "served.options: 'revision', expected options tinyhil serve usb takes",
        ),
        (
            'serve = "kfd", target = "MOCKKFD+AMD"',
            'targets = ["USB+AMD"]',
            "targets: 'USB+AMD' on a served kfd board, expected KFD+AMD",
        ),
        (
            'serve = "kfd", target = "MOCKKFD+AMD"',
            'capabilities = ["real-hardware"]',
            "capabilities: 'real-hardware' on a served board",
        ),
        ("serve = 'usb', target = 'MOCKUSB+AMD'", "slots = 2", "slots: unknown field"),
    ],
)
def test_a_malformed_served_table_is_one_error_naming_the_field(table: str, extra: str, message: str) -> None:
    with pytest.raises(HwmapError, match=r"^lab\.toml:\d+: board 's' ") as raised:
        parse_hwmap(_map(table, extra), "lab.toml")
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_served_table_on_another_kind_is_refused() -> None:
    text = '[[board]]\nid = "s"\nkind = "emulated"\nemulated = { target = "NULL" }\nserved = { serve = "kfd" }\n'
    with pytest.raises(HwmapError, match=r"board 's' served: a served table on a emulated board"):
        parse_hwmap(text, "lab.toml")
