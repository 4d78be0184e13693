"""The HTML report (report/html): built from a fixture results file, opened in a real
headless Chromium (the Debian package chromium-headless-shell; the Makefile's DEBS install it
in CI; these tests skip without it).

Expected values are computed here from the database with pandas and Python's own html
module, never with report.html's code: the sort order a click produces is checked against
Python's sort of the same column, escaping against ``html.escape``.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
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
from tests.support.fixtures.report import (
    CAMPAIGN,
    DDL,
)

ROOT = Path(__file__).resolve().parents[3]
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


def test_cells_print_short_and_sort_by_the_full_value() -> None:
    assert views.cell(1.23456789) == views.Cell("1.235", "1.23456789")
    assert views.cell(7) == views.Cell("7", "7")
    assert views.cell(None) == views.Cell("") == views.cell(float("nan"))
    assert views.cell([1, 2.5]).text == "[1, 2.500]"
    assert views.cell("x" * 200).long


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


def _small(image: Image.Image) -> Image.Image:
    """Grey, an eighth the size: a half-pixel offset of the page's layout does not count."""
    return image.convert("L").resize((image.width // 8, image.height // 8), Image.BOX)


def _differ(a: Image.Image, b: Image.Image) -> float:
    return ImageStat.Stat(ImageChops.difference(_small(a), _small(b))).mean[0]
