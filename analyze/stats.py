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
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import numpy as np
import pandas as pd

N_BOOT = 2000
SEED = 20260101
LEVEL = 0.95

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


def resample_counts(rng: np.random.Generator, n_prompts: int, n_boot: int) -> np.ndarray:
    """Draw the (n_boot, n_prompts) prompt-index matrix once and count the draws.

    Returns C with C[b, p] = how many times prompt p is in resample b (each row sums to
    n_prompts). Counting instead of gathering lets resamples with uneven reps stay vectorised.
    """
    idx = rng.integers(0, n_prompts, size=(n_boot, n_prompts))
    flat = idx + n_prompts * np.arange(n_boot)[:, None]
    return np.bincount(flat.ravel(), minlength=n_boot * n_prompts).reshape(n_boot, n_prompts)


def resampled_medians(values: np.ndarray, prompt_idx: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Median of every resample, without building the resamples.

    Value j appears counts[b, prompt_idx[j]] times in resample b, a multiset of N_b values.
    With the values sorted once, the median (as np.median) is the mean of the elements at
    0-based ranks floor((N_b - 1) / 2) and floor(N_b / 2), found on the cumulative weights.
    """
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    cumulative = np.cumsum(counts[:, prompt_idx[order]], axis=1)
    total = cumulative[:, -1]
    lower = _position_of_rank(cumulative, (total - 1) // 2)
    upper = _position_of_rank(cumulative, total // 2)
    return (sorted_values[lower] + sorted_values[upper]) / 2


def _position_of_rank(cumulative: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """Index of the sorted value holding 0-based `rank`: the first j with cumulative[j] > rank."""
    return (cumulative <= rank[:, None]).sum(axis=1)


def _flatten(by_prompt: Sequence[Sequence[float]]) -> tuple[np.ndarray, np.ndarray]:
    """Per-prompt value lists -> (all values, the prompt index of each value)."""
    arrays = [np.asarray(v, dtype=float) for v in by_prompt]
    if not arrays or any(a.size == 0 for a in arrays):
        raise ValueError("every prompt needs at least one value")
    sizes = [a.size for a in arrays]
    return np.concatenate(arrays), np.repeat(np.arange(len(arrays)), sizes)


def bootstrap_ratio_of_medians(
    m_by_prompt: Sequence[Sequence[float]],
    b_by_prompt: Sequence[Sequence[float]],
    n_boot: int = N_BOOT,
    seed: int = SEED,
    level: float = LEVEL,
) -> tuple[float, float, float]:
    """Point estimate and paired percentile-bootstrap CI of median(M) / median(B).

    m_by_prompt[p] and b_by_prompt[p] hold the values (all reps) of the same prompt p.
    point = median(all M values) / median(all B values); (lo, hi) = the (1 - level) / 2 and
    (1 + level) / 2 quantiles of the ratio over n_boot resamples of the prompts.
    """
    if len(m_by_prompt) != len(b_by_prompt):
        raise ValueError("method and baseline must cover the same prompts")
    m_values, m_idx = _flatten(m_by_prompt)
    b_values, b_idx = _flatten(b_by_prompt)
    point = np.median(m_values) / np.median(b_values)
    counts = resample_counts(np.random.default_rng(seed), len(m_by_prompt), n_boot)
    ratios = resampled_medians(m_values, m_idx, counts) / resampled_medians(b_values, b_idx, counts)
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(ratios, [tail, 100 - tail])
    return float(point), float(lo), float(hi)


def _by_prompt(side: pd.DataFrame) -> dict[str, np.ndarray]:
    """decode_tps values of one side, keyed by prompt_id."""
    return {p: g.to_numpy(dtype=float) for p, g in side.groupby("prompt_id")["decode_tps"]}


def compare_group(rows: pd.DataFrame, n_boot: int = N_BOOT, seed: int = SEED) -> dict:
    """Speedup statistics of one comparison from its `speedup_pairs` rows."""
    method = rows[rows["role"] == "method"]
    base = rows[rows["role"] == "baseline"]
    m_map, b_map = _by_prompt(method), _by_prompt(base)
    prompts = sorted(m_map.keys() & b_map.keys())
    point, lo, hi = bootstrap_ratio_of_medians(
        [m_map[p] for p in prompts], [b_map[p] for p in prompts], n_boot, seed
    )
    return {
        "baseline": rows["baseline"].iat[0],
        "speedup": point,
        "ci_low": lo,
        "ci_high": hi,
        "significant": bool(lo > 1 or hi < 1),
        "n": len(method),
        "n_baseline": len(base),
        "n_prompts": len(prompts),
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
