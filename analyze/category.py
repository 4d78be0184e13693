"""Acceptance length and speedup per prompt category: the tables category_speedup (per window)
and category_pooled (one row per method and category over the concurrency-1 windows that share
max_tokens).

Input: the TEMP view category_cells (analyze/sql/category_cells.sql), the `speedup` table's
(run, prompt) cells with each prompt's category, its d (mean ln decode_tps of M - of the
baseline) and g (mean ln acceptance length of M's requests). For a group of cells (run r,
prompt p), with stats.paired's t interval (calibrated by tests/unit/stats/test_paired_coverage.py
and, at 3-32 prompts, tests/unit/analyze/test_category_coverage.py):

    speedup         = exp(mean d')         ci_low, ci_high = interval(d, start, dt)
    acceptance_gain = exp(mean g)          acceptance_low, acceptance_high = interval(g)
    accept_length   = sum(tokens) / sum(steps)   (pooled, token-weighted; no interval)

start is the stratum's start variance and drift as the `speedup` table takes them (the
closed-loop decode speed's, analyze.starts: the same starts, the same metric), d' the drift-
corrected d, dt each run's start position of M minus the baseline's. Acceptance takes no start
variance (its own runs carry it, mean_variance): a service start does not change which drafts
are accepted.
The acceptance figures are NULL where some of M's requests have no verify count (the factors of
a subset would not be the speedup's). Below stats.paired.MIN_PROMPTS prompts there is no
interval (ci_reason, acceptance_reason). p_holm, significant, n_family, sim_ci_low,
sim_ci_high: analyze.stats.adjust_family over each table's own rows of a campaign (a family of
its own: a breakdown is not the campaign's claims).

category_pooled pools the concurrency-1 windows of (campaign_id, engine, tp, max_tokens, method):
a prompt is (workload, prompt_id), distinct across workloads, so no prompt counts twice; a
group whose windows measured different runs has no interval (its cells are not a full run x
prompt grid). What may be pooled, and why:

- acceptance across windows of a method only where they share max_tokens and the closed-loop
  concurrency-1 regime. max_tokens: acceptance changes along the output (late tokens of long
  replies repeat earlier text, which n-gram and tree drafters accept more), so windows of two
  output lengths estimate two different quantities. Concurrency 1: the one regime every plan
  measures; at higher concurrency an engine may change how it speculates (cap or switch off
  drafting under large batches, share a draft budget among slots), so acceptance there need
  not be the same quantity (acceptance_by_load shows whether it moved).
- speedup across workloads at concurrency 1 and one max_tokens, for the same reason and
  because each prompt is still paired with the baseline's own window; NEVER across
  concurrencies: the speedup is acceptance over step cost, and step cost grows with the batch
  (acceptance_by_load), so a pooled figure would average different estimands weighted by how
  many prompts each level happened to have, and the same prompt measured at several levels
  would count as several independent prompts, while the t interval takes its prompts as
  independent.

Coverage is checked at 3-10 prompts (a category's size: MT-Bench has 10 a category;
tests/unit/analyze/test_category_coverage.py: speedup 93.9-97.0%, acceptance 92.2-94.6% with
acceptance rates Beta-distributed per prompt, skewed either way), at 16, 25 and 32 (the GPU
plans' ShareGPT split: speedup 92.8-96.7%, acceptance 92.1-95.8%) and at 30
(tests/unit/stats/test_paired_coverage.py's grid 3, 5, 8, 30); above 32 prompts it is not
simulated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from specsweep.analyze.starts import CLOSED_STRATUM
from specsweep.analyze.stats import adjust_family, insert_frame
from specsweep.schema.controls import aa_control_name
from specsweep.schema.keys import COMPARISON_KEY
from specsweep.stats.paired import MIN_PROMPTS, interval
from specsweep.stats.starts import StartVariance

POOLED = ["campaign_id", "engine", "tp", "max_tokens"]
POOLED_CONCURRENCY = 1
Variances = dict[tuple, StartVariance]
NONE = StartVariance(reason="no start variance for this stratum")

# (name, type, comment) of the columns both tables share after their keys
FIGURES = [
    ("category", "VARCHAR NOT NULL", "the prompts' category"),
    ("is_control", "BOOLEAN NOT NULL", "M is the baseline's A/A control"),
    ("n_prompts", "INTEGER NOT NULL", "prompts of the category in the comparison"),
    ("n_runs", "INTEGER NOT NULL", "runs of the campaign the cells come from"),
    ("n", "INTEGER NOT NULL", "M's requests"),
    ("n_baseline", "INTEGER NOT NULL", "the baseline's requests"),
    ("n_verified", "INTEGER NOT NULL", "M's requests with a verify count"),
    ("accept_length", "DOUBLE", "decode tokens / verify steps, pooled (accept_length_tw)"),
    ("acceptance_gain", "DOUBLE", "exp(mean over cells of mean ln acceptance length)"),
    ("acceptance_low", "DOUBLE", "its 95% t interval (NULL: acceptance_reason)"),
    ("acceptance_high", "DOUBLE", ""),
    ("acceptance_reason", "VARCHAR", "why no acceptance figure or interval"),
    ("speedup", "DOUBLE", "exp(mean over cells of d): the paired geometric mean"),
    ("ci_low", "DOUBLE", "its 95% t interval (NULL: ci_reason)"),
    ("ci_high", "DOUBLE", ""),
    ("ci_reason", "VARCHAR", "why no interval"),
    ("df", "DOUBLE", "the t interval's degrees of freedom"),
    ("p_value", "DOUBLE", "two-sided t test of no change"),
    ("log_se", "DOUBLE", "standard error of ln speedup"),
    ("start_sd", "DOUBLE", "the stratum's start sd in the interval (NULL: none)"),
    ("p_holm", "DOUBLE", "Holm over the table's rows of the campaign"),
    ("significant", "BOOLEAN", "p_holm < 0.05; NULL for the control"),
    ("n_family", "INTEGER", "rows in that family"),
    ("sim_ci_low", "DOUBLE", "simultaneous interval over the family"),
    ("sim_ci_high", "DOUBLE", ""),
]
KEYS = {
    "category_speedup": [("campaign_id", "VARCHAR NOT NULL"), ("engine", "VARCHAR NOT NULL"),
                         ("tp", "INTEGER NOT NULL"), ("workload", "VARCHAR NOT NULL"),
                         ("max_tokens", "INTEGER NOT NULL"), ("concurrency", "INTEGER NOT NULL"),
                         ("method", "VARCHAR NOT NULL")],
    "category_pooled": [("campaign_id", "VARCHAR NOT NULL"), ("engine", "VARCHAR NOT NULL"),
                        ("tp", "INTEGER NOT NULL"), ("max_tokens", "INTEGER NOT NULL"),
                        ("method", "VARCHAR NOT NULL"),
                        ("workloads", "VARCHAR NOT NULL"),  # pooled, sorted, ', '-joined
                        ("n_windows", "INTEGER NOT NULL")],
}  # fmt: skip


def ddl(table: str) -> str:
    """CREATE OR REPLACE TABLE of one of KEYS' tables, its columns typed and commented."""
    cols = [(f"{n} {t}", "") for n, t in KEYS[table]] + [(f"{n} {t}", c) for n, t, c in FIGURES]
    lines = [
        f"    {decl}{',' if i < len(cols) - 1 else ''}" + (f"  -- {note}" if note else "")
        for i, (decl, note) in enumerate(cols)
    ]
    return f"CREATE OR REPLACE TABLE {table} (\n" + "\n".join(lines) + "\n)"


def matrix(cells: Mapping[str, Any], value: str, prompt: str) -> np.ndarray | None:
    """The (R, P) matrix of ``value`` over (run, prompt), runs and prompts sorted, each cell
    the first non-null value of its (run, prompt); None when some cell has none. (What
    pandas' pivot_table with aggfunc "first" gives, in numpy: pivot_table took 8 ms a group,
    half of a small campaign's analysis.)"""
    v = np.asarray(cells[value], float)
    runs, r = np.unique(np.asarray(cells["run"]), return_inverse=True)
    prompts, p = np.unique(np.asarray(cells[prompt]), return_inverse=True)
    ok = ~np.isnan(v)
    codes, first = np.unique(r[ok] * len(prompts) + p[ok], return_index=True)
    if len(codes) < len(runs) * len(prompts):
        return None
    return v[ok][first].reshape(len(runs), len(prompts))


# the columns of category_cells that figures reads, as numpy arrays (pandas' per-group
# column access, groupby and nunique cost 2-3 ms a group, most of the tables' time)
COLUMNS = ("run", "n", "n_verified", "n_baseline", "d", "g", "dt", "tokens", "steps")


def figures(cells: Mapping[str, np.ndarray], prompt: str, start: StartVariance) -> dict:
    """The FIGURES of one (comparison, category) group of cells (COLUMNS and `prompt`, each
    an array over the group's cells; nulls are NaN and are skipped, as pandas' sums do)."""
    n, verified = int(np.nansum(cells["n"])), int(np.nansum(cells["n_verified"]))
    d, g = matrix(cells, "d", prompt), matrix(cells, "g", prompt)
    runs, run = np.unique(cells["run"], return_inverse=True)
    dt = np.asarray(cells["dt"], float)
    counts = np.bincount(run, weights=~np.isnan(dt), minlength=len(runs))
    sums = np.bincount(run, weights=np.nan_to_num(dt), minlength=len(runs))
    dt = np.divide(sums, counts, out=np.zeros(len(runs)), where=counts > 0)  # a run's mean, or 0
    sp = None if d is None else interval(d, start=start, dt=dt)
    acc = interval(g) if g is not None and verified == n else None
    out = {
        "n_prompts": len(np.unique(cells[prompt])), "n_runs": len(runs), "n": n,
        "n_baseline": int(np.nansum(cells["n_baseline"])), "n_verified": verified,
        "accept_length": _ratio(cells["tokens"], cells["steps"]) if verified else None,
        "acceptance_gain": acc.speedup if acc else None,
        "acceptance_low": acc.ci_low if acc else None,
        "acceptance_high": acc.ci_high if acc else None,
        "acceptance_reason": _acceptance_reason(acc, verified, n, g),
        "speedup": sp.speedup if sp else float(np.exp(_nanmean(cells["d"]))),
        "ci_low": sp.ci_low if sp else None, "ci_high": sp.ci_high if sp else None,
        "ci_reason": sp.reason if sp else "windows measured in different runs",
        "df": sp.df if sp else None, "p_value": sp.p_value if sp else None,
        "log_se": sp.log_se if sp else None,
        "start_sd": start.s2**0.5 if sp and sp.ci_low is not None else None,
    }  # fmt: skip
    return out


def _nanmean(values: np.ndarray) -> float:
    """The mean, nulls skipped (pandas' mean); NaN when every value is null."""
    v = np.asarray(values, float)
    return float(v[~np.isnan(v)].mean()) if (~np.isnan(v)).any() else float("nan")


def _ratio(tokens: np.ndarray, steps: np.ndarray) -> float:
    """sum(tokens) / sum(steps), nulls skipped (pandas' sums)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.nansum(np.asarray(tokens, float)) / np.nansum(np.asarray(steps, float)))


def _acceptance_reason(acc, verified: int, n: int, g: np.ndarray | None) -> str | None:
    if verified == 0:
        return "no verify counts"
    if verified < n:
        return f"{n - verified} of {n} requests without a verify count"
    if g is None:
        return "windows measured in different runs"
    return acc.reason


def rows(
    cells: pd.DataFrame, key: Sequence[str], prompt: str, baseline: str, variances: Variances
) -> pd.DataFrame:
    """One row per (key, method, category) group of cells; variances: the closed-loop
    strata's StartVariance (analyze.stats.paired_speedups), by CLOSED_STRATUM."""
    aa, out, by = aa_control_name(baseline), [], [*key, "method", "category"]
    arrays = {c: cells[c].to_numpy() for c in (*COLUMNS, prompt)}
    strata = cells[list(CLOSED_STRATUM)].to_numpy()
    for group, at in cells.groupby(by, sort=True).indices.items():
        start = variances.get(tuple(strata[at[0]]), NONE)
        out.append({**dict(zip(by, group)), "is_control": group[len(key)] == aa,
                    **figures({c: a[at] for c, a in arrays.items()}, prompt, start)})  # fmt: skip
    return pd.DataFrame.from_records(out)


def pooled(cells: pd.DataFrame, baseline: str, variances: Variances) -> pd.DataFrame:
    """category_pooled's rows: the concurrency-1 cells of each (POOLED, method, category)."""
    c1 = cells[cells["concurrency"] == POOLED_CONCURRENCY]
    if c1.empty:
        return pd.DataFrame()
    # a prompt is (workload, prompt_id): prompt ids are a workload's own
    c1 = c1.assign(prompt=c1["workload"] + "\x1f" + c1["prompt_id"])
    frame = rows(c1, POOLED, "prompt", baseline, variances)
    names = c1.groupby([*POOLED, "method", "category"])["workload"].agg(
        lambda w: ", ".join(sorted(set(w)))
    )
    frame["workloads"] = names.to_numpy()  # both grouped in the same sorted order
    frame["n_windows"] = frame["workloads"].str.count(", ") + 1
    return frame


def build(con: duckdb.DuckDBPyConnection, variances: Variances) -> None:
    """Create category_speedup and category_pooled on con from the TEMP view category_cells,
    with the closed-loop strata's start variance (analyze.stats.paired_speedups)."""
    cells = con.execute("SELECT * FROM category_cells ORDER BY ALL").df()
    baseline = con.execute("SELECT baseline FROM analysis_params").fetchone()[0]
    for table in KEYS:
        con.execute(ddl(table))
    if cells.empty:
        return
    for table, frame in (
        ("category_speedup", rows(cells, COMPARISON_KEY, "prompt_id", baseline, variances)),
        ("category_pooled", pooled(cells, baseline, variances)),
    ):
        if not frame.empty:
            adjust_family([(frame, "speedup")])
            insert_frame(con, table, frame)


__all__ = ["MIN_PROMPTS", "build"]
