"""What page 1 and the threats say about the experiment's design (issue 36, items 5 and the
noise floor), on hand-built analysis rows: the one Holm family and its m, no point ratio
beside a significance column unlabelled, no bare single-window throughput ratio after "no
significant speedup", the grey bands from the start spread (not from the A/A control), the
rounds, start sd and drift per start, and the categories labelled as a family of their own."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PolyCollection

from specsweep.report import charts, findings
from specsweep.report.context import workload_columns
from specsweep.report.data import ReportData
from specsweep.report.findings import design
from specsweep.report.speculation import categories
from specsweep.report.text import code

KEY = {"campaign_id": "c1", "engine": "llama.cpp", "tp": 1, "max_tokens": 64}


def _claims(n: int, **extra: object) -> pd.DataFrame:
    return pd.DataFrame(
        {**KEY, "workload": "chat", "concurrency": range(1, n + 1), "method": "ngram",
         "is_control": False, "p_value": 0.01, **extra}
    )  # fmt: skip


def _data(**frames: pd.DataFrame) -> ReportData:
    empty = pd.DataFrame()
    defaults = {"speedup": empty, "services": empty, "config_summary": empty}
    return ReportData(
        campaign={"n_measured": 10, "campaign_id": "c1"},
        environment=empty,
        distribution=empty,
        best_config=empty,
        agentic=empty,
        **(defaults | frames),
    )


# --- one family -------------------------------------------------------------------------


def test_page_one_names_its_family_and_m() -> None:
    """4 speedups, 2 energy ratios and 2 TPOT ratios (a third untested, the control left
    out) adjusted together: m = 8."""
    data = _data(
        speedup=_claims(4, n_family=8),
        energy_ratio=_claims(2, n_family=8),
        rate_speedup=_claims(3, n_family=8)
        .assign(p_value=[0.01, 0.02, np.nan])
        .pipe(lambda f: pd.concat([f, f.iloc[:1].assign(is_control=True)])),
    )
    text = design.family_sentence(data)
    assert "The claims on this page are one family" in text
    assert (
        "m = 8 tested claims together (4 decode speedup(s), 2 energy ratio(s), 2 open-loop" in text
    )
    assert "breakdown with a Holm family of their own" in text


def test_a_file_adjusted_in_separate_families_says_so() -> None:
    data = _data(speedup=_claims(4, n_family=4), energy_ratio=_claims(2, n_family=2))
    text = design.family_sentence(data)
    assert "separate Holm families (decode speedup(s) over 4; energy ratio(s) over 2)" in text
    assert code("specsweep analyze") in text  # marked as code (report.text)


def test_the_summary_states_the_family_and_no_bare_throughput_ratio() -> None:
    """Issue 36: "the best aggregate throughput ratio is ... at 1.51x (a single window, no
    CI)" right after "no significant speedup" read as a finding; it is gone, and the family
    is on page 1."""
    sp = _claims(2, n_family=2, speedup=[1.1, 1.2], ci_low=[0.9, 0.95], ci_high=[1.3, 1.5],
                 significant=False, throughput_speedup=[1.3, 1.51])  # fmt: skip
    data = _data(speedup=sp, config_summary=pd.DataFrame({"accept_length_tw": []}))
    text = " ".join(str(s) for s in findings.summary(data))
    assert "no significant speedup" in text
    assert "aggregate throughput ratio" not in text and "no CI" not in text
    method = " ".join(findings.method(data))  # the family is in the method, before the summary
    assert "The claims on this page are one family" in method and "m = 2 tested" in method


def test_no_point_ratio_beside_the_significance_column_without_saying_so() -> None:
    headers = [c.header for c in workload_columns()]
    assert "sig." in headers
    ratios = [h for h in headers if "ratio" in h]
    assert ratios and all(h.endswith("(point estimate)") for h in ratios)


def test_the_categories_are_labelled_their_own_family() -> None:
    rows = pd.DataFrame(
        {"category": ["writing", "math"], "method": "ngram", "is_control": False,
         "ci_low": [1.1, np.nan], "ci_high": [1.3, np.nan], "n_prompts": [5, 2],
         "significant": [True, None], "n_family": 2}
    )  # fmt: skip
    text = categories.summary(rows)
    assert "Their own Holm family (a breakdown, apart from the campaign's claims): m = 2" in text


# --- the noise floor ----------------------------------------------------------------------


def _bands(ax: plt.Axes) -> list[tuple[float, float]]:
    out = []
    for c in ax.collections:
        if isinstance(c, PolyCollection):
            y = c.get_paths()[0].vertices[:, 1]
            out.append((round(float(y.min()), 4), round(float(y.max()), 4)))
    return out


def _frame(**extra: object) -> pd.DataFrame:
    return pd.DataFrame(
        {"workload": "chat", "max_tokens": 64, "concurrency": [1, 4], "method": "ngram",
         "speedup": [1.3, 1.1], "ci_low": [1.1, 0.9], "ci_high": [1.5, 1.3],
         "significant": [True, False], **extra}
    )  # fmt: skip


def test_the_grey_bands_are_the_start_spread_not_the_aa_control() -> None:
    """start_spread 1.25 at c=1 and 1.1 at c=4 draw [0.8, 1.25] and [0.909, 1.1]; an A/A
    control's own ratio (1.5) draws no band of its own, only its grey x."""
    charts.set_theme()
    palette = charts.method_palette(["autoregressive", "ngram"])
    fig, ax = plt.subplots()
    frame = _frame(start_spread=[1.25, 1.1], aa_speedup=[1.5, 1.5], is_control=False)
    control = frame.iloc[:1].assign(method="autoregressive-aa", speedup=1.5, is_control=True)
    charts.plot_speedup_by_workload(ax, pd.concat([frame, control]), palette)
    assert sorted(_bands(ax)) == [(0.8, 1.25), (0.9091, 1.1)]
    marks = [line for line in ax.lines if line.get_marker() == "x"]
    assert len(marks) == 1 and marks[0].get_ydata()[0] == pytest.approx(1.5)
    legend = [label for _, label in charts.noise_legend(frame)]
    assert legend == ["grey band: two starts of one service, 95%"]
    plt.close(fig)
    fig, ax = plt.subplots()
    charts.plot_speedup_by_workload(ax, _frame(aa_speedup=[1.5, 0.8]), palette)
    assert _bands(ax) == []  # an A/A ratio is one draw of a start, not the noise floor
    plt.close(fig)


def _variance(**extra: object) -> pd.DataFrame:
    return pd.DataFrame(
        {**KEY, "metric": "decode_tps", "load": "concurrency", "level": [1.0, 4.0],
         "start_sd": [0.031, 0.052], "df": [12.0, 6.0], "start_spread": [1.09, 1.18],
         "drift_per_start": [0.004, -0.012], "drift_low": [-0.002, -0.03],
         "drift_high": [0.01, 0.006], "contrasts": 4, "starts": 9, "configs": 3, "rounds": 3,
         "windows": 2, "pooled": False, "reason": None, **extra}
    )  # fmt: skip


def _services(rounds: int) -> pd.DataFrame:
    return pd.DataFrame(
        [{"config_id": f"cfg-{m}", "method": m, "run": r} for m in ("ar", "ngram")
         for r in range(1, rounds + 1)]
    )  # fmt: skip


def test_the_threats_give_rounds_start_sd_and_drift_with_its_interval() -> None:
    data = _data(start_variance=_variance(), services=_services(3))
    notes = " ".join(design.start_notes(data))
    assert "Each configuration was started in 3 round(s)" in notes
    assert (
        "llama.cpp TP1 concurrency 1: start sd 3.1% (12 df, 9 starts of 3 configurations), "
        "drift +0.4% per start [-0.2%, +1.0%]"
    ) in notes
    assert "concurrency 4: start sd 5.2% (6 df" in notes
    floor = design.noise_floor(data)
    assert "x = 1.09 to 1.18 over 2 stratum(s)" in floor and "3.1% to 5.2%" in floor


def test_one_start_per_configuration_prints_no_interval_and_says_why() -> None:
    one = "one service start per configuration: the start-to-start variance was not sampled"
    side = (
        "one service start per side: how far another start would land was not sampled "
        "(plan repeat: 2 or more)"
    )
    sv = _variance(start_sd=np.nan, df=np.nan, start_spread=np.nan, reason=one,
                   drift_per_start=np.nan)  # fmt: skip
    sp = _claims(2, p_value=np.nan, ci_low=np.nan, ci_high=np.nan, speedup=1.2, ci_reason=side)
    data = _data(start_variance=sv, services=_services(1), speedup=sp)
    notes = " ".join(design.start_notes(data))
    assert "Each configuration was started once (one round)" in notes
    assert f"none ({one})" in notes
    assert "2 of 2 speedup comparison(s) print no interval" in notes and side in notes
    assert f"no start variance was estimated ({one} (2))" in design.noise_floor(data)
    assert "No claim of this campaign has an interval" in design.family_sentence(data)
