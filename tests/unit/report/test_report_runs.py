"""The report's sentence on rounds of service starts: each comparison rests on the campaign's
rounds, and how much of one round's speedup variance lies between rounds (speedup.n_runs,
run_speedup_min / _max, between_run_share), on hand-built rows and on the 3-round fixture; with
one round (the one-round fixture) the report says that nothing has an interval, and why."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pandas as pd

from specsweep.report import findings
from specsweep.report.build import compile_tex, render_tex
from specsweep.report.context import build_context
from specsweep.report.data import load
from specsweep.report.figures import make_figures
from specsweep.report.text import em, latex

# as the PDF prints it (report.text.latex): the method's name escaped
SHARE_SENTENCE = (
    "Each comparison rests on the campaign\\textquoteright{}s 3 rounds of service starts "
    "crossed with its prompts; its interval adds the stratum\\textquoteright{}s start variance "
    "to the prompts\\textquoteright{} spread. Between rounds: a median 40\\% of one "
    "round\\textquoteright{}s speedup variance over 3 comparison(s), the most "
    "62\\% (per-round speedups 0.81$\\times$ to 1.20$\\times$) for n\\_gram\\&co on "
    "\\emph{chat}, max\\_tokens 64, concurrency 4; 0\\% means the rounds agree up to prompt "
    "noise (with 2 or 3 rounds a rough figure)."
)


def _speedup(n_runs: list[int], shares: list[float | None]) -> pd.DataFrame:
    """Three speedup rows of one setup; the second has share shares[1], per-run 0.81 to 1.2."""
    return pd.DataFrame({
        "engine": "llama.cpp", "tp": 1, "workload": "chat", "max_tokens": 64,
        "concurrency": [1, 4, 8], "method": ["eagle3", "n_gram&co", "eagle3"],
        "n_runs": n_runs, "between_run_share": shares,
        "run_speedup_min": [1.0, 0.81, 1.1], "run_speedup_max": [1.1, 1.2, 1.3],
    })  # fmt: skip


def test_the_median_share_and_the_largest_by_hand() -> None:
    """Shares 20%, 62%, 40%: median 40%, the most 62% at concurrency 4; names escaped."""
    sp = _speedup([3, 3, 3], [0.2, 0.62, 0.4])
    assert findings.several_runs(sp)
    assert latex(findings.runs_sentence(sp)) == SHARE_SENTENCE


def test_one_run_or_an_older_file_says_nothing() -> None:
    one = _speedup([1, 1, 1], [None, None, None])
    assert not findings.several_runs(one) and findings.runs_sentence(one) == ""
    older = one.drop(columns=["n_runs", "between_run_share"])
    assert not findings.several_runs(older) and findings.runs_sentence(older) == ""
    assert not findings.several_runs(pd.DataFrame())


def test_runs_differing_per_comparison_give_the_range() -> None:
    sp = _speedup([2, 3, 1], [0.5, 0.62, None])
    assert findings.runs_sentence(sp).startswith(
        "Each comparison rests on the campaign\u2019s rounds (1 to 3 per comparison) of service "
        "starts crossed with its prompts; its interval adds the stratum\u2019s start variance to "
        "the prompts\u2019 spread. Between rounds: a median 56% of one round\u2019s speedup "
        "variance over 2 comparison(s)"
    )


def _with_shares(report_db: Path, path: Path) -> Path:
    """The 3-round fixture's file with a between-round share behind every speedup row: 10%
    upward by 10 points in the table's order."""
    shutil.copyfile(report_db, path)
    with duckdb.connect(str(path)) as con:
        con.execute("""
            UPDATE speedup SET between_run_share = s.k / 10.0
            FROM (SELECT workload, max_tokens, concurrency, method,
                         row_number() OVER (ORDER BY workload, max_tokens, concurrency, method) AS k
                  FROM speedup) AS s
            WHERE s.workload = speedup.workload AND s.max_tokens = speedup.max_tokens
              AND s.concurrency = speedup.concurrency AND s.method = speedup.method
        """)  # fmt: skip
    return path


def test_the_method_and_the_threats_say_rounds(report_db: Path, tmp_path: Path) -> None:
    data = load(_with_shares(report_db, tmp_path / "runs.duckdb"))
    sp = data.speedup
    top = sp.loc[sp["between_run_share"].idxmax()]
    method = [str(s) for s in findings.method(data)]  # page 1's method, after the chart
    assert method[3] == findings.runs_sentence(sp)
    assert f"the most {100 * top['between_run_share']:.0f}%" in method[3]
    assert f"for {top['method']} on {em(top['workload'])}" in method[3]
    tex = render_tex(build_context(data, make_figures(data, tmp_path / "figures")))
    flat = " ".join(tex.split())
    assert latex(method[3]) in tex
    assert "how much of a comparison's spread is between rounds: see the method above" in flat
    assert "Each configuration was started in 3 round(s)" in flat
    assert "Intervals carry the spread between service starts" in flat
    assert "With one round" not in flat
    if shutil.which("latexmk"):  # the sentence and the branches are valid LaTeX
        (tmp_path / "report.tex").write_text(tex, encoding="utf-8")
        assert compile_tex(tmp_path / "report.tex").exists()


def test_one_round_prints_no_interval_and_says_why(
    report_db_one_round: Path, tmp_path: Path
) -> None:
    """One start per configuration: no interval anywhere, no "significant", and the page says
    that the start-to-start variance was not sampled (speedup.ci_reason, start_variance)."""
    data = load(report_db_one_round)
    assert data.speedup["ci_low"].isna().all() and data.speedup["significant"].isna().all()
    summary = " ".join(str(s) for s in findings.method(data) + findings.summary(data))
    assert "Intervals cross" not in summary and "Each comparison rests" not in summary
    assert "No claim of this campaign has an interval, so none is tested" in summary
    assert (
        "In 2 of 2 stratum(s) no start variance was estimated (one service start per "
        "configuration: the start-to-start variance was not sampled (2))"
    ) in summary
    assert "the most certain gain is" not in summary and "no significant speedup" in summary
    notes = " ".join(str(s) for s in findings.validity_notes(data))
    assert "Each configuration was started once (one round)" in notes
    assert (
        "8 of 8 speedup comparison(s) print no interval and are called neither significant "
        "nor not: one service start per side: how far another start would land was not "
        "sampled (plan repeat: 2 or more)."
    ) in notes
    tex = " ".join(render_tex(build_context(data, make_figures(data, tmp_path / "f"))).split())
    assert "With one round, each configuration ran on one service start" in tex
    assert "how much of a comparison's spread is between rounds" not in tex
