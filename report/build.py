"""Build the PDF report: read views, draw figures, render TeX, run latexmk.

The build happens in a temporary folder (figures/, report.tex, LaTeX aux files);
only the PDF and the ``.tex`` are copied out. latexmk runs with
``-no-shell-escape`` so nothing in the document can run commands.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from specsweep.report.data import ReportData, ReportError, load
from specsweep.writing import publish

if TYPE_CHECKING:
    from specsweep.report.findings import Findings

log = logging.getLogger(__name__)

LATEXMK_ARGS = ["-pdf", "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape"]
LOG_TAIL_LINES = 40
TIMEOUT_S = 300


def require_latexmk() -> str:
    """Path of latexmk, or a :class:`ReportError` saying how to install it."""
    exe = shutil.which("latexmk")
    if exe is None:
        raise ReportError(
            "latexmk not found on PATH; install it (Debian/Ubuntu: apt-get install "
            "latexmk texlive-latex-recommended texlive-latex-extra "
            "texlive-fonts-recommended lmodern)"
        )
    return exe


def log_tail(log_path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a LaTeX log (empty if there is none)."""
    if not log_path.exists():
        return ""
    text = log_path.read_text(encoding="utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:])


def compile_tex(tex_path: Path) -> Path:
    """Run latexmk on ``tex_path`` in its folder; return the PDF or raise with the log tail."""
    exe = require_latexmk()
    cmd = [exe, *LATEXMK_ARGS, tex_path.name]
    started = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd,
            cwd=tex_path.parent,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ReportError(
            f"latexmk timed out after {TIMEOUT_S}s\n{log_tail(tex_path.with_suffix('.log'))}"
        ) from exc
    pdf = tex_path.with_suffix(".pdf")
    if proc.returncode != 0 or not pdf.exists():
        tail = log_tail(tex_path.with_suffix(".log")) or proc.stdout[-4000:]
        raise ReportError(
            f"latexmk failed (exit {proc.returncode}) on {tex_path.name}; LaTeX log tail:\n{tail}"
        )
    log.info("latexmk built %s in %.1fs", pdf.name, time.perf_counter() - started)
    return pdf


def render_tex(context: dict, template: str = "report.tex.j2") -> str:
    """Render the report template with the escape-by-default environment."""
    from specsweep.report.latex import make_environment

    return make_environment().get_template(template).render(**context)


def run(
    db_path: Path | str,
    out_pdf: Path | str = "reports/report.pdf",
    campaign: str | None = None,
    workers: int | None = None,
) -> Path:
    """Build the report for ``campaign`` (default: latest) and return the PDF path.

    Also writes the rendered ``.tex`` next to the PDF (same stem). ``workers``: processes
    drawing the figures (default: report.figures.figure_workers()).
    """
    require_latexmk()
    data = load(db_path, campaign)
    out_pdf = Path(out_pdf)
    with tempfile.TemporaryDirectory(prefix="specsweep-report-") as tmp:
        work = Path(tmp)
        write_pdf(data, draw_figures(data, work, workers), work, out_pdf)
    return out_pdf


def draw_figures(data: ReportData, work: Path, workers: int | None) -> dict[str, Path | None]:
    """Every figure the data supports, drawn into ``work/figures`` (report.figures)."""
    from specsweep.report.figures import make_figures

    started = time.perf_counter()
    figs = make_figures(data, work / "figures", workers)
    log.info(
        "%d figures drawn in %.1fs",
        sum(1 for f in figs.values() if f),
        time.perf_counter() - started,
    )
    return figs


def write_pdf(
    data: ReportData,
    figs: dict[str, Path | None],
    work: Path,
    out_pdf: Path,
    found: Findings | None = None,
) -> Path:
    """Render and compile the report in ``work`` (where ``figs`` were drawn), copy the PDF
    and its ``.tex`` to ``out_pdf``; report.html draws the figures and builds the findings
    (``found``) once for both."""
    from specsweep.report.context import build_context

    tex = work / "report.tex"
    tex.write_text(render_tex(build_context(data, figs, found)), encoding="utf-8")
    # Copied before compiling so a LaTeX failure can be inspected.
    publish(out_pdf.with_suffix(".tex"), tex.read_bytes())
    publish(out_pdf, compile_tex(tex).read_bytes())
    log.info("report for %s written to %s", data.campaign["campaign_id"], out_pdf)
    return out_pdf
