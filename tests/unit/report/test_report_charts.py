"""Chart functions on small hand-built frames: each draws and saves a non-empty PDF."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from matplotlib.collections import PathCollection

from specsweep.report import charts
from specsweep.report.charts.layout import PANEL_ROW, ratio_figure, save_figure, sweeps_figure
from specsweep.report.figures import slug

METHODS = ["dflash", "autoregressive", "ddtree_b8"]


@pytest.fixture(scope="module")
def palette() -> dict:
    charts.set_theme()
    return charts.method_palette(METHODS)


def _speedup() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "workload": ["chat", "chat", "code", "code"],
            "max_tokens": [64] * 4,
            "concurrency": [1, 1, 1, 1],
            "method": ["dflash", "ddtree_b8"] * 2,
            "speedup": [1.4, 0.98, 1.9, 1.1],
            "ci_low": [1.2, 0.9, 1.7, 0.95],
            "ci_high": [1.6, 1.05, 2.1, 1.3],
            "significant": [True, False, True, False],
        }
    )


def _summary() -> pd.DataFrame:
    rows = [(m, w, c) for m in METHODS for w in ("chat", "code") for c in (1, 4)]
    frame = pd.DataFrame(rows, columns=["method", "workload", "concurrency"])
    frame["accept_length_tw"] = [None if m == "autoregressive" else 2.5 for m, _, _ in rows]
    frame["throughput_tps"] = [10.0 * c * (1.5 if m == "dflash" else 1) for m, _, c in rows]
    return frame


def _requests() -> pd.DataFrame:
    """request_distribution rows: box statistics per method and metric."""
    rows = []
    for m in METHODS:
        for metric, b in (("decode_tps", 10.0 + 5 * (m == "dflash")), ("ttft_s", 0.1)):
            rows.append(
                {
                    "method": m,
                    "metric": metric,
                    "n": 8,
                    "mean": b + 3,
                    "min": b,
                    "whislo": b + 1,
                    "p25": b + 2,
                    "p50": b + 3,
                    "p75": b + 4,
                    "iqr": 2.0,
                    "whishi": b + 6,
                    "max": b + 9,
                }
            )
    return pd.DataFrame(rows)


def _turns() -> pd.DataFrame:
    rows = [(m, t, 0.1 * (t + 1), 100 * (t + 1)) for m in METHODS for t in range(3)]
    return pd.DataFrame(rows, columns=["method", "turn", "ttft_p50_s", "prompt_tokens_p50"])


EIGHT = [f"method_{i}" for i in range(8)]


def _sweep() -> pd.DataFrame:
    """Eight methods at concurrency 1, 4, 16; method_i crosses at 4 when i is even."""
    rows = []
    for i, m in enumerate(EIGHT):
        for c, s in ((1, 1.5 + 0.05 * i), (4, 1.0 + 0.2 * (i % 2)), (16, 0.9)):
            rows.append((m, c, s, s - 0.08, s + 0.08, abs(s - 1) > 0.08, c == 4 and i % 2 == 0))
    return pd.DataFrame(
        rows,
        columns=[
            "method",
            "concurrency",
            "speedup",
            "ci_low",
            "ci_high",
            "significant",
            "is_crossover",
        ],
    )


CASES = [
    (charts.plot_speedup_by_workload, _speedup),
    (charts.plot_accept_length_by_workload, _summary),
    (charts.plot_decode_tps_by_method, _requests),
    (charts.plot_ttft_by_method, _requests),
    (charts.plot_ttft_by_turn, _turns),
    (charts.plot_context_by_turn, _turns),
    (charts.plot_throughput_by_concurrency, _summary),
    (charts.plot_speedup_by_concurrency, _sweep),
]


@pytest.mark.parametrize(("plot", "make"), CASES, ids=[c[0].__name__ for c in CASES])
def test_chart_saves_vector_pdf(plot, make, palette: dict, tmp_path: Path) -> None:
    fig, ax = plt.subplots()
    assert plot(ax, make(), palette) is ax
    out = save_figure(fig, tmp_path / f"{plot.__name__}.pdf")
    data = out.read_bytes()
    assert data.startswith(b"%PDF") and len(data) > 2000


@pytest.mark.parametrize(("plot", "make"), CASES, ids=[c[0].__name__ for c in CASES])
def test_chart_copes_with_empty_frame(plot, make, palette: dict, tmp_path: Path) -> None:
    fig, ax = plt.subplots()
    plot(ax, make().iloc[0:0], palette)
    assert save_figure(fig, tmp_path / "empty.pdf").stat().st_size > 0


def test_palette_baseline_first_and_stable() -> None:
    pal = charts.method_palette(["zeta", "autoregressive", "alpha", "alpha"])
    assert list(pal) == ["autoregressive", "alpha", "zeta"]
    assert len(set(pal.values())) == 3
    assert pal == charts.method_palette(["alpha", "zeta", "autoregressive"])


def test_speedup_colours_follow_palette(palette: dict) -> None:
    fig, ax = plt.subplots()
    charts.plot_speedup_by_workload(ax, _speedup(), palette)
    drawn = dict(zip(*reversed(ax.get_legend_handles_labels())))
    assert tuple(drawn["dflash"].get_facecolor()[0][:3]) == pytest.approx(palette["dflash"])
    assert any(
        line.get_linestyle() == "--" and line.get_ydata()[0] == 1.0 for line in ax.get_lines()
    )
    # two workloads at one load point each: the workload names the points apart
    assert [t.get_text() for t in ax.get_xticklabels()] == ["chat\nc=1", "code\nc=1"]
    plt.close(fig)


def _ticks(ax) -> dict[str, float]:
    return {t.get_text(): t.get_position()[1] for t in ax.get_yticklabels()}


def test_ratio_axis_is_log2_and_symmetric_around_one() -> None:
    """A 10x interval and a 0.3x point: one log-2 axis from 1/m to m, powers of two labelled."""
    fig, ax = plt.subplots()
    charts.ratio_axis(ax, [0.3, 1.1, 10.4, float("nan"), 0.0])
    low, high = ax.get_ylim()
    assert ax.get_yscale() == "log" and low * high == pytest.approx(1.0)
    assert 10.4 < high < 16
    assert _ticks(ax) == {
        "0.125×": 0.125,
        "0.25×": 0.25,
        "0.5×": 0.5,
        "1×": 1.0,
        "2×": 2.0,
        "4×": 4.0,
        "8×": 8.0,
    }
    # a narrow range (0.9x to 1.2x) gets in-between ticks so the axis is not bare
    charts.ratio_axis(ax, [0.9, 1.2])
    assert set(_ticks(ax)) == {"0.8×", "1×", "1.25×"}
    charts.ratio_axis(ax, [0.7, 1.4])  # under 2x either way
    assert set(_ticks(ax)) == {"0.667×", "0.8×", "1×", "1.25×", "1.5×"}
    charts.ratio_axis(ax, [])  # nothing finite: a small axis around 1, no error
    assert ax.get_ylim()[0] * ax.get_ylim()[1] == pytest.approx(1.0)
    plt.close(fig)


# the speedup table's columns the ratio figures read
RATIO_COLUMNS = [
    "workload",
    "max_tokens",
    "concurrency",
    "method",
    "speedup",
    "ci_low",
    "ci_high",
    "significant",
]


def _campaign_like() -> pd.DataFrame:
    """The H200 campaign's shape: 4 workloads, rewrite at 2 max_tokens x 3 concurrencies,
    four methods, one interval up to 10x."""
    points = [("agentic", 128, 1), ("agentic", 128, 4), ("chat", 256, 1), ("chat", 256, 16)]
    points += [("rewrite", mt, c) for mt in (64, 256) for c in (1, 4, 16)]
    points += [("summarize", 128, 1), ("summarize", 128, 4)]
    rows = [
        (w, mt, c, m, 1.0 + 0.1 * i, 0.9, 10.0 if m == "dflash" else 1.3, i % 2 == 0)
        for w, mt, c in points
        for i, m in enumerate(["dflash", "ddtree_b8", "x", "y"])
    ]
    return pd.DataFrame(rows, columns=RATIO_COLUMNS)


def _overlaps(fig) -> list[tuple[str, str]]:
    """Pairs of x tick labels of one panel whose drawn boxes intersect."""
    fig.canvas.draw()
    out = []
    for ax in fig.axes:
        labels = [t for t in ax.get_xticklabels() if t.get_text()]
        boxes = [t.get_window_extent() for t in labels]
        out += [
            (labels[i].get_text(), labels[j].get_text())
            for i in range(len(boxes))
            for j in range(i + 1, len(boxes))
            if boxes[i].overlaps(boxes[j])
        ]
    return out


def _legend_rows(fig) -> list[list[str]]:
    """The figure legend's labels as a reader sees them: rows top to bottom, left to right."""
    fig.canvas.draw()
    spots = {
        t.get_text(): t.get_window_extent() for t in fig.legends[0].get_texts() if t.get_text()
    }
    rows: list[list[str]] = []
    last = None
    for y, lb in sorted(((-(b.y0 + b.y1) / 2, lb) for lb, b in spots.items())):
        if last is None or y - last > 4:  # a new row: more than 4 px lower
            rows.append([])
        rows[-1].append(lb)
        last = y
    return [sorted(row, key=lambda lb: spots[lb].x0) for row in rows]


def test_ratio_figure_panels_per_workload_without_label_overlap(tmp_path: Path) -> None:
    pal = charts.method_palette(["autoregressive", "dflash", "ddtree_b8", "x", "y"])
    fig = ratio_figure(_campaign_like(), charts.plot_speedup_by_workload, pal)
    assert [ax.get_title() for ax in fig.axes] == [
        "agentic",
        "chat",
        "rewrite\nmax_tokens 64",
        "rewrite\nmax_tokens 256",
        "summarize",
    ]
    assert [t.get_text() for t in fig.axes[2].get_xticklabels()] == ["c=1", "c=4", "c=16"]
    assert _overlaps(fig) == []
    # one y axis for all panels, log-2, symmetric around 1, labelled only on the first
    assert {ax.get_ylim() for ax in fig.axes} == {fig.axes[0].get_ylim()}
    assert fig.axes[0].get_ylim()[0] * fig.axes[0].get_ylim()[1] == pytest.approx(1.0)
    assert fig.axes[0].get_ylabel() and not fig.axes[1].get_ylabel()
    # the legend as read, row by row: the methods, then a row saying what the markers mean
    assert _legend_rows(fig) == [
        ["ddtree_b8", "dflash", "x", "y"],
        [
            "filled: significant (Holm-adjusted over the campaign)",
            "hollow: not significant (or no interval)",
        ],
    ]
    assert save_figure(fig, tmp_path / "speedup.pdf").read_bytes().startswith(b"%PDF")


def test_ratio_figure_wraps_rows_past_panel_row(palette: dict) -> None:
    """Nine workloads at three load points each do not fit one row of PANEL_ROW points."""
    rows = [(f"w{w}", 64, c, "dflash", 1.2, 1.1, 1.3, True) for w in range(9) for c in (1, 2, 4)]
    frame = pd.DataFrame(rows, columns=RATIO_COLUMNS)
    fig = ratio_figure(frame, charts.plot_speedup_by_workload, palette)
    tops = sorted({round(ax.get_position().y1, 3) for ax in fig.axes})
    assert len(tops) == -(-9 * 3 // PANEL_ROW)
    assert _overlaps(fig) == []
    plt.close(fig)


def test_the_old_single_axis_layout_did_overlap() -> None:
    """The check above can fail: all 12 load points on one 6.4 in axis overlap."""
    pal = charts.method_palette(["dflash", "ddtree_b8", "x", "y"])
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    charts.plot_speedup_by_workload(ax, _campaign_like(), pal)
    assert _overlaps(fig)
    plt.close(fig)


def test_slug_is_file_safe() -> None:
    assert slug("code_gen/\\input{x}") == "code-gen-input-x"


def test_speedup_by_concurrency_rings_crossovers_and_tells_eight_methods_apart() -> None:
    pal = charts.method_palette(["autoregressive", *EIGHT])
    fig, ax = plt.subplots()
    charts.plot_speedup_by_concurrency(ax, _sweep(), pal)
    handles, labels = ax.get_legend_handles_labels()
    assert labels == [*EIGHT, "crossover"]
    styles = {(h.get_color(), h.get_marker()) for h in handles[:8]}
    assert len(styles) == 8
    rings = handles[-1].get_offsets()
    # four crossovers at concurrency 4, each shifted sideways by less than a fifth of a doubling
    assert len(rings) == 4 and all(4 * 2**-0.2 < x < 4 * 2**0.2 for x in rings[:, 0])
    assert any(
        line.get_linestyle() == "--" and line.get_ydata()[0] == 1.0 for line in ax.get_lines()
    )
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "4", "16"]
    plt.close(fig)


def _facetted() -> pd.DataFrame:
    """speedup_sweep rows (analyze/sql/speedup_sweep.sql; tests/unit/analyze/test_speedup_sweep.py
    builds them from speedup and crossover rows): chat swept at TP1 and TP4, dflash's
    crossover at 4."""
    rows = [
        ("e", tp, "chat $x$", 64, c, m, lo + 0.1, lo, lo + 0.2, lo > 1, m == "dflash" and c == 4)
        for tp in (1, 4)
        for m in ("dflash", "ddtree_b8")
        for c, lo in ((1, 1.2), (4, 0.9 if m == "dflash" else 1.1))
    ]
    key = ["engine", "tp", "workload", "max_tokens", "concurrency", "method"]
    return pd.DataFrame(
        rows, columns=[*key, "speedup", "ci_low", "ci_high", "significant", "is_crossover"]
    )


def test_sweeps_figure_has_a_panel_per_tp_and_one_legend(palette: dict, tmp_path: Path) -> None:
    fig = sweeps_figure(_facetted(), palette)
    assert [ax.get_title() for ax in fig.axes] == [r"chat \$x\$ | TP1", r"chat \$x\$ | TP4"]
    assert _legend_rows(fig) == [
        ["ddtree_b8", "dflash", "crossover"],
        [
            "filled: significant (Holm-adjusted over the campaign)",
            "hollow: not significant (or no interval)",
        ],
    ]
    assert all(ax.get_yscale() == "log" for ax in fig.axes)
    assert save_figure(fig, tmp_path / "concurrency.pdf").read_bytes().startswith(b"%PDF")


def test_energy_ratio_chart_draws_the_ratios_and_names_its_axis(
    palette: dict, tmp_path: Path
) -> None:
    """energy_ratio rows drawn like the speedup chart: one marker per row at its ratio."""
    frame = _speedup().rename(columns={"speedup": "energy_ratio"})
    fig, ax = plt.subplots()
    charts.plot_energy_ratio_by_workload(ax, frame, palette)
    assert ax.get_ylabel() == "J/token vs baseline"
    drawn = sorted(
        float(y)
        for c in ax.collections
        if isinstance(c, PathCollection)
        for _, y in c.get_offsets()
    )
    assert drawn == sorted(frame["energy_ratio"])
    assert save_figure(fig, tmp_path / "energy.pdf").stat().st_size > 0
    fig, ax = plt.subplots()
    charts.plot_energy_ratio_by_workload(ax, frame.head(0), palette)
    assert ax.texts[0].get_text() == "no energy comparison"
    plt.close(fig)


def test_boxes_are_drawn_from_the_distribution_rows(palette: dict) -> None:
    """One box per method in palette order and colour: box p25..p75, median p50, whiskers
    whislo..whishi; no point per request (the frame has none)."""
    fig, ax = plt.subplots()
    charts.plot_decode_tps_by_method(ax, _requests(), palette)
    assert [t.get_text() for t in ax.get_xticklabels()] == list(palette)
    boxes = [p for p in ax.patches]
    fills = [charts.fill(palette[m]) for m in palette]  # seaborn's fill saturation
    assert [tuple(b.get_facecolor()[:3]) for b in boxes] == fills
    dflash = list(palette).index("dflash")
    ys = boxes[dflash].get_path().vertices[:, 1]
    assert (ys.min(), ys.max()) == (17.0, 19.0)
    ends = sorted(
        {
            round(y, 9)
            for line in ax.lines
            for y in line.get_ydata()
            if abs(line.get_xdata()[0] - dflash) < 0.5
        }
    )
    assert ends == [16.0, 17.0, 18.0, 19.0, 21.0]  # whislo, box, median, box, whishi
    assert not ax.collections  # no strip of points
    plt.close(fig)
