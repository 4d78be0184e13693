"""The summary's sentence on energy: the paired energy ratios (table energy_ratio), adjusted in
the campaign's one Holm family with the speedups (report.findings.design)."""

from __future__ import annotations

import pandas as pd

from specsweep.report.text import data as d
from specsweep.report.text import num, times


def _reason(row: pd.Series) -> str:
    """Why a row has no interval (its ci_reason; 'too few prompts' for a file without one)."""
    why = row.get("ci_reason")
    return why if isinstance(why, str) and why else "too few prompts"


def energy_finding(er: pd.DataFrame) -> list[str]:
    """One summary sentence on the paired energy ratios (marked text): the lowest ratio among
    those significantly below 1 (Holm, in the campaign's one family with the speedups), quoted
    with its simultaneous interval (it is picked); with none, the lowest point estimate, said
    to be not significantly below 1 (with why it has no interval, where it has none)."""
    if "is_control" in er:
        er = er[~er["is_control"].fillna(False).astype(bool)]
    if er.empty:
        return []
    sig = er["significant"].fillna(False).astype(bool)
    less = int((sig & (er["energy_ratio"] < 1)).sum())
    more = int((sig & (er["energy_ratio"] > 1)).sum())
    lower = er[sig & (er["energy_ratio"] < 1)]
    best = (lower if not lower.empty else er).sort_values("energy_ratio").iloc[0]
    low, high, kind = "ci_low", "ci_high", "95% CI"
    if not pd.isna(best.get("sim_ci_low")):
        low, high, kind = "sim_ci_low", "sim_ci_high", "simultaneous 95% CI"
    span = (
        f"{kind} {num(best[low])}\u2013{num(best[high])}"
        if not pd.isna(best[low])
        else "no interval: " + d(_reason(best))
    )
    where = (
        f"{d(best['method'])} on {d(best['workload'])} at {times(best['energy_ratio'])} ({span})"
    )
    lead = (
        f"Energy per output token (GPU board power): {less} of {len(er)} comparisons use "
        f"significantly less than the baseline and {more} significantly more; "
    )
    if not lower.empty:
        return [lead + f"the lowest significant ratio is {where}."]
    return [lead + f"the lowest point estimate, {where}, is not significantly below 1."]
