"""The open-loop part's charts: latency, goodput and SLO attainment, TPOT speedup and schedule
lag against the offered rate, one pure function per figure (as :mod:`report.charts`).

Each draws the rows of one analysis table as it is (open_windows; the goodput chart
rate_points', a swept rate's windows over the rounds' starts; the speedup chart rate_sweep's):
a line per method in its palette colour and marker, saturated points hollow, points behind
schedule crossed (x).
Where a figure exists twice, from the scheduled send and from the actual send (TTFT,
attainment, goodput), the from-schedule one is the solid line with markers and the from-send
one a thin dashed line of the same colour beside it: the gap between them is the wait in the
client's own queue, which from-send figures leave out (docs/open-loop-latency.md).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.ticker import NullLocator

from specsweep.report import charts
from specsweep.report.latex import fmt_num

SETTING = ["tp", "workload", "max_tokens"]
# (from-schedule column, its from-send twin or None, axis label)
LATENCY = (
    ("ttft_from_schedule_p50_s", "ttft_p50_s", "TTFT p50 (ms)"),
    ("ttft_from_schedule_p99_s", "ttft_p99_s", "TTFT p99 (ms)"),
    ("tpot_p50_s", None, "TPOT p50 (ms)"),
    ("tpot_p99_s", None, "TPOT p99 (ms)"),
)
# drawn only: the rule itself is open_windows.behind_schedule (open_windows.sql)
BEHIND_GROWTH = 0.1
SOLID_DASHED = [
    (Line2D([], [], color="0.35", marker="o", ms=4), "from scheduled send"),
    (Line2D([], [], color="0.35", ls="--", lw=0.9), "from actual send"),
]


def flag(frame: pd.DataFrame, col: str) -> np.ndarray:
    """A boolean column as a numpy mask, NULL (or a missing column) as False."""
    if col not in frame:
        return np.zeros(len(frame), bool)
    return frame[col].astype("boolean").fillna(False).to_numpy(bool)


def windows(ow: pd.DataFrame) -> pd.DataFrame:
    """open_windows with ``x``, the rate a window is drawn at: its offered rate, or for a
    ramp or trace replay (no single rate) its scheduled rate."""
    if ow.empty:
        return ow
    return ow.assign(x=ow["rate"].astype(float).fillna(ow["scheduled_rps"].astype(float)))


def settings(ow: pd.DataFrame) -> list[tuple[tuple, pd.DataFrame]]:
    """(tp, workload, max_tokens) -> its windows, in order."""
    return list(ow.groupby(SETTING, sort=True)) if not ow.empty else []


def title(key: tuple, ow: pd.DataFrame) -> str:
    """A setting's name: workload, plus max_tokens and TP where those vary."""
    tp, workload, mt = key
    out = str(workload)
    if ow.loc[ow["workload"] == workload, "max_tokens"].nunique() > 1:
        out += f", max_tokens {mt}"
    return out + (f", TP{tp}" if ow["tp"].nunique() > 1 else "")


def _marker(palette: charts.Palette, method: str) -> str:
    return charts.MARKERS[list(palette).index(method) % len(charts.MARKERS)]


def _methods(palette: charts.Palette, frame: pd.DataFrame) -> list[str]:
    return [m for m in palette if m in set(frame["method"])]


def rate_axis(ax: Axes, xs: pd.Series) -> None:
    """A rate x axis: log-2 when the rates span 4x or more, ticks at the rates (up to 8)."""
    rates = sorted({float(v) for v in xs if np.isfinite(v) and v > 0})
    if len(rates) > 1 and rates[-1] / rates[0] >= 4:
        ax.set_xscale("log", base=2)
        ax.xaxis.set_minor_locator(NullLocator())
    if 0 < len(rates) <= 8:
        ax.set_xticks(rates, [fmt_num(r, "g") for r in rates])
    ax.set_xlabel("offered rate (req/s)")


def plot_by_rate(
    ax: Axes,
    frame: pd.DataFrame,
    y: str,
    palette: charts.Palette,
    scale: float = 1.0,
    band: tuple[str, str] | None = None,
) -> Axes:
    """``y`` (times ``scale``) against the rate, a line per method through its fixed-rate
    windows (ramps and trace replays are lone points at their scheduled rate), ``band`` as
    error bars; saturated windows hollow, windows behind schedule crossed (x)."""
    for method in _methods(palette, frame):
        sub = frame[frame["method"] == method].dropna(subset=[y]).sort_values("x")
        colour, marker = palette[method], _marker(palette, method)
        x, v = sub["x"].to_numpy(float), sub[y].to_numpy(float) * scale
        if band:
            lo, hi = (sub[c].to_numpy(float) * scale for c in band)
            ax.errorbar(
                x,
                v,
                yerr=np.abs(np.vstack([v - lo, hi - v])),
                fmt="none",
                ecolor=colour,
                capsize=2,
                lw=1,
            )
        fixed = sub["rate"].notna().to_numpy(bool)
        ax.plot(x[fixed], v[fixed], color=colour, marker=marker, ms=5, lw=1.2, zorder=3)
        ax.plot(x[~fixed], v[~fixed], ls="none", color=colour, marker=marker, ms=5, zorder=3)
        sat, behind = flag(sub, "saturated"), flag(sub, "behind_schedule")
        ax.scatter(
            x[sat], v[sat], marker=marker, s=16, facecolor="white", edgecolor=colour, zorder=4
        )
        ax.scatter(x[behind], v[behind], marker="x", s=40, color="black", lw=1, zorder=5)
    rate_axis(ax, frame["x"])
    return ax


def plot_beside(
    ax: Axes, frame: pd.DataFrame, y: str, palette: charts.Palette, scale: float = 1.0
) -> Axes:
    """The from-send twin of a from-schedule figure: a thin dashed line per method through
    its fixed-rate windows, no markers (nothing when the column is absent: an older file)."""
    if y not in frame:
        return ax
    for method in _methods(palette, frame):
        sub = frame[(frame["method"] == method) & frame["rate"].notna()].dropna(subset=[y])
        sub = sub.sort_values("x")
        ax.plot(
            sub["x"].to_numpy(float),
            sub[y].to_numpy(float) * scale,
            ls="--",
            lw=0.9,
            color=palette[method],
            zorder=2,
        )
    return ax


def _legend(
    fig: plt.Figure,
    palette: charts.Palette,
    methods: list[str],
    extra: list[tuple[Line2D, str]] | None = None,
    hollow: bool = True,
) -> None:
    rows = [
        (Line2D([], [], color=palette[m], marker=_marker(palette, m), ms=5), charts.plain(m))
        for m in methods
    ] + (extra or [])
    rows += [
        (Line2D([], [], ls="none", marker="o", ms=5, mfc="white", mec="0.35"), "hollow: saturated")
    ][: int(hollow)]
    rows += [(Line2D([], [], ls="none", marker="x", ms=6, color="black"), "x: behind schedule")]
    fig.legend(
        *zip(*rows),
        loc="outside lower center",
        fontsize="small",
        frameon=False,
        ncol=min(len(rows), 4),
    )


def _primary(frame: pd.DataFrame, col: str, twin: str | None) -> str:
    """The from-schedule column, or its from-send twin in a file analysed before it."""
    return col if col in frame or twin is None else twin


def latency_figure(frame: pd.DataFrame, palette: charts.Palette) -> plt.Figure:
    """TTFT (from the scheduled send, solid; from the actual send, dashed) and TPOT p50/p99
    (steady requests, ms) against the rate, one setting."""
    fig, axes = plt.subplots(2, 2, figsize=(6.4, 4.6), layout="constrained")
    for ax, (col, twin, label) in zip(axes.flat, LATENCY):
        plot_by_rate(ax, frame, _primary(frame, col, twin), palette, 1000.0)
        if twin and col in frame:
            plot_beside(ax, frame, twin, palette, 1000.0)
        ax.set_ylabel(label)
    axes[0, 0].set_xlabel("")
    axes[0, 1].set_xlabel("")
    _legend(fig, palette, _methods(palette, frame), SOLID_DASHED)
    return fig


def goodput_figure(frame: pd.DataFrame, palette: charts.Palette, target: float) -> plt.Figure:
    """Goodput (95% interval; none for a window behind schedule) against the rate with the
    y = x line of the offered rate, and SLO attainment (%) with the target as a horizontal
    line, one setting (rate_points: a swept rate's interval is over the rounds' starts, a
    ramp's its one window's); both from the scheduled send, the from-send figures dashed."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(6.4, 3.0), layout="constrained")
    plot_by_rate(left, frame, "goodput_rps", palette, band=("goodput_lo", "goodput_hi"))
    plot_beside(left, frame, "goodput_from_send_rps", palette)
    lo, hi = frame["x"].min(), frame["x"].max()
    left.plot([lo, hi], [lo, hi], ls=":", color="0.4", lw=1)
    left.set_ylabel("goodput (req/s)")
    plot_by_rate(
        right, frame, "attainment", palette, 100.0, band=("attainment_lo", "attainment_hi")
    )
    plot_beside(right, frame, "attainment_from_send", palette, 100.0)
    right.axhline(100 * target, ls="--", color="0.3", lw=1)
    right.set_ylabel("SLO attainment (%)")
    _legend(
        fig,
        palette,
        _methods(palette, frame),
        [
            *SOLID_DASHED,
            (Line2D([], [], ls=":", color="0.4"), "offered rate (y = x)"),
            (Line2D([], [], ls="--", color="0.3", lw=1.4), f"target {100 * target:g}%"),
        ],
    )
    return fig


def speedup_figure(frame: pd.DataFrame, palette: charts.Palette) -> plt.Figure:
    """TPOT speedup over the baseline against the rate (rate_sweep, 95% intervals, log-2
    ratio axis), drawn as the crossover chart; rings mark each method's stops-paying rate
    (rate_sweep.is_crossover)."""
    fig, ax = plt.subplots(figsize=(4.8, 3.0), layout="constrained")
    charts.plot_speedup_by_concurrency(
        ax,
        frame.rename(
            columns={
                "rate": "concurrency",
                "tpot_speedup": "speedup",
                "tpot_speedup_lo": "ci_low",
                "tpot_speedup_hi": "ci_high",
            }
        ),
        palette,
    )
    ax.set_xlabel("offered rate (req/s)")
    ax.set_ylabel("TPOT speedup")
    entries = {lb: h for h, lb in zip(*ax.get_legend_handles_labels())}
    rows = [(h, "ring: stops paying" if lb == "crossover" else lb) for lb, h in entries.items()]
    fig.legend(
        *zip(*(rows + charts.significance_legend())),
        loc="outside lower center",
        fontsize="small",
        frameon=False,
        ncol=2,
    )
    return fig


def _scatter(
    ax: Axes, frame: pd.DataFrame, col: str, palette: charts.Palette, scale: float
) -> None:
    for method in _methods(palette, frame):
        sub = frame[frame["method"] == method]
        ax.scatter(
            sub["x"],
            sub[col] * scale,
            color=palette[method],
            s=18,
            marker=_marker(palette, method),
            zorder=3,
        )
        behind = flag(sub, "behind_schedule")
        ax.scatter(
            sub["x"][behind],
            sub[col][behind] * scale,
            marker="x",
            s=40,
            color="black",
            lw=1,
            zorder=4,
        )
    rate_axis(ax, frame["x"])


def lag_figure(frame: pd.DataFrame, palette: charts.Palette) -> plt.Figure:
    """Per open-loop window against the rate: the p90 schedule lag (ms, symlog; left) and the
    lag growth (s of lag per s of schedule, symlog; right) with the behind-schedule threshold
    0.1 as a dashed line."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(6.4, 2.9), layout="constrained")
    _scatter(left, frame, "lag_p90_s", palette, 1000.0)
    left.set_yscale("symlog", linthresh=0.1)
    left.set_ylabel("lag p90 (ms)")
    _scatter(right, frame, "lag_growth", palette, 1.0)
    right.set_yscale("symlog", linthresh=0.01)
    right.axhline(BEHIND_GROWTH, ls="--", color="0.3", lw=1)
    right.set_ylabel("lag growth (s per s)")
    _legend(
        fig,
        palette,
        _methods(palette, frame),
        [(Line2D([], [], ls="--", color="0.3"), f"threshold {BEHIND_GROWTH:g} s per s")],
        hollow=False,
    )
    return fig
