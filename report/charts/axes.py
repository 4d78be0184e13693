"""Axes helpers the charts share: an empty panel's message, a categorical x axis, slanted
crowded labels, the log-2 ratio axis and its legends, and the concurrency ticks."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import NullLocator

from specsweep.report.charts.theme import Palette, _order, plain


def _empty(ax: Axes, message: str) -> Axes:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()
    return ax


def ratio_axis(ax: Axes, values: Iterable[float]) -> None:
    """A log-2 y axis symmetric around 1, so that a ratio r and 1/r lie equally far from the
    1x line and one wide interval cannot squash the rest; ticks at powers of two labelled
    ``0.5×``, ``1×``, ``2×``, plus 0.667/1.5 (and 0.8/1.25 under 2x) below 3x either way."""
    v = np.asarray(list(values), float)
    v = v[np.isfinite(v) & (v > 0)]
    extent = float(np.abs(np.log2(v)).max()) if v.size else 0.0
    half = max(extent * 1.05 + 0.08, 0.45)  # in doublings; at least 1.37x either way
    ax.set_yscale("log", base=2)
    ax.set_ylim(2**-half, 2**half)
    step = 2 if half > 5 else 1  # beyond 32x label every other doubling
    ticks = [2.0**k for k in range(-int(half), int(half) + 1) if k % step == 0]
    if half < 1.6:  # under 3x either way powers of two alone leave the axis almost bare
        extra = (2 / 3, 0.8, 1.25, 1.5) if half < 1 else (2 / 3, 1.5)
        ticks += [t for t in extra if abs(np.log2(t)) < half]
    ticks = sorted(ticks)
    ax.set_yticks(ticks, [f"{t:.3g}\u00d7" for t in ticks])
    ax.yaxis.set_minor_locator(NullLocator())


def ratio_legend(palette: Palette, methods: Iterable[str]) -> list[tuple[Line2D, str]]:
    """Legend entries for a ratio chart: one dot per method present, in its colour (what
    filled and hollow mean is :func:`significance_legend`)."""
    return [
        (Line2D([], [], ls="none", marker="o", ms=6, color=palette[m]), plain(m))
        for m in _order(palette, methods)
    ]


def significance_legend() -> list[tuple[Line2D, str]]:
    """Grey proxy markers: filled = 95% CI excludes 1 (significant), hollow = it does not."""
    return [
        (
            Line2D([], [], ls="none", marker="o", ms=6, color="0.35"),
            "filled: significant (Holm-adjusted over the campaign)",
        ),
        (
            Line2D([], [], ls="none", marker="o", ms=6, mfc="white", mec="0.35"),
            "hollow: not significant (or no interval)",
        ),
    ]


def noise_legend(frame: pd.DataFrame) -> list[tuple[object, str]]:
    """Legend entries for what a speedup chart draws besides the methods: the grey band of
    start_spread (where any row has one) and the A/A control's grey x (where the plan ran
    one)."""
    out: list[tuple[object, str]] = []
    if "start_spread" in frame and frame["start_spread"].notna().any():
        out.append((Patch(color="0.88"), "grey band: two starts of one service, 95%"))
    if "is_control" in frame and frame["is_control"].fillna(False).astype(bool).any():
        out.append((Line2D([], [], ls="none", marker="x", color="0.45"), "x: A/A control"))
    return out


def _categorical(ax: Axes, n: int, label: str) -> None:
    """A categorical x axis of n slots: no grid across it, half a slot of margin."""
    ax.set_xlim(-0.5, n - 0.5)
    ax.grid(axis="x", visible=False)
    ax.set_xlabel(label)


def _slant_if_crowded(ax: Axes, n: int, room: int = 5) -> None:
    """Tilt the x tick labels when more than ``room`` categories share the axis."""
    if n > room:
        ax.tick_params(axis="x", labelrotation=30)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")


def concurrency_ticks(ax: Axes, frame: pd.DataFrame) -> None:
    """x ticks at the nominal concurrency levels, each with the mean effective_concurrency
    (config_summary: sum e2e / span) of its rows beneath it, and an axis label saying so."""
    levels = sorted(frame["concurrency"].unique())
    eff = (
        frame.groupby("concurrency")["effective_concurrency"].mean()
        if "effective_concurrency" in frame
        else pd.Series(dtype=float)
    )
    known = eff.reindex(levels)
    ax.set_xticks(
        levels, [f"{c:g}" + ("" if pd.isna(e) else f"\n{e:.1f}") for c, e in zip(levels, known)]
    )
    ax.set_xlabel("concurrency" + ("" if known.isna().all() else " (nominal; effective below)"))
