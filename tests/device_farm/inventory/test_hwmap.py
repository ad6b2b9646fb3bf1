"""The hardware map: a valid map loads into typed boards; every bad map is one error naming file, line and field."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tinyhil.device_farm.inventory.hwmap import (
    MAX_BOARDS,
    MAX_SLOTS,
    BoardKind,
    EmulatedLocator,
    HwmapError,
    KfdLocator,
    MapState,
    NvLocator,
    UsbLocator,
    load_hwmap,
    normalize_pci,
    parse_hwmap,
)
from tinyhil.errors import InvalidArgument
from tinyhil.loading import LIMITS
from tinyhil.registry import default_registry

GOOD = """\
version = 1

[[board]]
id = "bridge-a"
kind = "usb-bridge"
usb = { vid_pid = "ADD1:0001", serial = "A1B2" }
targets = ["USB+AMD"]
host = "lab-1"
tags = ["nightly"]

[[board]]
id = "bridge-b"
kind = "usb-bridge"
usb = { vid_pid = "add1:0001", port = "1-2.3" }
targets = ["USB+AMD"]
state = "maintenance"

[[board]]
id = "kfd-0"
kind = "amd-kfd"
kfd = { gpu_id = 4660, pci = "0000:03:00.0" }
targets = ["KFD+AMD"]

[[board]]
id = "nv-0"
kind = "nv"
nv = { pci_bus_id = "00000000:01:00.0" }
targets = ["USB+AMD"]
capabilities = ["copyin"]

[[board]]
id = "emu"
kind = "emulated"
emulated = { target = "MOCKUSB+AMD", slots = 2 }
"""


def test_a_valid_map_loads_every_board_with_its_locator_and_defaults() -> None:
    hwmap = parse_hwmap(GOOD, "lab.toml", host="here")
    assert [b.id for b in hwmap.boards] == ["bridge-a", "bridge-b", "kfd-0", "nv-0", "emu"]
    bridge, second, kfd, nv, emu = hwmap.boards
    assert bridge.kind is BoardKind.USB_BRIDGE
    assert bridge.locator == UsbLocator("add1:0001", serial="A1B2")
    assert (bridge.host, bridge.tags, bridge.line) == ("lab-1", ("nightly",), 3)
    assert second.locator == UsbLocator("add1:0001", port="1-2.3")
    assert second.state is MapState.MAINTENANCE and second.host == "here"
    assert kfd.locator == KfdLocator(gpu_id=4660, pci="0000:03:00.0")
    assert nv.locator == NvLocator(pci_bus_id="0000:01:00.0")  # NVML's 8-digit domain, in one spelling
    assert nv.capabilities == {"copyin"}
    assert emu.locator == EmulatedLocator("MOCKUSB+AMD", slots=2) and emu.slots == 2 and bridge.slots == 1
    assert emu.targets == ("MOCKUSB+AMD",)
    registry = default_registry()
    assert bridge.capabilities == registry.resolve("USB+AMD").capabilities  # default: its targets' capabilities
    assert emu.capabilities == registry.resolve("MOCKUSB+AMD").capabilities
    assert hwmap.board("kfd-0") is kfd
    with pytest.raises(InvalidArgument, match=r"'nope' is not in lab\.toml; boards: bridge-a, bridge-b"):
        hwmap.board("nope")


def test_a_power_cycle_command_is_kept_as_its_argument_list() -> None:
    board = parse_hwmap(_entry(power_cycle='["uhubctl", "-l", "1-2", "-p", "3", "-a", "cycle"]')).board("b")
    assert board.power_cycle == ("uhubctl", "-l", "1-2", "-p", "3", "-a", "cycle")
    assert parse_hwmap(_entry()).board("b").power_cycle == ()


def test_load_hwmap_reads_a_file_and_names_it_in_errors(tmp_path: Path) -> None:
    path = tmp_path / "hwmap.toml"
    path.write_text(GOOD)
    assert len(load_hwmap(path).boards) == 5
    with pytest.raises(HwmapError, match=r"missing\.toml: file: cannot read it"):
        load_hwmap(tmp_path / "missing.toml")


def _entry(**fields: str) -> str:
    body = {"id": '"b"', "kind": '"usb-bridge"', "usb": '{ vid_pid = "add1:0001", serial = "s" }',
            "targets": '["USB+AMD"]'}  # fmt: skip
    body.update(fields)
    lines = [f"{key} = {value}" for key, value in body.items() if value]
    return "# a lab\n[[board]]\n" + "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("[[board]\n", 1, "file: not TOML: "),
        (
            _entry(kind='"usb-brige"'),
            4,
            "kind: 'usb-brige' (did you mean 'usb-bridge'?), expected one of usb-bridge, amd",
        ),
        (_entry(kind="3"), 4, "board 'b' kind: 3, expected one of usb-bridge"),
        (_entry(id="7"), 3, "board #1 id: 7, expected a non-empty string"),
        (_entry(id=""), 2, "board #1 id: missing"),
        (_entry(id='"../x"'), 3, "board '../x' id: '../x', expected letters, digits, '.', '_' or '-'"),
        (_entry(usb=""), 2, "board 'b' usb: missing, expected a table telling how to find the board"),
        (_entry(usb='{ vid_pid = "add1:0001" }'), 5, "board 'b' usb: no serial and no port"),
        (_entry(usb='{ vid_pid = "add1", serial = "s" }'), 5, "board 'b' usb.vid_pid: 'add1', expected VVVV:PPPP"),
        (_entry(usb='{ vid_pid = "add1:0001", port = "x" }'), 5, "usb.port: 'x', expected a bus-port path"),
        (_entry(usb='{ vid_pid = "add1:0001", serail = "s" }'), 5, "usb.serail: unknown field (did you mean 'serial"),
        (_entry(nv='{ uuid = "GPU-1" }'), 7, "board 'b' nv: a nv table on a usb-bridge board, expected usb = {...}"),
        (
            _entry(targets='"USB+AMD"'),
            6,
            "board 'b' targets: 'USB+AMD', expected a non-empty list of at most 4096 strings",
        ),
        (_entry(targets='["USB+AMDX"]'), 6, "board 'b' targets: "),
        (_entry(targets='["MOCKUSB+AMD"]'), 6, "'MOCKUSB+AMD' on a usb-bridge board, expected a hardware target"),
        (_entry(capabilities='["copyinn"]'), 7, "capabilities: unknown capability 'copyinn' (did you mean 'copyin'?)"),
        (_entry(state='"broken"'), 7, "board 'b' state: 'broken', expected one of maintenance, retired"),
        (_entry(colour='"red"'), 7, "board 'b' colour: unknown field, expected one of id, kind"),
        (_entry(tags="[1]"), 7, "board 'b' tags: [1], expected a non-empty list of at most 4096"),
        (_entry(host="1"), 7, "board 'b' host: 1, expected a non-empty string"),
        (
            _entry(power_cycle='"uhubctl -a cycle"'),  # a shell string: never run through a shell
            7,
            "board 'b' power_cycle: 'uhubctl -a cycle', expected a non-empty list of at most 64 strings",
        ),
        (_entry(power_cycle='["uhubctl", ""]'), 7, "board 'b' power_cycle: ['uhubctl', ''], expected a non-empty list"),
        ("colour = 1\n", 1, "colour: unknown top-level field"),
        ("version = 2\n", 1, "version: 2, expected 1"),
        ("[board]\nid = 1\n", 1, "board: expected [[board]] tables"),
    ],
)
def test_a_bad_map_is_one_error_naming_file_line_and_field(text: str, line: int, message: str) -> None:
    with pytest.raises(HwmapError) as raised:
        parse_hwmap(text, "lab.toml")
    assert str(raised.value).startswith(f"lab.toml:{line}: "), str(raised.value)
    assert message in str(raised.value)
    assert raised.value.line == line and raised.value.path == "lab.toml"


@pytest.mark.parametrize(
    ("kind", "table", "message"),
    [
        ("amd-kfd", "kfd = { }", "board 'k' kfd: empty, expected at least one of gpu_id, unique_id, pci"),
        ("amd-kfd", "kfd = { gpu_id = 0 }", "board 'k' kfd.gpu_id: 0, expected an integer >= 1"),
        ("amd-kfd", "kfd = { gpu_id = true }", "kfd.gpu_id: True, expected an integer >= 1"),
        ("amd-kfd", 'kfd = { pci = "3:00.0" }', "kfd.pci: '3:00.0', expected a PCI location DDDD:BB:DD.F"),
        ("nv", 'nv = { uuid = "1234" }', "nv.uuid: '1234', expected an NVML UUID starting 'GPU-'"),
        ("nv", "nv = { }", "board 'k' nv: empty, expected pci_bus_id or uuid"),
        (
            "emulated",
            'emulated = { target = "MOCKUSB+AMD", slots = 0 }',
            "emulated.slots: 0, expected an integer >= 1 and <= 256",
        ),
        ("emulated", 'emulated = { target = "USB+AMD" }', "emulated.target: 'USB+AMD' on a emulated board"),
        ("emulated", "emulated = { slots = 2 }", "emulated.target: missing"),
        (
            "emulated",
            'emulated = { target = "MOCKUSB+AMDX" }',
            "board 'k' emulated.target: unknown target 'MOCKUSB+AMDX'",
        ),
    ],
)
def test_each_kind_validates_its_locator(kind: str, table: str, message: str) -> None:
    targets = "" if kind == "emulated" else 'targets = ["KFD+AMD"]\n'
    text = f'[[board]]\nid = "k"\nkind = "{kind}"\n{table}\n{targets}'
    with pytest.raises(HwmapError, match=r"^lab\.toml:4: ") as raised:
        parse_hwmap(text, "lab.toml")
    assert message in str(raised.value)


def test_a_duplicate_id_names_both_lines() -> None:
    text = _entry() + "\n" + _entry().replace("# a lab\n", "")
    with pytest.raises(HwmapError, match=r"^lab.toml:8: board 'b' id: duplicate id \(first at line 2\)$"):
        parse_hwmap(text, "lab.toml")


def test_emulated_targets_must_include_the_target_it_runs() -> None:
    text = '[[board]]\nid = "e"\nkind = "emulated"\nemulated = { target = "MOCKUSB+AMD" }\ntargets = ["MOCKKFD+AMD"]\n'
    with pytest.raises(HwmapError, match=r"lab.toml:5: board 'e' targets: \['MOCKKFD\+AMD'\] leaves out"):
        parse_hwmap(text, "lab.toml")


@pytest.mark.parametrize(
    ("given", "expected"), [("0000:03:00.0", "0000:03:00.0"), ("00000000:0A:1f.7", "0000:0a:1f.7")]
)
def test_normalize_pci_spells_one_location_one_way(given: str, expected: str) -> None:
    assert normalize_pci(given) == expected


def test_normalize_pci_refuses_what_is_not_a_location() -> None:
    with pytest.raises(InvalidArgument, match=r"PCI location '03:00\.0', expected DDDD:BB:DD\.F"):
        normalize_pci("03:00.0")


def _emulated_boards(count: int) -> str:
    return "".join(
        f'[[board]]\nid = "b{n}"\nkind = "emulated"\nemulated = {{ target = "NULL" }}\n' for n in range(count)
    )


def test_a_map_of_more_boards_than_the_cap_is_refused_naming_the_bound() -> None:
    with pytest.raises(HwmapError, match=r"^lab\.toml: board: 5000 boards, expected at most 4096 in one map$"):
        parse_hwmap(_emulated_boards(5000), "lab.toml")
    assert len(parse_hwmap(_emulated_boards(MAX_BOARDS), "lab.toml").boards) == MAX_BOARDS


def test_slots_past_the_bound_are_refused_before_any_slot_exists() -> None:
    text = '[[board]]\nid = "e"\nkind = "emulated"\nemulated = { target = "NULL", slots = 100000000 }\n'
    with pytest.raises(HwmapError) as raised:
        parse_hwmap(text, "lab.toml")
    assert str(raised.value) == (
        f"lab.toml:4: board 'e' emulated.slots: 100000000, expected an integer >= 1 and <= {MAX_SLOTS}"
    )
    assert parse_hwmap(text.replace("100000000", str(MAX_SLOTS))).boards[0].slots == MAX_SLOTS


def _board_with_seed(seed: str) -> str:
    return f'[[board]]\nid = "e"\nkind = "emulated"\nemulated = {{ target = "NULL", options = {{ seed = {seed} }} }}\n'


@pytest.mark.parametrize(
    ("text", "field", "why"),
    [
        (_board_with_seed("[" * 40 + "]" * 40), "board[0].emulated.options.seed", "nested deeper than 32 levels"),
        (_board_with_seed("[" * 5000 + "]" * 5000), "file", "nested deeper than 32 levels"),
        (_board_with_seed("9" * 5000), "file", "not TOML: "),
        (_board_with_seed("9" * 30), "board[0].emulated.options.seed", "an integer past 64 bits"),
        (b'[[board]]\nid = "\xff"\n', "file", "not UTF-8 text"),
    ],
)
def test_deep_nesting_huge_integers_and_bad_bytes_are_one_hwmap_error(text: str | bytes, field: str, why: str) -> None:
    with pytest.raises(HwmapError) as raised:
        parse_hwmap(text, "lab.toml")
    assert raised.value.path == "lab.toml" and raised.value.field.startswith(field) and raised.value.why.startswith(why)
    assert str(raised.value).startswith("lab.toml")


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('emulated = { target = ["NULL"] }', "board 'k' emulated.target: ['NULL'], expected a non-empty string"),
        ('emulated = { target = "NULL", slots = "4" }', "board 'k' emulated.slots: '4', expected an integer >= 1"),
        ('emulated = { target = "NULL", options = 3 }', "board 'k' emulated.options: 3, expected a table"),
        ('emulated = { target = "NULL", options = { seed = 1979-05-27 } }', "board 'k' emulated.options: "),
        ("kfd = { unique_id = -1 }", "board 'k' kfd.unique_id: -1, expected an integer >= 0"),
        ("kfd = { pci = 3 }", "board 'k' kfd.pci: 3, expected a non-empty string"),
        ("nv = { uuid = {} }", "board 'k' nv.uuid: {}, expected a non-empty string"),
        ("usb = 5", "board 'k' usb: 5, expected a table telling how to find the board"),
    ],
)
def test_wrong_types_in_a_locator_name_the_board_and_the_field(table: str, message: str) -> None:
    kind = {"emulated": "emulated", "kfd": "amd-kfd", "nv": "nv", "usb": "usb-bridge"}[table.split(" ")[0]]
    targets = {"amd-kfd": 'targets = ["KFD+AMD"]\n', "usb-bridge": 'targets = ["USB+AMD"]\n'}.get(kind, "")
    with pytest.raises(HwmapError, match=r"^lab\.toml:4: ") as raised:
        parse_hwmap(f'[[board]]\nid = "k"\nkind = "{kind}"\n{table}\n{targets}', "lab.toml")
    assert message in str(raised.value)


def test_a_map_over_the_size_cap_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    """A 50 MB map: one line naming the file and the cap, and the loading process never holds the file (reading it
    whole would alone put the peak past 95 MiB).

    The child reports its peak resident set as ``VmHWM`` (this process image's own): ``ru_maxrss`` carries the
    parent's peak across fork and exec, so a child of a large pytest would report the parent's size.
    """
    path = tmp_path / "huge.toml"
    with path.open("w") as out:
        chunk = _emulated_boards(1000)
        while out.tell() < 50_000_000:
            out.write(chunk)
    child = (
        "import re, sys\n"
        "from tinyhil.device_farm.inventory.hwmap import HwmapError, load_hwmap\n"
        "try:\n    load_hwmap(sys.argv[1])\nexcept HwmapError as exc:\n    print(exc)\n"
        "print(re.search(r'VmHWM:\\s+(\\d+) kB', open('/proc/self/status').read()).group(1))\n"
    )
    done = subprocess.run([sys.executable, "-c", child, str(path)], capture_output=True, text=True, check=True)
    message, peak_kib = done.stdout.splitlines()
    assert message == f"{path}: file: larger than {LIMITS['hwmap'].max_bytes} bytes, the limit for a hardware map " \
        "(hwmap.toml)"  # fmt: skip
    assert int(peak_kib) < 80 * 1024, f"{peak_kib} KiB for a refused map"  # ~48 MiB of interpreter and imports
