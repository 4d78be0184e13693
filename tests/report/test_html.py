"""The HTML report (report/html): built from a fixture results file, opened in a real
headless Chromium (the Debian package chromium-headless-shell; the Makefile's DEBS install it
in CI; these tests skip without it).

Expected values are computed here from the database with pandas and Python's own html
module, never with report.html's code: the sort order a click produces is checked against
Python's sort of the same column, escaping against ``html.escape``.
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from PIL import Image, ImageChops, ImageStat

from specsweep.report import findings
from specsweep.report.data import load
from specsweep.report.html import views
from specsweep.report.html.build import run
from specsweep.report.text import html as html_text
from specsweep.report.text import plain
from tests.report.conftest import (
    CAMPAIGN,
    DDL,
    needs_latex,
    raw_requests,
    request_metrics,
)

ROOT = Path(__file__).resolve().parents[2]
XSS = "<script>document.body.setAttribute('data-pwned', '1')</script>"
ESCAPED = XSS.replace("<", "&lt;").replace(">", "&gt;")  # as a DOM dump writes text
BROWSERS = (
    shutil.which("chromium-headless-shell"),
    shutil.which("chromium"),
    "/usr/lib/chromium/chromium-headless-shell",
)
CHROMIUM = next((p for p in BROWSERS if p and Path(p).exists()), None)
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="chromium-headless-shell not installed (Debian package "
    "chromium-headless-shell; CI installs it through the Makefile's DEBS)",
)
needs_poppler = pytest.mark.skipif(
    shutil.which("pdftocairo") is None, reason="pdftocairo (poppler-utils) not installed"
)


@pytest.fixture(scope="module")
def hostile_db(report_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report fixture with a script tag in a finding (a workload name) and in a table
    (an environment value), and a view."""
    path = tmp_path_factory.mktemp("html-db") / "specsweep.duckdb"
    shutil.copyfile(report_db, path)
    with duckdb.connect(str(path)) as con:
        con.execute("UPDATE speedup SET workload = ? WHERE workload = 'summ'", [XSS])
        con.execute(
            "INSERT INTO environment_summary (campaign_id, host, key, value) "
            "VALUES (?, 'localhost', 'note.xss', ?)",
            [CAMPAIGN, XSS],
        )
        # analyze makes speedup_pairs a view (analyze/VIEWS.md); the fixture has only tables
        con.execute(
            "CREATE VIEW speedup_pairs AS SELECT campaign_id, method, prompt_id, "
            "decode_tps FROM request_metrics"
        )
    return path


@pytest.fixture(scope="module")
def page(hostile_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run(
        hostile_db, tmp_path_factory.mktemp("html") / "reports" / "report.html", CAMPAIGN, workers=1
    )


# --- the findings, rendered from their marked text ---------------------------------------


@pytest.mark.parametrize(
    "fixture", ["report_db", "report_db_no_agentic", "report_db_energy", "report_db_no_sweep"]
)
def test_every_finding_of_the_fixtures_renders_as_html(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    found = findings.build(load(request.getfixturevalue(fixture), CAMPAIGN))
    sentences = found.summary + found.validity
    assert len(sentences) > 3
    for s in sentences:
        got = str(html_text(s))
        assert "\\" not in got and "$" not in got, got  # no LaTeX left in the HTML
        assert html.unescape(re.sub(r"</?(em|strong|code)>", "", got)) == plain(s)


# --- the analysis tables -----------------------------------------------------------------


def test_raw_tables_are_the_ddls_and_none_is_shown(report_db: Path) -> None:
    ddl = set(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", DDL.read_text()))
    assert ddl == views.RAW
    names = {v.name for v in views.read_views(report_db, CAMPAIGN)}
    assert {"speedup", "config_summary", "request_metrics", "campaign_summary"} <= names
    assert not names & ddl


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


def test_cells_print_short_and_sort_by_the_full_value() -> None:
    assert views.cell(1.23456789) == views.Cell("1.235", "1.23456789")
    assert views.cell(7) == views.Cell("7", "7")
    assert views.cell(None) == views.Cell("") == views.cell(float("nan"))
    assert views.cell([1, 2.5]).text == "[1, 2.500]"
    assert views.cell("x" * 200).long


def test_the_page_has_a_table_per_object_views_included(page: Path) -> None:
    body = page.read_text(encoding="utf-8")
    for name in ("speedup", "request_metrics", "speedup_pairs", "campaign_summary"):
        assert f'<table id="t-{name}" class="sortable">' in body, name
    assert 'speedup_pairs <span class="kind">view</span>' in body
    assert 'id="t-requests"' not in body and 'id="t-campaigns"' not in body  # raw tables
    # the fixture's objects are all below the cap but the two a row per request (3 rounds)
    assert body.count("Showing the first 500 of") == body.count("Showing the first") == 2


# --- one file, escaped --------------------------------------------------------------------


def test_the_page_is_self_contained(page: Path) -> None:
    body = page.read_text(encoding="utf-8")
    refs = re.findall(r"""(?:src|href)\s*=\s*["']?([^"'\s>]*)""", body, re.IGNORECASE)
    assert refs and all(r.startswith(("#", "data:image/png;base64,")) for r in refs), refs
    assert not re.search(r"https?://|<link\b|@import|url\(", body, re.IGNORECASE)
    assert body.count("<img ") >= 5  # the figures are embedded


def test_text_from_the_database_is_escaped(page: Path, hostile_db: Path) -> None:
    body = page.read_text(encoding="utf-8")
    escaped = ESCAPED.replace("'", "&#39;")  # as markupsafe writes it
    assert XSS not in body and body.lower().count("<script") == 1  # the page's own
    assert "data-pwned" not in body.replace(escaped, "")
    with duckdb.connect(str(hostile_db), read_only=True) as con:
        n_rows = con.execute("SELECT count(*) FROM speedup WHERE workload = ?", [XSS]).fetchone()
    # the workload's finding, its claims in page 1's table (all shown: fewer than its cap) and
    # its rows of the speedup table, the environment_summary row
    assert n_rows[0] >= 1 and body.count(escaped) == 1 + 2 * n_rows[0] + 1


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


# --- in Chromium --------------------------------------------------------------------------


def chromium(*args: str, url: str, tmp: Path) -> subprocess.CompletedProcess:
    """Run headless Chromium on ``url`` with console messages logged to stderr. No sandbox:
    CI runs as root, where Chromium refuses its sandbox; the page is our own file. Every
    host name resolves nowhere, so a request leaving the machine would fail loudly."""
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        f"--user-data-dir={tmp / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        *args,
        url,
    ]
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=120, check=True, stdin=subprocess.DEVNULL
    )


def console_lines(stderr: str) -> list[str]:
    """Chromium's log lines for console messages and uncaught errors of the page."""
    return [ln for ln in stderr.splitlines() if ":CONSOLE" in ln or "Uncaught" in ln]


def autotest(page: Path, hook: str, tmp: Path, *args: str) -> list:
    """What the page's #autotest hook wrote into body[data-autotest] for ``hook``
    ('<table id>:<column>:<clicks>': the rows after clicking that header so often;
    'rect:<CSS selector>': where the element is)."""
    proc = chromium("--dump-dom", *args, url=f"{page.as_uri()}#autotest={hook}", tmp=tmp)
    assert not console_lines(proc.stderr), console_lines(proc.stderr)
    m = re.search(r'<body[^>]*data-autotest="([^"]*)"', proc.stdout)
    assert m, "the autotest hook did not run"
    return json.loads(html.unescape(m.group(1)))


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


def _small(image: Image.Image) -> Image.Image:
    """Grey, an eighth the size: a half-pixel offset of the page's layout does not count."""
    return image.convert("L").resize((image.width // 8, image.height // 8), Image.BOX)


def _differ(a: Image.Image, b: Image.Image) -> float:
    return ImageStat.Stat(ImageChops.difference(_small(a), _small(b))).mean[0]


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
