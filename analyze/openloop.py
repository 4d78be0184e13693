"""The open-loop analysis objects (contract: analyze/VIEWS.md, "Open-loop load").

Built after the closed-loop objects, inside the same transaction (analyze.build): the Wilson
interval macros (21), slo_targets (22), open_requests (23), cache_hygiene (24), open_windows
(25), then the paired TPOT bootstraps of rate space into the TEMP table `rate_tpot` (here),
rate_speedup (26), which reads it, and rate_limits (27). On a file without open-loop windows
or SLO rows every one of them is an empty table.

rate_tpot, one row per (campaign_id, tp, workload, max_tokens, rate, method M != baseline)
with steady ok TPOTs on prompts both M and the baseline measured at that rate:

    tpot_speedup     = exp(mean over prompts of (mean ln baseline's TPOT - mean ln M's))
    tpot_speedup_lo, tpot_speedup_hi = its 95% t interval on the per-prompt log ratios
                       (NULL below schema.paired.MIN_PROMPTS prompts, tpot_ci_reason)
    p_value, p_holm, significant, sim_ci_low, sim_ci_high = as the closed-loop `speedup`'s,
                       Holm and the simultaneous level over the campaign's open-loop claims
                       (analyze.stats.adjust_family; the A/A control is not a claim)

from schema.paired's flat_paired_speedup (the closed-loop `speedup`'s definition, with the
baseline on the numerator side: TPOT is a time, decode speed its reciprocal). Open-loop and
closed-loop claims are two families, each adjusted on its own: they answer different
questions (per-request speed at a concurrency, token pace at an offered rate). Pair rows are
read once as numbers, sorted in DuckDB.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd

from analyze.stats import adjust_family, insert_frame
from schema.controls import aa_control_name
from schema.paired import flat_paired_speedup

BEFORE_BOOTSTRAP = (
    "21_wilson.sql",
    "22_slo_targets.sql",
    "23_open_requests.sql",
    "24_cache_hygiene.sql",
    "25_open_windows.sql",
)
AFTER_BOOTSTRAP = ("26_rate_speedup.sql", "27_rate_limits.sql")
OBJECTS = ("slo_targets", "open_requests", "cache_hygiene", "open_windows", "rate_speedup",
           "rate_limits")  # fmt: skip

KEY = ["campaign_id", "tp", "workload", "max_tokens", "rate", "method"]
_KEY = ", ".join(KEY)
_SETTING = "campaign_id, tp, workload, max_tokens, rate"

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

# steady ok requests with a TPOT at a swept rate; side 0 = the baseline (numerator), 1 = M;
# the baseline's rows repeated once per M; prompts as ordinals in prompt_id order
PAIRS_SQL = f"""
WITH
params AS (SELECT baseline FROM analysis_params),
usable AS (
    SELECT {_KEY}, prompt_id, tpot_s FROM open_requests
    WHERE steady AND ok AND tpot_s IS NOT NULL AND rate IS NOT NULL
),
base AS (SELECT u.* EXCLUDE (method) FROM usable AS u JOIN params AS p ON u.method = p.baseline),
meth AS (SELECT u.* FROM usable AS u JOIN params AS p ON u.method <> p.baseline),
shared AS (
    SELECT DISTINCT {_KEY}, prompt_id FROM meth
    SEMI JOIN base USING ({_SETTING}, prompt_id)
),
comparisons AS (
    SELECT {_KEY}, row_number() OVER (ORDER BY {_KEY}) - 1 AS comparison
    FROM (SELECT DISTINCT {_KEY} FROM shared)
),
prompts AS (
    SELECT {_KEY}, prompt_id,
           row_number() OVER (PARTITION BY {_KEY} ORDER BY prompt_id) - 1 AS prompt
    FROM shared
),
sides AS (
    SELECT s.*, 0 AS side, b.tpot_s FROM prompts AS s JOIN base AS b USING ({_SETTING}, prompt_id)
    UNION ALL
    SELECT s.*, 1 AS side, m.tpot_s FROM prompts AS s JOIN meth AS m USING ({_KEY}, prompt_id)
)
SELECT comparison, side, prompt, tpot_s
FROM sides JOIN comparisons USING ({_KEY})
ORDER BY comparison, side, prompt
"""
COMPARISONS_SQL = f"""
WITH
params AS (SELECT baseline FROM analysis_params),
usable AS (
    SELECT {_KEY}, prompt_id FROM open_requests
    WHERE steady AND ok AND tpot_s IS NOT NULL AND rate IS NOT NULL
),
base AS (SELECT u.* EXCLUDE (method) FROM usable AS u JOIN params AS p ON u.method = p.baseline),
meth AS (SELECT u.* FROM usable AS u JOIN params AS p ON u.method <> p.baseline)
SELECT DISTINCT {_KEY} FROM meth SEMI JOIN base USING ({_SETTING}, prompt_id)
ORDER BY {_KEY}
"""


def build(con: duckdb.DuckDBPyConnection, read_sql) -> None:
    """Create the open-loop objects on con (inside the caller's transaction); read_sql(name)
    gives the text of analyze/sql/<name>."""
    for name in BEFORE_BOOTSTRAP:
        con.execute(read_sql(name))
    build_rate_tpot(con)
    for name in AFTER_BOOTSTRAP:
        con.execute(read_sql(name))


def build_rate_tpot(con: duckdb.DuckDBPyConnection) -> int:
    """Bootstrap every rate-space TPOT comparison into the TEMP table rate_tpot; return its
    row count."""
    frame = tpot_speedups(con)
    con.execute(RATE_TPOT_DDL)
    return insert_frame(con, "rate_tpot", frame)


def tpot_speedups(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """One row per comparison: KEY, n_pairs, n_method, n_baseline, tpot_speedup and its
    interval (baseline's median TPOT over M's, on the prompts both measured)."""
    keys = con.execute(COMPARISONS_SQL).df()
    rows = con.execute(PAIRS_SQL).fetchnumpy()
    baseline = con.execute("SELECT baseline FROM analysis_params").fetchone()[0]
    tpot = np.asarray(rows["tpot_s"], dtype=float)
    prompt = np.asarray(rows["prompt"], dtype=np.int64)
    # rows sorted by (comparison, side): segment 2c is the baseline's rows of comparison c
    segment = np.asarray(rows["comparison"], dtype=np.int64) * 2 + np.asarray(rows["side"])
    bounds = np.searchsorted(segment, np.arange(2 * len(keys) + 1))
    records = []
    for c, key in enumerate(keys.itertuples(index=False)):
        base, meth = (slice(bounds[s], bounds[s + 1]) for s in (2 * c, 2 * c + 1))
        zeros = np.zeros
        result, _ = flat_paired_speedup(
            tpot[base],
            zeros(base.stop - base.start, int),
            prompt[base],
            tpot[meth],
            zeros(meth.stop - meth.start, int),
            prompt[meth],
        )
        records.append(
            {
                **key._asdict(),
                "n_pairs": int(prompt[meth].max()) + 1,
                "n_method": meth.stop - meth.start,
                "n_baseline": base.stop - base.start,
                "is_control": key.method == aa_control_name(baseline),
                "tpot_speedup": result.speedup,
                "tpot_speedup_lo": result.ci_low,
                "tpot_speedup_hi": result.ci_high,
                "tpot_ci_reason": result.reason,
                "p_value": result.p_value,
                "df": result.df,
                "log_se": result.log_se,
            }
        )
    frame = pd.DataFrame.from_records(records)
    if not frame.empty:
        adjust_family([(frame, "tpot_speedup")])
    return frame
