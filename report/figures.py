"""Lay out and save the report's figures as vector PDFs.

Chooses which chart functions to call for the data at hand, gives each a figure
of a fitting size, and writes ``<name>.pdf``. A figure whose data is missing is
skipped (``None`` in the result) so the template can say so instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from report import charts
from report.data import ReportData

Plot = Callable[..., object]


def save_figure(fig: plt.Figure, path: Path) -> Path:
    """Write ``fig`` as a vector PDF and close it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="pdf", bbox_inches="tight")
    plt.close(fig)
    return path


def draw(path: Path, plots: list[tuple[Plot, pd.DataFrame]], palette: charts.Palette,
         size: tuple[float, float] = (6.4, 3.2)) -> Path:
    """One figure with a panel per ``(plot function, frame)``, saved to ``path``."""
    fig, axes = plt.subplots(1, len(plots), figsize=size, squeeze=False)
    for ax, (plot, frame) in zip(axes[0], plots):
        plot(ax, frame, palette)
    fig.tight_layout()
    return save_figure(fig, path)


def slug(text: str) -> str:
    """A file-name-safe slug of a workload name (figures are referenced by path in TeX)."""
    return re.sub(r"[^A-Za-z0-9]+", "-", str(text)).strip("-").lower() or "x"


def _wide(n_categories: int) -> tuple[float, float]:
    return (min(6.4, 2.5 + 0.9 * n_categories), 3.0)


def make_figures(data: ReportData, outdir: Path) -> dict[str, Path | None]:
    """Draw every figure the data supports into ``outdir``; name -> path or None."""
    charts.set_theme()
    pal = data.palette
    figs: dict[str, Path | None] = dict.fromkeys(
        ["speedup", "accept", "decode_tps", "ttft", "throughput", "agentic"])
    sp, cs, rm, ag = data.speedup, data.config_summary, data.request_metrics, data.agentic
    if not sp.empty:
        figs["speedup"] = draw(outdir / "speedup.pdf",
                               [(charts.plot_speedup_by_workload, sp)], pal)
        for i, (workload, sub) in enumerate(sp.groupby("workload", sort=True)):
            n = len(sub[["max_tokens", "concurrency"]].drop_duplicates())
            figs[f"speedup:{workload}"] = draw(
                outdir / f"speedup-{i}-{slug(workload)}.pdf",
                [(charts.plot_speedup_by_workload, sub)], pal, size=_wide(n))
    if cs["accept_length_tw"].notna().any():
        figs["accept"] = draw(outdir / "accept.pdf",
                              [(charts.plot_accept_length_by_workload, cs)], pal)
    if rm["decode_tps"].notna().any():
        figs["decode_tps"] = draw(outdir / "decode_tps.pdf",
                                  [(charts.plot_decode_tps_by_method, rm)], pal)
    if rm["ttft_s"].notna().any():
        figs["ttft"] = draw(outdir / "ttft.pdf", [(charts.plot_ttft_by_method, rm)], pal)
    if cs["throughput_tps"].notna().any():
        figs["throughput"] = draw(outdir / "throughput.pdf",
                                  [(charts.plot_throughput_by_concurrency, cs)], pal)
    if not ag.empty:
        figs["agentic"] = draw(outdir / "agentic.pdf",
                               [(charts.plot_ttft_by_turn, ag),
                                (charts.plot_context_by_turn, ag)], pal, size=(6.4, 2.8))
    return figs
