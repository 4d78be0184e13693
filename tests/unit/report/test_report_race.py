"""The report's race section (report/race/) on a hand-built raced campaign run through the real
analyze (tests/support/race_rows.py): what each phase shows, page 1's sentence, the chart's
job, and that an arm's name reaches LaTeX escaped. The latexmk and HTML renderings are in
tests/integration/report/test_report_race.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from specsweep.analyze import build
from specsweep.report import findings
from specsweep.report.build import render_tex
from specsweep.report.context import build_context
from specsweep.report.data import load
from specsweep.report.figures import make_figures
from specsweep.report.race import section
from specsweep.report.text import plain
from tests.support import race_rows

HOSTILE = "draft_n8 & 50%"
C1 = {"A": [100, 104, 102], HOSTILE: [60, 61, 62], "B": [99, 101, 100]}
C4 = {"A": [200, 210, 205], HOSTILE: [120, 118, 119], "B": [205, 200, 203]}
SECONDS = {"A": 10.0, HOSTILE: 30.0, "B": 20.0}


@pytest.fixture(scope="module")
def race_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Level c1 decided for A in round 3, level c4 open after 3 of 4 rounds."""
    path = tmp_path_factory.mktemp("race") / "r.duckdb"
    race_rows.write(path, C1, seconds=SECONDS, at4=C4)
    build.run(path, baseline="A")
    return path


def test_page_one_says_what_the_race_decided_and_spent(race_db: Path) -> None:
    found = [plain(s) for s in findings.build(load(race_db)).summary]
    # starts: A 3, the hostile arm 3, B 3 of 3 x 4; seconds 30 + 90 + 60 of (10 + 30 + 20) x 4
    assert (
        "The race of phase p decided 1 of 2 levels in 3 rounds and spent 75.0% of the grid's "
        "starts (75.0% of its device time)."
    ) in found


def test_a_phase_shows_its_rule_decisions_drops_guarantees_and_cost(race_db: Path) -> None:
    (p,) = section.phases(load(race_db), {})
    assert "more than 5% behind another survivor at 95% confidence" in plain(p["rule"])
    assert [(r["level"], r["decision"], r["picked"]) for r in p["decisions"]] == [
        ("w:64:c1", "winner", "A"),
        ("w:64:c4", "open", "A, B"),
    ]
    drops = [plain(s) for s in p["drops"]]
    assert drops[0].startswith(f"{HOSTILE} was dropped at w:64:c1 after round 2: ")
    assert any(s.startswith("B was dropped at w:64:c1 after round 3: ") for s in drops)
    assert plain(p["guarantees"][1]) == "At w:64:c4: no guarantee: still open after 3 rounds."
    assert plain(p["cost"]).startswith("The race made 9 of the grid's 12 service starts (75.0%)")


def test_the_chart_and_the_section_reach_the_tex_escaped(race_db: Path, tmp_path: Path) -> None:
    data = load(race_db)
    figs = make_figures(data, tmp_path / "figs", workers=1)
    assert figs["race:0-0"] is not None and figs["race:0-0"].exists()
    tex = render_tex(build_context(data, figs))
    assert "\\section{Race}" in tex and "{race-0-0.pdf}" in tex
    assert "draft\\_n8 \\& 50\\%" in tex and HOSTILE not in tex


def test_a_campaign_without_a_race_has_no_section(tmp_path: Path) -> None:
    from tests.support.analyze_rows import req, store_rows

    path = tmp_path / "r.duckdb"
    store_rows(path, campaigns=[race_rows.campaign()], requests=[req(campaign_id="c1")])
    build.run(path)
    data = load(path)
    assert section.latex_section(data, {}) == {"available": False, "phases": []}
    assert section.summary(data) == []


def test_a_drop_with_the_region_closed_says_so() -> None:
    """Margin 0: KN's region has closed, so the sentence names that and not "beyond 0%"."""
    import pandas as pd

    rows = pd.DataFrame([
        {"status": "dropped", "round": 2, "level": "w", "method": "B", "leader": "A",
         "gap": 0.002, "margin": 0.0},
        {"status": "dropped", "round": 2, "level": "w", "method": "C", "leader": "A",
         "gap": 0.5, "margin": 0.1},
    ])  # fmt: skip
    closed, beyond = (plain(s) for s in section.drops(rows))
    assert closed == (
        "B was dropped at w after round 2: 0.2% behind A; the continuation region had closed "
        "(margin 0: the starts varied so little against the zone that the best mean is within "
        "it at the stated confidence)."
    )
    assert beyond.endswith("50.0% behind A, beyond the margin of 10.0% at that round.")
