"""The compare report's chart: B/A decode speed per matched window with its 95% paired t
interval, drawn as the main report draws speedups (:func:`report.charts.layout.ratio_figure`:
a panel per workload and max_tokens, a point per concurrency and method, log-2 axis around
the dashed 1x line; filled markers significant after Holm's adjustment, hollow ones not;
a window without an interval, one start per side, shows its point only)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from specsweep.report import charts
from specsweep.report.charts.layout import ratio_figure, save_figure

YLABEL = "B / A decode tok/s"


def decode_ratios(changes: pd.DataFrame) -> pd.DataFrame:
    """The closed-loop decode_tps rows as a speedup-shaped frame (speedup = ratio B/A): a
    point per concurrency; open-loop windows are in the changes table."""
    closed = changes["load"] == "closed" if "load" in changes else True
    frame = changes[(changes["metric"] == "decode_tps") & closed]
    return frame.assign(
        speedup=frame["ratio"], significant=frame["significant"].astype(bool)
    ).reset_index(drop=True)


def draw(changes: pd.DataFrame, path: Path) -> Path | None:
    """Save the chart to ``path``; None when no closed-loop window has a decode-speed row."""
    frame = decode_ratios(changes)
    if frame.empty:
        return None
    charts.set_theme()
    palette = charts.method_palette(frame["method"])
    fig = ratio_figure(frame, charts.plot_speedup_by_workload, palette)
    for ax in fig.axes:
        if ax.get_ylabel():
            ax.set_ylabel(YLABEL)
    return save_figure(fig, path)
