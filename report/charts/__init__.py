"""Chart functions: one pure function per figure, drawing on a given matplotlib Axes.
Each ``plot_<metric>_by_<axis>(ax, frame, palette)`` reads only its frame (an analysis view as
a DataFrame) and metric labels (metric_catalog's, report.labels), draws, and returns the Axes;
it never saves or shows. One theme (:func:`set_theme`) and one colour per method
(:func:`method_palette`, baseline first, then sorted) keep every figure consistent.

The look is :mod:`report.charts.theme`'s, the shared axes helpers :mod:`report.charts.axes`'s,
the charts per workload, method and turn :mod:`report.charts.workload`'s and those against
concurrency :mod:`report.charts.concurrency`'s. The names below are re-exported because many
modules use them as ``charts.X`` (``charts._empty`` included: the section packages' charts
show the same empty-panel message)."""

from __future__ import annotations

from specsweep.report.charts.axes import (
    _empty,
    concurrency_ticks,
    noise_legend,
    ratio_axis,
    ratio_legend,
    significance_legend,
)
from specsweep.report.charts.concurrency import (
    plot_speedup_by_concurrency,
    plot_throughput_by_concurrency,
)
from specsweep.report.charts.theme import (
    BASELINE,
    COLORBLIND,
    DASHES,
    FILL_SATURATION,
    LINE_MARKER,
    MARKERS,
    THEME,
    Palette,
    fill,
    method_palette,
    plain,
    set_theme,
)
from specsweep.report.charts.workload import (
    BOX_EDGE,
    box_stats,
    plot_accept_length_by_workload,
    plot_context_by_turn,
    plot_decode_tps_by_method,
    plot_energy_ratio_by_workload,
    plot_speedup_by_workload,
    plot_ttft_by_method,
    plot_ttft_by_turn,
)

__all__ = [
    "BASELINE",
    "BOX_EDGE",
    "COLORBLIND",
    "DASHES",
    "FILL_SATURATION",
    "LINE_MARKER",
    "MARKERS",
    "THEME",
    "Palette",
    "_empty",
    "box_stats",
    "concurrency_ticks",
    "fill",
    "method_palette",
    "plain",
    "plot_accept_length_by_workload",
    "plot_context_by_turn",
    "plot_decode_tps_by_method",
    "plot_energy_ratio_by_workload",
    "plot_speedup_by_concurrency",
    "plot_speedup_by_workload",
    "plot_throughput_by_concurrency",
    "plot_ttft_by_method",
    "plot_ttft_by_turn",
    "ratio_axis",
    "noise_legend",
    "ratio_legend",
    "set_theme",
    "significance_legend",
]
