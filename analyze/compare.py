"""Compare two campaigns of one results file, and gate a candidate on a baseline
(`python -m analyze compare A B`, `python -m analyze gate --baseline A --candidate B
--max-regression 5%`). Run `python -m analyze` first: it reads the analysis layer.

Windows are matched on (engine, tp, method, workload, max_tokens, concurrency, load), and
within a window on prompt_id:

- closed-loop windows: load 'closed', the measured requests of request_metrics;
- open-loop windows: load the arrival process as load_label writes it ('poisson 4 rps',
  'gamma(0.5) 4 rps', 'poisson linear ramp 1-8 rps', 'trace'), concurrency the window's
  max_concurrency cap (NULL: none), the steady ok requests of open_requests (those its
  percentiles use); and `attainment`, the share of the steady requests (failed ones
  included) that meet the campaign's SLO (open_windows.attainment_steady), as the mean of
  meets_slo: a ratio of means with the same paired prompt bootstrap (a resample's mean is
  its drawn prompts' met count over their request count). Only when both campaigns have the
  same objectives and trim (slo_targets; otherwise the environment diff shows the slo.*
  keys that differ), and not where A met none (a ratio of nothing) unless B met none too.

Per matched window and metric, on the prompts both campaigns measured:

    metrics         = decode_tps, ttft_s, tpot_s, accept_length (medians), and ttft_s_p90,
                      tpot_s_p90 (90th percentiles: the tail a median hides; not p99, which
                      with the tens of values a window holds is its largest one or two);
                      attainment (open loop, above)
    ratio           = quantile(B's values) / quantile(A's values) (np.quantile, linear: the
                      report's and DuckDB's quantile_cont)
    ci_low, ci_high = the paired prompt bootstrap of the speedup table (schema.paired: same
                      resamples, seed and level), B in the place of the method, A of the
                      baseline; for a p90, paired_quantile_ratio on the same draws
    significant     = the interval excludes 1
    worse           = ratio < 1 for metrics where higher is better (decode_tps,
                      accept_length), ratio > 1 where lower is better (TTFT and TPOT)
    effect          = |ln ratio|, the order of the list (significant changes first)

accept_length is the per-request one definition ((output_tokens - 1) / spec_verify_ct), so a
method without verify counts has no acceptance row. `speedup_ratio` puts each campaign's own
speedup over its own baseline side by side (B / A, a point estimate: the two intervals come
from different baselines), closed-loop windows (the `speedup` table's). Windows present
in one campaign only are listed, not dropped; the environment diff lists every
`environment` key whose value differs or exists on one side.

Stored: `store` writes the comparison into the tables of OBJECTS (the report reads them,
never analyze's code): every row of the pair (a, b), the resolved ids, is deleted and
written anew in one transaction; other pairs' rows stay, and `python -m analyze` leaves the
tables alone. compare_environment holds the values environment_diff.stable made (the port
masked) and `change`, the changed arguments of two command lines (`-t 2 -> -t 1`; NULL for
other values);
compare_changes' rank is the order of Comparison.changes (1 = the largest significant
effect). The tables are derived: one whose columns are not this module's (a file written by
an older specsweep) is dropped and made anew, with only the pair being stored.

Gate: a matched metric fails when it is significantly worse and its ratio is worse than the
threshold (decode_tps ratio < 1 - t, ttft_s ratio > 1 + t): significance and size together,
as asv's `compare` does. Exit codes: 0 pass, 1 a regression, 2 bad input.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np

from analyze.environment_diff import argument_diff, arguments, environment
from schema.paired import (
    LEVEL,
    N_BOOT,
    SEED,
    Speedup,
    paired_quantile_ratio,
    paired_speedup,
    resample_counts,
)

KEY = ("engine", "tp", "method", "workload", "max_tokens", "concurrency", "load")
# in ROWS_SQL's column order
COLUMNS = ("decode_tps", "ttft_s", "tpot_s", "accept_length")  # ROWS_SQL's, in its order
# metric -> (column, quantile, higher is better)
METRICS = {"decode_tps": ("decode_tps", 0.5, True), "ttft_s": ("ttft_s", 0.5, False),
           "tpot_s": ("tpot_s", 0.5, False), "accept_length": ("accept_length", 0.5, True),
           "ttft_s_p90": ("ttft_s", 0.9, False), "tpot_s_p90": ("tpot_s", 0.9, False)}
HIGHER_IS_BETTER = {metric: higher for metric, (_, _, higher) in METRICS.items()}
HIGHER_IS_BETTER["attainment"] = True
WINDOW_DDL = ("engine VARCHAR, tp INTEGER, method VARCHAR, workload VARCHAR, "
              "max_tokens INTEGER, concurrency INTEGER, load VARCHAR")
STORE_DDL = {
    "compare_runs": "campaign_id VARCHAR NOT NULL, plan_name VARCHAR, started_at TIMESTAMP, "
                    "n_measured BIGINT",
    "compare_changes": f"{WINDOW_DDL}, metric VARCHAR NOT NULL, value_a DOUBLE, value_b DOUBLE, "
                       "ratio DOUBLE, ci_low DOUBLE, ci_high DOUBLE, n_prompts INTEGER, "
                       "significant BOOLEAN, worse BOOLEAN, effect DOUBLE, rank INTEGER",
    "compare_speedups": f"{WINDOW_DDL}, speedup_a DOUBLE, speedup_b DOUBLE",
    "compare_only": f"side VARCHAR NOT NULL, {WINDOW_DDL}",
    "compare_environment": "host VARCHAR, key VARCHAR NOT NULL, value_a VARCHAR, "
                           "value_b VARCHAR, change VARCHAR",
}
OBJECTS = tuple(STORE_DDL)  # tables `python -m analyze compare` writes, `report --compare` reads
# (campaign, the window's columns, load_label's arguments, prompt, the metrics); ? x4: a, b
ROWS_SQL = """
SELECT campaign_id, engine, tp, method, workload, max_tokens, concurrency,
       'closed', NULL::DOUBLE, NULL::VARCHAR, NULL::DOUBLE, NULL::DOUBLE, NULL::DOUBLE,
       prompt_id, decode_tps, ttft_s, tpot_s, accept_length_of(output_tokens, spec_verify_ct)
FROM request_metrics WHERE ok AND campaign_id IN (?, ?)
UNION ALL
SELECT o.campaign_id, o.engine, o.tp, o.method, o.workload, o.max_tokens, o.max_concurrency,
       o.load, o.rate, o.ramp, w.ramp_start_rate, w.ramp_end_rate, w.burstiness,
       o.prompt_id, decode_tps(o.output_tokens, o.e2e_s, o.ttft_s), o.ttft_s, o.tpot_s,
       accept_length_of(o.output_tokens, r.spec_verify_ct)
FROM open_requests AS o
JOIN windows AS w ON w.campaign_id = o.campaign_id AND w.window_id = o.window_id
JOIN requests AS r ON r.campaign_id = o.campaign_id AND r.request_id = o.request_id
WHERE o.ok AND o.steady AND o.campaign_id IN (?, ?)
"""
# (campaign, the window's columns, load_label's arguments, prompt, met 0/1): steady requests
# of windows whose campaign has an SLO; ? x2: a, b
ATTAINMENT_SQL = """
SELECT o.campaign_id, o.engine, o.tp, o.method, o.workload, o.max_tokens, o.max_concurrency,
       o.load, o.rate, o.ramp, w.ramp_start_rate, w.ramp_end_rate, w.burstiness,
       o.prompt_id, o.meets_slo::INTEGER
FROM open_requests AS o
JOIN windows AS w ON w.campaign_id = o.campaign_id AND w.window_id = o.window_id
WHERE o.steady AND o.meets_slo IS NOT NULL AND o.campaign_id IN (?, ?)
"""
SLO_SQL = ("SELECT count(DISTINCT (ttft_ms, tpot_ms, e2e_ms, trim)) = 1 AND count(*) = 2 "
           "FROM slo_targets WHERE has_slo AND campaign_id IN (?, ?)")


@dataclass(frozen=True)
class Change(Speedup):
    """One metric of one matched window, B against A: the paired comparison (speedup = the
    ratio B/A, its interval, significant) plus what was compared."""

    window: tuple[Any, ...] = ()
    metric: str = ""
    a: float = math.nan
    b: float = math.nan

    @property
    def ratio(self) -> float:
        return self.speedup

    @property
    def worse(self) -> bool:
        return self.ratio < 1 if HIGHER_IS_BETTER[self.metric] else self.ratio > 1

    @property
    def effect(self) -> float:
        return abs(math.log(self.ratio)) if self.ratio > 0 else math.inf

    def regresses_beyond(self, threshold: float) -> bool:
        """Significantly worse, and worse than the threshold (0.05 = 5%)."""
        if not (self.significant and self.worse):
            return False
        if HIGHER_IS_BETTER[self.metric]:
            return self.ratio < 1 - threshold
        return self.ratio > 1 + threshold


@dataclass(frozen=True)
class Comparison:
    a: str
    b: str
    changes: list[Change]
    only_a: list[tuple[Any, ...]]
    only_b: list[tuple[Any, ...]]
    speedup_ratio: dict[tuple[Any, ...], tuple[float, float]]
    environment: list[tuple[str, str, str | None, str | None]]


def resolve(con: duckdb.DuckDBPyConnection, spec: str) -> str:
    """A campaign id, or a plan name standing for its latest campaign; ValueError if none."""
    ids = [r[0] for r in con.execute("SELECT campaign_id FROM campaigns WHERE campaign_id = ? "
                                     "OR plan_name = ? ORDER BY campaign_id = ? DESC, "
                                     "started_at DESC", [spec, spec, spec]).fetchall()]
    if not ids:
        known = [r[0] for r in con.execute("SELECT campaign_id FROM campaigns").fetchall()]
        raise ValueError(f"no campaign {spec!r} (by id or plan name); the file has {known}")
    return ids[0]


def compare(con: duckdb.DuckDBPyConnection, a_spec: str, b_spec: str) -> Comparison:
    a, b = resolve(con, a_spec), resolve(con, b_spec)
    values: dict[str, dict[tuple, dict[str, dict[str, list[float]]]]] = {
        a: defaultdict(lambda: defaultdict(lambda: defaultdict(list))),
        b: defaultdict(lambda: defaultdict(lambda: defaultdict(list)))}
    for row in con.execute(ROWS_SQL, [a, b, a, b]).fetchall():
        campaign, key, prompt = row[0], (*row[1:7], load_label(*row[7:13])), row[13]
        for column, value in zip(COLUMNS, row[14:]):
            if value is not None and not math.isnan(value):
                values[campaign][key][column][prompt].append(value)
    changes = [c for key in sorted(set(values[a]) & set(values[b]), key=str)
               for metric, (column, _, _) in METRICS.items()
               if (c := _change(key, metric, values[a][key][column], values[b][key][column]))]
    changes += _attainment(con, a, b)
    changes.sort(key=lambda c: (not c.significant, -c.effect))
    return Comparison(a, b, changes, sorted(set(values[a]) - set(values[b]), key=str),
                      sorted(set(values[b]) - set(values[a]), key=str),
                      _speedup_ratio(con, a, b), environment(con, a, b))


def load_label(load: str, rate: float | None, ramp: str | None, start: float | None,
               end: float | None, burstiness: float | None) -> str:
    """A window's load in words, the last part of its key: 'closed', 'poisson 4 rps',
    'gamma(0.5) 4 rps', 'poisson linear ramp 1-8 rps', 'trace'."""
    if load == "closed":
        return load
    shape = f"gamma({burstiness:g})" if load == "gamma" and burstiness is not None else load
    if ramp is not None and start is not None and end is not None:
        return f"{shape} {ramp} ramp {start:g}-{end:g} rps"
    return shape if rate is None else f"{shape} {rate:g} rps"


def window_text(key: tuple[Any, ...]) -> str:
    """A window key in words: engine/tp/method/workload/max_tokens/c=4 (closed loop) or
    .../poisson 4 rps (open loop, '+ cap N' with a max_concurrency cap)."""
    *head, concurrency, load = key
    if load == "closed":
        tail = f"c={concurrency}"
    else:
        tail = load + (f" cap {concurrency}" if concurrency is not None else "")
    return "/".join([*map(str, head), tail])


def _change(key: tuple, metric: str, a_by_prompt: dict[str, list[float]],
            b_by_prompt: dict[str, list[float]]) -> Change | None:
    shared = sorted(set(a_by_prompt) & set(b_by_prompt))
    if not shared:
        return None
    a_side = {p: a_by_prompt[p] for p in shared}
    b_side = {p: b_by_prompt[p] for p in shared}
    q = METRICS[metric][1]
    s = paired_speedup(b_side, a_side) if q == 0.5 else paired_quantile_ratio(b_side, a_side, q)
    assert s is not None  # shared is not empty
    value_a = float(np.quantile([v for p in shared for v in a_side[p]], q))
    return Change(s.speedup, s.ci_low, s.ci_high, s.n_prompts, window=key, metric=metric,
                  a=value_a, b=value_a * s.speedup)


def _attainment(con: duckdb.DuckDBPyConnection, a: str, b: str) -> list[Change]:
    """The attainment changes of the open-loop windows both campaigns measured with the same
    SLO (the module docstring)."""
    same_slo = con.execute(SLO_SQL, [a, b]).fetchone()
    if not (same_slo and same_slo[0]):
        return []
    met: dict[str, dict[tuple, dict[str, list[int]]]] = {
        a: defaultdict(lambda: defaultdict(list)), b: defaultdict(lambda: defaultdict(list))}
    for row in con.execute(ATTAINMENT_SQL, [a, b]).fetchall():
        met[row[0]][(*row[1:7], load_label(*row[7:13]))][row[13]].append(row[14])
    return [c for key in sorted(set(met[a]) & set(met[b]), key=str)
            if (c := _mean_ratio(key, met[a][key], met[b][key]))]


def _mean_ratio(key: tuple, a_by_prompt: dict[str, list[int]],
                b_by_prompt: dict[str, list[int]]) -> Change | None:
    """B/A of the mean met share on the shared prompts, with the paired prompt bootstrap
    (schema.paired's draws and seed); None without a shared prompt, or when A met none and
    B met some (no ratio)."""
    shared = sorted(set(a_by_prompt) & set(b_by_prompt))
    if not shared:
        return None
    sums = np.array([[sum(side[p]) for p in shared] for side in (a_by_prompt, b_by_prompt)])
    sizes = np.array([[len(side[p]) for p in shared] for side in (a_by_prompt, b_by_prompt)])
    mean_a, mean_b = sums.sum(axis=1) / sizes.sum(axis=1)
    if mean_a == 0 and mean_b > 0:
        return None
    counts = resample_counts(np.random.default_rng(SEED), len(shared), N_BOOT)
    ra, rb = ((counts @ sums[i]) / (counts @ sizes[i]) for i in (0, 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where((ra == 0) & (rb == 0), 1.0, rb / ra)
    tail = (1 - LEVEL) / 2 * 100
    lo, hi = np.percentile(ratios, [tail, 100 - tail])
    ratio = 1.0 if mean_a == mean_b == 0 else mean_b / mean_a
    return Change(float(ratio), float(lo), float(hi), len(shared), window=key,
                  metric="attainment", a=float(mean_a), b=float(mean_b))


def _speedup_ratio(con: duckdb.DuckDBPyConnection, a: str,
                   b: str) -> dict[tuple[Any, ...], tuple[float, float]]:
    rows = con.execute(f"SELECT campaign_id, {', '.join(KEY[:-1])}, speedup FROM speedup "
                       "WHERE campaign_id IN (?, ?)", [a, b]).fetchall()
    by = {(r[0], (*r[1:7], "closed")): r[7] for r in rows}
    return {k: (by[(a, k)], by[(b, k)]) for (c, k) in by if c == a and (b, k) in by}


def store(con: duckdb.DuckDBPyConnection, comp: Comparison) -> dict[str, int]:
    """Write comp into the compare_* tables (created if missing), replacing the pair's rows
    in one transaction; returns the rows written per table."""
    runs = con.execute("SELECT campaign_id, plan_name, started_at, n_measured "
                       "FROM campaign_summary WHERE campaign_id IN (?, ?) "
                       "ORDER BY campaign_id = ? DESC", [comp.a, comp.b, comp.a]).fetchall()
    rows: dict[str, list[tuple]] = {
        "compare_runs": runs,
        "compare_changes": [(*c.window, c.metric, c.a, c.b, c.ratio, c.ci_low, c.ci_high,
                             c.n_prompts, c.significant, c.worse, c.effect, rank)
                            for rank, c in enumerate(comp.changes, 1)],
        "compare_speedups": [(*k, sa, sb) for k, (sa, sb) in sorted(comp.speedup_ratio.items(),
                                                                     key=str)],
        "compare_only": [("A", *k) for k in comp.only_a] + [("B", *k) for k in comp.only_b],
        "compare_environment": [(h, k, va, vb, arguments(va, vb))
                                for h, k, va, vb in comp.environment],
    }
    con.begin()
    try:
        for name, columns in STORE_DDL.items():  # names and columns: this module's constants
            _renew(con, name, f"a VARCHAR NOT NULL, b VARCHAR NOT NULL, {columns}")
            con.execute(f"DELETE FROM {name} WHERE a = ? AND b = ?", [comp.a, comp.b])
            if rows[name]:
                marks = ", ".join("?" * (2 + len(rows[name][0])))
                con.executemany(f"INSERT INTO {name} VALUES ({marks})",
                                [(comp.a, comp.b, *r) for r in rows[name]])
    except BaseException:
        con.rollback()
        raise
    con.commit()
    return {name: len(r) for name, r in rows.items()}


def _renew(con: duckdb.DuckDBPyConnection, name: str, columns: str) -> None:
    """Create table name with these columns; one of other columns (an older specsweep's) is
    dropped first: the compare tables are derived, `analyze compare` makes them again."""
    wanted = [c.strip().split()[0] for c in columns.split(",")]
    have = [r[0] for r in con.execute("SELECT column_name FROM information_schema.columns "
                                      "WHERE table_name = ? ORDER BY ordinal_position",
                                      [name]).fetchall()]
    if have and have != wanted:
        con.execute(f"DROP TABLE {name}")
    con.execute(f"CREATE TABLE IF NOT EXISTS {name} ({columns})")


def gate(comparison: Comparison, threshold: float) -> list[Change]:
    """The changes that fail the gate (empty: pass)."""
    return [c for c in comparison.changes if c.regresses_beyond(threshold)]


def describe(c: Change) -> str:
    window = window_text(c.window)
    flag = ("worse" if c.worse else "better") if c.significant else "no significant change"
    return (f"{window} {c.metric}: {c.a:.4g} -> {c.b:.4g} ({(c.ratio - 1) * 100:+.1f}%, "
            f"95% CI [{(c.ci_low - 1) * 100:+.1f}%, {(c.ci_high - 1) * 100:+.1f}%], "
            f"{c.n_prompts} prompts): {flag}")


def lines(comp: Comparison) -> list[str]:
    """What `python -m analyze compare` prints."""
    out = [f"compare {comp.a} (A) -> {comp.b} (B): {len(comp.changes)} matched metric(s), "
           f"{sum(c.significant for c in comp.changes)} significant"]
    out += ["  " + describe(c) for c in comp.changes]
    for key, (sa, sb) in sorted(comp.speedup_ratio.items(), key=str):
        out.append(f"  {window_text(key)} speedup over own baseline: "
                   f"{sa:.3g}x -> {sb:.3g}x")
    out += [f"  only in A: {window_text(k)}" for k in comp.only_a]
    out += [f"  only in B: {window_text(k)}" for k in comp.only_b]
    out += [f"  environment {host} {key}: {argument_diff(va, vb)}"
            for host, key, va, vb in comp.environment]
    return out
