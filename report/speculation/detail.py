"""Acceptance in detail: per-position acceptance (position_acceptance) and the histogram of
draft tokens accepted per verify step (accepted_histogram), a panel per window and a line
or a bar per method in its colour. Only engines that report per-request details fill these
tables (vLLM's detailed metrics, SGLang's spec_tokens_details); llama.cpp reports only
draft counts."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from specsweep.report import charts
from specsweep.report.speculation.panels import grid, legend_below, method_entries, of
from specsweep.report.speculation.panels import window_name as name


def _methods(frame: pd.DataFrame, palette: charts.Palette) -> list[str]:
    present = set(frame["method"])
    return [m for m in palette if m in present] + sorted(present - set(palette))


def plot_rate_by_position(ax: Axes, frame: pd.DataFrame, palette: charts.Palette) -> Axes:
    """Share of verify steps whose draft token at position k was accepted, against k, a
    line per method (a token at k is accepted only if every earlier one was, so the lines
    fall)."""
    data = frame.dropna(subset=["rate"])
    if data.empty:
        return charts._empty(ax, "no per-position counts")
    for method in _methods(data, palette):
        line = data[data["method"] == method].sort_values("position")
        ax.plot(
            line["position"],
            line["rate"],
            color=palette.get(method, (0.5, 0.5, 0.5)),
            **charts.LINE_MARKER,
        )
    ax.set_ylim(0, 1.02)
    ax.set_xticks(sorted(data["position"].unique()))
    ax.set_xlabel("draft position k")
    ax.set_ylabel("accepted at k (share of steps)")
    return ax


def plot_share_by_accepted(ax: Axes, frame: pd.DataFrame, palette: charts.Palette) -> Axes:
    """Share of verify steps that accepted exactly j draft tokens, against j, bars side by
    side per method."""
    data = frame.dropna(subset=["share"])
    if data.empty:
        return charts._empty(ax, "no histogram")
    methods = _methods(data, palette)
    width = 0.8 / len(methods)
    for i, method in enumerate(methods):
        sub = data[data["method"] == method]
        x = sub["accepted"].to_numpy(float) - 0.4 + width * (i + 0.5)
        ax.bar(
            x,
            sub["share"].to_numpy(float),
            width,
            color=charts.fill(palette.get(method, (0.5, 0.5, 0.5))),
        )
    js = sorted(data["accepted"].unique())
    ax.set_xticks(js)
    ax.set_xlim(min(js) - 0.5, max(js) + 0.5)
    ax.grid(axis="x", visible=False)
    ax.set_xlabel("draft tokens accepted in a verify step (j)")
    ax.set_ylabel("share of verify steps")
    return ax


def figure(
    frame: pd.DataFrame, keys: list[tuple], palette: charts.Palette, plot: str
) -> plt.Figure:
    """A panel per window in ``keys`` drawn by ``plot`` ('position' or 'histogram'); one
    legend of the methods below."""
    draw = plot_rate_by_position if plot == "position" else plot_share_by_accepted
    fig, axes = grid(len(keys), 2, (3.2, 2.2), sharey=True)
    for ax, key in zip(axes, keys):
        draw(ax, of(frame, key), palette)
        ax.set_title(charts.plain(name(key, frame)), fontsize="small", loc="left")
    for ax in axes[1::2]:
        ax.set_ylabel("")
    legend_below(fig, method_entries(palette, frame["method"]), ncol=4)
    return fig


def sources(pa: pd.DataFrame) -> str:
    """Where the per-position counts came from, as a phrase (plain text)."""
    words = {
        "per_pos": "per-position counters",
        "histogram": "acceptance histograms",
        "steps": "per-step accepted counts",
    }
    kinds = {k for s in pa["source"].dropna() for k in str(s).split(",") if k}
    found = [words.get(k, k) for k in sorted(kinds)]  # a window's sources: 'histogram,per_pos'
    return " and ".join(found) if found else ""


def engines(frame: pd.DataFrame) -> str:
    """The engines that reported details, as text."""
    return ", ".join(sorted(np.unique(frame["engine"].astype(str))))
