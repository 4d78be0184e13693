"""Build the compare PDF: read the stored comparison, draw the chart, render
``latex/compare.tex.j2`` and compile it with the main report's :func:`report.build.
render_tex` and :func:`report.build.compile_tex` (latexmk without shell escape), in a
temporary folder; the PDF and its ``.tex`` are copied out."""

from __future__ import annotations

import datetime as dt
import logging
import tempfile
from pathlib import Path
from typing import Any

from specsweep.report.build import compile_tex, render_tex, require_latexmk
from specsweep.report.compare import figure
from specsweep.report.compare import text as words
from specsweep.report.compare.data import CompareData, load
from specsweep.report.latex import fmt_time, texttt
from specsweep.writing import publish

log = logging.getLogger(__name__)
TEMPLATE = "compare.tex.j2"


def context(data: CompareData, chart: str | None) -> dict[str, Any]:
    """What the template shows."""
    changes_table, changes_left = words.changes_table(data.changes)
    speedups_table, speedups_left = words.speedups_table(data.speedups)
    sig = data.changes["significant"].astype(bool) if not data.changes.empty else []
    return {
        "a": data.a,
        "b": data.b,
        "a_started": _when(data.a["started_at"]),
        "b_started": _when(data.b["started_at"]),
        "a_id": texttt(data.a["campaign_id"]),
        "b_id": texttt(data.b["campaign_id"]),
        "summary": words.tex(words.summary(data.changes)),
        "starts": words.tex(words.start_sentence(data.changes)),
        "prompts": [words.tex(line) for line in words.prompt_lines(data.prompts)],
        "n_tested": int(data.changes["p_holm"].notna().sum()) if not data.changes.empty else 0,
        "n_raw": int(data.changes["significant_raw"].fillna(False).astype(bool).sum())
        if not data.changes.empty
        else 0,
        "cause": words.cause_sentence(data.environment),
        "causes": words.cause_items(data.environment),
        "chart": chart,
        "n_changes": len(data.changes),
        "n_significant": int(sum(sig)),
        "changes_table": changes_table,
        "changes_left": changes_left,
        "speedups_table": speedups_table if not data.speedups.empty else None,
        "speedups_left": speedups_left,
        "only_a": words.only(data.only, "A"),
        "only_b": words.only(data.only, "B"),
    }


def _when(value: Any) -> str:
    return fmt_time(value) if isinstance(value, dt.datetime) else str(value)


def run(
    db_path: Path | str, a_spec: str, b_spec: str, out_pdf: Path | str = "reports/compare.pdf"
) -> tuple[Path, str]:
    """Build the compare PDF of A and B; returns its path and the summary sentence. The
    rendered ``.tex`` is written next to the PDF (same stem)."""
    require_latexmk()
    data = load(db_path, a_spec, b_spec)
    out_pdf = Path(out_pdf)
    with tempfile.TemporaryDirectory(prefix="specsweep-compare-") as tmp:
        work = Path(tmp)
        chart = figure.draw(data.changes, work / "figures" / "decode-ratio.pdf")
        tex = work / "compare.tex"
        tex.write_text(
            render_tex(context(data, chart.name if chart else None), TEMPLATE), encoding="utf-8"
        )
        publish(out_pdf.with_suffix(".tex"), tex.read_bytes())  # before compiling: inspectable
        publish(out_pdf, compile_tex(tex).read_bytes())
    log.info(
        "compare report of %s and %s written to %s",
        data.a["campaign_id"],
        data.b["campaign_id"],
        out_pdf,
    )
    return out_pdf, words.summary(data.changes)
