"""Paired speedup intervals with the start variance, and the `speedup` table they fill.

For every method M and load point (campaign, engine, tp, workload, max_tokens, concurrency),
on the prompts that M's window and the baseline's window share in every run (view
`speedup_pairs`), stats.paired defines the figures (its docstring has the derivation) with
the stratum's start variance and drift (stats.starts, analyze.starts):

    d[r, p]            = mean ln decode_tps of M (run r, prompt p) - the baseline's
    speedup            = exp(mean d'), d' = d - beta dt[r]: the geometric mean over prompts of
                         the paired ratio, corrected for the drift along the start order
                         (drift_correction = exp(-beta mean dt); 1 without a drift estimate)
    ci_low, ci_high    = exp(mean d' -/+ t_{df, 0.975} sqrt(V)), V = MS_p / (R P) +
                         2 sigma_s^2 / R + Var(beta) mean(dt)^2, sigma_s^2 pooled over every
                         configuration's starts of the engine, tp and concurrency; NULL with
                         one start per side, below stats.paired.MIN_PROMPTS prompts or where
                         the stratum's starts leave too few contrasts (ci_reason says why)
    p_value            = the two-sided t test of "no change" (mean d' = 0) on the same V, df
    p_holm             = Holm's adjustment of p_value over the campaign's family of claims
                         (report.findings names the families; adjust_family)
    significant        = p_holm < 0.05 (a claim the family-wise error rate backs); NULL
                         for the A/A control, which is a check and not a claim
    significant_raw    = the unadjusted interval excludes 1
    start_sd, start_spread = the stratum's start sd and the 95% spread of two starts
                         (analyze.starts; the noise floor the report draws)
    n_runs, run_speedup_min, run_speedup_max, between_run_share: stats.paired.RunSpread
    aa_speedup, aa_ci_low, aa_ci_high = the A/A control's own comparison in the same window
                         (NULL without a control: plan aa_control)
    throughput_speedup = throughput_tps(M window) / throughput_tps(baseline window): a point
                         estimate (no interval)
    ttft_ratio         = median ttft_s of M / median ttft_s of the baseline (same prompts): a
                         point estimate
"""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd

from specsweep.analyze.starts import (
    CLOSED_STRATUM,
    Compared,
    Side,
    compare_all,
    start_spread,
    variance_rows,
)
from specsweep.schema.controls import aa_control_name
from specsweep.schema.keys import COMPARISON, COMPARISON_KEY
from specsweep.stats.paired import (
    LEVEL,
    MIN_PROMPTS,
    RunSpread,
    Speedup,
    holm,
    t_interval,
)
from specsweep.stats.starts import StartVariance

__all__ = ["LEVEL", "MIN_PROMPTS", "RunSpread", "Speedup", "build_speedup", "paired_speedups"]

ALPHA = 1 - LEVEL

SPEEDUP_DDL = f"""
CREATE OR REPLACE TABLE speedup (
    campaign_id              VARCHAR NOT NULL,
    engine                   VARCHAR NOT NULL,
    tp                       INTEGER NOT NULL,
    workload                 VARCHAR NOT NULL,
    max_tokens               INTEGER NOT NULL,
    concurrency              INTEGER NOT NULL,
    method                   VARCHAR NOT NULL,
    baseline                 VARCHAR NOT NULL,
    is_control               BOOLEAN NOT NULL,  -- the A/A control (a second baseline start)
    speedup                  DOUBLE,    -- geometric mean over prompts of the paired ratio
    ci_low                   DOUBLE,    -- NULL: no interval (ci_reason)
    ci_high                  DOUBLE,
    ci_reason                VARCHAR,   -- why there is no interval (NULL when there is one)
    df                       DOUBLE,    -- the t interval's degrees of freedom
    p_value                  DOUBLE,    -- two-sided t test of no change, unadjusted
    p_holm                   DOUBLE,    -- Holm-adjusted over the campaign's claims
    significant              BOOLEAN,   -- p_holm < 0.05; NULL for the control
    significant_raw          BOOLEAN,   -- the unadjusted interval excludes 1
    log_se                   DOUBLE,    -- standard error of ln speedup
    n_family                 INTEGER,   -- claims in the campaign's family (Holm's m)
    sim_ci_low               DOUBLE,    -- simultaneous 95% interval over the family
    sim_ci_high              DOUBLE,    --   (Bonferroni: level 1 - 0.05 / n_family)
    start_sd                 DOUBLE,    -- the stratum's sd of one start's effect (ln)
    start_spread             DOUBLE,    -- two starts land within [1/x, x] 95% of the time
    drift_correction         DOUBLE,    -- exp(-beta mean dt): the drift taken out (1: none)
    aa_speedup               DOUBLE,    -- the A/A control in this window (noise floor)
    aa_ci_low                DOUBLE,
    aa_ci_high               DOUBLE,
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
    PRIMARY KEY ({", ".join(COMPARISON)})
)
"""


# one row per request of speedup_pairs, numbers only: comparison as an ordinal in the sort
# order of COMPARISON, prompt as an ordinal within its window (every method of the window
# numbers a prompt alike: analyze.starts crosses them), start the position of the request's
# service (service_starts; NULL for imported rows); the view is evaluated once (MATERIALIZED)
_KEY = ", ".join(COMPARISON)
_WINDOW = ", ".join(COMPARISON_KEY)
PAIRS_SQL = f"""
WITH pairs AS MATERIALIZED (
    SELECT {_KEY}, role, run, prompt_id, service_id, decode_tps, ttft_s FROM speedup_pairs
),
comparisons AS (
    SELECT {_KEY}, row_number() OVER (ORDER BY {_KEY}) - 1 AS comparison
    FROM (SELECT DISTINCT {_KEY} FROM pairs)
),
prompts AS (
    SELECT {_WINDOW}, prompt_id,
           row_number() OVER (PARTITION BY {_WINDOW} ORDER BY prompt_id) - 1 AS prompt
    FROM (SELECT DISTINCT {_WINDOW}, prompt_id FROM pairs)
)
SELECT comparison, (role = 'baseline')::INTEGER AS side, pairs.run, prompt, decode_tps, ttft_s,
       s.start_index AS start
FROM pairs
JOIN comparisons USING ({_KEY})
JOIN prompts USING ({_WINDOW}, prompt_id)
LEFT JOIN service_starts AS s USING (campaign_id, service_id)
ORDER BY comparison, side, prompt
"""
COMPARISONS_SQL = f"""
SELECT {_KEY}, any_value(baseline) AS baseline
FROM speedup_pairs
GROUP BY ALL
ORDER BY {_KEY}
"""


def _median(values: np.ndarray) -> np.float64:
    """np.median of the non-missing values; NaN when there is none (a ratio over a zero
    median is then inf or NaN, as numpy's floats say)."""
    present = values[~np.isnan(values)]
    return np.median(present) if present.size else np.float64("nan")


def _row(got: Compared, method: dict, base: dict) -> dict:
    """The speedup table's columns of one comparison (all but the family's and A/A's)."""
    result, spread, start = got.result, got.spread, got.start
    return {
        "speedup": result.speedup, "ci_low": result.ci_low, "ci_high": result.ci_high,
        "ci_reason": result.reason, "df": result.df, "p_value": result.p_value,
        "significant_raw": result.significant, "log_se": result.log_se,
        "start_sd": start.s2**0.5 if start.usable else None,
        "start_spread": start_spread(start), "drift_correction": got.drift_correction,
        "n": got.n, "n_baseline": got.n_baseline,
        "n_prompts": result.n_prompts, "n_runs": spread.n_runs,
        "run_speedup_min": spread.run_speedup_min, "run_speedup_max": spread.run_speedup_max,
        "between_run_share": spread.between_run_share,
        "ttft_ratio": _median(method["ttft_s"]) / _median(base["ttft_s"]),
        "method_decode_tps_p50": _median(method["decode_tps"]),
        "baseline_decode_tps_p50": _median(base["decode_tps"]),
    }  # fmt: skip


def _comparisons(con: duckdb.DuckDBPyConnection) -> tuple[pd.DataFrame, list[tuple]]:
    """The comparison keys and, per comparison, its two sides' arrays."""
    keys = con.execute(COMPARISONS_SQL).df()
    rows = con.execute(PAIRS_SQL).fetchnumpy()
    columns = {"decode_tps": _column(rows, "decode_tps"), "ttft_s": _column(rows, "ttft_s"),
               "prompt": np.asarray(rows["prompt"], dtype=np.int64),
               "run": np.asarray(rows["run"], dtype=np.int64),
               "start": _column(rows, "start")}  # fmt: skip
    # rows are sorted by (comparison, side): segment 2c is M's rows of comparison c, 2c+1 B's
    segment = np.asarray(rows["comparison"], dtype=np.int64) * 2 + np.asarray(rows["side"])
    bounds = np.searchsorted(segment, np.arange(2 * len(keys) + 1))
    sides = [
        tuple({name: col[bounds[s] : bounds[s + 1]] for name, col in columns.items()}
              for s in (2 * c, 2 * c + 1))
        for c in range(len(keys))
    ]  # fmt: skip
    return keys, sides


def side(arrays: dict[str, np.ndarray], value: str) -> Side:
    """analyze.starts' Side of one comparison side's arrays, on the column `value`."""
    return Side(arrays[value], arrays["run"], arrays["prompt"], arrays["start"])


def paired_speedups(
    con: duckdb.DuckDBPyConnection, level: float = LEVEL
) -> tuple[pd.DataFrame, dict[tuple, StartVariance]]:
    """One row per comparison (COMPARISON) of the speedup_pairs view, read as numbers, with
    its stratum's start variance (analyze.starts); and the strata's StartVariance."""
    keys, sides = _comparisons(con)
    if keys.empty:
        return pd.DataFrame(), {}
    control = (keys["method"] == keys["baseline"].map(aa_control_name)).to_numpy()
    found, variances = compare_all(
        [(tuple(k[c] for c in COMPARISON_KEY), tuple(k[c] for c in CLOSED_STRATUM), k["method"],
          k["baseline"], side(m, "decode_tps"), side(b, "decode_tps"))
         for k, (m, b) in zip(keys.to_dict("records"), sides)],
        level,
    )  # fmt: skip
    records = [
        {**key, "is_control": bool(control[c]), **_row(found[c], *sides[c])}
        for c, key in enumerate(keys.to_dict("records"))
        if found[c] is not None  # speedup_pairs crosses runs and prompts: never None
    ]
    return _attach_control(pd.DataFrame.from_records(records)), variances


def _attach_control(frame: pd.DataFrame) -> pd.DataFrame:
    """aa_speedup, aa_ci_low, aa_ci_high: the A/A control's figures of each row's window."""
    aa = frame.loc[frame["is_control"], [*COMPARISON_KEY, "speedup", "ci_low", "ci_high"]]
    aa = aa.rename(columns={"speedup": "aa_speedup", "ci_low": "aa_ci_low",
                            "ci_high": "aa_ci_high"})  # fmt: skip
    return frame.merge(aa, on=[*COMPARISON_KEY], how="left")


def adjust_family(frames: list[tuple[pd.DataFrame, str]], alpha: float = ALPHA) -> None:
    """Holm and simultaneous intervals over each campaign's claims, in place. frames: (frame,
    its point-estimate column); a claim is a row that is not a control (is_control false,
    where the column exists) and has a p_value. Sets p_holm, significant = p_holm < alpha
    (NULL on the control and on untested rows), n_family = the campaign's claims (m), and
    sim_ci_low, sim_ci_high = the t interval at level 1 - alpha / m (Bonferroni): all m hold
    at once with probability >= 1 - alpha, so one picked from them after looking (a best
    setting, a headline) keeps its coverage."""
    tagged = []
    for f, (frame, _) in enumerate(frames):
        if frame.empty:
            continue
        for column in ("p_holm", "n_family", "sim_ci_low", "sim_ci_high"):
            frame[column] = np.nan
        frame["significant"] = pd.Series([None] * len(frame), dtype="object", index=frame.index)
        claims = ~frame["is_control"] if "is_control" in frame else pd.Series(True, frame.index)
        for i in frame.index[claims & frame["p_value"].notna()]:
            tagged.append((frame.at[i, "campaign_id"], f, i, float(frame.at[i, "p_value"])))
    for cid in {t[0] for t in tagged}:
        family = [t for t in tagged if t[0] == cid]
        level = 1 - alpha / len(family)
        for (_, f, i, _), adjusted in zip(family, holm([t[3] for t in family]), strict=True):
            frame, point = frames[f]
            frame.at[i, "p_holm"] = adjusted
            frame.at[i, "significant"] = adjusted < alpha
            frame.at[i, "n_family"] = len(family)
            frame.at[i, "sim_ci_low"], frame.at[i, "sim_ci_high"] = t_interval(
                frame.at[i, point], frame.at[i, "log_se"], frame.at[i, "df"], level
            )


def _column(frame: dict[str, np.ndarray], name: str) -> np.ndarray:
    """A fetched numeric column as float, SQL NULL as NaN."""
    return np.ma.filled(np.ma.asarray(frame[name], dtype=float), np.nan)


def join_sides(
    comparisons: pd.DataFrame,
    windows: pd.DataFrame,
    method: dict[str, str],
    baseline: dict[str, str],
) -> pd.DataFrame:
    """Each comparison (COMPARISON and its baseline) with columns of two window rows: the
    method's window (columns `method`, renamed by it) and the baseline's at the same
    COMPARISON_KEY (columns `baseline`, renamed by it); NaN where a window is missing."""
    m_side = windows[[*COMPARISON, *method]].rename(columns=method)
    b_side = windows[[*COMPARISON_KEY, "method", *baseline]].rename(
        columns={"method": "baseline", **baseline}
    )
    out = comparisons.merge(m_side, on=[*COMPARISON], how="left")
    return out.merge(b_side, on=[*COMPARISON_KEY, "baseline"], how="left")


def attach_window_ratios(speedups: pd.DataFrame, summary: pd.DataFrame) -> pd.DataFrame:
    """Add window-level columns from config_summary rows.

    throughput_speedup = throughput_tps(M) / throughput_tps(baseline); accept_length_tw of M.
    """
    out = join_sides(
        speedups,
        summary,
        {"throughput_tps": "method_throughput_tps", "accept_length_tw": "accept_length_tw"},
        {"throughput_tps": "baseline_throughput_tps"},
    )
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


def build_speedup(
    con: duckdb.DuckDBPyConnection,
) -> tuple[pd.DataFrame, dict[tuple, StartVariance]]:
    """Read speedup_pairs and config_summary and return the speedup rows (written by
    write_speedup once the family is adjusted: analyze.build) and the closed-loop strata's
    start variance, whose rows go into start_variance (analyze.starts)."""
    frame, variances = paired_speedups(con)
    insert_frame(con, "start_variance", variance_rows(variances, "decode_tps", "concurrency"))
    if not frame.empty:
        summary = con.execute("SELECT * FROM config_summary").df()
        frame = attach_window_ratios(frame, summary)
    return frame, variances
