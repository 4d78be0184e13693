"""The paired energy comparison against the baseline: the `energy_ratio` table.

For every method M and load point (campaign, engine, tp, workload, max_tokens, concurrency),
on the requests the speed comparison uses (view `speedup_pairs`: the prompts M's window and
the baseline's window share, every rep of such a prompt) that have an attributed energy
(view `request_energy`: ok requests of windows with usable GPU telemetry):

    energy_ratio       = exp(mean over prompts of (mean ln j_per_token of M's requests - the
                         baseline's)), j_per_token = processor-sharing energy / tokens: the
                         geometric mean of the per-prompt ratios
    ci_low, ci_high    = the interval of `speedup` (stats.paired.interval through
                         analyze.starts.compare_all): runs crossed with prompts, the start
                         variance of ln J/token pooled over the stratum's starts (its own
                         start_variance rows, metric j_per_token), the drift corrected; on the
                         runs and prompts with energy on both sides (a run without usable
                         telemetry drops out). NULL with one start per side, below 3 prompts
                         (ci_reason)
    p_value, p_holm, significant = the t test of no change, Holm over the campaign's claims
                         (one family with its speedups and open-loop TPOT ratios: the first
                         page says all three; the A/A control is not a claim), p_holm < 0.05
                         (below 1: M spends less energy per token); sim_ci_low, sim_ci_high
                         the simultaneous interval (analyze.stats.adjust_family)
    window_energy_ratio = energy_summary.j_per_token(M) / energy_summary.j_per_token(baseline)
                         (whole-window joules per token, idle pieces included; no interval)
    cost_ratio         = energy_summary.cost_per_mtok_usd(M) / the baseline's (= the inverse
                         throughput ratio times the GPU-count ratio; NULL without a price)
    energy_source      = request_energy.energy_source of the requests used, both sides:
                         'counter' (NVML's energy counter), 'power_trapezoid', or 'mixed'

A ratio above 1 means M spends more energy per output token than the baseline. The interval
is the one that fills `speedup`: a paired ratio is a paired ratio whatever it measures. Energy
sources and their limits: docs/energy.md.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd

from specsweep.analyze.starts import CLOSED_STRATUM, Compared, Side, compare_all, variance_rows
from specsweep.analyze.stats import insert_frame, join_sides
from specsweep.schema.controls import aa_control_name
from specsweep.schema.keys import COMPARISON

ENERGY_RATIO_DDL = f"""
CREATE OR REPLACE TABLE energy_ratio (
    campaign_id              VARCHAR NOT NULL,
    engine                   VARCHAR NOT NULL,
    tp                       INTEGER NOT NULL,
    workload                 VARCHAR NOT NULL,
    max_tokens               INTEGER NOT NULL,
    concurrency              INTEGER NOT NULL,
    method                   VARCHAR NOT NULL,
    baseline                 VARCHAR NOT NULL,
    is_control               BOOLEAN NOT NULL,  -- M is the baseline's A/A control
    energy_ratio             DOUBLE,   -- geometric mean of M's per-prompt J/token ratios
    ci_low                   DOUBLE,   -- NULL: no interval (ci_reason)
    ci_high                  DOUBLE,
    ci_reason                VARCHAR,
    df                       DOUBLE,
    log_se                   DOUBLE,
    p_value                  DOUBLE,
    p_holm                   DOUBLE,   -- Holm over the campaign's energy claims
    significant              BOOLEAN,  -- p_holm < 0.05; NULL for the control
    significant_raw          BOOLEAN,  -- the unadjusted interval excludes 1
    n_family                 INTEGER,
    sim_ci_low               DOUBLE,   -- simultaneous interval over the family
    sim_ci_high              DOUBLE,
    n                        INTEGER,  -- requests of M used
    n_baseline               INTEGER,  -- requests of the baseline used
    n_prompts                INTEGER,  -- shared prompts
    method_j_per_token_p50   DOUBLE,
    baseline_j_per_token_p50 DOUBLE,
    window_energy_ratio      DOUBLE,   -- window J/token of M / of the baseline
    cost_ratio               DOUBLE,   -- window cost per 1M tokens of M / of the baseline
    energy_source            VARCHAR,  -- of the requests used: counter | power_trapezoid | mixed
    PRIMARY KEY ({", ".join(COMPARISON)})
)
"""

# the speed comparison's rows, each with its request's energy per token (when it has one)
# and the position of its service start
PAIRS_SQL = """
SELECT p.*, e.j_per_token, e.energy_source, s.start_index
FROM speedup_pairs AS p
JOIN request_energy AS e USING (request_id)
LEFT JOIN service_starts AS s ON s.campaign_id = p.campaign_id AND s.service_id = p.service_id
WHERE e.j_per_token IS NOT NULL
"""

WINDOWS_SQL = """
SELECT COLUMNS(comparison_key()), method, j_per_token, cost_per_mtok_usd FROM energy_summary
"""


def _side(rows: pd.DataFrame) -> Side:
    return Side(rows["j_per_token"].to_numpy(float), rows["run"].to_numpy(np.int64),
                rows["prompt"].to_numpy(np.int64),
                rows["start_index"].to_numpy(float, na_value=np.nan))  # fmt: skip


def _figures(rows: pd.DataFrame, got: Compared) -> dict:
    """Energy-ratio statistics of one comparison."""
    method, base = rows[rows["role"] == "method"], rows[rows["role"] == "baseline"]
    shared = set(method["prompt_id"]) & set(base["prompt_id"])
    result = got.result
    return {
        "baseline": rows["baseline"].iat[0],
        "is_control": rows["method"].iat[0] == aa_control_name(rows["baseline"].iat[0]),
        "energy_ratio": result.speedup, "ci_low": result.ci_low, "ci_high": result.ci_high,
        "ci_reason": result.reason, "df": result.df, "log_se": result.log_se,
        "p_value": result.p_value, "significant_raw": result.significant,
        "n": got.n, "n_baseline": got.n_baseline, "n_prompts": result.n_prompts,
        "method_j_per_token_p50": method["j_per_token"].median(),
        "baseline_j_per_token_p50": base["j_per_token"].median(),
        "energy_source": combined_source(rows.loc[rows["prompt_id"].isin(shared), "energy_source"]),
    }  # fmt: skip


def combined_source(sources: pd.Series) -> str | None:
    """The one energy_source of these requests, 'mixed' when they differ (None: no rows)."""
    distinct = set(sources.dropna())
    return distinct.pop() if len(distinct) == 1 else ("mixed" if distinct else None)


def energy_ratios(pairs: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """One row per comparison (COMPARISON) of `pairs` with energy on both sides in a full
    run x prompt crossing, and the j_per_token strata's StartVariance."""
    if pairs.empty:
        return pd.DataFrame(), {}
    pairs = pairs.assign(prompt=pd.factorize(pairs["prompt_id"])[0])
    groups = [(key, rows) for key, rows in pairs.groupby([*COMPARISON], sort=True)]
    found, variances = compare_all([
        (key[:-1], tuple(rows[c].iat[0] for c in CLOSED_STRATUM), key[-1],
         rows["baseline"].iat[0], _side(rows[rows["role"] == "method"]),
         _side(rows[rows["role"] == "baseline"]))
        for key, rows in groups
    ])  # fmt: skip
    records = [{**dict(zip(COMPARISON, key)), **_figures(rows, got)}
               for (key, rows), got in zip(groups, found) if got is not None]  # fmt: skip
    return pd.DataFrame.from_records(records), variances


def attach_energy_ratios(ratios: pd.DataFrame, windows: pd.DataFrame) -> pd.DataFrame:
    """window_energy_ratio and cost_ratio from the windows' J/token and cost."""
    cols = ["j_per_token", "cost_per_mtok_usd"]
    out = join_sides(ratios, windows, {c: c for c in cols}, {c: f"b_{c}" for c in cols})
    out["window_energy_ratio"] = out["j_per_token"] / out["b_j_per_token"]
    out["cost_ratio"] = out["cost_per_mtok_usd"] / out["b_cost_per_mtok_usd"]
    return out.drop(columns=[*cols, *(f"b_{c}" for c in cols)])


def energy_frame(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Read speedup_pairs, request_energy and energy_summary and return the energy_ratio
    rows (adjusted with the campaign's other claims and written by analyze.build:
    write_energy_ratio); the j_per_token strata's start variance goes into start_variance."""
    frame, variances = energy_ratios(con.execute(PAIRS_SQL).df())
    insert_frame(con, "start_variance", variance_rows(variances, "j_per_token", "concurrency"))
    if frame.empty:
        return frame
    return attach_energy_ratios(frame, con.execute(WINDOWS_SQL).df())


def write_energy_ratio(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame) -> int:
    """(Re)create energy_ratio and insert `frame`; return its row count."""
    con.execute(ENERGY_RATIO_DDL)
    return insert_frame(con, "energy_ratio", frame)
