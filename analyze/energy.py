"""The paired energy comparison against the baseline: the `energy_ratio` table.

For every method M and load point (campaign, engine, tp, workload, max_tokens, concurrency),
on the requests the speed comparison uses (view `speedup_pairs`: the prompts M's window and
the baseline's window share, every rep of such a prompt) that have an attributed energy
(view `request_energy`: ok requests of windows with usable GPU telemetry):

    energy_ratio       = median(j_per_token of M's requests) / median(j_per_token of the
                         baseline's requests), j_per_token = processor-sharing energy / tokens
    ci_low, ci_high    = the paired prompt bootstrap of `speedup` with one run (schema.paired:
                         B = 2000, seed 20260101, 95% percentile interval); a campaign's runs
                         are pooled per prompt, not resampled first as `speedup` does (a
                         window without usable telemetry in one run would leave no prompt
                         paired in every run)
    significant        = ci_low > 1 or ci_high < 1 (below 1: M spends less energy per token)
    window_energy_ratio = energy_summary.j_per_token(M) / energy_summary.j_per_token(baseline)
                         (whole-window joules per token, idle pieces included; no interval)
    cost_ratio         = energy_summary.cost_per_mtok_usd(M) / the baseline's (= the inverse
                         throughput ratio times the GPU-count ratio; NULL without a price)

A ratio above 1 means M spends more energy per output token than the baseline. The bootstrap
is schema.paired.paired_speedup, the one that fills `speedup`: a ratio of medians is a ratio
of medians whatever it measures.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd

from analyze.stats import GROUP_KEY, insert_frame, join_sides
from schema.paired import N_BOOT, SEED, paired_speedup

ENERGY_RATIO_DDL = """
CREATE OR REPLACE TABLE energy_ratio (
    campaign_id              VARCHAR NOT NULL,
    engine                   VARCHAR NOT NULL,
    tp                       INTEGER NOT NULL,
    workload                 VARCHAR NOT NULL,
    max_tokens               INTEGER NOT NULL,
    concurrency              INTEGER NOT NULL,
    method                   VARCHAR NOT NULL,
    baseline                 VARCHAR NOT NULL,
    energy_ratio             DOUBLE,   -- median J/token of M / median J/token of the baseline
    ci_low                   DOUBLE,
    ci_high                  DOUBLE,
    significant              BOOLEAN,
    n                        INTEGER,  -- requests of M used
    n_baseline               INTEGER,  -- requests of the baseline used
    n_prompts                INTEGER,  -- shared prompts
    method_j_per_token_p50   DOUBLE,
    baseline_j_per_token_p50 DOUBLE,
    window_energy_ratio      DOUBLE,   -- window J/token of M / of the baseline
    cost_ratio               DOUBLE,   -- window cost per 1M tokens of M / of the baseline
    n_boot                   INTEGER,
    seed                     BIGINT,
    PRIMARY KEY (campaign_id, engine, tp, workload, max_tokens, concurrency, method)
)
"""

# the speed comparison's rows, each with its request's energy per token (when it has one)
PAIRS_SQL = """
SELECT p.*, e.j_per_token
FROM speedup_pairs AS p
JOIN request_energy AS e USING (request_id)
WHERE e.j_per_token IS NOT NULL
"""

WINDOWS_SQL = """
SELECT campaign_id, engine, tp, workload, max_tokens, concurrency, method, j_per_token,
       cost_per_mtok_usd
FROM energy_summary
"""


def _by_prompt(side: pd.DataFrame) -> dict[str, np.ndarray]:
    return {p: g.to_numpy(dtype=float) for p, g in side.groupby("prompt_id")["j_per_token"]}


def compare_group(rows: pd.DataFrame, n_boot: int = N_BOOT, seed: int = SEED) -> dict | None:
    """Energy-ratio statistics of one comparison; None when no prompt has both sides."""
    method = rows[rows["role"] == "method"]
    base = rows[rows["role"] == "baseline"]
    result = paired_speedup(_by_prompt(method), _by_prompt(base), n_boot, seed)
    if result is None:
        return None
    shared = set(method["prompt_id"]) & set(base["prompt_id"])
    return {
        "baseline": rows["baseline"].iat[0],
        "energy_ratio": result.speedup, "ci_low": result.ci_low, "ci_high": result.ci_high,
        "significant": result.significant,
        "n": int(method["prompt_id"].isin(shared).sum()),
        "n_baseline": int(base["prompt_id"].isin(shared).sum()),
        "n_prompts": result.n_prompts,
        "method_j_per_token_p50": method["j_per_token"].median(),
        "baseline_j_per_token_p50": base["j_per_token"].median(),
        "n_boot": n_boot, "seed": seed,
    }


def energy_ratios(pairs: pd.DataFrame, n_boot: int = N_BOOT, seed: int = SEED) -> pd.DataFrame:
    """One row per comparison (GROUP_KEY) of `pairs` that has energy on both sides."""
    records = []
    for key, rows in pairs.groupby(GROUP_KEY, sort=True):
        stats = compare_group(rows, n_boot, seed)
        if stats is not None:
            records.append({**dict(zip(GROUP_KEY, key)), **stats})
    return pd.DataFrame.from_records(records)


def attach_energy_ratios(ratios: pd.DataFrame, windows: pd.DataFrame) -> pd.DataFrame:
    """window_energy_ratio and cost_ratio from the windows' J/token and cost."""
    cols = ["j_per_token", "cost_per_mtok_usd"]
    out = join_sides(ratios, windows, {c: c for c in cols}, {c: f"b_{c}" for c in cols})
    out["window_energy_ratio"] = out["j_per_token"] / out["b_j_per_token"]
    out["cost_ratio"] = out["cost_per_mtok_usd"] / out["b_cost_per_mtok_usd"]
    return out.drop(columns=[*cols, *(f"b_{c}" for c in cols)])


def build_energy_ratio(con: duckdb.DuckDBPyConnection, n_boot: int = N_BOOT,
                       seed: int = SEED) -> int:
    """Read speedup_pairs, request_energy and energy_summary, bootstrap, write `energy_ratio`;
    return its row count."""
    con.execute(ENERGY_RATIO_DDL)
    frame = energy_ratios(con.execute(PAIRS_SQL).df(), n_boot, seed)
    if frame.empty:
        return 0
    frame = attach_energy_ratios(frame, con.execute(WINDOWS_SQL).df())
    return insert_frame(con, "energy_ratio", frame)
