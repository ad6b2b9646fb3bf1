"""``tinyhil trace convert`` and ``tinyhil trace show``: formats from extensions, one-line errors (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tinyhil.cli import EXIT_USAGE, main


def test_convert_both_ways_and_show(recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pcapng, back = tmp_path / "s.pcapng", tmp_path / "back.hiltrace.jsonl"
    assert main(["trace", "convert", str(recorded), str(pcapng)]) == 0
    assert main(["trace", "convert", str(pcapng), str(back)]) == 0
    again = tmp_path / "again.pcapng"
    assert main(["trace", "convert", str(back), str(again)]) == 0
    assert again.read_bytes() == pcapng.read_bytes()
    capsys.readouterr()
    assert main(["trace", "show", str(recorded)]) == 0
    out = capsys.readouterr().out
    assert "target: MOCKUSB+AMD   device: ADD1:0001 serial 'TINYHIL0001'" in out
    assert "SRAM_ARM (0xf2) OUT" in out and "TLP (0xf0) IN" in out and "XDATA_READ (0xe4) IN" in out
    # The largest bulk OUT is a firmware image of the gfx1100 boot (GeneratedFirmware's, 260 KB), not a copy window.
    assert "ep 0x02 OUT" in out and "(each 12..266240)" in out and "errors: 0 (none)" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["convert", "{rec}", "out.txt"], "unknown extension, expected '*.hiltrace.jsonl' or '*.pcapng'"),
        (["show", "missing.pcapng"], "missing.pcapng: file: cannot read it: No such file or directory"),
        (["show", "{bad}"], "line 1: field 'format': None, expected 'tinyhil-trace'"),
    ],
)
def test_mistakes_are_one_line_usage_errors(
    args: list[str], message: str, recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    bad = tmp_path / "bad.hiltrace.jsonl"
    bad.write_text('{"hello": 1}\n')
    argv = ["trace", *(a.format(rec=recorded, bad=bad) for a in args)]
    assert main(argv) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("tinyhil trace: ") and message in err and err.count("\n") == 1
