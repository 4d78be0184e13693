"""Effective concurrency beside the nominal one, wherever the report charts concurrency scaling.

A closed-loop window at nominal concurrency c keeps fewer than c requests in flight when it is
short (its last requests run with fewer neighbours): config_summary.effective_concurrency =
sum(e2e_s) / window span says how many it held on average. The throughput and
speedup-versus-concurrency charts label each nominal tick with it.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.axes import Axes

LEVEL_KEY = ["engine", "tp", "workload", "max_tokens", "concurrency"]


def concurrency_ticks(ax: Axes, frame: pd.DataFrame) -> None:
    """x ticks at the nominal concurrency levels of ``frame``, each with the mean
    effective_concurrency of its rows there beneath it (nominal alone where unknown), and an
    axis label saying so."""
    levels = sorted(frame["concurrency"].unique())
    eff = (frame.groupby("concurrency")["effective_concurrency"].mean()
           if "effective_concurrency" in frame else pd.Series(dtype=float))
    known = eff.reindex(levels)
    ax.set_xticks(levels, [f"{c:g}" + ("" if pd.isna(e) else f"\n{e:.1f}")
                           for c, e in zip(levels, known)])
    ax.set_xlabel("concurrency" + ("" if known.isna().all() else " (nominal; effective below)"))


def with_effective(rows: pd.DataFrame, summary: pd.DataFrame) -> pd.DataFrame:
    """``rows`` (one per method and level, e.g. speedup rows) with effective_concurrency: the
    mean over config_summary's windows at the same (engine, tp, workload, max_tokens,
    concurrency), every method's and the baseline's (a speedup compares two windows)."""
    if rows.empty or "effective_concurrency" not in summary:
        return rows
    eff = summary.groupby(LEVEL_KEY, as_index=False)["effective_concurrency"].mean()
    return rows.drop(columns="effective_concurrency", errors="ignore").merge(
        eff, on=LEVEL_KEY, how="left")
