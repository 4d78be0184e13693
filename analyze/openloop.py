"""The paired TPOT ratios of rate space: the TEMP table `rate_tpot`, which rate_speedup
(analyze/sql/rate_speedup.sql) reads. The `claims` model (analyze.models.registry) computes
them from open_requests beside the closed-loop speedups and energy ratios and adjusts the three
as one family; empty on a file without open-loop windows.

rate_tpot, one row per (campaign_id, tp, workload, max_tokens, rate, method M != baseline)
with steady ok TPOTs on prompts both M and the baseline measured at that rate in every run:

    tpot_speedup     = exp(mean over (run, prompt) of (mean ln baseline's TPOT - mean ln M's)),
                       drift-corrected as the closed-loop speedup
    tpot_speedup_lo, tpot_speedup_hi = its 95% interval with the start variance of ln TPOT
                       pooled over the stratum's starts (campaign, engine, tp, rate: its own
                       start_variance rows, metric tpot_s; analyze.starts.compare_all); NULL
                       with one start per side or below stats.paired.MIN_PROMPTS prompts
                       (tpot_ci_reason)
    p_value, p_holm, significant, sim_ci_low, sim_ci_high = as the closed-loop `speedup`'s,
                       Holm and the simultaneous level over the campaign's claims (its
                       speedups, these ratios and its energy ratios: one family,
                       analyze.stats.adjust_family; the A/A control is not a claim)

from stats.paired's interval (the closed-loop `speedup`'s definition, with the baseline on
the numerator side: TPOT is a time, decode speed its reciprocal). Open-loop and
closed-loop claims are two families, each adjusted on its own: they answer different
questions (per-request speed at a concurrency, token pace at an offered rate). Pair rows are
read once as numbers, sorted in DuckDB.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd

from specsweep.analyze.starts import Compared, Side, compare_all, variance_rows
from specsweep.analyze.stats import insert_frame
from specsweep.schema.controls import aa_control_name

KEY = ["campaign_id", "tp", "workload", "max_tokens", "rate", "method"]
_KEY = ", ".join(KEY)
_SETTING = "campaign_id, tp, workload, max_tokens, rate"
STRATUM = ["campaign_id", "engine", "tp", "rate"]  # open-loop windows sharing starts and a rate

RATE_TPOT_DDL = """
CREATE OR REPLACE TEMP TABLE rate_tpot (
    campaign_id      VARCHAR NOT NULL,
    tp               INTEGER NOT NULL,
    workload         VARCHAR NOT NULL,
    max_tokens       INTEGER NOT NULL,
    rate             DOUBLE NOT NULL,
    method           VARCHAR NOT NULL,
    n_pairs          INTEGER NOT NULL,   -- prompts both sides measured
    n_method         INTEGER NOT NULL,   -- M's requests used
    n_baseline       INTEGER NOT NULL,   -- the baseline's requests used
    is_control       BOOLEAN NOT NULL,   -- M is the baseline's A/A control
    tpot_speedup     DOUBLE,
    tpot_speedup_lo  DOUBLE,             -- NULL: no interval (tpot_ci_reason)
    tpot_speedup_hi  DOUBLE,
    tpot_ci_reason   VARCHAR,
    p_value          DOUBLE,             -- t test of no change, unadjusted
    p_holm           DOUBLE,             -- Holm over the campaign's claims (analyze.stats)
    significant      BOOLEAN,            -- p_holm < 0.05; NULL for the control
    df               DOUBLE,             -- the t interval's degrees of freedom
    log_se           DOUBLE,             -- standard error of ln tpot_speedup
    n_family         INTEGER,            -- claims in the campaign's family (Holm's m)
    sim_ci_low       DOUBLE,             -- simultaneous interval (level 1 - 0.05 / n_family)
    sim_ci_high      DOUBLE
)
"""

# steady ok requests with a TPOT at a swept rate; side 0 = M, 1 = the baseline (repeated once
# per M); prompts as ordinals within the rate's window, start the service's position
PAIRS_SQL = f"""
WITH
params AS (SELECT baseline FROM analysis_params),
usable AS (
    SELECT {_KEY}, engine, run, prompt_id, service_id, tpot_s FROM open_requests
    WHERE steady AND ok AND tpot_s IS NOT NULL AND rate IS NOT NULL
),
base AS (SELECT u.* EXCLUDE (method) FROM usable AS u JOIN params AS p ON u.method = p.baseline),
meth AS (SELECT u.* FROM usable AS u JOIN params AS p ON u.method <> p.baseline),
comparisons AS (
    SELECT {_KEY}, row_number() OVER (ORDER BY {_KEY}) - 1 AS comparison
    FROM (SELECT DISTINCT {_KEY} FROM meth SEMI JOIN base USING ({_SETTING}, prompt_id))
),
prompts AS (
    SELECT {_SETTING}, prompt_id,
           row_number() OVER (PARTITION BY {_SETTING} ORDER BY prompt_id) - 1 AS prompt
    FROM (SELECT DISTINCT {_SETTING}, prompt_id FROM usable)
),
sides AS (
    SELECT c.comparison, 0 AS side, m.run, m.prompt_id, m.service_id, m.tpot_s, m.campaign_id,
           m.workload, m.max_tokens, m.rate, m.tp
    FROM comparisons AS c JOIN meth AS m USING ({_KEY})
    UNION ALL
    SELECT c.comparison, 1 AS side, b.run, b.prompt_id, b.service_id, b.tpot_s, b.campaign_id,
           b.workload, b.max_tokens, b.rate, b.tp
    FROM comparisons AS c JOIN base AS b USING ({_SETTING})
)
SELECT comparison, side, sides.run, prompt, tpot_s, s.start_index AS start
FROM sides
JOIN prompts USING ({_SETTING}, prompt_id)
LEFT JOIN service_starts AS s USING (campaign_id, service_id)
ORDER BY comparison, side, prompt
"""
COMPARISONS_SQL = f"""
WITH
params AS (SELECT baseline FROM analysis_params),
usable AS (
    SELECT {_KEY}, engine, prompt_id FROM open_requests
    WHERE steady AND ok AND tpot_s IS NOT NULL AND rate IS NOT NULL
),
base AS (SELECT u.* EXCLUDE (method) FROM usable AS u JOIN params AS p ON u.method = p.baseline),
meth AS (SELECT u.* FROM usable AS u JOIN params AS p ON u.method <> p.baseline)
SELECT {_KEY}, any_value(engine) AS engine FROM meth SEMI JOIN base USING ({_SETTING}, prompt_id)
GROUP BY ALL
ORDER BY {_KEY}
"""


def write_rate_tpot(con: duckdb.DuckDBPyConnection, tpot: pd.DataFrame) -> None:
    """Write the adjusted TPOT ratios (tpot_speedups, then analyze.stats.adjust_family) into
    the TEMP table rate_tpot."""
    con.execute(RATE_TPOT_DDL)
    insert_frame(con, "rate_tpot", tpot)


def tpot_speedups(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """One row per comparison: KEY, n_pairs, n_method, n_baseline, tpot_speedup and its
    interval (the baseline's TPOT over M's, runs crossed with the prompts both measured);
    the tpot_s strata's start variance goes into start_variance."""
    keys = con.execute(COMPARISONS_SQL).df()
    rows = con.execute(PAIRS_SQL).fetchnumpy()
    baseline = con.execute("SELECT baseline FROM analysis_params").fetchone()[0]
    columns = [np.asarray(rows[c], dtype=float) for c in ("tpot_s", "run", "prompt")]
    start = np.ma.filled(np.ma.asarray(rows["start"], dtype=float), np.nan)
    # rows sorted by (comparison, side): segment 2c is M's rows of comparison c, 2c+1 B's
    segment = np.asarray(rows["comparison"], dtype=np.int64) * 2 + np.asarray(rows["side"])
    bounds = np.searchsorted(segment, np.arange(2 * len(keys) + 1))
    sides = [[Side(columns[0][s], columns[1][s].astype(np.int64), columns[2][s].astype(np.int64),
                   start[s]) for s in (slice(bounds[2 * c], bounds[2 * c + 1]),
                                      slice(bounds[2 * c + 1], bounds[2 * c + 2]))]
             for c in range(len(keys))]  # fmt: skip
    found, variances = compare_all(
        [(tuple(k[c] for c in KEY[:-1]), tuple(k[c] for c in STRATUM), k["method"], baseline,
          *sides[i]) for i, k in enumerate(keys.to_dict("records"))],
        invert=True,
    )  # fmt: skip
    insert_frame(con, "start_variance", variance_rows(variances, "tpot_s", "rate"))
    records = [_record(key, got, baseline) for key, got in zip(keys.to_dict("records"), found)
               if got is not None]  # fmt: skip
    return pd.DataFrame.from_records(records)


def _record(key: dict, got: Compared, baseline: str) -> dict:
    result = got.result
    return {
        **{k: key[k] for k in KEY}, "n_pairs": result.n_prompts, "n_method": got.n,
        "n_baseline": got.n_baseline, "is_control": key["method"] == aa_control_name(baseline),
        "tpot_speedup": result.speedup, "tpot_speedup_lo": result.ci_low,
        "tpot_speedup_hi": result.ci_high, "tpot_ci_reason": result.reason,
        "p_value": result.p_value, "df": result.df, "log_se": result.log_se,
    }  # fmt: skip
