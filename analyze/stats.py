"""Bootstrap confidence intervals for speedups, and the `speedup` table they fill.

For every method M and load point (campaign, engine, tp, workload, max_tokens, concurrency),
on the prompts that M's window and the baseline's window share (view `speedup_pairs`):

    speedup            = median(decode_tps of M's requests) / median(decode_tps of baseline's)
    ci_low, ci_high    = 2.5th / 97.5th percentiles of that ratio over B = 2000 paired bootstrap
                         resamples of the PROMPTS (one index matrix per comparison, used for both
                         M and the baseline; every rep of a drawn prompt comes along)
    significant        = ci_low > 1 or ci_high < 1
    throughput_speedup = throughput_tps(M window) / throughput_tps(baseline window)
    ttft_ratio         = median ttft_s of M / median ttft_s of the baseline (same prompts)

Each comparison starts a fresh `numpy.random.default_rng(SEED)`, so a CI depends only on its
own data, not on which other comparisons the database holds or the order they are built in.
The speedup, its interval and `significant` come from schema.paired.paired_speedup, the one
definition collect's best-of ranking uses too.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd

# the paired bootstrap itself is schema's, shared with collect's best-of ranking
from schema.paired import (  # noqa: F401  (re-exported: analyze.stats.* is the public name)
    LEVEL,
    N_BOOT,
    SEED,
    bootstrap_ratio_of_medians,
    paired_speedup,
    resample_counts,
    resampled_medians,
)

WINDOW_KEY = ["campaign_id", "engine", "tp", "workload", "max_tokens", "concurrency"]
GROUP_KEY = [*WINDOW_KEY, "method"]

SPEEDUP_DDL = """
CREATE OR REPLACE TABLE speedup (
    campaign_id              VARCHAR NOT NULL,
    engine                   VARCHAR NOT NULL,
    tp                       INTEGER NOT NULL,
    workload                 VARCHAR NOT NULL,
    max_tokens               INTEGER NOT NULL,
    concurrency              INTEGER NOT NULL,
    method                   VARCHAR NOT NULL,
    baseline                 VARCHAR NOT NULL,
    speedup                  DOUBLE,
    ci_low                   DOUBLE,
    ci_high                  DOUBLE,
    significant              BOOLEAN,
    n                        INTEGER,   -- requests of M used
    n_baseline               INTEGER,   -- requests of the baseline used
    n_prompts                INTEGER,   -- shared prompts
    throughput_speedup       DOUBLE,
    method_throughput_tps    DOUBLE,
    baseline_throughput_tps  DOUBLE,
    ttft_ratio               DOUBLE,
    accept_length_tw         DOUBLE,
    method_decode_tps_p50    DOUBLE,
    baseline_decode_tps_p50  DOUBLE,
    n_boot                   INTEGER,
    seed                     BIGINT,
    PRIMARY KEY (campaign_id, engine, tp, workload, max_tokens, concurrency, method)
)
"""


def _by_prompt(side: pd.DataFrame) -> dict[str, np.ndarray]:
    """decode_tps values of one side, keyed by prompt_id."""
    return {p: g.to_numpy(dtype=float) for p, g in side.groupby("prompt_id")["decode_tps"]}


def compare_group(rows: pd.DataFrame, n_boot: int = N_BOOT, seed: int = SEED) -> dict:
    """Speedup statistics of one comparison from its `speedup_pairs` rows."""
    method = rows[rows["role"] == "method"]
    base = rows[rows["role"] == "baseline"]
    result = paired_speedup(_by_prompt(method), _by_prompt(base), n_boot, seed)
    if result is None:
        raise ValueError("a speedup_pairs group with no prompt on both sides")
    return {
        "baseline": rows["baseline"].iat[0],
        "speedup": result.speedup,
        "ci_low": result.ci_low,
        "ci_high": result.ci_high,
        "significant": result.significant,
        "n": len(method),
        "n_baseline": len(base),
        "n_prompts": result.n_prompts,
        "ttft_ratio": method["ttft_s"].median() / base["ttft_s"].median(),
        "method_decode_tps_p50": method["decode_tps"].median(),
        "baseline_decode_tps_p50": base["decode_tps"].median(),
        "n_boot": n_boot,
        "seed": seed,
    }


def bootstrap_speedups(pairs: pd.DataFrame, n_boot: int = N_BOOT, seed: int = SEED) -> pd.DataFrame:
    """One row per comparison (GROUP_KEY) in `pairs` (rows of the speedup_pairs view)."""
    records = [
        {**dict(zip(GROUP_KEY, key)), **compare_group(rows, n_boot, seed)}
        for key, rows in pairs.groupby(GROUP_KEY, sort=True)
    ]
    return pd.DataFrame.from_records(records)


def attach_window_ratios(speedups: pd.DataFrame, summary: pd.DataFrame) -> pd.DataFrame:
    """Add window-level columns from config_summary rows.

    throughput_speedup = throughput_tps(M) / throughput_tps(baseline); accept_length_tw of M.
    """
    method_side = summary[[*GROUP_KEY, "throughput_tps", "accept_length_tw"]].rename(
        columns={"throughput_tps": "method_throughput_tps"}
    )
    base_side = summary[[*WINDOW_KEY, "method", "throughput_tps"]].rename(
        columns={"method": "baseline", "throughput_tps": "baseline_throughput_tps"}
    )
    out = speedups.merge(method_side, on=GROUP_KEY, how="left")
    out = out.merge(base_side, on=[*WINDOW_KEY, "baseline"], how="left")
    out["throughput_speedup"] = out["method_throughput_tps"] / out["baseline_throughput_tps"]
    return out


def write_speedup(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame) -> None:
    """(Re)create the speedup table with its fixed schema and insert `frame` by column name."""
    con.execute(SPEEDUP_DDL)
    if frame.empty:
        return
    con.register("speedup_frame", frame)
    try:
        con.execute("INSERT INTO speedup BY NAME SELECT * FROM speedup_frame")
    finally:
        con.unregister("speedup_frame")


def build_speedup(con: duckdb.DuckDBPyConnection, n_boot: int = N_BOOT, seed: int = SEED) -> int:
    """Read speedup_pairs and config_summary, bootstrap, write `speedup`; return its row count."""
    pairs = con.execute("SELECT * FROM speedup_pairs").df()
    frame = bootstrap_speedups(pairs, n_boot, seed)
    if not frame.empty:
        summary = con.execute("SELECT * FROM config_summary").df()
        frame = attach_window_ratios(frame, summary)
    write_speedup(con, frame)
    return len(frame)
