"""Why a method is fast or slow: the speedup decomposition (speedup_decomposition table).

Per window, each method's two factors side by side on one log-2 axis: the acceptance gain
(geometric mean acceptance length, tokens per verify step) and the step cost (a verify
step's time in baseline tokens), both over the speedup's own requests; the measured speedup
(95% interval) is marked on them. On those requests speedup = acceptance gain / step cost
exactly (analyze/sql/speedup_decomposition.sql), so on the log axis the diamond sits as
far from 1 as the filled bar's top is above the hatched bar's. The sentences name the methods
that lose on step cost and those that lose on acceptance (a sentence page 1's summary gains
through report.speculation.section.summary), and the windows whose factors are unknown because
some of the speedup's requests carry no verify count (marked Unicode text, report.text).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from specsweep.report import charts
from specsweep.report.keys import COMPARISON
from specsweep.report.speculation.panels import WINDOW, Entry, grid, legend_below, of
from specsweep.report.speculation.panels import window_name as name
from specsweep.report.text import data as d
from specsweep.report.text import num, times

WIDTH = 0.38  # of a method's slot, per bar
HATCH = "////"


def plot_factors_by_method(ax: Axes, frame: pd.DataFrame, palette: charts.Palette) -> Axes:
    """One window: per method (palette order) a bar from 1 to its acceptance length and a
    hatched bar from 1 to its step cost, in the method's colour, on a log-2 axis symmetric
    around 1; a black diamond with its 95% interval is the measured speedup."""
    data = frame.dropna(subset=["acceptance_gain", "step_cost"])
    if data.empty:
        return charts._empty(ax, "no baseline window to compare")
    methods = [m for m in palette if m in set(data["method"])]
    methods += sorted(set(data["method"]) - set(methods))
    for i, method in enumerate(methods):
        r = data[data["method"] == method].iloc[0]
        colour = palette.get(method, (0.5, 0.5, 0.5))
        gain, cost = float(r["acceptance_gain"]), float(r["step_cost"])
        ax.bar(i - WIDTH / 2, gain - 1, WIDTH, bottom=1, color=charts.fill(colour))
        ax.bar(
            i + WIDTH / 2,
            cost - 1,
            WIDTH,
            bottom=1,
            facecolor="white",
            edgecolor=colour,
            hatch=HATCH,
            lw=0.8,
        )
        if pd.notna(r["speedup"]):
            s = float(r["speedup"])
            lo, hi = r["ci_low"], r["ci_high"]
            yerr = None if pd.isna(lo) or pd.isna(hi) else [[s - lo], [hi - s]]
            ax.errorbar(
                [i],
                [s],
                yerr=np.abs(yerr) if yerr else None,
                fmt="D",
                ms=5,
                color="black",
                mfc="black",
                capsize=2,
                lw=1,
                zorder=4,
            )
    ax.axhline(1.0, ls="--", color="0.3", lw=1)
    values = data[["acceptance_gain", "step_cost", "speedup", "ci_low", "ci_high"]]
    charts.ratio_axis(ax, values.to_numpy(float).ravel())
    ax.set_xticks(range(len(methods)), [charts.plain(m) for m in methods])
    ax.set_xlim(-0.6, len(methods) - 0.4)
    ax.grid(axis="x", visible=False)
    if len(methods) > 2:  # three names side by side overlap in a half-width panel
        ax.tick_params(axis="x", labelrotation=30)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
    ax.set_ylabel("factor (log scale)")
    return ax


def legend() -> list[Entry]:
    """What the bars and the diamond mean (the methods are named under their bars)."""
    return [
        (Patch(facecolor="0.6"), "acceptance gain (tokens / verify step)"),
        (
            Patch(facecolor="white", edgecolor="0.35", hatch=HATCH),
            "step cost (verify step in baseline tokens)",
        ),
        (Line2D([], [], ls="none", marker="D", ms=5, color="black"), "measured speedup (95% CI)"),
    ]


def columns(frame: pd.DataFrame) -> int:
    """Panels per row: one when a window has more than 4 methods, else two."""
    most = frame.groupby(WINDOW)["method"].nunique().max() if not frame.empty else 0
    return 1 if most > 4 else 2


def figure(frame: pd.DataFrame, keys: list[tuple], palette: charts.Palette) -> plt.Figure:
    """A panel per window in ``keys`` (:func:`plot_factors_by_method`), one legend below."""
    ncols = columns(frame)
    fig, axes = grid(len(keys), ncols, (6.4 if ncols == 1 else 3.2, 2.3))
    for ax, key in zip(axes, keys):
        plot_factors_by_method(ax, of(frame, key), palette)
        ax.set_title(charts.plain(name(key, frame)), fontsize="small", loc="left")
    legend_below(fig, legend(), ncol=2)
    return fig


MAX_NAMED = 6  # methods named per clause; the rest are counted


def _worst(sub: pd.DataFrame, frame: pd.DataFrame) -> str:
    """A method's slowest losing window: its two factors and its speedup there."""
    r = sub.loc[sub["speedup"].idxmin()]
    return (
        f"{d(r['method'])} (acceptance gain {num(r['acceptance_gain'])}, step cost "
        f"{num(r['step_cost'])}: {times(r['speedup'])} on "
        f"{d(name(tuple(r[WINDOW]), frame))}"
        + (f"; {len(sub)} windows" if len(sub) > 1 else "")
        + ")"
    )


def _named(rows: pd.DataFrame, frame: pd.DataFrame) -> str:
    items = [_worst(sub, frame) for _, sub in rows.groupby("method", sort=True)]
    more = [f"{len(items) - MAX_NAMED} more"] if len(items) > MAX_NAMED else []
    return ", ".join(items[:MAX_NAMED] + more)


NO_LOSER = "No method is slower than the baseline in any window with verify counts."


def losers(frame: pd.DataFrame) -> str:
    """Who loses on step cost and who on acceptance (the table's limited_by, read from the
    factors), among the windows where the method is significantly slower: Holm-significant in
    the campaign's family (the speedup table's `significant`, which :func:`with_significance`
    adds) with its interval below 1; a frame without that column (a file analysed before the
    family) by its 95% interval alone. A point estimate below 1 alone is never called a loss
    (marked Unicode; :data:`NO_LOSER` when none loses)."""
    below = frame["ci_high"].lt(1).fillna(False).astype(bool)
    if "significant" in frame:
        below &= frame["significant"].astype("boolean").fillna(False).astype(bool)
    slower = frame[below]
    cost = slower[slower["limited_by"] == "step cost"]
    acc = slower[slower["limited_by"] == "acceptance"]
    if cost.empty and acc.empty:
        return NO_LOSER
    parts = []
    if not cost.empty:
        parts.append(f"on step cost, not acceptance: {_named(cost, frame)}")
    if not acc.empty:
        parts.append(f"on acceptance (at most 1.05 tokens per verify step): {_named(acc, frame)}")
    return (
        "Where a method is significantly slower than the baseline (Holm, the campaign’s family "
        "of claims; its acceptance gain is then below its step cost), it loses "
        + "; and ".join(parts)
        + "."
    )


def with_significance(frame: pd.DataFrame, speedup: pd.DataFrame) -> pd.DataFrame:
    """speedup_decomposition rows with the speedup table's Holm `significant` (kept where the
    frame has one already; NULL where the speedup table has no such row)."""
    if "significant" in frame or speedup.empty or not {*COMPARISON, "significant"} <= set(speedup):
        return frame
    return frame.merge(speedup[[*COMPARISON, "significant"]], on=COMPARISON, how="left")


def unknown(frame: pd.DataFrame) -> str | None:
    """The method windows left undecomposed because some of the speedup's requests have no
    verify count (acceptance_gain NULL, n_verified < n), or None (marked Unicode)."""
    if "acceptance_gain" not in frame:
        return None
    rows = frame[frame["acceptance_gain"].isna()]
    if rows.empty:
        return None
    named = ", ".join(
        f"{d(r['method'])} on {d(name(tuple(r[WINDOW]), frame))}"
        for _, r in rows.head(MAX_NAMED).iterrows()
    )
    more = f" and {len(rows) - MAX_NAMED} more" if len(rows) > MAX_NAMED else ""
    return (
        f"{len(rows)} method window(s) are not decomposed, because some of the requests "
        f"their speedup rests on carry no verify count: {named}{more}."
    )
