"""The report's speculation section (report/speculation/) on hand-built analysis tables.

method_families, param_sweep, speedup_decomposition, best_setting, position_acceptance and
accepted_histogram are made here with the issue-14 contract's columns and added to the
report fixture's file, so these tests do not depend on analyze/. The workload name carries
LaTeX specials.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from specsweep.report import charts
from specsweep.report.build import render_tex
from specsweep.report.context import build_context
from specsweep.report.data import load
from specsweep.report.speculation import best, decomposition, panels, section, sweep
from specsweep.report.text import latex, plain
from tests.support.fixtures.report import CAMPAIGN
from tests.unit.report.test_report_openloop import NO_FIGS, with_tables

CHAT = "chat & co_op"
CHAT_TEX = r"chat \& co\_op"
WIN = {"campaign_id": CAMPAIGN, "engine": "llama.cpp", "tp": 1, "max_tokens": 64}
# ddtree over budget, per concurrency: value -> (accept length, speedup, ci_low, ci_high)
DDTREE = {
    1: {8: (3.0, 1.5, 1.4, 1.6), 16: (4.5, 1.9, 1.8, 2.0), 64: (6.1, 1.2, 1.1, 1.3)},
    4: {8: (3.0, 0.9, 0.8, 1.0), 16: (4.5, 1.1, 0.95, 1.2), 64: (4.0, 0.7, 0.6, 0.8)},
}
# draft_simple over n_max, p_min held (concurrency 1): (n_max, p_min) -> (accept, speedup)
DRAFT = {
    (2, "0.5"): (2.5, 0.6),
    (4, "0.5"): (3.8, 0.31),
    (2, "0.8"): (2.0, 0.7),
    (4, "0.8"): (3.0, 0.5),
}


def _sweep_row(
    family: str,
    param: str,
    held: str,
    method: str,
    value: str,
    value_num: float | None,
    conc: int,
    acc: float,
    s: float,
    lo: float,
    hi: float,
    engine_acc: float | None = None,
) -> dict:
    return {
        **WIN,
        "workload": CHAT,
        "concurrency": conc,
        "family": family,
        "param": param,
        "held": held,
        "method": method,
        "value": value,
        "value_num": value_num,
        "speedup": s,
        "ci_low": lo,
        "ci_high": hi,
        "significant": lo > 1 or hi < 1,
        "accept_length": acc,
        "engine_accept_length": engine_acc,
        "n": 12,
    }


def _best_flags(ps: pd.DataFrame) -> pd.DataFrame:
    group = ["engine", "tp", "workload", "max_tokens", "concurrency", "family", "param", "held"]
    ps["best_speedup"] = ps["speedup"] == ps.groupby(group)["speedup"].transform("max")
    ps["best_acceptance"] = ps["accept_length"] == ps.groupby(group)["accept_length"].transform(
        "max"
    )
    return ps


def param_sweep() -> pd.DataFrame:
    rows = [
        _sweep_row(
            "ddtree",
            "budget",
            "",
            f"ddtree-b{b}",
            str(b),
            float(b),
            c,
            *v,
            engine_acc=v[0] + 0.1 if b == 16 else None,
        )
        for c, by in DDTREE.items()
        for b, v in by.items()
    ]
    rows += [
        _sweep_row(
            "draft_simple",
            "n_max",
            f"p_min={p}",
            f"draft-n{n}-p{p}",
            str(n),
            float(n),
            1,
            a,
            s,
            s - 0.05,
            s + 0.05,
        )
        for (n, p), (a, s) in DRAFT.items()
    ]
    rows += [
        _sweep_row("ngram", "mode", "", f"ngram-{m}", m, None, 1, a, s, s - 0.1, s + 0.1)
        for m, a, s in (("wide", 1.3, 1.05), ("fast", 1.02, 0.8))
    ]
    return _best_flags(pd.DataFrame(rows))


def _decomp(
    method: str, conc: int, acc: float | None, cost: float | None, s: float, limited: str | None
) -> dict:
    return {
        **WIN,
        "workload": CHAT,
        "concurrency": conc,
        "method": method,
        "n_prompts": 3,
        "n_runs": 1,
        "n": 6,
        "n_baseline": 6,
        "n_verified": 6 if acc else 2,
        "acceptance_gain": acc,
        "step_time_s": cost and 0.005 * cost,
        "baseline_token_time_s": cost and 0.005,
        "step_cost": cost,
        "speedup": s,
        "ci_low": s - 0.05,
        "ci_high": s + 0.05,
        "limited_by": limited,
        "significant": s + 0.05 < 1 or s - 0.05 > 1,  # Holm's verdict (the speedup table's)
    }


def decomposition_rows() -> pd.DataFrame:
    return pd.DataFrame(
        [
            _decomp("ddtree-b16", 1, 4.5, 4.5 / 1.9, 1.9, None),
            _decomp("draft-n4-p0.5", 1, 3.8, 12.4, 0.31, "step cost"),
            _decomp("draft-n4-p0.5", 4, 3.7, 9.0, 0.40, "step cost"),
            _decomp("ngram-fast", 1, 1.02, 1.2, 0.8, "acceptance"),
            _decomp("ngram-wide", 4, None, None, 1.05, None),
        ]
    )


def _best(
    family: str, kind: str, load: float, method: str | None, label: str, s: float, n: int = 3
) -> dict:
    return {
        **WIN,
        "workload": CHAT,
        "load_kind": kind,
        "load": load,
        "family": family,
        "method": method,
        "params_label": label if method else None,
        "speedup": s if method else None,
        "ci_low": s - 0.1 if method else None,
        "ci_high": s + 0.1 if method else None,
        "n_candidates": n,
        "decision": "method" if method else "off",
    }


def best_rows() -> pd.DataFrame:
    return pd.DataFrame(
        [
            _best("ddtree", "concurrency", 1, "ddtree-b16", "budget=16", 1.9),
            _best("ddtree", "concurrency", 4, None, "", 0),
            _best("draft_simple", "concurrency", 1, None, "", 0, 4),
            _best("(any)", "concurrency", 1, "ddtree-b16", "budget=16", 1.9, 9),
            _best("(any)", "concurrency", 4, None, "", 0, 9),
            _best("ddtree", "rate", 2, "ddtree-b8", "budget=8", 1.4),
            _best("ddtree", "rate", 8, "ddtree-b8", "budget=8", 1.2),
            _best("ddtree", "rate", 32, None, "", 0),
        ]
    )


def families() -> pd.DataFrame:
    rows = [("autoregressive", "autoregressive", "", 0)]
    rows += [(f"ddtree-b{b}", "ddtree", f"budget={b}", 1) for b in (8, 16, 64)]
    rows += [(f"draft-n{n}-p{p}", "draft_simple", f"n_max={n}, p_min={p}", 2) for n, p in DRAFT]
    rows += [(f"ngram-{m}", "ngram", f"mode={m}", 1) for m in ("wide", "fast")]
    return pd.DataFrame(
        [
            {"campaign_id": CAMPAIGN, "method": m, "family": f, "params_label": p, "n_params": n}
            for m, f, p, n in rows
        ]
    )


def detail_rows() -> dict[str, pd.DataFrame]:
    """vLLM-style details for ddtree-b16 at chat, concurrency 1: 100 verify steps that
    accepted 0..3 draft tokens 10, 20, 30 and 40 times."""
    key = {**WIN, "engine": "vllm", "workload": CHAT, "concurrency": 1, "method": "ddtree-b16"}
    hist = [10, 20, 30, 40]
    pa = [
        {
            **key,
            "position": k,
            "steps": 100,
            "accepted": sum(hist[k:]),
            "rate": sum(hist[k:]) / 100,
            "source": "histogram",
        }
        for k in (1, 2, 3)
    ]
    ah = [{**key, "accepted": j, "steps": n, "share": n / 100} for j, n in enumerate(hist)]
    return {"position_acceptance": pd.DataFrame(pa), "accepted_histogram": pd.DataFrame(ah)}


def tables(detail: bool = False) -> dict[str, pd.DataFrame]:
    empty = {k: v.iloc[0:0] for k, v in detail_rows().items()}
    return {
        "method_families": families(),
        "param_sweep": param_sweep(),
        "speedup_decomposition": decomposition_rows(),
        "best_setting": best_rows(),
        **(detail_rows() if detail else empty),
    }


@pytest.fixture(scope="module")
def spec_db(report_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return with_tables(report_db, tmp_path_factory.mktemp("spec") / "s.duckdb", tables())


@pytest.fixture(scope="module")
def detail_db(report_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return with_tables(report_db, tmp_path_factory.mktemp("det") / "d.duckdb", tables(True))


def test_family_findings_say_where_acceptance_and_speedup_peak(spec_db: Path) -> None:
    """The sentences page 1's summary gains (section.summary: marked Unicode), as the PDF
    prints them, and as the HTML and the JSON export's plain text read."""
    marked = section.summary(load(spec_db))
    found = [latex(s) for s in marked]
    assert plain(marked[0]).startswith(
        f"ddtree over budget: on {CHAT}, concurrency 1, acceptance keeps rising to budget 64 "
        "(6.10) while speedup peaks at budget 16 (1.90\u00d7 [1.80, 2.00]); "
    )
    assert found[0] == (
        f"\\emph{{ddtree}} over budget: on {CHAT_TEX}, concurrency 1, acceptance keeps rising "
        "to budget 64 (6.10) while speedup peaks at budget 16 (1.90$\\times$ {[}1.80, 2.00{]}); "
        f"on {CHAT_TEX}, concurrency 4, acceptance and speedup both peak at budget 16 (4.50; "
        "1.10$\\times$ {[}0.95, 1.20{]}, not above 1)."
    )
    assert found[1] == (
        f"\\emph{{draft\\_simple}} over n\\_max: on {CHAT_TEX}, concurrency 1 with "
        "p\\_min=0.5, acceptance keeps rising to n\\_max 4 (3.80) while speedup peaks at "
        "n\\_max 2 (0.60$\\times$ {[}0.55, 0.65{]}, not above 1); on "
        f"{CHAT_TEX}, concurrency 1 with p\\_min=0.8, acceptance keeps rising to n\\_max 4 "
        "(3.00) while speedup peaks at n\\_max 2 (0.70$\\times$ {[}0.65, 0.75{]}, not above 1)."
    )
    assert found[2].startswith(
        f"\\emph{{ngram}} over mode: on {CHAT_TEX}, concurrency 1, "
        "acceptance and speedup both peak at mode wide (1.30; 1.05"
    )


def test_a_peak_inside_the_range_is_not_called_rising() -> None:
    line = pd.DataFrame(
        [
            _sweep_row("f", "k", "", f"m{k}", str(k), float(k), 1, a, s, 1.1, 2)
            for k, a, s in ((2, 2.0, 1.5), (4, 3.0, 1.2), (8, 2.5, 1.1))
        ]
    )
    assert sweep.clause(_best_flags(line)) == (
        "acceptance peaks at k 4 (3.00) while speedup peaks at k 2 (1.50\u00d7 [1.10, 2.00])"
    )


def test_decomposition_names_who_loses_on_what_and_the_undecomposed(spec_db: Path) -> None:
    dec = section.section(load(spec_db), NO_FIGS)["decomposition"]
    assert dec["losers"] == (
        "Where a method is significantly slower than the baseline (Holm, the "
        "campaign\\textquoteright{}s family "
        "of claims; its acceptance gain is then below its step cost), it loses on step "
        "cost, not acceptance: draft-n4-p0.5 (acceptance gain 3.80, step cost 12.40: "
        f"0.31$\\times$ on {CHAT_TEX}, concurrency 1; 2 windows); and on acceptance (at most "
        "1.05 tokens per verify step): ngram-fast (acceptance gain 1.02, step cost 1.20: "
        f"0.80$\\times$ on {CHAT_TEX}, concurrency 1)."
    )
    # ngram-wide at concurrency 4: 2 of its 6 requests have a verify count, no factors
    assert dec["unknown"] == (
        "1 method window(s) are not decomposed, because some of the requests their speedup "
        f"rests on carry no verify count: ngram-wide on {CHAT_TEX}, concurrency 4."
    )
    assert decomposition.losers(decomposition_rows().assign(limited_by=None)) == (
        "No method is slower than the baseline in any window with verify counts."
    )
    # below 1 at the point but not by the interval (ci_high 1.01): not called a loss
    assert decomposition.losers(decomposition_rows().assign(ci_high=1.01)) == (
        "No method is slower than the baseline in any window with verify counts."
    )
    # below 1 by the raw interval but not after Holm's adjustment: not called a loss
    assert decomposition.losers(decomposition_rows().assign(significant=False)) == (
        "No method is slower than the baseline in any window with verify counts."
    )
    assert decomposition.unknown(decomposition_rows().iloc[:4]) is None


def _table_rows(tex: str) -> list[str]:
    return [line.split("\\\\")[0].strip() for line in tex.splitlines() if "&" in line]


def test_best_setting_table_and_deployment_sentences(spec_db: Path) -> None:
    sec = section.section(load(spec_db), NO_FIGS)
    assert [str(s) for s in sec["deploy"]] == [
        f"\\emph{{ddtree}} on {CHAT_TEX}: budget=16 up to concurrency 1, off from 4.",
        f"\\emph{{ddtree}} on {CHAT_TEX} (open loop): budget=8 up to 8 req/s, off from 32 req/s.",
        f"\\emph{{draft\\_simple}} on {CHAT_TEX}: off at concurrency 1.",
        f"Any method on {CHAT_TEX}: ddtree-b16 up to concurrency 1, off from 4.",
    ]
    assert _table_rows(sec["best_table"])[1:] == [
        f"{CHAT_TEX}&64&1 conc.&ddtree&budget=16&1.90&{{[}}1.80, 2.00{{]}}&3",
        f"{CHAT_TEX}&64&4 conc.&ddtree&off&&&3",
        f"{CHAT_TEX}&64&2 req/s&ddtree&budget=8&1.40&{{[}}1.30, 1.50{{]}}&3",
        f"{CHAT_TEX}&64&8 req/s&ddtree&budget=8&1.20&{{[}}1.10, 1.30{{]}}&3",
        f"{CHAT_TEX}&64&32 req/s&ddtree&off&&&3",
        f"{CHAT_TEX}&64&1 conc.&draft\\_simple&off&&&4",
        f"{CHAT_TEX}&64&1 conc.&(any)&ddtree-b16&1.90&{{[}}1.80, 2.00{{]}}&9",
        f"{CHAT_TEX}&64&4 conc.&(any)&off&&&9",
    ]


def test_a_plan_reads_as_runs_of_the_same_choice() -> None:
    def group(*choices: tuple[float, str | None]) -> pd.DataFrame:
        return pd.DataFrame([_best("k", "concurrency", c, m, m or "", 1.5) for c, m in choices])

    assert best.plan(group((1, "K=4"), (8, "K=4"), (16, "K=2"), (32, None), (64, None))) == (
        "K=4 up to concurrency 8, K=2 at 16, off from 32"
    )
    assert best.plan(group((1, "K=4"), (2, "K=2"), (4, "K=2"), (8, None))) == (
        "K=4 up to concurrency 1, K=2 from 2 to 4, off from 8"
    )
    assert best.plan(group((1, "K=4"), (4, "K=4"))) == (
        "K=4 at every concurrency measured (1 to 4)"
    )
    alone = pd.DataFrame(
        [_best("dflash", "concurrency", c, m, "", 1.5) for c, m in ((1, "dflash"), (4, None))]
    )
    assert best.plan(alone) == "on up to concurrency 1, off from 4"  # a method of its own


def _points(ax: plt.Axes) -> list[tuple[float, float]]:
    return [
        tuple(map(float, c.get_offsets()[0])) for c in ax.collections if len(c.get_offsets()) == 1
    ]


def _hollow(ax: plt.Axes) -> list[tuple[float, float]]:
    """Points drawn white inside (not significant); rings have no face at all."""
    return [
        tuple(map(float, c.get_offsets()[0]))
        for c in ax.collections
        if len(c.get_offsets()) == 1
        and len(c.get_facecolor())
        and np.allclose(c.get_facecolor()[0][:3], 1.0)
    ]


def test_sweep_charts_draw_a_grey_line_per_held_on_the_right_axis() -> None:
    ps = param_sweep()
    draft = ps[ps["family"] == "draft_simple"]
    palette = charts.method_palette(ps["method"])
    fig, (left, right) = plt.subplots(1, 2)
    sweep.plot_speedup_by_value(right, draft, palette)
    lines = [ln for ln in right.lines if ln.get_color() == sweep.LINE]
    assert sorted(map(list, (ln.get_ydata() for ln in lines))) == [[0.6, 0.31], [0.7, 0.5]]
    assert right.get_xscale() == "linear" and right.get_yscale() == "log"  # 2..4: not 4x
    assert [t.get_text() for t in right.get_xticklabels()] == ["2", "4"]
    assert not _hollow(right)  # every draft_simple interval lies below 1: all significant
    dd = ps[(ps["family"] == "ddtree") & (ps["concurrency"] == 1)]
    sweep.plot_accept_length_by_value(left, dd, palette)
    assert left.get_xscale() == "log"  # 8..64
    assert (16.0, 4.6) in [(x, round(y, 6)) for x, y in _points(left)]  # the engine's own
    plt.close(fig)
    ng = ps[ps["family"] == "ngram"]
    fig, ax = plt.subplots()
    sweep.plot_speedup_by_value(ax, ng, palette)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["fast", "wide"]  # categorical
    assert _hollow(ax) == [(1.0, 1.05)]  # wide, 1.05 [0.95, 1.15]: not significant
    plt.close(fig)


def test_decomposition_bars_start_at_one_and_mark_the_speedup() -> None:
    frame = decomposition_rows()
    frame = frame[frame["concurrency"] == 1]
    fig, ax = plt.subplots()
    decomposition.plot_factors_by_method(ax, frame, charts.method_palette(frame["method"]))
    bars = [(round(p.get_y(), 6), round(p.get_y() + p.get_height(), 6)) for p in ax.patches]
    assert bars == [
        (1.0, 4.5),
        (1.0, round(4.5 / 1.9, 6)),
        (1.0, 3.8),
        (1.0, 12.4),
        (1.0, 1.02),
        (1.0, 1.2),
    ]
    assert [t.get_text() for t in ax.get_xticklabels()] == [
        "ddtree-b16",
        "draft-n4-p0.5",
        "ngram-fast",
    ]
    diamonds = [ln for ln in ax.lines if ln.get_marker() == "D"]
    assert [list(ln.get_ydata()) for ln in diamonds] == [[1.9], [0.31], [0.8]]
    plt.close(fig)


def test_figures_and_one_legend_entry_per_method(spec_db: Path, tmp_path: Path) -> None:
    data = load(spec_db)
    jobs = dict(section.figure_jobs(data, tmp_path, lambda fig, path: fig))
    assert sorted(jobs) == [
        "spec-decomposition:0",
        "spec-sweep:0-0",
        "spec-sweep:1-0",
        "spec-sweep:2-0",
    ]
    fig = jobs["spec-sweep:1-0"]()  # draft_simple: four methods, two held lines
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == [
        "draft-n2-p0.5",
        "draft-n2-p0.8",
        "draft-n4-p0.5",
        "draft-n4-p0.8",
        "p_min=0.5",
        "p_min=0.8",
        "hollow: not significant",
        "ring: best of its line",
    ]
    assert len(fig.axes) == 2
    plt.close(fig)
    fig = jobs["spec-sweep:0-0"]()  # ddtree: two windows, the engine's own figure at b16
    assert len(fig.axes) == 4
    assert "x: the engine's own figure" in [t.get_text() for t in fig.legends[0].get_texts()]
    plt.close(fig)


def test_a_file_without_the_tables_has_no_section(report_db: Path, tmp_path: Path) -> None:
    empty = with_tables(report_db, tmp_path / "e.duckdb", tables(), empty=True)
    before = render_tex(build_context(load(report_db), NO_FIGS))
    after = render_tex(build_context(load(empty), NO_FIGS))
    assert after == before and "Speculation's knobs" not in after


def _raw_family(path: Path) -> Path:
    """The report fixture's raw rows (llama.cpp counts, no per-request details) with dflash
    and ddtree_b8 declared one family, ``tree``, at budgets 4 and 8."""
    import duckdb

    from specsweep.schema.store import DDL
    from tests.support.fixtures.report import _meta, raw_requests

    with duckdb.connect(str(path)) as con:
        con.execute(DDL.read_text())
        _meta(con)
        con.register("req_df", raw_requests(agentic=False))
        con.execute("INSERT INTO requests BY NAME SELECT * FROM req_df")
        con.executemany(
            "INSERT INTO method_params VALUES (?, ?, 'tree', 'budget', ?, ?)",
            [[CAMPAIGN, "dflash", "4", 4.0], [CAMPAIGN, "ddtree_b8", "8", 8.0]],
        )
    return path


def test_a_long_sweep_is_cut_into_two_figures_and_the_rest_counted() -> None:
    """Ten concurrency levels: two figures of four windows, two windows left out; with a
    second engine, a window's name says which."""
    rows = [
        _sweep_row("k", "k", "", f"k{k}", str(k), float(k), c, 2.0 + k, 1.2, 1.1, 1.3)
        for c in range(1, 11)
        for k in (2, 4)
    ]
    ps = _best_flags(pd.DataFrame(rows))
    data = type("Data", (), {"palette": charts.method_palette(ps["method"]), "param_sweep": ps})
    jobs = [key for key, _ in section.figure_jobs(data, Path("."), lambda fig, path: path)]
    assert jobs == ["spec-sweep:0-0", "spec-sweep:0-1"]
    sw = section.sweeps(ps, {"spec-sweep:0-1": Path("b.pdf"), "spec-sweep:0-0": Path("a.pdf")})
    assert sw[0]["figures"] == ["a.pdf", "b.pdf"] and sw[0]["left_out"] == 2
    assert str(sw[0]["finding"]).endswith("; 6 more window(s).")
    two = pd.concat([ps, ps.assign(engine="vllm", tp=2)])
    key = ("vllm", 2, CHAT, 64, 4)
    assert panels.window_name(key, two) == f"{CHAT}, concurrency 4 (vllm TP2)"
