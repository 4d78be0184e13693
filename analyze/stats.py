"""Bootstrap confidence intervals for speedups, and the `speedup` table they fill.

For every method M and load point (campaign, engine, tp, workload, max_tokens, concurrency),
on the prompts that M's window and the baseline's window share (view `speedup_pairs`):

    speedup            = median(decode_tps of M's requests) / median(decode_tps of baseline's)
    ci_low, ci_high    = 2.5th / 97.5th percentiles of that ratio over B = 2000 paired bootstrap
                         resamples of the PROMPTS (one index matrix per comparison, used for both
                         M and the baseline; every rep of a drawn prompt comes along); when the
                         campaign has several runs (speedup_pairs.run), of the RUNS, then the
                         prompts within each drawn run (schema.paired.run_counts)
    n_runs             = the comparison's runs (1: the prompt bootstrap above, same numbers)
    run_speedup_min, run_speedup_max = the least and greatest speedup of one run alone
                         (median of M's decode_tps in run r / the baseline's); NULL with one run
    between_run_share  = tau2 / (tau2 + mean v_r), tau2 = max(0, var(ln s_r) - mean v_r): s_r
                         each run's speedup alone, v_r the variance of its ln ratio over a
                         prompt bootstrap of run r (schema.paired); NULL with one run
    significant        = ci_low > 1 or ci_high < 1
    throughput_speedup = throughput_tps(M window) / throughput_tps(baseline window)
    ttft_ratio         = median ttft_s of M / median ttft_s of the baseline (same prompts)

Each comparison starts a fresh `numpy.random.default_rng(SEED)`, so a CI depends only on its
own data, not on which other comparisons the database holds or the order they are built in.
The speedup, its interval and `significant` come from schema.paired (flat_runs_ratio_of_medians:
with one run flat_ratio_of_medians, the array form of paired_speedup, the one definition
collect's best-of ranking uses too).
speedup_pairs is read once as numbers (comparison and prompt ordinals, run, decode_tps, ttft_s),
sorted in DuckDB and split with numpy; the comparison keys are read once (PAIRS_SQL and
COMPARISONS_SQL). Prompt ordinals follow prompt_id's sort order, as paired_speedup's do, so
a prompt gets the same draws either way.
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
    RunSpread,
    Speedup,
    bootstrap_ratio_of_medians,
    flat_ratio_of_medians,
    flat_runs_ratio_of_medians,
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
    n_runs                   INTEGER,   -- runs of the campaign the comparison rests on
    run_speedup_min          DOUBLE,    -- least speedup of one run alone (NULL: one run)
    run_speedup_max          DOUBLE,    -- greatest speedup of one run alone (NULL: one run)
    between_run_share        DOUBLE,    -- of one run's speedup variance, between runs (NULL: 1 run)
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


# one row per request of speedup_pairs, numbers only: comparison and prompt as ordinals in
# the sort order of GROUP_KEY and of prompt_id (the order paired_speedup sorts prompts in),
# joined from the small key lists (cheaper than two window sorts over every row); the view is
# evaluated once for the three uses (MATERIALIZED); run as stored (numbered per comparison by
# _statistics: a third join over every row cost more than numpy's unique on each comparison)
_KEY = ", ".join(GROUP_KEY)
PAIRS_SQL = f"""
WITH pairs AS MATERIALIZED (
    SELECT {_KEY}, role, run, prompt_id, decode_tps, ttft_s FROM speedup_pairs
),
comparisons AS (
    SELECT {_KEY}, row_number() OVER (ORDER BY {_KEY}) - 1 AS comparison
    FROM (SELECT DISTINCT {_KEY} FROM pairs)
),
prompts AS (
    SELECT {_KEY}, prompt_id,
           row_number() OVER (PARTITION BY {_KEY} ORDER BY prompt_id) - 1 AS prompt
    FROM (SELECT DISTINCT {_KEY}, prompt_id FROM pairs)
)
SELECT comparison, (role = 'baseline')::INTEGER AS side, run, prompt, decode_tps, ttft_s
FROM pairs
JOIN comparisons USING ({_KEY})
JOIN prompts USING ({_KEY}, prompt_id)
ORDER BY comparison, side, prompt
"""
COMPARISONS_SQL = f"""
SELECT {_KEY}, any_value(baseline) AS baseline
FROM speedup_pairs
GROUP BY ALL
ORDER BY {_KEY}
"""


def _median(values: np.ndarray) -> np.float64:
    """np.median of the non-missing values (pandas' Series.median); NaN when there is none.
    A numpy float, so that a ratio over a zero median is inf or NaN, as pandas' was."""
    present = values[~np.isnan(values)]
    return np.median(present) if present.size else np.float64("nan")


def _statistics(
    method: dict[str, np.ndarray], base: dict[str, np.ndarray], n_boot: int, seed: int
) -> dict:
    """Speedup statistics of one comparison; a side is {"decode_tps", "ttft_s", "run",
    "prompt"} arrays, run the run's number (numbered 0..n_runs-1 here, in order) and prompt an
    ordinal 0..n_prompts-1, every (run, prompt) present on both sides."""
    n_method = len(method["run"])
    run = np.unique(np.concatenate([method["run"], base["run"]]), return_inverse=True)[1]
    point, lo, hi, spread = flat_runs_ratio_of_medians(
        method["decode_tps"], run[:n_method], method["prompt"],
        base["decode_tps"], run[n_method:], base["prompt"], n_boot, seed,
    )  # fmt: skip
    result = Speedup(point, lo, hi, int(method["prompt"].max()) + 1)
    return {
        "speedup": result.speedup,
        "ci_low": result.ci_low,
        "ci_high": result.ci_high,
        "significant": result.significant,
        "n": len(method["prompt"]),
        "n_baseline": len(base["prompt"]),
        "n_prompts": result.n_prompts,
        "n_runs": spread.n_runs,
        "run_speedup_min": spread.run_speedup_min,
        "run_speedup_max": spread.run_speedup_max,
        "between_run_share": spread.between_run_share,
        "ttft_ratio": _median(method["ttft_s"]) / _median(base["ttft_s"]),
        "method_decode_tps_p50": _median(method["decode_tps"]),
        "baseline_decode_tps_p50": _median(base["decode_tps"]),
        "n_boot": n_boot,
        "seed": seed,
    }


def compare_group(rows: pd.DataFrame, n_boot: int = N_BOOT, seed: int = SEED) -> dict:
    """Speedup statistics of one comparison from its `speedup_pairs` rows (role, prompt_id,
    decode_tps, ttft_s, baseline, and run if several: the view's rows, which pair every
    prompt in every run); only the prompts both roles have count."""
    shared = sorted(set(rows.loc[rows["role"] == "method", "prompt_id"])
                    & set(rows.loc[rows["role"] == "baseline", "prompt_id"]))  # fmt: skip
    if not shared:
        raise ValueError("a speedup_pairs group with no prompt on both sides")
    rows = rows[rows["prompt_id"].isin(shared)]
    ordinal = rows["prompt_id"].map({p: i for i, p in enumerate(shared)}).to_numpy()
    run = rows["run"].to_numpy(dtype=np.int64) if "run" in rows else np.ones(len(rows), int)
    sides = {
        role: {"decode_tps": rows["decode_tps"].to_numpy(dtype=float)[mask],
               "ttft_s": rows["ttft_s"].to_numpy(dtype=float)[mask], "prompt": ordinal[mask],
               "run": run[mask]}
        for role in ("method", "baseline")
        for mask in [(rows["role"] == role).to_numpy()]
    }  # fmt: skip
    return {
        "baseline": rows["baseline"].iat[0],
        **_statistics(sides["method"], sides["baseline"], n_boot, seed),
    }


def _column(frame: dict[str, np.ndarray], name: str) -> np.ndarray:
    """A fetched numeric column as float, SQL NULL as NaN."""
    return np.ma.filled(np.ma.asarray(frame[name], dtype=float), np.nan)


def bootstrap_speedups(
    con: duckdb.DuckDBPyConnection, n_boot: int = N_BOOT, seed: int = SEED
) -> pd.DataFrame:
    """One row per comparison (GROUP_KEY) of the speedup_pairs view, read as numbers."""
    keys = con.execute(COMPARISONS_SQL).df()
    rows = con.execute(PAIRS_SQL).fetchnumpy()
    columns = {"decode_tps": _column(rows, "decode_tps"), "ttft_s": _column(rows, "ttft_s"),
               "prompt": np.asarray(rows["prompt"], dtype=np.int64),
               "run": np.asarray(rows["run"], dtype=np.int64)}  # fmt: skip
    # rows are sorted by (comparison, side): segment 2c is M's rows of comparison c, 2c+1 B's
    segment = np.asarray(rows["comparison"], dtype=np.int64) * 2 + np.asarray(rows["side"])
    bounds = np.searchsorted(segment, np.arange(2 * len(keys) + 1))
    records = []
    for c, key in enumerate(keys.itertuples(index=False)):
        method, base = (
            {name: col[bounds[s] : bounds[s + 1]] for name, col in columns.items()}
            for s in (2 * c, 2 * c + 1)
        )
        records.append({**key._asdict(), **_statistics(method, base, n_boot, seed)})
    return pd.DataFrame.from_records(records)


def join_sides(comparisons: pd.DataFrame, windows: pd.DataFrame, method: dict[str, str],
               baseline: dict[str, str]) -> pd.DataFrame:
    """Each comparison (GROUP_KEY and its baseline) with columns of two window rows: the
    method's window (columns `method`, renamed by it) and the baseline's at the same
    WINDOW_KEY (columns `baseline`, renamed by it); NaN where a window is missing."""
    m_side = windows[[*GROUP_KEY, *method]].rename(columns=method)
    b_side = windows[[*WINDOW_KEY, "method", *baseline]].rename(
        columns={"method": "baseline", **baseline})
    out = comparisons.merge(m_side, on=GROUP_KEY, how="left")
    return out.merge(b_side, on=[*WINDOW_KEY, "baseline"], how="left")


def attach_window_ratios(speedups: pd.DataFrame, summary: pd.DataFrame) -> pd.DataFrame:
    """Add window-level columns from config_summary rows.

    throughput_speedup = throughput_tps(M) / throughput_tps(baseline); accept_length_tw of M.
    """
    out = join_sides(speedups, summary, {"throughput_tps": "method_throughput_tps",
                                         "accept_length_tw": "accept_length_tw"},
                     {"throughput_tps": "baseline_throughput_tps"})
    out["throughput_speedup"] = out["method_throughput_tps"] / out["baseline_throughput_tps"]
    return out


def write_speedup(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame) -> None:
    """(Re)create the speedup table with its fixed schema and insert `frame` by column name."""
    con.execute(SPEEDUP_DDL)
    insert_frame(con, "speedup", frame)


def insert_frame(con: duckdb.DuckDBPyConnection, table: str, frame: pd.DataFrame) -> int:
    """Insert a pandas frame's rows into `table` (one of analyze's own tables, never user
    input) by column name; returns the row count."""
    if frame.empty:
        return 0
    con.register(f"{table}_frame", frame)
    try:
        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM {table}_frame")
    finally:
        con.unregister(f"{table}_frame")
    return len(frame)


def build_speedup(con: duckdb.DuckDBPyConnection, n_boot: int = N_BOOT, seed: int = SEED) -> int:
    """Read speedup_pairs and config_summary, bootstrap, write `speedup`; return its row count."""
    frame = bootstrap_speedups(con, n_boot, seed)
    if not frame.empty:
        summary = con.execute("SELECT * FROM config_summary").df()
        frame = attach_window_ratios(frame, summary)
    write_speedup(con, frame)
    return len(frame)
