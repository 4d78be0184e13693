"""The layouts of the report's figures, each saved as a vector PDF.

A figure here is panels of :mod:`report.charts`' chart functions laid out on one page width:
a plain row of panels (:func:`draw`), the ratio figure with a panel per workload and
max_tokens (:func:`ratio_figure`), the crossover figure of speedup against concurrency
(:func:`sweeps_figure`, cut by :func:`sweep_parts` into figures that fit a page), and the
one legend below the panels that they share. :mod:`report.figures` picks which to draw.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from specsweep.report import charts

Plot = Callable[..., object]


def save_figure(fig: plt.Figure, path: Path) -> Path:
    """Write ``fig`` as a vector PDF and close it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # no CreationDate: the same figure gives the same bytes, whichever process drew it
    fig.savefig(path, format="pdf", bbox_inches="tight", metadata={"CreationDate": None})
    plt.close(fig)
    return path


def draw(
    path: Path,
    plots: list[tuple[Plot, pd.DataFrame]],
    palette: charts.Palette,
    size: tuple[float, float] = (6.4, 3.2),
    shared_legend: bool = False,
) -> Path:
    """One figure with a panel per ``(plot function, frame)``, saved to ``path``; with
    ``shared_legend`` the panels' legends become one below them."""
    fig, axes = plt.subplots(1, len(plots), figsize=size, squeeze=False)
    for ax, (plot, frame) in zip(axes[0], plots):
        plot(ax, frame, palette)
    if shared_legend:
        for ax in axes.flat:
            if ax.get_legend() is not None:
                ax.get_legend().remove()
        _shared_legend(fig, axes, [charts.plain(m) for m in palette])
    fig.tight_layout()
    return save_figure(fig, path)


PANEL_ROW = 12  # load points per row of a ratio figure (6.4 in) before it wraps


def ratio_figure(
    frame: pd.DataFrame, plot: Plot, palette: charts.Palette, value: str = "speedup"
) -> plt.Figure:
    """A ratio chart (speedup, energy ratio) with one panel per workload and max_tokens,
    each as wide as its load points, wrapped into rows of about :data:`PANEL_ROW` points;
    every panel shares one log-2 y axis symmetric around 1, and one legend below names the
    methods and what filled and hollow markers mean."""
    groups = list(frame.groupby(["workload", "max_tokens"], sort=True))
    spans = [max(2, sub["concurrency"].nunique()) for _, sub in groups]
    rows: list[list[int]] = [[]]
    for i, span in enumerate(spans):  # greedy: a panel moves down when its row is full
        if rows[-1] and sum(spans[j] for j in rows[-1]) + span > PANEL_ROW:
            rows.append([])
        rows[-1].append(i)
    ncols = max(sum(spans[j] for j in row) for row in rows)
    width = max(4.0, min(6.4, 1.6 + 0.6 * ncols))
    fig = plt.figure(figsize=(width, 0.5 + 2.4 * len(rows)), layout="constrained")
    fig.get_layout_engine().set(wspace=0.0, w_pad=0.02)
    grid = fig.add_gridspec(len(rows), ncols)
    axes: list = []
    for r, row in enumerate(rows):
        start = 0
        for n, j in enumerate(row):
            ax = fig.add_subplot(
                grid[r, start : start + spans[j]], sharey=axes[0] if axes else None
            )
            start += spans[j]
            (workload, mt), sub = groups[j]
            plot(ax, sub, palette)
            several = frame.loc[frame["workload"] == workload, "max_tokens"].nunique() > 1
            title = charts.plain(workload) + (f"\nmax_tokens {mt}" if several else "")
            ax.set_title(title, fontsize="small")
            if n:
                ax.tick_params(labelleft=False)
                ax.set_ylabel("")
            axes.append(ax)
    values = frame[[value, "ci_low", "ci_high"]].to_numpy(float).ravel()
    for ax in axes:
        charts.ratio_axis(ax, values)
    drawn = (
        frame[~frame["is_control"].fillna(False).astype(bool)] if "is_control" in frame else frame
    )  # the A/A control is a grey x, not a method
    methods = charts.ratio_legend(palette, drawn["method"])
    ncol = max(2, min(len(methods), 4 if width >= 5 else 3))
    extra = charts.noise_legend(frame)
    entries = _row_major([methods, charts.significance_legend() + extra], ncol)
    fig.legend(
        *zip(*entries), loc="outside lower center", fontsize="small", frameon=False, ncol=ncol
    )
    return fig


def _row_major(groups: list[list[tuple[object, str]]], ncol: int) -> list[tuple[object, str]]:
    """Legend entries reordered so that matplotlib, which fills a legend column by column,
    shows them row by row, each group starting a new row (blank entries pad the rows)."""
    rows: list[list[tuple[object, str]]] = []
    for group in groups:
        rows += [group[i : i + ncol] for i in range(0, len(group), ncol)]
    blank = (Line2D([], [], alpha=0), "")
    rows = [row + [blank] * (ncol - len(row)) for row in rows]
    return [rows[r][c] for c in range(ncol) for r in range(len(rows))]


def _facet_title(workload: str, max_tokens: int, engine: str, tp: int, frame: pd.DataFrame) -> str:
    """Panel title naming only what varies: workload, max_tokens if several, engine if several."""
    title = charts.plain(workload)
    if frame.loc[frame["workload"] == workload, "max_tokens"].nunique() > 1:
        title += f", max_tokens {max_tokens}"
    setup = f"{charts.plain(engine)} TP{tp}" if frame["engine"].nunique() > 1 else f"TP{tp}"
    return f"{title} | {setup}"


SWEEP_PANELS = 6  # panels per crossover figure: 3 rows of 2 (about 8 in) fit on a page
SWEEP_COLS = 2  # panels per row when a single (engine, tp) is measured


def sweep_parts(frame: pd.DataFrame) -> list[pd.DataFrame]:
    """``frame`` cut into parts of at most :data:`SWEEP_PANELS` panels each, whole
    (workload, max_tokens) settings per part and parts of about equal size, so that every
    crossover figure fits on a page."""
    if frame.empty:
        return []
    settings = sorted(frame[["workload", "max_tokens"]].drop_duplicates().itertuples(index=False))
    per_setting = max(1, len(frame[["engine", "tp"]].drop_duplicates()))
    n_parts = -(-len(settings) * per_setting // SWEEP_PANELS) if settings else 0
    size = -(-len(settings) // n_parts) if n_parts else 0
    parts = []
    for start in range(0, len(settings), size or 1):
        chunk = set(settings[start : start + size])
        keep = [(w, m) in chunk for w, m in zip(frame["workload"], frame["max_tokens"])]
        parts.append(frame[keep])
    return parts


def draw_sweeps(path: Path, frame: pd.DataFrame, palette: charts.Palette) -> Path:
    """The speedup-versus-concurrency figure (:func:`sweeps_figure`) saved to ``path``."""
    return save_figure(sweeps_figure(frame, palette), path)


def _sweep_grid(frame: pd.DataFrame) -> list[list[tuple | None]]:
    """Panels as rows of (workload, max_tokens, engine, tp): a row per setting and a column
    per (engine, tp) when several were measured, else the settings wrapped
    :data:`SWEEP_COLS` to a row (None pads the last row)."""
    rows = sorted(frame[["workload", "max_tokens"]].drop_duplicates().itertuples(index=False))
    cols = sorted(frame[["engine", "tp"]].drop_duplicates().itertuples(index=False))
    if len(cols) > 1:
        return [[(w, m, e, t) for e, t in cols] for w, m in rows]
    ncol = min(SWEEP_COLS, len(rows))
    flat: list[tuple | None] = [(w, m, *cols[0]) for w, m in rows]
    flat += [None] * (-len(flat) % ncol)
    return [flat[i : i + ncol] for i in range(0, len(flat), ncol)]


def sweeps_figure(frame: pd.DataFrame, palette: charts.Palette) -> plt.Figure:
    """Speedup versus concurrency: a panel per (workload, max_tokens) and (engine, tp) laid
    out by :func:`_sweep_grid`, one shared legend below; the panels of one setting share
    their y axis (one symmetric log axis over the setting's rows)."""
    grid = _sweep_grid(frame)
    several = frame[["engine", "tp"]].drop_duplicates().shape[0] > 1
    ncol = len(grid[0])
    size = (min(6.4, 1.4 + 2.6 * ncol), 0.4 + 2.5 * len(grid))
    fig, axes = plt.subplots(
        len(grid), ncol, figsize=size, squeeze=False, sharey="row" if several else False
    )
    for (i, j), ax in np.ndenumerate(axes):
        panel_key = grid[i][j]
        if panel_key is None:
            ax.remove()
            continue
        workload, mt, engine, tp = panel_key
        setting = frame[(frame["workload"] == workload) & (frame["max_tokens"] == mt)]
        panel = setting[(setting["engine"] == engine) & (setting["tp"] == tp)]
        charts.plot_speedup_by_concurrency(ax, panel, palette)
        ax.set_title(_facet_title(workload, mt, engine, tp, frame), fontsize="small")
        shared = setting if several else panel  # one symmetric log axis per shared y
        charts.ratio_axis(ax, shared[["speedup", "ci_low", "ci_high"]].to_numpy(float).ravel())
        below = i + 1 < len(grid) and grid[i + 1][j] is not None
        ax.set_xlabel("" if below else ax.get_xlabel())
        ax.set_ylabel(ax.get_ylabel() if j == 0 else "")
    live = np.array([ax for ax in axes.flat if ax in fig.axes])
    _shared_legend(
        fig,
        live,
        [charts.plain(m) for m in palette] + ["crossover"],
        extra=charts.significance_legend(),
    )
    fig.tight_layout()
    return fig


def _shared_legend(
    fig: plt.Figure, axes: np.ndarray, order: list[str], extra: Sequence[tuple[object, str]] = ()
) -> None:
    """One legend below the panels with every label any panel drew, in ``order``, then
    the ``extra`` entries."""
    handles: dict[str, object] = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    labels = sorted(handles, key=lambda lb: order.index(lb) if lb in order else len(order))
    ncol = min(len(labels), 5)
    entries = [(handles[lb], lb) for lb in labels]
    if extra:  # the extra entries on a row of their own
        ncol = max(2, min(len(labels), 4 if fig.get_figwidth() >= 5 else 3))
        entries = _row_major([entries, list(extra)], ncol)
    fig.legend(
        *zip(*entries),
        loc="upper center",
        ncol=ncol,
        bbox_to_anchor=(0.5, 0.0),
        fontsize="small",
        frameon=False,
    )
