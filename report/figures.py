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
import numpy as np
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


SWEEP_KEY = ["engine", "tp", "workload", "max_tokens", "method"]


def sweep_frame(speedup: pd.DataFrame, crossover: pd.DataFrame | None) -> pd.DataFrame:
    """Speedup rows of every setting measured at two or more concurrency levels (per the
    crossover view), with ``is_crossover`` marking each setting's crossover level."""
    if crossover is None or crossover.empty or speedup.empty:
        return pd.DataFrame()
    swept = crossover.loc[crossover["status"] != "single level",
                          [*SWEEP_KEY, "crossover_concurrency"]]
    out = speedup.merge(swept, on=SWEEP_KEY, how="inner")
    out["is_crossover"] = (out["concurrency"] == out["crossover_concurrency"]).fillna(False)
    return out


def _facet_title(workload: str, max_tokens: int, engine: str, tp: int,
                 frame: pd.DataFrame) -> str:
    """Panel title naming only what varies: workload, max_tokens if several, engine if several."""
    title = charts.plain(workload)
    if frame.loc[frame["workload"] == workload, "max_tokens"].nunique() > 1:
        title += f", max_tokens {max_tokens}"
    setup = f"{charts.plain(engine)} TP{tp}" if frame["engine"].nunique() > 1 else f"TP{tp}"
    return f"{title} | {setup}"


def draw_sweeps(path: Path, frame: pd.DataFrame, palette: charts.Palette) -> Path:
    """The speedup-versus-concurrency figure (:func:`sweeps_figure`) saved to ``path``."""
    return save_figure(sweeps_figure(frame, palette), path)


def sweeps_figure(frame: pd.DataFrame, palette: charts.Palette) -> plt.Figure:
    """Speedup versus concurrency: a row of panels per (workload, max_tokens), a column per
    (engine, tp), one shared legend below; panels share the y axis along a row."""
    rows = sorted(frame[["workload", "max_tokens"]].drop_duplicates().itertuples(index=False))
    cols = sorted(frame[["engine", "tp"]].drop_duplicates().itertuples(index=False))
    size = (min(6.4, 1.4 + 2.6 * len(cols)), 0.4 + 2.5 * len(rows))
    fig, axes = plt.subplots(len(rows), len(cols), figsize=size, squeeze=False, sharey="row")
    for (workload, mt), ax_row in zip(rows, axes):
        for (engine, tp), ax in zip(cols, ax_row):
            panel = frame[(frame["workload"] == workload) & (frame["max_tokens"] == mt)
                          & (frame["engine"] == engine) & (frame["tp"] == tp)]
            charts.plot_speedup_by_concurrency(ax, panel, palette)
            ax.set_title(_facet_title(workload, mt, engine, tp, frame), fontsize="small")
    for (i, j), ax in np.ndenumerate(axes):  # axis titles once per row and column
        ax.set_xlabel(ax.get_xlabel() if i == len(rows) - 1 else "")
        ax.set_ylabel(ax.get_ylabel() if j == 0 else "")
    _shared_legend(fig, axes, [charts.plain(m) for m in palette] + ["crossover"])
    fig.tight_layout()
    return fig


def _shared_legend(fig: plt.Figure, axes: np.ndarray, order: list[str]) -> None:
    """One legend below the panels with every label any panel drew, in ``order``."""
    handles: dict[str, object] = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    labels = sorted(handles, key=lambda lb: order.index(lb) if lb in order else len(order))
    fig.legend([handles[lb] for lb in labels], labels, loc="upper center",
               ncol=min(len(labels), 5), bbox_to_anchor=(0.5, 0.0), fontsize="small",
               frameon=False)


def _wide(n_categories: int) -> tuple[float, float]:
    return (min(6.4, 2.5 + 0.9 * n_categories), 3.0)


def make_figures(data: ReportData, outdir: Path) -> dict[str, Path | None]:
    """Draw every figure the data supports into ``outdir``; name -> path or None."""
    charts.set_theme()
    pal = data.palette
    figs: dict[str, Path | None] = dict.fromkeys(
        ["speedup", "accept", "decode_tps", "ttft", "throughput", "crossover", "agentic",
         "energy"])
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
    sweeps = sweep_frame(sp, data.crossover)
    if not sweeps.empty:
        figs["crossover"] = draw_sweeps(outdir / "crossover.pdf", sweeps, pal)
    if not data.energy_ratio.empty:
        figs["energy"] = draw(outdir / "energy.pdf",
                              [(charts.plot_energy_ratio_by_workload, data.energy_ratio)], pal)
    if not ag.empty:
        figs["agentic"] = draw(outdir / "agentic.pdf",
                               [(charts.plot_ttft_by_turn, ag),
                                (charts.plot_context_by_turn, ag)], pal, size=(6.4, 2.8))
    return figs
