"""SLO attainment and goodput over a configuration's service starts (issue 36): the table
`rate_attainment`, which rate_limits' strict max rate reads.

A campaign measures every configuration in rounds, one service start each (stats/starts.py),
so an open-loop window at a rate is one start's. Its requests share that start: a slower start
moves every one of them towards the SLO's limit, and requests of one start are not independent
trials. Wilson's interval on sum(n_good) / sum(n_scheduled) over the starts treats them as if
they were and hides the start-to-start variance (with a start sd of 0.6 on the logit, 150
requests a window and 3 starts it covered 53%: tests/unit/analyze/test_analyze_openloop.py). Each
window's own Wilson interval (open_windows.attainment_lo, _hi) stays what it is: one start's.

Model. Request i of start r of a configuration c meets the SLO with probability
p_r = expit(mu_c + s_r), s_r ~ N(0, sigma^2) the start's effect on the logit, shared by every
request of the start. Then (Williams 1982, "Extra-binomial variation in logistic linear
models", Applied Statistics 31:144-148) the count k_r of n_r requests has

    Var(k_r) = n_r pi (1 + (n_r - 1) sigma^2 pi),   pi = p (1 - p)

The estimand is the attainment a start gives on average, p = E_s p_r (the one the point
figure attainment = sum k / sum n estimates). sigma^2 is pooled over every configuration's
starts of the stratum (campaign_id, engine, tp, rate: the strata of start_variance's tpot_s
rows) by Williams' moment estimator on Pearson's X^2 (each configuration's own p-hat fitted):

    X2_c = sum_r (k_r - n_r p_c)^2 / (n_r pi_c),   E X2_c = D_c + sigma^2 W_c
    D_c  = R_c - 1,   W_c = pi_c sum_r (1 - n_r / N_c) (n_r - 1),   N_c = sum_r n_r
    s2   = max(0, (sum X2 - sum D) / sum W); pooled (s2 = 0, known) when sum X2 <= the
           chi^2_{sum D} quantile at 1 - POOL_ALPHA (Bancroft's sometimes-pool rule, as
           stats.starts and stats.paired use it: no over-dispersion shown, the binomial
           variance alone), from MIN_POOL_CONTRASTS contrasts (sum D) on: with 2, as from 2
           configurations in 2 rounds, the test pools too often and covered 90-93%
    Var(s2) = 2 sum_c D_c phi_c^2 / (sum W)^2 * max(1, sum D / K),
           phi_c = 1 + (n_c - 1) s2 pi_c, K = the distinct starts under those configurations
           minus their configurations (config_id). Windows of one start (its workloads) share
           its effect and add no start draws (as in stats.starts): if they were perfectly
           correlated their X2 terms' variance would grow by exactly sum D / K

and the interval is the quasi-score (Wilson-type) set of p0 with

    (p - p0)^2 <= t_{df, (1 + level) / 2}^2 V(p0)
    V(p0) = pi0 / N + s2 b(p0),   b(p0) = pi0^2 sum_r n_r (n_r - 1) / N^2,   pi0 = p0 (1 - p0)
    df    = 2 V(p~)^2 / (b(p~)^2 Var(s2)),   p~ = (k + 1/2) / (N + 1)

from its least to its greatest point (a grid in logit, then Brent's method). df is
Satterthwaite's: the binomial part of V known, its start part on s2's sampling variance; for a
configuration alone it is R - 1, pooled it grows with the stratum's configurations. It is taken
near the data (p~), not at each p0: far from it the start part dominates V and a t quantile on
s2's own few degrees of freedom let three starts at 92-100% reach 9%, where the normal
approximation to a score no longer holds. When pooled (s2 = 0) df is infinite and the interval
is Wilson's on the summed counts: starts that show no more spread than binomial noise keep it.

Why this and not a quasi-binomial with one dispersion phi for the stratum: a start effect on
the logit gives phi = 1 + (n - 1) sigma^2 p (1 - p), which depends on p, so configurations at
60% and 99% share sigma^2 but not phi, and one pooled phi over-covers the one and under-covers
the other. Why not a t interval on the per-start shares: their variance depends on p as well
(pooling it across configurations is wrong), and three starts that each met the SLO in every
request give an interval of width 0. Korn and Graubard (1998, Survey Methodology 24:193-201)
take the same two steps for clustered proportions: the design effect, and the degrees of
freedom of the variance estimate.

Measured on simulations of this model (300 campaigns a cell; 4 configurations x 2 workloads
sharing each start x 2 rates, 40 or 150 requests a window, attainment 60-99.5%, start sd 0-1 on
the logit, 2 or 3 rounds): coverage 94.6-96.7%; 2 configurations alone 94.2-99.6% (2 rounds
with no start effect: 99.6%, unpooled below MIN_POOL_CONTRASTS); attainment 90-99.9% 94.2-96.2%;
a round effect shared by every configuration (sd 0.5) 93.6%. Wilson on the summed counts:
34-95%. Through the SQL path, in collect's order with drift:
tests/unit/analyze/test_analyze_openloop.py (95.7-97.3% at start sd 0-1; Wilson on the summed
counts 56-95%).

A stratum where no configuration has 2 starts with 0 < p < 1 (every request of every start met,
or missed, the SLO) shows no spread to measure: its s2 comes from the campaign's engine and tp
over every rate (dispersion_from 'engine'); with none there either there is no interval. With
one start there is none either (ci_reason): how far another start would land was not sampled.

Goodput: goodput_rps = sum n_good / sum elapsed_s over the starts, goodput_lo / _hi =
sum n_scheduled / sum elapsed_s x attainment_lo / _hi (the elapsed time's own spread, the last
reply's latency on a fixed schedule, is left out); NULL when a start's window fell behind its
schedule (it was not offered the rate).
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import numpy as np
import pandas as pd
from scipy import special

from specsweep.analyze.stats import insert_frame
from specsweep.stats import dist
from specsweep.stats.paired import LEVEL
from specsweep.stats.starts import POOL_ALPHA

MIN_POOL_CONTRASTS = 4  # below, Bancroft's test has too little power to pool on
KEY = ["campaign_id", "tp", "method", "workload", "max_tokens", "rate"]
STRATUM = ["campaign_id", "engine", "tp", "rate"]
ONE_START = (
    "one service start: how far another start's attainment would land was not sampled "
    "(plan repeat: 2 or more)"
)
NO_SPREAD = (
    "every request of every start met the SLO or every one missed it, at every rate of this "
    "engine and tp: the start-to-start variance of attainment could not be estimated"
)
GRID = special.expit(np.linspace(-16.0, 16.0, 1601))  # candidate attainments, even in logit

# one row per (key, round): the round's windows at the key (normally one) summed
STARTS_SQL = """
SELECT
    campaign_id, tp, method, workload, max_tokens, rate, engine, run,
    any_value(config_id) AS config_id,
    bool_and(has_slo) AS has_slo,
    max(invalid_reason) AS invalid_reason,
    max(goodput_reason) FILTER (WHERE behind_schedule) AS behind_reason,
    sum(n_good) AS n_good,
    sum(n_scheduled) AS n_scheduled,
    sum(elapsed_s) AS elapsed_s
FROM open_windows
WHERE rate IS NOT NULL
GROUP BY ALL
ORDER BY campaign_id, tp, method, workload, max_tokens, rate, run
"""

DDL = """
CREATE OR REPLACE TABLE rate_attainment (
    campaign_id      VARCHAR NOT NULL,
    tp               INTEGER NOT NULL,
    method           VARCHAR NOT NULL,
    workload         VARCHAR NOT NULL,
    max_tokens       INTEGER NOT NULL,
    rate             DOUBLE NOT NULL,
    engine           VARCHAR,
    n_starts         INTEGER NOT NULL,   -- rounds with a window at the key (one start each)
    n_scheduled      BIGINT NOT NULL,    -- summed over the starts
    n_good           BIGINT,             -- NULL without an SLO
    attainment       DOUBLE,             -- n_good / n_scheduled (NULL: no SLO, invalid rows)
    attainment_lo    DOUBLE,             -- start-aware 95% interval (NULL: ci_reason)
    attainment_hi    DOUBLE,
    attainment_df    DOUBLE,             -- its t quantile's df (NULL: infinite, the normal's)
    start_min        DOUBLE,             -- the least and greatest attainment of one start
    start_max        DOUBLE,
    ci_reason        VARCHAR,            -- why there is no interval
    start_sd_logit   DOUBLE,             -- sqrt(s2): sd of a start's effect on the logit
    pooled           BOOLEAN,            -- starts showed no more spread than binomial noise
    dispersion_from  VARCHAR,            -- 'rate' (the stratum) | 'engine' (every rate's)
    goodput_rps      DOUBLE,             -- sum n_good / sum elapsed_s (NULL: goodput_reason)
    goodput_lo       DOUBLE,             -- sum n_scheduled / sum elapsed_s x attainment_lo
    goodput_hi       DOUBLE,
    goodput_reason   VARCHAR,            -- no SLO | invalid rows | a start behind schedule
    PRIMARY KEY (campaign_id, tp, method, workload, max_tokens, rate)
)
"""


@dataclass(frozen=True)
class Starts:
    """One configuration's counts at a rate, start by start: good[r] of scheduled[r] on the
    service start starts[r] ((config_id, run): windows of one start share its effect)."""

    good: np.ndarray
    scheduled: np.ndarray
    starts: tuple[tuple[str, int], ...] = ()

    @property
    def share(self) -> float:
        return float(self.good.sum() / self.scheduled.sum())

    @property
    def informative(self) -> bool:
        """Two starts or more, the pooled share strictly between 0 and 1, and a start of
        two requests or more (W > 0)."""
        return len(self.good) >= 2 and 0.0 < self.share < 1.0 and self.scheduled.max() > 1

    def pearson(self) -> tuple[float, float, float]:
        """(X2, D, W) of the module docstring."""
        n, p = self.scheduled, self.share
        pi = p * (1 - p)
        x2 = float(((self.good - n * p) ** 2 / (n * pi)).sum())
        return x2, len(n) - 1.0, float(pi * ((1 - n / n.sum()) * (n - 1)).sum())


@dataclass(frozen=True)
class Dispersion:
    """A pool's start variance of attainment on the logit: s2 and the variance of its
    estimate (0: pooled, or without a start part), or the reason there is none."""

    s2: float = 0.0
    var_s2: float = 0.0
    pooled: bool = False
    source: str | None = None  # 'rate' | 'engine'
    reason: str | None = None


def dispersion(keys: list[Starts], source: str) -> Dispersion:
    """Williams' pooled s2 over the informative configurations of a pool (module
    docstring), with the variance of its estimate."""
    used = [k for k in keys if k.informative]
    if not used:
        return Dispersion(reason=NO_SPREAD)
    parts = np.array([k.pearson() for k in used])
    x2, d, w = parts.sum(axis=0)
    if d >= MIN_POOL_CONTRASTS and x2 <= dist.chi2_ppf(1 - POOL_ALPHA, d):
        return Dispersion(0.0, 0.0, True, source)
    s2 = max(0.0, (x2 - d) / w)
    pis = np.array([k.share * (1 - k.share) for k in used])
    phi = 1 + (np.array([k.scheduled.mean() for k in used]) - 1) * s2 * pis
    shared = max(1.0, d / max(_contrasts(used), 1))  # windows of one start: one draw
    return Dispersion(float(s2), 2 * float((parts[:, 1] * phi**2).sum()) / w**2 * shared,
                      False, source)  # fmt: skip


def _contrasts(keys: list[Starts]) -> int:
    """K: the distinct starts under the keys minus their configurations."""
    starts = {start for k in keys for start in k.starts}
    return len(starts) - len({config for config, _ in starts})


def interval(starts: Starts, disp: Dispersion, level: float = LEVEL) -> tuple[float, float, float]:
    """(lo, hi, df): the quasi-score interval of the configuration's attainment and the
    degrees of freedom of its t quantile (module docstring)."""
    n = starts.scheduled.astype(float)
    total, pairs, share = n.sum(), float((n * (n - 1)).sum()), starts.share

    def variance(p0: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
        pi = p0 * (1 - p0)
        part = pi**2 * pairs / total**2  # b(p0): V's start part per unit of s2
        return pi / total + disp.s2 * part, part

    var, part = variance((starts.good.sum() + 0.5) / (total + 1))
    df = 2 * var**2 / (part**2 * disp.var_s2) if disp.var_s2 > 0 and part > 0 else np.inf
    q = float(dist.t_ppf((1 + level) / 2, df))

    def excess(p0: np.ndarray) -> np.ndarray:  # <= 0 inside the interval
        return (share - p0) ** 2 / variance(p0)[0] - q**2

    grid = np.union1d(GRID, [share]) if 0 < share < 1 else GRID
    inside = np.flatnonzero(excess(grid) <= 0)
    first, last = inside[0], inside[-1]  # the share itself is always inside (or an end)

    def edge(a: float, b: float) -> float:
        return dist.root(lambda x: float(excess(np.array([x]))[0]), a, b)

    lo = 0.0 if first == 0 else edge(grid[first - 1], grid[first])
    hi = 1.0 if last == len(grid) - 1 else edge(grid[last], grid[last + 1])
    return min(lo, share), max(hi, share), float(df)


def pools(frame: pd.DataFrame) -> dict[tuple, Dispersion]:
    """stratum key -> its Dispersion, falling back to the engine's pool over every rate
    (stratum[:3]: campaign_id, engine, tp). A key with an invalid window adds nothing."""
    invalid = frame.groupby(KEY)["invalid_reason"].transform(lambda r: r.notna().any())
    usable = frame[frame["has_slo"] & ~invalid.astype(bool)]
    found, by_engine = {}, {}
    for stratum, group in usable.groupby(STRATUM, sort=False):
        members = [_starts(g) for _, g in group.groupby(KEY, sort=False)]
        found[stratum] = dispersion(members, "rate")
        by_engine.setdefault(stratum[:3], []).extend(members)
    for stratum, disp in found.items():
        if disp.reason:
            found[stratum] = dispersion(by_engine[stratum[:3]], "engine")
    return found


def _starts(group: pd.DataFrame) -> Starts:
    return Starts(group["n_good"].to_numpy(float), group["n_scheduled"].to_numpy(float),
                  tuple(zip(group["config_id"], group["run"].astype(int))))  # fmt: skip


def row(key: tuple, group: pd.DataFrame, disp: Dispersion | None) -> dict:
    """One rate_attainment row from a key's rounds (group) and its stratum's Dispersion."""
    out = dict(zip(KEY, key)) | {
        "engine": group["engine"].iloc[0] or None, "n_starts": len(group),
        "n_scheduled": int(group["n_scheduled"].sum()),
    }  # fmt: skip
    invalid = group["invalid_reason"].dropna()
    if not group["has_slo"].all() or len(invalid):
        why = invalid.iloc[0] if len(invalid) else "no SLO"
        return out | {"ci_reason": why, "goodput_reason": why}
    starts = _starts(group)
    shares = starts.good / starts.scheduled
    out |= {"n_good": int(starts.good.sum()), "attainment": starts.share,
            "start_min": float(shares.min()), "start_max": float(shares.max())}  # fmt: skip
    out |= _interval_columns(starts, disp)
    return out | _goodput(group, out)


def _interval_columns(starts: Starts, disp: Dispersion | None) -> dict:
    if len(starts.good) < 2:
        return {"ci_reason": ONE_START}
    if disp is None or disp.reason:
        return {"ci_reason": disp.reason if disp else NO_SPREAD}
    lo, hi, df = interval(starts, disp)
    return {
        "attainment_lo": lo, "attainment_hi": hi, "attainment_df": df if np.isfinite(df) else None,
        "start_sd_logit": disp.s2**0.5, "pooled": disp.pooled, "dispersion_from": disp.source,
    }  # fmt: skip


def _goodput(group: pd.DataFrame, out: dict) -> dict:
    """goodput_rps and its interval (attainment's, scaled), or why there is none."""
    behind = group[group["behind_reason"].notna()]
    if len(behind):
        return {"goodput_reason": f"run {behind['run'].iloc[0]}: {behind['behind_reason'].iloc[0]}"}
    elapsed = float(group["elapsed_s"].sum())
    if not elapsed > 0:
        return {"goodput_reason": "no elapsed time"}
    scale = out["n_scheduled"] / elapsed
    lo, hi = out.get("attainment_lo"), out.get("attainment_hi")
    return {
        "goodput_rps": out["n_good"] / elapsed,
        "goodput_lo": None if lo is None else scale * lo,
        "goodput_hi": None if hi is None else scale * hi,
    }


def build(con: duckdb.DuckDBPyConnection) -> int:
    """Create rate_attainment from open_windows; return its row count."""
    con.execute(DDL)
    frame = con.execute(STARTS_SQL).df()
    if frame.empty:
        return 0
    frame["engine"] = frame["engine"].fillna("")  # a group key: NULL would drop the row
    found = pools(frame)
    rows = [row(key, group, found.get(tuple(group[STRATUM].iloc[0])))
            for key, group in frame.groupby(KEY, sort=True)]  # fmt: skip
    return insert_frame(con, "rate_attainment", pd.DataFrame.from_records(rows))
