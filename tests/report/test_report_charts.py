"""Chart functions on small hand-built frames: each draws and saves a non-empty PDF."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from matplotlib.collections import PathCollection

from report import charts
from report.figures import save_figure, slug, sweep_frame, sweeps_figure

METHODS = ["dflash", "autoregressive", "ddtree_b8"]


@pytest.fixture(scope="module")
def palette() -> dict:
    charts.set_theme()
    return charts.method_palette(METHODS)


def _speedup() -> pd.DataFrame:
    return pd.DataFrame({
        "workload": ["chat", "chat", "code", "code"], "max_tokens": [64] * 4,
        "concurrency": [1, 1, 1, 1], "method": ["dflash", "ddtree_b8"] * 2,
        "speedup": [1.4, 0.98, 1.9, 1.1], "ci_low": [1.2, 0.9, 1.7, 0.95],
        "ci_high": [1.6, 1.05, 2.1, 1.3], "significant": [True, False, True, False]})


def _summary() -> pd.DataFrame:
    rows = [(m, w, c) for m in METHODS for w in ("chat", "code") for c in (1, 4)]
    frame = pd.DataFrame(rows, columns=["method", "workload", "concurrency"])
    frame["accept_length_tw"] = [None if m == "autoregressive" else 2.5 for m, _, _ in rows]
    frame["throughput_tps"] = [10.0 * c * (1.5 if m == "dflash" else 1) for m, _, c in rows]
    return frame


def _requests() -> pd.DataFrame:
    rows = [(m, 10.0 + i + 5 * (m == "dflash"), 0.1 + i / 100) for m in METHODS
            for i in range(8)]
    return pd.DataFrame(rows, columns=["method", "decode_tps", "ttft_s"])


def _turns() -> pd.DataFrame:
    rows = [(m, t, 0.1 * (t + 1), 100 * (t + 1)) for m in METHODS for t in range(3)]
    return pd.DataFrame(rows, columns=["method", "turn", "ttft_p50_s", "prompt_tokens_p50"])


EIGHT = [f"method_{i}" for i in range(8)]


def _sweep() -> pd.DataFrame:
    """Eight methods at concurrency 1, 4, 16; method_i crosses at 4 when i is even."""
    rows = []
    for i, m in enumerate(EIGHT):
        for c, s in ((1, 1.5 + 0.05 * i), (4, 1.0 + 0.2 * (i % 2)), (16, 0.9)):
            rows.append((m, c, s, s - 0.08, s + 0.08, abs(s - 1) > 0.08,
                         c == 4 and i % 2 == 0))
    return pd.DataFrame(rows, columns=["method", "concurrency", "speedup", "ci_low", "ci_high",
                                       "significant", "is_crossover"])


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
    legend = {t.get_text(): h for t, h in zip(ax.get_legend().get_texts(),
                                              ax.get_legend().legend_handles)}
    assert tuple(legend["dflash"].get_facecolor()[0][:3]) == pytest.approx(palette["dflash"])
    assert any(line.get_linestyle() == "--" and line.get_ydata()[0] == 1.0
               for line in ax.get_lines())
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
    assert any(line.get_linestyle() == "--" and line.get_ydata()[0] == 1.0
               for line in ax.get_lines())
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "4", "16"]
    plt.close(fig)


def _facetted() -> pd.DataFrame:
    """Speedup and crossover rows: chat swept at TP1 and TP4, code at one level only."""
    sp, cx = [], []
    for tp in (1, 4):
        for m in ("dflash", "ddtree_b8"):
            for c, lo in ((1, 1.2), (4, 0.9 if m == "dflash" else 1.1)):
                sp.append(("e", tp, "chat $x$", 64, c, m, lo + 0.1, lo, lo + 0.2, lo > 1))
            cx.append(("e", tp, "chat $x$", 64, m, "crosses" if m == "dflash" else "always pays",
                       4 if m == "dflash" else None))
            sp.append(("e", tp, "code", 64, 1, m, 1.5, 1.4, 1.6, True))
            cx.append(("e", tp, "code", 64, m, "single level", None))
    key = ["engine", "tp", "workload", "max_tokens"]
    speed = pd.DataFrame(sp, columns=[*key, "concurrency", "method", "speedup", "ci_low",
                                      "ci_high", "significant"])
    cross = pd.DataFrame(cx, columns=[*key, "method", "status", "crossover_concurrency"])
    return sweep_frame(speed, cross)


def test_sweep_frame_keeps_swept_settings_and_marks_crossovers() -> None:
    frame = _facetted()
    assert set(frame["workload"]) == {"chat $x$"} and len(frame) == 8
    marked = frame[frame["is_crossover"]]
    assert set(zip(marked["method"], marked["concurrency"])) == {("dflash", 4)}
    assert len(marked) == 2  # once per tp
    assert sweep_frame(frame, None).empty


def test_sweeps_figure_has_a_panel_per_tp_and_one_legend(palette: dict, tmp_path: Path) -> None:
    fig = sweeps_figure(_facetted(), palette)
    assert [ax.get_title() for ax in fig.axes] == [r"chat \$x\$ | TP1", r"chat \$x\$ | TP4"]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [
        "ddtree_b8", "dflash", "crossover"]
    assert save_figure(fig, tmp_path / "crossover.pdf").read_bytes().startswith(b"%PDF")


def test_energy_ratio_chart_draws_the_ratios_and_names_its_axis(palette: dict,
                                                                 tmp_path: Path) -> None:
    """energy_ratio rows drawn like the speedup chart: one marker per row at its ratio."""
    frame = _speedup().rename(columns={"speedup": "energy_ratio"})
    fig, ax = plt.subplots()
    charts.plot_energy_ratio_by_workload(ax, frame, palette)
    assert ax.get_ylabel() == "J/token vs baseline"
    drawn = sorted(float(y) for c in ax.collections if isinstance(c, PathCollection)
                   for _, y in c.get_offsets())
    assert drawn == sorted(frame["energy_ratio"])
    assert save_figure(fig, tmp_path / "energy.pdf").stat().st_size > 0
    fig, ax = plt.subplots()
    charts.plot_energy_ratio_by_workload(ax, frame.head(0), palette)
    assert ax.texts[0].get_text() == "no energy comparison"
    plt.close(fig)
