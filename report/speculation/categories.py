"""Acceptance and speedup per prompt category (category_pooled table): a category x method
heatmap of each, one figure per (engine, TP, max_tokens) measured at concurrency 1.

A cell is a method's figure over the category's prompts, pooled over the concurrency-1 windows
of one max_tokens (analyze/category.py; VIEWS.md says why only those are pooled): the
acceptance gain (geometric mean tokens per verify step) and the speedup (geometric mean paired
ratio over the baseline), each printed with its 95% t interval beneath; a cell without an
interval (fewer than 3 prompts, no spread, or windows of different runs) carries a hollow
circle in its corner, a cell without a figure is grey. Colours: acceptance on a sequential
scale from 1, speedup on a diverging log-2 scale centred on 1x. The A/A control is left out.
Drawn with seaborn.heatmap, imported inside :func:`plot_metric_by_category` only: it runs in a
figure worker, and importing seaborn costs every report run time it would not use otherwise
(report/charts/theme.py; docs/decisions.md).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib import colors
from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from specsweep.report import charts
from specsweep.report.latex import escape_latex as e
from specsweep.report.latex import fmt_num
from specsweep.report.speculation.panels import legend_below, windows
from specsweep.stats.paired import MIN_PROMPTS

GROUP = ["engine", "tp", "max_tokens"]
MAX_FIGURES = 2
UNCATEGORIZED = "uncategorized"  # requests.category of rows older than the column
PANELS = (
    ("acceptance_gain", "acceptance_low", "acceptance_high", "acceptance (tokens / verify step)"),
    ("speedup", "ci_low", "ci_high", "speedup over the baseline"),
)
RATIO_TICKS = (0.25, 0.5, 2 / 3, 1.0, 1.5, 2.0, 3.0, 4.0, 8.0)
NO_INTERVAL = {"marker": "o", "ms": 4, "mfc": "white", "mec": "0.15", "ls": "none", "mew": 0.8}


def shown(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows a heatmap draws: not the A/A control; none when every prompt is
    'uncategorized' (a file collected before prompts had categories)."""
    if frame.empty or set(frame["category"]) <= {UNCATEGORIZED}:
        return frame.iloc[0:0]
    return frame[~frame["is_control"].astype(bool)]


def groups(frame: pd.DataFrame) -> list[tuple]:
    """(engine, tp, max_tokens) keys with a row to draw, at most MAX_FIGURES."""
    return windows(shown(frame), GROUP)[:MAX_FIGURES]


def _norm(value: str, grid: np.ndarray) -> tuple[colors.Normalize, str]:
    """Acceptance: linear from 1 to the largest; speedup: log-2, symmetric around 1."""
    finite = grid[np.isfinite(grid)]
    if value == "speedup":
        half = max(float(np.abs(np.log2(finite)).max()) if finite.size else 0.0, 0.25)
        return colors.LogNorm(2**-half, 2**half), "PuOr"
    top = max(float(finite.max()) if finite.size else 1.0, 1.5)
    return colors.Normalize(1.0, top), "cividis"


def _cell_text(v: float, lo: float, hi: float) -> str:
    head = fmt_num(v, ".2f")
    return head if pd.isna(lo) or pd.isna(hi) else f"{head}\n[{lo:.2f}, {hi:.2f}]"


def _grids(frame: pd.DataFrame, panel: tuple[str, ...]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The panel's value per (category row, method column), NaN where not measured, and
    its cell text (value, interval beneath; empty where not measured)."""
    value, low, high, _ = panel
    frame = frame.drop_duplicates(["category", "method"], keep="last")  # one cell each
    cells = zip(frame[value], frame[low], frame[high])
    rows = frame.assign(text=[_cell_text(*c) if pd.notna(c[0]) else "" for c in cells])
    grid = rows.pivot(index="category", columns="method", values=value).astype(float)
    text = rows.pivot(index="category", columns="method", values="text")
    return grid.sort_index().sort_index(axis=1), text.sort_index().sort_index(axis=1).fillna("")


def plot_metric_by_category(ax: Axes, frame: pd.DataFrame, panel: tuple[str, ...]) -> Axes:
    """One heatmap: a row per category, a column per method (sorted), the value in colour
    and in figures, its interval beneath, a hollow circle where it has none, grey where the
    method was not measured on the category (masked)."""
    import seaborn as sns  # here only: the figure worker pays its import, the report does not

    value, low, high, title = panel
    grid, text = _grids(frame, panel)
    norm, cmap = _norm(value, grid.to_numpy())
    sns.heatmap(grid, mask=grid.isna(), cmap=plt.get_cmap(cmap).with_extremes(bad="0.88"),
                norm=norm, annot=text, fmt="", annot_kws={"fontsize": 5.5}, linewidths=0.5,
                cbar_kws={"shrink": 0.8, "pad": 0.02}, ax=ax,
                xticklabels=[charts.plain(m) for m in grid.columns],
                yticklabels=[charts.plain(c) for c in grid.index])  # fmt: skip
    ax.set_facecolor("0.88")  # masked (not measured) cells are left undrawn: grey shows
    ax.set(xlabel="", ylabel="")
    ax.grid(False)
    ax.tick_params(axis="x", labelrotation=30)
    ax.tick_params(axis="y", labelrotation=0)
    plt.setp(ax.get_xticklabels(), ha="right")
    no_ci = frame[frame[value].notna() & (frame[low].isna() | frame[high].isna())]
    for c, m in zip(no_ci["category"], no_ci["method"]):  # cell (x, y) spans [x, x+1] x [y, y+1]
        ax.plot([grid.columns.get_loc(m) + 0.86], [grid.index.get_loc(c) + 0.2], **NO_INTERVAL)
    ax.set_title(title, fontsize="small", loc="left")
    bar = ax.collections[0].colorbar
    if value == "speedup":  # ratio ticks as the other charts write them, not 10^x
        ticks = [t for t in RATIO_TICKS if norm.vmin <= t <= norm.vmax]
        bar.set_ticks(ticks, labels=[f"{t:.3g}\u00d7" for t in ticks])
        bar.ax.minorticks_off()
    return ax


def figure(frame: pd.DataFrame, key: tuple) -> plt.Figure:
    """The two heatmaps of one (engine, tp, max_tokens), side by side, one legend below."""
    rows = shown(frame)
    for col, v in zip(GROUP, key):
        rows = rows[rows[col] == v]
    n_cats, n_methods = rows["category"].nunique(), rows["method"].nunique()
    size = (6.4, 1.2 + 0.42 * n_cats) if n_methods <= 3 else (6.4, 2.0 + 0.42 * n_cats)
    ncols = 2 if n_methods <= 3 else 1
    fig, axes = plt.subplots(2 // ncols, ncols, layout="constrained",
                             figsize=(size[0], size[1] * (2 // ncols)))  # fmt: skip
    for ax, panel in zip(np.ravel(axes), PANELS):
        plot_metric_by_category(ax, rows, panel)
    legend_below(fig, [(Line2D([], [], **NO_INTERVAL), "no 95% interval"),
                       (Line2D([], [], ls="none", marker="s", ms=6, color="0.88"),
                        "not measured")], ncol=2)  # fmt: skip
    return fig


def caption_key(key: tuple, frame: pd.DataFrame) -> str:
    """What a figure covers, for its caption (raw LaTeX): max_tokens, and engine and TP where
    several were measured."""
    engine, tp, mt = key
    out = f"max\\_tokens {fmt_num(mt, 'g')}"
    if frame[["engine", "tp"]].drop_duplicates().shape[0] > 1:
        out += f", {e(engine)} TP{fmt_num(tp, 'g')}"
    return out


def summary(frame: pd.DataFrame) -> str | None:
    """How many cells carry an interval, and the categories too small for one (raw LaTeX)."""
    rows = shown(frame)
    if rows.empty:
        return None
    with_ci = int((rows["ci_low"].notna() & rows["ci_high"].notna()).sum())
    small = sorted(rows.loc[rows["n_prompts"] < MIN_PROMPTS, "category"])
    text = f"{with_ci} of {len(rows)} speedup cells have a 95\\% interval."
    if "n_family" in rows and rows["n_family"].notna().any():
        n_sig = int(rows["significant"].fillna(False).astype(bool).sum())
        text += (
            f" Their own Holm family (a breakdown, apart from the campaign's claims): "
            f"m = {int(rows['n_family'].max())} cells, {n_sig} significant after it."
        )
    if small:
        text += " Too few prompts for an interval: " + ", ".join(e(c) for c in dict.fromkeys(small))
        text += "."
    return text
