"""The self-contained report page, opened in a real headless Chromium.

Needs Debian's ``chromium`` and the ``playwright`` package (both installed by .ci/run);
the test is skipped, with the reason, where either is missing.
"""

import shutil

import pytest

from disembed.cli import main
from disembed.experiment import DEFAULT_RECIPE

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture
def bench_page(full_data_dir, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    monkeypatch.setenv("DISEMBED_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "bench"
    assert main(["bench", "--encoder", "hash:16", "--languages", "de,zh",
                 "--pairs-per-language", "40", "--max-epochs", "2", "--out", str(out),
                 "--data-dir", str(full_data_dir), "-q"]) == 0
    return out / "report.html"


def test_report_html_is_self_contained(bench_page):
    html = bench_page.read_text(encoding="utf-8")
    assert "<title>disembed bench</title>" in html and "<table>" in html
    assert html.count('src="data:image/png;base64,') == 2  # summary.png, differences.png
    assert 'src="summary.png"' not in html and "## " not in html  # rendered, not raw markdown
    assert "Provenance" in html and "disembed bench --encoder hash:16" in html


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_report_renders_in_headless_chromium(bench_page, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    shot = tmp_path / "report.png"
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        page.goto(bench_page.as_uri())
        page.wait_for_load_state("load")
        title = page.title()
        cells = page.eval_on_selector_all("td", "els => els.map(e => e.textContent.trim())")
        images = page.eval_on_selector_all(
            "img", "els => els.map(e => [e.complete, e.naturalWidth, e.naturalHeight])")
        headings = page.eval_on_selector_all("h2", "els => els.map(e => e.textContent)")
        page.screenshot(path=str(shot), full_page=True)
        browser.close()
    assert title == "disembed bench"
    assert f"hash:16 / {DEFAULT_RECIPE}" in cells and "hash:16 / mean-centering" in cells
    assert any(c.replace(".", "", 1).isdigit() for c in cells)  # scores, not empty cells
    assert images and all(ok and w > 100 and h > 100 for ok, w, h in images)
    assert {"Summary", "Training data", "Provenance"} <= set(headings)
    assert shot.stat().st_size > 20_000  # a rendered page, not a blank one
    shutil.copy(shot, bench_page.parent / "report-screenshot.png")
