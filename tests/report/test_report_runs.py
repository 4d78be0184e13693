"""The report's sentence on repeated runs: how much of the speedup intervals' variance is
between runs (speedup.n_runs, run_speedup_min / _max, between_run_share), on hand-built rows
and on a hand-built results file."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pandas as pd

from report import findings
from report.build import compile_tex, render_tex
from report.context import build_context
from report.data import load
from report.figures import make_figures

SHARE_SENTENCE = (
    "Intervals cross the campaign's 3 runs with its prompts (a two-way variance: runs pooled "
    "where they differ by no more than noise). Between "
    "runs: a median 40\\% of one run's speedup variance over 3 comparison(s), the most 62\\% "
    "(per-run speedups 0.81$\\times$ to 1.20$\\times$) for n\\_gram\\&co on \\emph{chat}, "
    "max\\_tokens 64, concurrency 4; 0\\% means the runs agree up to prompt noise (with 2 or "
    "3 runs a rough figure)."
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
    assert findings.runs_sentence(sp) == SHARE_SENTENCE


def test_one_run_or_an_older_file_says_nothing() -> None:
    one = _speedup([1, 1, 1], [None, None, None])
    assert not findings.several_runs(one) and findings.runs_sentence(one) == ""
    older = one.drop(columns=["n_runs", "between_run_share"])
    assert not findings.several_runs(older) and findings.runs_sentence(older) == ""
    assert not findings.several_runs(pd.DataFrame())


def test_runs_differing_per_comparison_give_the_range() -> None:
    sp = _speedup([2, 3, 1], [0.5, 0.62, None])
    assert findings.runs_sentence(sp).startswith(
        "Intervals cross the campaign's runs (1 to 3 per comparison) with its prompts (a "
        "two-way variance: runs pooled where they differ by no more than noise). Between "
        "runs: a median 56\\% of one run's speedup variance over 2 comparison(s)"
    )


def _with_runs(report_db: Path, path: Path) -> Path:
    """The report fixture's file with three runs behind every speedup row: shares 10% upward
    by 10 points in the table's order, per-run speedups 0.9 and 1.1 of the point estimate."""
    shutil.copyfile(report_db, path)
    with duckdb.connect(str(path)) as con:
        con.execute("ALTER TABLE speedup ADD COLUMN n_runs INTEGER DEFAULT 3")
        con.execute("ALTER TABLE speedup ADD COLUMN run_speedup_min DOUBLE")
        con.execute("ALTER TABLE speedup ADD COLUMN run_speedup_max DOUBLE")
        con.execute("ALTER TABLE speedup ADD COLUMN between_run_share DOUBLE")
        con.execute("""
            UPDATE speedup SET run_speedup_min = 0.9 * speedup, run_speedup_max = 1.1 * speedup,
                between_run_share = s.k / 10.0
            FROM (SELECT workload, max_tokens, concurrency, method,
                         row_number() OVER (ORDER BY workload, max_tokens, concurrency, method) AS k
                  FROM speedup) AS s
            WHERE s.workload = speedup.workload AND s.max_tokens = speedup.max_tokens
              AND s.concurrency = speedup.concurrency AND s.method = speedup.method
        """)  # fmt: skip
    return path


def test_the_summary_and_the_threats_say_runs(report_db: Path, tmp_path: Path) -> None:
    data = load(_with_runs(report_db, tmp_path / "runs.duckdb"))
    sp = data.speedup
    top = sp.loc[sp["between_run_share"].idxmax()]
    summary = [str(s) for s in findings.summary(data)]
    assert summary[2] == findings.runs_sentence(sp)
    assert f"the most {100 * top['between_run_share']:.0f}\\%" in summary[2]
    assert f"for {top['method']} on \\emph{{{top['workload']}}}" in summary[2]
    tex = render_tex(build_context(data, make_figures(data, tmp_path / "figures")))
    assert summary[2] in tex
    assert "runs crossed with prompts" in tex
    assert "Intervals cross the campaign's runs with its prompts" in tex
    assert "With one run, intervals cover prompts" not in tex
    if shutil.which("latexmk"):  # the sentence and the branches are valid LaTeX
        (tmp_path / "report.tex").write_text(tex, encoding="utf-8")
        assert compile_tex(tmp_path / "report.tex").exists()


def test_one_run_keeps_the_prompts_only_wording(report_db: Path, tmp_path: Path) -> None:
    data = load(report_db)
    assert all("Intervals cross" not in str(s) for s in findings.summary(data))
    tex = render_tex(build_context(data, make_figures(data, tmp_path / "figures")))
    assert "With one run, intervals cover prompts" in tex
    assert "runs crossed with prompts" not in tex
