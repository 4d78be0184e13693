"""Build the HTML report: one self-contained file beside the PDF.

The same campaign data (report.data.load), the same findings (one report.findings.Findings,
built once and rendered here by report.text.html), the same figures (drawn once, for
both outputs, and embedded as PNG data URIs) and a sortable, filterable table per analysis
object (report.html.views). Templates are ``report/html/*.j2``, rendered by jinja2 with
autoescape on: every database and plan string is HTML-escaped unless it is a ``Markup`` built
here from escaped parts. The page makes no request: its CSS and script are inline, there are
no web fonts and no external images.
"""

from __future__ import annotations

import logging
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

from specsweep.report import findings
from specsweep.report.data import ReportData, load
from specsweep.report.findings import table
from specsweep.report.html import figures, views
from specsweep.report.race import section as race
from specsweep.report.text import html
from specsweep.writing import publish

log = logging.getLogger(__name__)

TEMPLATE = "report.html.j2"
CAMPAIGN_KEYS = (
    "campaign_id",
    "plan_name",
    "description",
    "status",
    "started_at",
    "finished_at",
    "n_measured",
    "n_warmup",
    "plan_sha256",
)


def environment() -> jinja2.Environment:
    """jinja2 with HTML autoescape for every template here (package data of report.html)."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(resources.files("specsweep.report.html"))),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def context(
    data: ReportData,
    figs: dict[str, Path | None],
    tables: list[views.View],
    found: findings.Findings | None = None,
) -> dict[str, Any]:
    """Everything ``report.html.j2`` renders; ``found``: the findings of ``data`` when the
    caller built them already (for the PDF too)."""
    c = data.campaign
    found = found if found is not None else findings.build(data)
    embedded, figure_note = figures.embed(figs)
    headline = [f for f in embedded if f.key == figures.HEADLINE]  # page 1's chart, on top
    rows, left_out = table.rows(found.claims)
    return {
        "campaign": c,
        "baseline": data.baseline,
        "campaign_rows": [(k, views.cell(c.get(k)).text) for k in CAMPAIGN_KEYS if k in c],
        "claims": {"headers": table.headers(found.claims), "rows": rows, "left_out": left_out},
        "headline_figure": headline[0] if headline else None,
        "method": [html(s) for s in found.method],
        "findings": [html(s) for s in found.summary],
        "validity": [html(s) for s in found.validity],
        "figures": [f for f in embedded if f.key != figures.HEADLINE],
        "figure_note": figure_note,
        "views": tables,
        "race": race_section(data, figs),
        "plan": str(c.get("plan_yaml") or ""),
    }


def race_section(data: ReportData, figs: dict[str, Path | None]) -> dict[str, Any]:
    """The race section (report.race), each figure key as its anchor on this page."""
    found = race.html_section(data, figs)
    for p in found["phases"]:
        p["figures"] = [(figures.anchor(k), figures.title(k)) for k in p["figures"]]
    return found


def render(
    data: ReportData,
    figs: dict[str, Path | None],
    tables: list[views.View],
    found: findings.Findings | None = None,
) -> str:
    """The HTML page for ``data``, its drawn figures, its analysis tables and its findings
    (``found``; built here when not given)."""
    page = context(data, figs, tables, found)
    return environment().get_template(TEMPLATE).render(**page)


def run(
    db_path: Path | str,
    out_html: Path | str = "reports/report.html",
    campaign: str | None = None,
    workers: int | None = None,
    out_pdf: Path | str | None = None,
    max_rows: int = views.MAX_ROWS,
) -> Path:
    """Write the HTML report of ``campaign`` (default: latest) to ``out_html``; with
    ``out_pdf`` also the PDF (report.build.write_pdf) from the same figures, first, so a
    LaTeX failure stops the build as it does without ``--html``. Returns the HTML path."""
    from specsweep.report.build import draw_figures, require_latexmk, write_pdf

    if out_pdf is not None:
        require_latexmk()
    data = load(db_path, campaign)
    tables = views.read_views(db_path, str(data.campaign["campaign_id"]), max_rows)
    found = findings.build(data)
    out_html = Path(out_html)
    with tempfile.TemporaryDirectory(prefix="specsweep-html-") as tmp:
        work = Path(tmp)
        figs = draw_figures(data, work, workers)
        if out_pdf is not None:
            write_pdf(data, figs, work, Path(out_pdf), found)
        page = render(data, figs, tables, found)
    publish(out_html, page)
    log.info(
        "HTML report for %s written to %s (%.1f MB)",
        data.campaign["campaign_id"],
        out_html,
        len(page.encode()) / 1e6,
    )
    return out_html
