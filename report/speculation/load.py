"""Acceptance and step cost against load (acceptance_by_load table).

A row of three panels per setting (engine, TP, workload, max_tokens) and load kind: the
acceptance gain (geometric mean tokens per verify step), the step cost (a verify step's time
in baseline tokens) and the measured speedup with its 95% interval, each against the
concurrency (closed loop) or the offered rate (open loop), a line per method. The two factors
are point estimates (no coverage test checks an interval for them); the speedup's interval is
the `speedup` table's (or rate_speedup's), and a speedup without one is drawn hollow. On the
speedup's own requests speedup = acceptance gain / step cost exactly
(analyze/sql/acceptance_by_load.sql), so the panels show which factor moved with load.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from specsweep.report import charts
from specsweep.report.latex import escape_latex as e
from specsweep.report.latex import fmt_num
from specsweep.report.speculation.panels import (
    SETTING,
    grid,
    legend_below,
    method_entries,
    of,
    windows,
)
from specsweep.report.speculation.panels import window_name as name

SERIES = [*SETTING, "load_kind"]
AXIS = {"concurrency": "concurrency", "rate": "offered rate (req/s)"}
PER_FIGURE = 3  # settings (rows of three panels) per figure
MAX_NAMED = 6  # methods named in the sentence; the rest are counted


def _lines(ax: Axes, frame: pd.DataFrame, value: str, palette: charts.Palette) -> list[str]:
    """A line per method (palette order) of ``value`` against load; the methods drawn."""
    drawn = []
    for i, method in enumerate(m for m in palette if m in set(frame["method"])):
        rows = frame[frame["method"] == method].dropna(subset=[value]).sort_values("load")
        if rows.empty:
            continue
        colour = palette[method]
        marker = charts.MARKERS[i % len(charts.MARKERS)]
        if value == "speedup":
            _speedup(ax, rows, colour, marker)
        else:
            ax.plot(rows["load"], rows[value], color=colour, marker=marker, ms=4, lw=1.2)
        drawn.append(method)
    return drawn


def _speedup(ax: Axes, rows: pd.DataFrame, colour: tuple, marker: str) -> None:
    """The measured speedup: a line, a 95% interval where there is one, hollow where not."""
    ax.plot(rows["load"], rows["speedup"], color=colour, lw=1.2)
    known = rows["ci_low"].notna() & rows["ci_high"].notna()
    if known.any():
        k = rows[known]
        yerr = np.abs(np.vstack([k["speedup"] - k["ci_low"], k["ci_high"] - k["speedup"]]))
        ax.errorbar(k["load"], k["speedup"], yerr=yerr, fmt=marker, ms=4, color=colour,
                    capsize=2, lw=1)  # fmt: skip
    if (~known).any():
        u = rows[~known]
        ax.plot(u["load"], u["speedup"], ls="none", marker=marker, ms=4, mfc="white", mec=colour)


def _x_axis(ax: Axes, frame: pd.DataFrame, kind: str) -> None:
    levels = sorted(frame["load"].unique())
    if len(levels) > 1 and levels[0] > 0:
        ax.set_xscale("log", base=2)
    ax.set_xticks(levels, [fmt_num(v, "g") for v in levels])
    ax.minorticks_off()
    ax.set_xlabel(AXIS.get(kind, kind))


def plot_factors_by_load(axes: list[Axes], frame: pd.DataFrame, palette: charts.Palette) -> None:
    """One setting and load kind on three axes: acceptance gain, step cost (both from 1,
    linear) and the speedup (log-2 ratio axis, 95% intervals, hollow without one)."""
    data = frame.dropna(subset=["acceptance_gain", "step_cost"], how="all")
    if data.empty:
        for ax in axes:
            charts._empty(ax, "no verify counts")
        return
    kind = str(data["load_kind"].iloc[0])
    for ax, value, label in zip(
        axes,
        ("acceptance_gain", "step_cost", "speedup"),
        ("acceptance (tokens/step)", "step cost (baseline tokens)", "speedup"),
    ):
        _lines(ax, data, value, palette)
        _x_axis(ax, data, kind)
        ax.set_ylabel(label)
        if value == "speedup":
            ax.axhline(1.0, ls="--", color="0.3", lw=1)
            charts.ratio_axis(ax, data[["speedup", "ci_low", "ci_high"]].to_numpy(float).ravel())
        else:
            top = float(np.nanmax(data[value].to_numpy(float))) if data[value].notna().any() else 1
            ax.set_ylim(0, max(top, 1.0) * 1.15)
            ax.axhline(1.0, ls=":", color="0.5", lw=0.8)


def figure(frame: pd.DataFrame, keys: list[tuple], palette: charts.Palette) -> plt.Figure:
    """A row of three panels per (setting, load kind) in ``keys``, one legend below."""
    fig, axes = grid(3 * len(keys), 3, (2.1, 1.9))
    for row, key in enumerate(keys):
        sub = of(frame, key, SERIES)
        trio = axes[3 * row : 3 * row + 3]
        plot_factors_by_load(trio, sub, palette)
        trio[0].set_title(charts.plain(name(key, frame, load=None)), fontsize="small", loc="left")
    hollow = Line2D([], [], ls="none", marker="o", ms=5, mfc="white", mec="0.35")
    legend_below(fig, [*method_entries(palette, frame["method"]),
                       (hollow, "speedup without an interval")], ncol=4)  # fmt: skip
    return fig


def series(frame: pd.DataFrame) -> list[tuple]:
    """The (setting, load kind) keys with a factor at two loads or more (a line to draw)."""
    if frame.empty:
        return []
    known = frame.dropna(subset=["acceptance_gain", "step_cost"])
    counts = known.groupby(SERIES)["load"].nunique() if not known.empty else pd.Series()
    return [k for k in windows(frame, SERIES) if counts.get(k, 0) >= 2]


def finding(frame: pd.DataFrame) -> str | None:
    """Per method, at the highest load of its series: how far step cost and acceptance moved
    from the lowest load (acceptance_by_load's *_vs_lowest), or None without two loads
    (raw LaTeX)."""
    top = frame.dropna(subset=["acceptance_vs_lowest", "step_cost_vs_lowest"])
    top = top[top["load"] > top["lowest_load"]]
    if top.empty:
        return None
    top = top.loc[top.groupby([*SERIES, "method"])["load"].idxmax()]
    items = []
    for _, r in top.sort_values(["method", *SERIES]).head(MAX_NAMED).iterrows():
        unit = "concurrency" if r["load_kind"] == "concurrency" else "req/s"
        items.append(
            f"{e(r['method'])} on {e(name(tuple(r[SETTING]), frame, load=None))} "
            f"({unit} {fmt_num(r['lowest_load'], 'g')} to {fmt_num(r['load'], 'g')}): step "
            f"cost $\\times${fmt_num(r['step_cost_vs_lowest'])}, acceptance "
            f"$\\times${fmt_num(r['acceptance_vs_lowest'])}"
        )
    more = f"; and {len(top) - MAX_NAMED} more" if len(top) > MAX_NAMED else ""
    return (
        "From the lowest load to the highest, each factor as a multiple of its value at the "
        "lowest load (point estimates): " + "; ".join(items) + more + "."
    )
