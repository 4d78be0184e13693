"""Lay out and save the report's figures as vector PDFs.

Chooses which figures to draw for the data at hand (:func:`figure_jobs`), each laid out by
:mod:`report.charts.layout` or by a section package (:mod:`report.openloop`,
:mod:`report.speculation`), and writes ``<name>.pdf``, in worker processes when the CPUs
allow (:func:`make_figures`). A figure whose data is missing is skipped (``None`` in the
result) so the template can say so instead.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pandas as pd

from specsweep.interrupt import worker_pool
from specsweep.report import charts
from specsweep.report.charts.layout import (
    Plot,
    draw,
    draw_sweeps,
    ratio_figure,
    save_figure,
    sweep_parts,
)
from specsweep.report.data import ReportData
from specsweep.report.openloop import section as openloop
from specsweep.report.race import section as race
from specsweep.report.speculation import section as speculation


def slug(text: str) -> str:
    """A file-name-safe slug of a workload name (figures are referenced by path in TeX)."""
    return re.sub(r"[^A-Za-z0-9]+", "-", str(text)).strip("-").lower() or "x"


def throughput_lines(cs: pd.DataFrame) -> pd.DataFrame:
    """config_summary rows with ``workload`` naming a line of the throughput chart: the
    workload plus its max_tokens where the workload ran several, plus engine and TP where
    several were measured, so that the chart (which averages rows of one workload, method
    and concurrency) never averages different settings into one line."""
    label = cs["workload"].astype(str)
    several_mt = cs.groupby("workload")["max_tokens"].transform("nunique") > 1
    label = label.where(~several_mt, label + " mt=" + cs["max_tokens"].astype(str))
    if len(cs[["engine", "tp"]].drop_duplicates()) > 1:
        label = label + " " + cs["engine"].astype(str) + " TP" + cs["tp"].astype(str)
    return cs.assign(workload=label)


def with_spread(rows: pd.DataFrame, sv: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Ratio rows (energy_ratio) with start_spread: the start_variance of ``metric`` at their
    engine, tp and concurrency (the grey band of the ratio chart); unchanged without it."""
    if rows.empty or sv.empty or "start_spread" in rows:
        return rows
    key = ["engine", "tp", "concurrency"]
    at = sv[(sv["metric"] == metric) & (sv["load"] == "concurrency")]
    at = at.assign(concurrency=at["level"].astype(int))[[*key, "start_spread"]]
    return rows.merge(at, on=key, how="left")


Job = tuple[str, Callable[[], Path]]  # (figure key, draw-and-save returning the PDF path)
MAX_WORKERS = 4  # figure processes at most; each figure costs 0.1-1 s of CPU, 13 at 10k


def _save_ratio(
    path: Path, frame: pd.DataFrame, plot: Plot, palette: charts.Palette, value: str = "speedup"
) -> Path:
    return save_figure(ratio_figure(frame, plot, palette, value), path)


def figure_jobs(data: ReportData, outdir: Path) -> list[Job]:
    """One job per figure the data supports, the costliest (most panels) first."""
    pal, jobs = data.palette, []
    sp, cs, dist, ag = data.speedup, data.config_summary, data.distribution, data.agentic
    labels = {"labels": data.labels}  # the axes' metric labels (metric_catalog)

    def add(key: str, func: Callable[..., Path], *args: object, **kwargs: object) -> None:
        jobs.append((key, partial(func, *args, **kwargs)))

    for i, part in enumerate(sweep_parts(data.speedup_sweep)):
        # concurrency.pdf, then concurrency-2.pdf, ... (keys 'concurrency', 'concurrency:2', ...):
        # speedup against concurrency, rings at each method's crossover
        key, name = (
            ("concurrency", "concurrency")
            if i == 0
            else (f"concurrency:{i + 1}", f"concurrency-{i + 1}")
        )
        add(key, draw_sweeps, outdir / f"{name}.pdf", part, pal)
    if not sp.empty:
        add(
            "speedup", _save_ratio, outdir / "speedup.pdf", sp, charts.plot_speedup_by_workload, pal
        )
        for i, (workload, sub) in enumerate(sp.groupby("workload", sort=True)):
            add(
                f"speedup:{workload}",
                _save_ratio,
                outdir / f"speedup-{i}-{slug(workload)}.pdf",
                sub,
                charts.plot_speedup_by_workload,
                pal,
            )
    if not data.energy_ratio.empty:
        add(
            "energy",
            _save_ratio,
            outdir / "energy.pdf",
            with_spread(data.energy_ratio, data.start_variance, "j_per_token"),
            charts.plot_energy_ratio_by_workload,
            pal,
            value="energy_ratio",
        )
    if cs["throughput_tps"].notna().any():
        add(
            "throughput",
            draw,
            outdir / "throughput.pdf",
            [(partial(charts.plot_throughput_by_concurrency, **labels), throughput_lines(cs))],
            pal,
        )
    if not ag.empty:
        add(
            "agentic",
            draw,
            outdir / "agentic.pdf",
            [(charts.plot_ttft_by_turn, ag), (charts.plot_context_by_turn, ag)],
            pal,
            size=(6.4, 2.8),
            shared_legend=True,
        )
    if cs["accept_length_tw"].notna().any():
        add(
            "accept",
            draw,
            outdir / "accept.pdf",
            [(partial(charts.plot_accept_length_by_workload, **labels), cs)],
            pal,
        )
    if (dist["metric"] == "decode_tps").any():
        add(
            "decode_tps",
            draw,
            outdir / "decode_tps.pdf",
            [(charts.plot_decode_tps_by_method, dist)],
            pal,
        )
    if (dist["metric"] == "ttft_s").any():
        add("ttft", draw, outdir / "ttft.pdf", [(charts.plot_ttft_by_method, dist)], pal)
    return (
        jobs
        + openloop.figure_jobs(data, outdir, save_figure)
        + speculation.figure_jobs(data, outdir, save_figure)
        + race.figure_jobs(data, outdir, save_figure)
    )


def figure_workers() -> int:
    """Processes to draw figures in: the CPUs this process may use (at most MAX_WORKERS) on
    Linux; 1 (draw in this process) elsewhere."""
    if sys.platform != "linux":
        return 1
    return max(1, min(MAX_WORKERS, len(os.sched_getaffinity(0))))


def _run_job(job: Job) -> tuple[str, Path]:
    """Draw one figure in a worker, in the report's theme (a worker starts from the fork
    server, not from this process: it has not set it)."""
    key, make = job
    charts.set_theme()
    return key, make()


def make_figures(
    data: ReportData, outdir: Path, workers: int | None = None
) -> dict[str, Path | None]:
    """Draw every figure the data supports into ``outdir``; name -> path or None.

    Figures are independent, so with ``workers`` > 1 (default :func:`figure_workers`) they
    are drawn by that many worker processes; the files are the same as drawn one by one.
    Workers come from a fork server (a fresh interpreter that imported this module), never
    forked from this process: a process with threads (DuckDB's, or a Ray client's gRPC
    threads in the test suite) can be forked while one of them holds a lock, and the child
    then waits on it forever (seen in CI: a figure worker stuck in a futex). Each job, a
    partial of a module-level function with its frames, is pickled to its worker."""
    charts.set_theme()
    figs: dict[str, Path | None] = dict.fromkeys(
        [
            "speedup",
            "accept",
            "decode_tps",
            "ttft",
            "throughput",
            "concurrency",
            "agentic",
            "energy",
        ]
    )
    jobs = figure_jobs(data, outdir)
    workers = min(figure_workers() if workers is None else workers, len(jobs))
    if workers <= 1:
        done = {key: make() for key, make in jobs}
    else:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([__name__])
        with worker_pool(context, workers) as pool:
            done = dict(pool.imap_unordered(_run_job, jobs, chunksize=1))
    figs.update((key, done[key]) for key, _ in jobs)  # the jobs' order, not completion's
    return figs
