"""report.html from a real farm run, opened in headless Chromium (Debian ``chromium``, driven by Playwright): the
matrix and the timeline render with the right counts, and a screenshot is kept as an artifact."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest

from tinyhil.cli import main
from tinyhil.device_farm.reports.html import render_report
from tinyhil.device_farm.reports.summary import PairReport

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS_ENV = "TINYHIL_TEST_ARTIFACTS"
SUITE = """
import pytest


@pytest.mark.parametrize("n", range(3))
def test_alloc(hil_device, n):
    hil_device.free(hil_device.alloc(64))


@pytest.mark.hil(requires=["copyout"])
def test_round_trip(hil_device):
    buf = hil_device.alloc(4)
    hil_device.copyin(buf, b"abcd")
    assert hil_device.copyout(buf) == b"abcd"


def test_fails(hil_target):
    assert hil_target.name == "nothing", "wrong target"
"""

needs_browser = pytest.mark.skipif(
    importlib.util.find_spec("playwright") is None or shutil.which(CHROMIUM) is None,
    reason="needs the Debian package chromium (/usr/bin/chromium) and Playwright (pip install playwright)",
)


@pytest.fixture(scope="module")
def farm_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("farm")
    (root / "test_report_suite.py").write_text(SUITE)
    args = ["farm", "run", "--suite", str(root / "test_report_suite.py"), "--report", str(root / "run"), "--state",
            str(root / "state"), "--target", "NULL", "--target", "MOCKKFD+AMD"]  # fmt: skip
    assert main(args) == 1  # test_fails fails on both targets
    return root / "run"


def test_the_page_is_self_contained_and_names_every_pair(farm_run: Path) -> None:
    page = (farm_run / "report.html").read_text()
    assert "http://" not in page and "https://" not in page and "<script src" not in page and "<link" not in page
    summary = json.loads((farm_run / "summary.json").read_text())
    assert f'data-pairs="{len(summary["results"])}"' in page
    assert page.count("<tr data-test=") == 5  # test_alloc[0..2], test_round_trip, test_fails


@needs_browser
def test_the_report_renders_in_chromium_with_the_right_counts(farm_run: Path) -> None:
    from playwright.sync_api import sync_playwright

    summary = json.loads((farm_run / "summary.json").read_text())
    ran = [r for r in summary["results"] if r["outcome"] != "skipped"]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto((farm_run / "report.html").as_uri())
            assert page.locator("#matrix tbody tr").count() == 5
            assert page.locator("#matrix thead th").count() == 3  # "test" and the two targets
            assert page.locator("#matrix td[data-outcome]").count() == 10
            assert page.locator('#matrix td[data-outcome="failed"]').count() == 2
            assert page.locator('#matrix td[data-outcome="skipped"]').count() == 1  # NULL refuses copyout
            assert page.locator("#failures li").count() == 2
            assert "wrong target" in page.locator("#failures").inner_text()
            details = page.locator('#failures details[data-detail="longrepr"]')
            assert details.count() == 2 and not details.first.evaluate("d => d.open")  # collapsed
            assert not details.first.locator("pre").is_visible()
            details.first.locator("summary").click()
            assert "test_report_suite.py:" in details.first.locator("pre").inner_text()  # file:line, shown on click
            page.locator('#matrix td[data-outcome="failed"] a').first.click()  # a failed cell leads to its failure
            anchor = page.evaluate("location.hash")
            assert anchor.startswith("#failure-") and page.locator(anchor).is_visible()
            assert page.locator("#timeline .lane").count() == 2  # one per board that ran something
            assert page.locator("#timeline .bar").count() == len(ran)
            widths = page.locator("#timeline .bar").evaluate_all(
                "bars => bars.map(b => b.getBoundingClientRect().width)"
            )
            assert all(width > 0 for width in widths)  # the bars are laid out, not just present in the markup
            assert page.locator("#timeline-axis .tick").count() >= 2 and page.locator("#timeline-legend").is_visible()
            titles = page.locator("#timeline .bar").evaluate_all("bars => bars.map(b => b.title)")
            assert all(" attempt 1: " in title and title.endswith(" s") for title in titles)  # durations on hover
            assert page.locator('#metadata tr[data-name="run_id"] td').inner_text() == summary["run_id"]
            assert page.locator("#boards tbody tr").count() == len(summary["boards"])
            shot = Path(os.environ.get(ARTIFACTS_ENV) or farm_run) / "report.png"  # CI keeps $TINYHIL_TEST_ARTIFACTS
            shot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 1000
        finally:
            browser.close()


def test_the_page_resists_markup_and_control_characters_from_ids_messages_and_output() -> None:
    hostile = "<script>alert(1)</script>\"'><img src=x onerror=alert(2)>\x00\x01\x07\x08\x0b\x1b]0;t\x07"
    final = {"nodeid": f"t.py::test_x[{hostile}]", "target": f"NULL{hostile}", "board": f"b{hostile}",
             "host": f"h{hostile}", "attempt": 1, "outcome": "failed", "reason": f"boom {hostile}",
             "duration_s": 0.1, "started": 1.0, "finished": 2.0, "bundle": f"/tmp/{hostile}",
             "longrepr": f"tb {hostile}", "stdout": hostile, "stderr": hostile, "log": hostile}  # fmt: skip
    extra = {"run_id": hostile, "boards": [{"board": hostile, "host": hostile, "health": hostile, "reason": hostile}]}
    page = render_report([PairReport(final)], extra)
    assert (
        "<script" not in page and "<img" not in page and "onerror=alert" not in page.replace("onerror=alert(2)&gt;", "")
    )
    assert not any(chr(c) in page for c in (*range(0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F))
    assert "&lt;script&gt;" in page and "\\x1b]0;t\\x07" in page
    assert page.count("<details") == 4  # the traceback, stdout, stderr and log: each escaped like the rest
