"""The HTML report (report/html): built from a fixture results file, opened in a real
headless Chromium (the Debian package chromium-headless-shell; the Makefile's DEBS install it
in CI; these tests skip without it).

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/report/test_html.py."""

from __future__ import annotations

import base64
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
from PIL import Image, ImageStat

from specsweep.report.html import views
from specsweep.report.html.build import run
from tests.support.fixtures.report import (
    CAMPAIGN,
    needs_latex,
    raw_requests,
    request_metrics,
)
from tests.unit.report.test_html import (  # noqa: F401
    ESCAPED,
    ROOT,
    _differ,
    autotest,
    chromium,
    console_lines,
    hostile_db,
    needs_chromium,
    needs_poppler,
    page,
)


def test_a_large_view_is_capped_and_counted(hostile_db: Path, tmp_path: Path) -> None:
    rm = request_metrics(raw_requests())
    n = int((rm["campaign_id"] == CAMPAIGN).sum())
    shown = {v.name: v for v in views.read_views(hostile_db, CAMPAIGN, max_rows=5)}
    assert len(shown["request_metrics"].rows) == 5 and shown["request_metrics"].n_total == n
    assert shown["request_metrics"].capped and n > 5
    body = run(hostile_db, tmp_path / "capped.html", CAMPAIGN, workers=1, max_rows=5).read_text(
        encoding="utf-8"
    )
    assert f"Showing the first 5 of {n} rows" in body


def test_the_page_has_a_table_per_object_views_included(page: Path) -> None:
    body = page.read_text(encoding="utf-8")
    for name in ("speedup", "request_metrics", "speedup_pairs", "campaign_summary"):
        assert f'<table id="t-{name}" class="sortable">' in body, name
    assert 'speedup_pairs <span class="kind">view</span>' in body
    assert 'id="t-requests"' not in body and 'id="t-campaigns"' not in body  # raw tables
    # the fixture's objects are all below the cap but the two a row per request (3 rounds)
    assert body.count("Showing the first 500 of") == body.count("Showing the first") == 2


def test_cli_writes_html_only_with_no_pdf(hostile_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    cmd = [sys.executable, "-m", "specsweep.report", "--db", str(hostile_db), "--workers", "1"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [*cmd, "--html", str(out), "--no-pdf"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(out)] and out.exists()
    assert not (tmp_path / "reports").exists()
    bad = subprocess.run(
        [*cmd, "--no-pdf"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2 and "--no-pdf needs --html" in bad.stderr


@needs_latex
def test_cli_html_writes_the_pdf_too_by_default(report_db: Path, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "specsweep.report", "--db", str(report_db), "--html"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["reports/report.pdf", "reports/report.html"]
    assert (tmp_path / "reports" / "report.pdf").stat().st_size > 10_000
    assert (tmp_path / "reports" / "report.html").stat().st_size > 10_000


@needs_chromium
def test_the_page_loads_without_console_errors(page: Path, tmp_path: Path) -> None:
    proc = chromium("--dump-dom", url=page.as_uri(), tmp=tmp_path)
    assert not console_lines(proc.stderr), console_lines(proc.stderr)
    assert 'id="t-speedup"' in proc.stdout and not re.search(r"<body[^>]*data-error", proc.stdout)
    assert "data-pwned" not in proc.stdout.replace(ESCAPED, "")
    # the check can fail: a page with an error is seen
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><body><script>undefinedFunction()</script></body>")
    assert console_lines(chromium("--dump-dom", url=bad.as_uri(), tmp=tmp_path).stderr)


@needs_chromium
def test_a_click_sorts_the_table(page: Path, hostile_db: Path, tmp_path: Path) -> None:
    with duckdb.connect(str(hostile_db), read_only=True) as con:
        sp = con.execute("SELECT * FROM speedup WHERE campaign_id = ?", [CAMPAIGN]).df()
    col, key = list(sp.columns).index("speedup"), ["method", "workload", "concurrency"]
    m, w, c = (list(sp.columns).index(k) for k in key)
    expected = [
        (r.method, r.workload, str(r.concurrency), r.speedup)
        for r in sp.sort_values("speedup").itertuples()
    ]
    for clicks, order in ((1, expected), (2, expected[::-1])):
        rows = autotest(page, f"t-speedup:{col}:{clicks}", tmp_path)
        assert [(r[m], r[w], r[c], float(r[col])) for r in rows] == order
    by_workload = [r[w] for r in autotest(page, f"t-speedup:{w}:1", tmp_path)]
    assert by_workload == sorted(sp["workload"]) and by_workload != list(sp["workload"])


@needs_chromium
@needs_poppler
def test_a_screenshot_shows_the_speedup_figure(page: Path, tmp_path: Path) -> None:
    window = ("--hide-scrollbars", "--window-size=1200,2400")  # the same layout for both runs
    rect = autotest(page, "rect:#fig-speedup img", tmp_path, *window)
    left, top = (round(v) + 1 for v in rect[:2])  # inside the 1 px border
    width, height = (round(v) for v in rect[2:])
    shot = tmp_path / "shot.png"
    chromium(*window, f"--screenshot={shot}", url=page.as_uri(), tmp=tmp_path)
    image = Image.open(shot).convert("RGB")
    assert image.size == (1200, 2400) and top + height <= 2400
    assert max(ImageStat.Stat(image).stddev) > 20  # not blank
    # The figure as embedded: the first <img> of the page, the speedup figure's PNG.
    uris = re.findall(r'<img src="data:image/png;base64,([^"]+)"', page.read_text())
    figs = [Image.open(io.BytesIO(base64.b64decode(u))).convert("RGB") for u in uris[:2]]
    speedup, other = figs[0], figs[1].resize(figs[0].size)
    assert (width, height) == (speedup.width + 2, speedup.height + 2)  # full size + border
    shown = image.crop((left, top, left + speedup.width, top + speedup.height))
    blank = Image.new("RGB", speedup.size, "white")
    # the screenshot shows that figure: far closer to it than to white or another figure
    near, far = _differ(shown, speedup), min(_differ(shown, blank), _differ(shown, other))
    assert near < far / 4, (near, far)
    colour = sum(shown.convert("HSV").getchannel("S").histogram()[100:])
    assert colour > 200, colour  # with the methods' coloured markers in it
