"""The race section rendered for real: the PDF through latexmk and the HTML page, on the raced
campaign of tests/unit/report/test_report_race.py (real analyze). The in-process tests are
there."""

from __future__ import annotations

import subprocess
from pathlib import Path

from specsweep.report.html.build import run
from tests.support.fixtures.report import needs_latex
from tests.unit.report.test_report_race import HOSTILE, race_db  # noqa: F401


@needs_latex
def test_the_pdf_and_the_page_show_the_race(race_db: Path, tmp_path: Path) -> None:
    page = run(race_db, tmp_path / "r.html", out_pdf=tmp_path / "r.pdf", workers=1)
    text = " ".join(
        subprocess.run(
            ["pdftotext", str(tmp_path / "r.pdf"), "-"], capture_output=True, text=True, check=True
        ).stdout.split()
    )
    assert "Race" in text and "Phase p" in text
    assert f"{HOSTILE} was dropped at w:64:c1 after round 2" in text
    assert "no guarantee: still open after 3 rounds." in text  # after "At w:64:c4"
    assert "The race made 9 of the grid's 12 service starts (75.0%)" in text
    assert "Figure" in text and "The race of phase p" in text
    html = page.read_text(encoding="utf-8")
    assert '<section id="race">' in html and 'href="#fig-race-0-0"' in html
    assert 'id="fig-race-0-0"' in html  # the chart is embedded
    assert "draft_n8 &amp; 50%" in html and "<td>winner</td>" in html
    assert "decided 1 of 2 levels in 3 rounds" in html
