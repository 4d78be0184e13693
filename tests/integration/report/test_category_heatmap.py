"""The category x method heatmaps (report/speculation/categories.py) and the acceptance-by-load
figure (report/speculation/load.py) on hand-built analysis tables (category_pooled,
acceptance_by_load with the columns of analyze/VIEWS.md) added to the report fixture's file;
the PDF builds with both.

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/report/test_category_heatmap.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

from specsweep.report.build import run
from specsweep.report.context import build_context
from tests.support.fixtures.report import needs_latex
from tests.unit.report.test_category_heatmap import cat_db  # noqa: F401


@needs_latex
def test_the_pdf_carries_both_figures(cat_db: Path, tmp_path: Path) -> None:
    pdf = run(cat_db, tmp_path / "r.pdf")
    text = " ".join(
        subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True,
                       check=True).stdout.split()
    )  # fmt: skip
    assert "Acceptance and speedup by prompt category" in text
    assert "Acceptance and step cost against load" in text
    assert "a hollow circle marks a cell without an interval" in text
    tex = pdf.with_suffix(".tex").read_text(encoding="utf-8")
    assert "{spec-category-0.pdf}" in tex and "{spec-load-0.pdf}" in tex
    assert build_context  # the context the PDF was rendered from is report.context's
