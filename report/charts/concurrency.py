"""The charts against concurrency: aggregate throughput (a colour per method, a dash
pattern per workload) and speedup with its 95% CI for one setting (crossover ringed)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from specsweep.report.charts.axes import _empty, concurrency_ticks, ratio_axis
from specsweep.report.charts.theme import DASHES, LINE_MARKER, MARKERS, Palette, _order, plain
from specsweep.report.labels import Labels, metric_label


def plot_throughput_by_concurrency(
    ax: Axes, frame: pd.DataFrame, palette: Palette, labels: Labels = None
) -> Axes:
    """Aggregate output tok/s versus concurrency, one colour per method, style per workload."""
    data = frame.dropna(subset=["throughput_tps"])
    if data.empty:
        return _empty(ax, "no throughput data")
    # lines in row order (max_tokens ascending), not label order ("mt=256" before "mt=64")
    workloads = list(pd.unique(data["workload"])) if data["workload"].nunique() > 1 else []
    data = data.groupby(["method", "workload", "concurrency"], as_index=False).throughput_tps.mean()
    order = _order(palette, data["method"])
    dashes = dict(zip(workloads, DASHES * len(workloads)))
    for (method, workload), line in data.groupby(["method", "workload"], sort=False):
        if method in palette:
            line = line.sort_values("concurrency")
            ax.plot(
                line["concurrency"],
                line["throughput_tps"],
                color=palette[method],
                dashes=dashes.get(workload, ()),
                **LINE_MARKER,
            )
    if data["concurrency"].nunique() > 1 and data["concurrency"].min() > 0:
        ax.set_xscale("log", base=2)
    concurrency_ticks(ax, frame.dropna(subset=["throughput_tps"]))
    ax.set_ylabel(metric_label(labels, "throughput_tps"))
    ax.legend(
        *zip(*_line_legend(palette, order, dashes)),
        fontsize="small",
        loc="upper left",
        bbox_to_anchor=(1.01, 1),
    )  # beside the lines
    return ax


def _line_legend(
    palette: Palette, methods: list[str], dashes: Mapping[str, tuple]
) -> list[tuple[Line2D, str]]:
    """Legend of the throughput chart: a "method" heading and a line per method in its
    colour, then (when several) a "workload" heading and a grey line per dash pattern."""
    heading = Line2D([], [], alpha=0)
    rows = [(heading, "method")] + [
        (Line2D([], [], color=palette[m], **LINE_MARKER), plain(m)) for m in methods
    ]
    if dashes:
        rows += [(heading, "workload")] + [
            (Line2D([], [], color=".2", dashes=d, **LINE_MARKER), plain(w))
            for w, d in dashes.items()
        ]
    return rows


DODGE = 0.05  # sideways shift between methods, in log2(concurrency) units


def plot_speedup_by_concurrency(ax: Axes, frame: pd.DataFrame, palette: Palette) -> Axes:
    """Speedup versus concurrency for one setting (engine, tp, workload, max_tokens).

    One line per method with its 95% CI as error bars, methods shifted sideways by a few
    percent of a doubling so the bars do not hide each other; log-2 ratio axis
    (:func:`ratio_axis`). Filled markers are significant, hollow ones are not; the crossover
    level (rows with ``is_crossover``) is ringed in black.
    """
    if frame.empty:
        return _empty(ax, "no speedup rows")
    methods = _order(palette, frame["method"])
    shift = {m: DODGE * (i - (len(methods) - 1) / 2) for i, m in enumerate(methods)}
    frame = frame.assign(x=frame["concurrency"] * 2 ** frame["method"].map(shift))
    for method in methods:
        _speedup_line(
            ax, frame[frame["method"] == method].sort_values("concurrency"), method, palette
        )
    cross = frame[frame["is_crossover"].fillna(False).astype(bool)]
    if not cross.empty:
        ax.scatter(
            cross["x"],
            cross["speedup"],
            marker="o",
            s=90,
            facecolor="none",
            edgecolor="black",
            linewidths=1.1,
            zorder=5,
            label="crossover",
        )
    ax.axhline(1.0, ls="--", color="0.3", lw=1)
    ratio_axis(ax, frame[["speedup", "ci_low", "ci_high"]].to_numpy(float).ravel())
    levels = sorted(frame["concurrency"].unique())
    ax.set_xscale("log", base=2)
    concurrency_ticks(ax, frame)
    ax.set_xlim(levels[0] / 2**0.5, levels[-1] * 2**0.5)
    ax.set_ylabel("speedup")
    return ax


def _speedup_line(ax: Axes, sub: pd.DataFrame, method: str, palette: Palette) -> None:
    """One method's points and CI bars at their shifted x, non-significant markers hollow."""
    colour = palette[method]
    marker = MARKERS[list(palette).index(method) % len(MARKERS)]
    x, y = sub["x"].to_numpy(float), sub["speedup"].to_numpy(float)
    err = np.vstack([y - sub["ci_low"].to_numpy(float), sub["ci_high"].to_numpy(float) - y])
    ax.errorbar(x, y, yerr=np.abs(err), fmt="none", ecolor=colour, capsize=2, lw=1)
    ax.plot(x, y, color=colour, marker=marker, ms=5, lw=1.2, label=plain(method), zorder=3)
    sig = sub["significant"].fillna(False).astype(bool).to_numpy()
    ax.scatter(x[~sig], y[~sig], marker=marker, s=16, facecolor="white", edgecolor=colour, zorder=4)
