"""The race chart: per level of a raced phase, each arm's running ratio to the leader against
the round (race_rounds), the continuation region as a grey band and an x where an arm was
dropped.

The ratio is exp(-gap_ln), the arm's geometric-mean decode tok/s over the leader's after the
rounds so far (1 for the leader); the band runs from 1 - margin up to 1: an arm whose ratio
falls below it is dropped (stats.race's W(r), the same number race_rounds prints). Before
first_rounds there is no band. One panel per level, :data:`PER_FIGURE` at most (the text says
how many more there are).
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from specsweep.report import charts

PER_FIGURE = 6  # level panels a figure (3 columns x 2 rows)
GREY = (0.85, 0.85, 0.85)


def levels(rounds: pd.DataFrame) -> list[str]:
    """The phase's levels in the order race_rounds gives them."""
    return list(dict.fromkeys(rounds["level"])) if not rounds.empty else []


def plot_ratio_by_round(ax: plt.Axes, frame: pd.DataFrame, palette: charts.Palette) -> plt.Axes:
    """One level's race: each arm's exp(-gap_ln) per round in its colour, the 1 - margin band
    (grey), an x at the round an arm was dropped, a dashed line at 1 (the leader)."""
    if frame.empty:
        return charts._empty(ax, "no closed round")
    band = frame.dropna(subset=["margin"]).groupby("round")["margin"].first()
    if not band.empty:
        ax.bar(band.index, band.to_numpy(), bottom=1 - band.to_numpy(), width=0.5, color=GREY,
               lw=0, label="1 \u2212 margin to 1: kept")  # fmt: skip
    ax.axhline(1, color="0.4", lw=0.8, ls="--")
    for i, (method, sub) in enumerate(frame.groupby("method", sort=False)):
        colour = palette.get(method, (0.4, 0.4, 0.4))
        sub = sub.sort_values("round")
        ratio = np.exp(-sub["gap_ln"].astype(float))
        marker = charts.MARKERS[i % len(charts.MARKERS)]
        ax.plot(sub["round"], ratio, color=colour, marker=marker, ms=4, lw=1.2,
                label=charts.plain(method))  # fmt: skip
        out = sub[sub["status"].isin(["dropped", "missing"])]
        out_ratio = np.exp(-out["gap_ln"].astype(float)).fillna(_last(ratio))
        ax.scatter(out["round"], out_ratio, marker="x", s=60, color=colour, zorder=5, lw=1.6)
    ax.set_xticks(sorted(frame["round"].unique()))
    ax.set_xlabel("round")
    ax.set_ylabel("ratio to the leader")
    ax.set_title(charts.plain(frame["level"].iloc[0]), fontsize=9)
    return ax


def _last(ratio: pd.Series) -> float:
    known = ratio.dropna()
    return float(known.iloc[-1]) if not known.empty else 1.0


def figure(rounds: pd.DataFrame, keys: list[str], palette: charts.Palette) -> plt.Figure:
    """The panels of `keys` (levels of one phase's race_rounds), a shared legend below."""
    n = len(keys)
    cols = min(3, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(2.3 * cols + 0.6, 2.2 * rows + 0.5),
                             squeeze=False, sharey=True)  # fmt: skip
    for ax, key in zip(axes.flat, keys):
        plot_ratio_by_round(ax, rounds[rounds["level"] == key], palette)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    seen = dict(zip(labels, handles))
    for ax in list(axes.flat)[1:n]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    fig.legend(list(seen.values()), list(seen), loc="lower center", ncol=min(4, len(seen)),
               frameon=False, bbox_to_anchor=(0.5, -0.02))  # fmt: skip
    fig.tight_layout(rect=(0, 0.1 if rows == 1 else 0.06, 1, 1))
    return fig
