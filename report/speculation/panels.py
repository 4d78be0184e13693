"""What the speculation section's figures and sentences share: the window key, a window's
name (only what varies), panel grids and a legend below the panels."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from specsweep.report import charts
from specsweep.report.keys import WINDOW
from specsweep.report.latex import fmt_num

SETTING = ["engine", "tp", "workload", "max_tokens"]
Entry = tuple[object, str]


def windows(frame: pd.DataFrame, key: Sequence[str] = WINDOW) -> list[tuple]:
    """The distinct values of ``key`` in ``frame``, sorted."""
    if frame.empty:
        return []
    return sorted(frame[list(key)].drop_duplicates().itertuples(index=False, name=None))


def of(frame: pd.DataFrame, key: tuple, cols: Sequence[str] = WINDOW) -> pd.DataFrame:
    """The rows of ``frame`` whose ``cols`` equal ``key``."""
    keep = np.ones(len(frame), bool)
    for col, value in zip(cols, key):
        keep &= (frame[col] == value).to_numpy(bool)
    return frame[keep]


def window_name(key: tuple, frame: pd.DataFrame, load: str | None = "concurrency") -> str:
    """A window as a reader names it: the workload, max_tokens where the workload ran
    several, the load (``concurrency 4``) unless ``load`` is None, engine and TP where several
    were measured. Plain text: escape it for LaTeX, :func:`charts.plain` it for a chart."""
    engine, tp, workload, mt = key[:4]
    out = str(workload)
    if frame.loc[frame["workload"] == workload, "max_tokens"].nunique() > 1:
        out += f", max_tokens {mt}"
    if load is not None and len(key) > 4:
        out += f", {load} {fmt_num(key[4], 'g')}"
    if frame[["engine", "tp"]].drop_duplicates().shape[0] > 1:
        out += f" ({engine} TP{tp})"
    return out


def grid(
    n: int, ncols: int, panel: tuple[float, float], sharey: bool = False
) -> tuple[plt.Figure, list[Axes]]:
    """A figure of ``n`` panels in rows of ``ncols`` (spare cells removed), each about
    ``panel`` inches, laid out by constrained layout with room for a legend below."""
    ncols = max(1, min(ncols, n))
    nrows = -(-n // ncols)
    fig, axes = plt.subplots(
        nrows,
        ncols,
        squeeze=False,
        sharey=sharey,
        layout="constrained",
        figsize=(min(6.4, panel[0] * ncols), 0.6 + panel[1] * nrows),
    )
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.remove()
    return fig, flat[:n]


def method_entries(palette: charts.Palette, methods: object) -> list[Entry]:
    """One legend entry per method present, a dot in its colour, in palette order."""
    present = set(methods)  # type: ignore[arg-type]
    return [
        (Line2D([], [], ls="none", marker="o", ms=6, color=palette[m]), charts.plain(m))
        for m in palette
        if m in present
    ]


def legend_below(fig: plt.Figure, entries: list[Entry], ncol: int = 3) -> None:
    """One legend under every panel of ``fig``."""
    if entries:
        fig.legend(
            *zip(*entries),
            loc="outside lower center",
            fontsize="small",
            frameon=False,
            ncol=max(1, min(ncol, len(entries))),
        )


def parts(keys: list[tuple], per_figure: int, max_figures: int) -> tuple[list[list[tuple]], int]:
    """``keys`` cut into figures of at most ``per_figure`` panels, at most ``max_figures``
    of them; also how many keys were left out."""
    shown = keys[: per_figure * max_figures]
    return (
        [shown[i : i + per_figure] for i in range(0, len(shown), per_figure)],
        len(keys) - len(shown),
    )
