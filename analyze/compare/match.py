"""Match two campaigns' windows and prompts and compare them metric by metric (the package
docstring has the columns; analyze.compare.stats the statistics, analyze.compare.variance
the start variance)."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import replace
from typing import Any

import duckdb
import numpy as np

from specsweep.analyze.compare import stats as cs
from specsweep.analyze.compare import variance as cv
from specsweep.analyze.compare.change import METRICS, SHIFT_WINDOW, Change, Comparison
from specsweep.analyze.compare.prompts import PromptCheck, prompt_check
from specsweep.analyze.environment_diff import environment
from specsweep.schema.keys import WINDOW_KEY
from specsweep.stats.paired import holm
from specsweep.stats.starts import StartVariance

# a window within its campaign, and how it was loaded (a closed loop or a rate)
KEY = (*WINDOW_KEY[1:], "load")
COLUMNS = ("decode_tps", "ttft_s", "tpot_s", "accept_length")  # ROWS_SQL's, in its order
# (campaign, the window's columns, load_label's arguments, run, prompt, the position of the
# request's service start (service_starts; NULL for imported rows), the metrics); ? x4
ROWS_SQL = f"""
SELECT {", ".join(f"m.{c}" for c in WINDOW_KEY)},
       'closed', NULL::DOUBLE, NULL::VARCHAR, NULL::DOUBLE, NULL::DOUBLE, NULL::DOUBLE,
       m.run, m.prompt_id, s.start_index, m.decode_tps, m.ttft_s, m.tpot_s,
       accept_length_of(m.output_tokens, m.spec_verify_ct)
FROM request_metrics AS m
LEFT JOIN service_starts AS s ON s.campaign_id = m.campaign_id AND s.service_id = m.service_id
WHERE m.ok AND m.campaign_id IN (?, ?)
UNION ALL
SELECT o.campaign_id, o.engine, o.tp, o.method, o.workload, o.max_tokens, o.max_concurrency,
       o.load, o.rate, o.ramp, w.ramp_start_rate, w.ramp_end_rate, w.burstiness,
       r.run, o.prompt_id, s.start_index, decode_tps(o.output_tokens, o.e2e_s, o.ttft_s),
       o.ttft_s, o.tpot_s, accept_length_of(o.output_tokens, r.spec_verify_ct)
FROM open_requests AS o
JOIN windows AS w ON w.campaign_id = o.campaign_id AND w.window_id = o.window_id
JOIN requests AS r ON r.campaign_id = o.campaign_id AND r.request_id = o.request_id
LEFT JOIN service_starts AS s ON s.campaign_id = o.campaign_id AND s.service_id = r.service_id
WHERE o.ok AND o.steady AND o.campaign_id IN (?, ?)
"""
# (campaign, the window's columns, load_label's arguments, run, prompt, NULL start, met 0/1):
# steady requests of windows whose campaign has an SLO; ? x2: a, b
ATTAINMENT_SQL = """
SELECT o.campaign_id, o.engine, o.tp, o.method, o.workload, o.max_tokens, o.max_concurrency,
       o.load, o.rate, o.ramp, w.ramp_start_rate, w.ramp_end_rate, w.burstiness,
       r.run, o.prompt_id, NULL::BIGINT, o.meets_slo::INTEGER
FROM open_requests AS o
JOIN windows AS w ON w.campaign_id = o.campaign_id AND w.window_id = o.window_id
JOIN requests AS r ON r.campaign_id = o.campaign_id AND r.request_id = o.request_id
WHERE o.steady AND o.meets_slo IS NOT NULL AND o.campaign_id IN (?, ?)
"""
SLO_SQL = (
    "SELECT count(DISTINCT (ttft_ms, tpot_ms, e2e_ms, trim)) = 1 AND count(*) = 2 "
    "FROM slo_targets WHERE has_slo AND campaign_id IN (?, ?)"
)
BASELINES_SQL = "SELECT campaign_id, baseline FROM campaigns WHERE campaign_id IN (?, ?)"
# campaign -> window key -> column -> (run, prompt) -> values
Values = dict[str, dict[tuple, dict[str, cv.Cells]]]


def resolve(con: duckdb.DuckDBPyConnection, spec: str) -> str:
    """A campaign id, or a plan name standing for its latest campaign; ValueError if none."""
    ids = [
        r[0]
        for r in con.execute(
            "SELECT campaign_id FROM campaigns WHERE campaign_id = ? "
            "OR plan_name = ? ORDER BY campaign_id = ? DESC, "
            "started_at DESC",
            [spec, spec, spec],
        ).fetchall()
    ]
    if not ids:
        known = [r[0] for r in con.execute("SELECT campaign_id FROM campaigns").fetchall()]
        raise ValueError(f"no campaign {spec!r} (by id or plan name); the file has {known}")
    return ids[0]


def _nested() -> defaultdict:
    return defaultdict(lambda: defaultdict(lambda: defaultdict(list)))


def _read(
    con: duckdb.DuckDBPyConnection, sql: str, a: str, b: str, columns: tuple[str, ...]
) -> tuple[Values, dict]:
    """values[campaign][window key][column][(run, prompt)]: the positive values of a query
    whose rows are (campaign, 6 window columns, 6 load_label arguments, run, prompt, start,
    values); and starts[campaign][window key][run]: the start positions of the run's rows."""
    out: Values = {a: _nested(), b: _nested()}
    starts: dict = {c: defaultdict(lambda: defaultdict(list)) for c in (a, b)}
    params = [a, b] * (sql.count("?") // 2)
    for row in con.execute(sql, params).fetchall():
        key, cell = (*row[1:7], load_label(*row[7:13])), (row[13], row[14])
        if row[15] is not None:
            starts[row[0]][key][row[13]].append(row[15])
        for column, value in zip(columns, row[16:]):
            if value is not None and (value > 0 or column == "met"):
                out[row[0]][key][column][cell].append(value)
    return out, starts


def compare(con: duckdb.DuckDBPyConnection, a_spec: str, b_spec: str) -> Comparison:
    a, b = resolve(con, a_spec), resolve(con, b_spec)
    if a == b:  # every change would be 0, without a word
        raise ValueError(
            f"{a_spec!r} and {b_spec!r} are the same campaign, {a} (a plan name stands for its "
            "latest campaign): give two campaign ids"
        )
    values, starts = _read(con, ROWS_SQL, a, b, COLUMNS)
    met = _met(con, a, b)
    baselines = dict(con.execute(BASELINES_SQL, [a, b]).fetchall())
    check = prompt_check(con, a, b)
    pooled = {c: cv.ratio_variances(values, starts, baselines, c) for c in COLUMNS}
    prompts = _unchecked(check, (set(values[a]) & set(values[b])) | (set(met[a]) & set(met[b])))
    changes = _changes(check, values[a], values[b], pooled, prompts)
    changes += _attainments(check, met[a], met[b], cv.share_variances(met))
    changes += _shifts(changes)
    return Comparison(
        a,
        b,
        _adjusted(changes),
        sorted(set(values[a]) - set(values[b]), key=str),
        sorted(set(values[b]) - set(values[a]), key=str),
        _speedup_ratio(con, a, b),
        environment(con, a, b),
        sorted(set(prompts), key=str),
    )


def _met(con: duckdb.DuckDBPyConnection, a: str, b: str) -> Values:
    """The met flags of both campaigns' open-loop windows, where they have the same SLO."""
    same_slo = con.execute(SLO_SQL, [a, b]).fetchone()
    return _read(con, ATTAINMENT_SQL, a, b, ("met",))[0] if same_slo and same_slo[0] else {
        a: {}, b: {}}  # fmt: skip


def _shifts(changes: list[Change]) -> list[Change]:
    """The campaign-wide shift of each of SHIFT_METRICS over its windows' paired rounds
    (analyze.compare.stats.shift); none with fewer than 2 paired rounds."""
    out = []
    for metric in cs.SHIFT_METRICS:
        windows = [c for c in changes if c.metric == metric and c.kind == "ratio"]
        s = cs.shift([c.rounds for c in windows])
        if s is None:
            continue
        a, b = (math.exp(float(np.mean([math.log(v) for v in side]))) for side in (
            [c.a for c in windows], [c.b for c in windows]))  # fmt: skip
        out.append(Change(
            SHIFT_WINDOW, metric, a, b, s.speedup, kind="shift", ci_low=s.ci_low,
            ci_high=s.ci_high, reason=s.reason, n_prompts=sum(c.n_prompts for c in windows),
            n_runs=max(len(c.rounds) for c in windows), start_source="rounds",
            p_value=s.p_value, n_windows=s.n_prompts, start_df=s.df,
            start_sd=None if s.log_se is None else s.log_se * (s.df + 1) ** 0.5,
        ))  # fmt: skip
    return out


def _adjusted(changes: list[Change]) -> list[Change]:
    """The changes with Holm's weighted p over their family (the shifts holding
    SHIFT_WEIGHT of the level, analyze.compare.stats), significant ones first by effect."""
    tested = [c for c in changes if c.p_value is not None]
    n_shift = sum(c.kind == "shift" for c in tested)
    share = {
        True: cs.SHIFT_WEIGHT / max(n_shift, 1),
        False: (1 - cs.SHIFT_WEIGHT if n_shift else 1.0) / max(len(tested) - n_shift, 1),
    }
    adjusted = holm([c.p_value for c in changes], [share[c.kind == "shift"] for c in changes])
    n_family = sum(p is not None for p in adjusted)
    changes = [replace(c, p_holm=p, n_family=n_family) for c, p in zip(changes, adjusted)]
    return sorted(changes, key=lambda c: (not c.significant, -c.effect))


def _pooled(variances: dict[tuple, StartVariance], key: tuple) -> StartVariance:
    """The window's stratum's pooled start variance (an unusable one where none was built)."""
    return variances.get(cv.stratum(key)) or cv.combine(None, None)


def _changes(
    check: PromptCheck,
    a: dict[tuple, dict[str, cv.Cells]],
    b: dict[tuple, dict[str, cv.Cells]],
    pooled: dict[str, dict[tuple, StartVariance]],
    refused: list[tuple],
) -> list[Change]:
    """Every ratio and point change of the windows both campaigns measured (prompts not
    paired are appended to refused)."""
    out = []
    for key in sorted(set(a) & set(b), key=str):
        a_side, b_side = _paired(check, key, a[key], b[key], refused)
        for metric, (column, q, _) in METRICS.items():
            start = _pooled(pooled[column], key)
            c = _change(key, metric, q, a_side.get(column, {}), b_side.get(column, {}), start)
            out += [] if c is None else [c]
    return out


def _attainments(
    check: PromptCheck,
    a: dict[tuple, dict[str, cv.Cells]],
    b: dict[tuple, dict[str, cv.Cells]],
    pooled: dict[tuple, StartVariance],
) -> list[Change]:
    """The attainment change of every window both campaigns measured under the same SLO."""
    out = []
    for key in sorted(set(a) & set(b), key=str):
        a_side, b_side = _paired(check, key, a[key], b[key], [])
        c = _attainment(key, a_side.get("met", {}), b_side.get("met", {}), _pooled(pooled, key))
        out += [] if c is None else [c]
    return out


def _unchecked(check: PromptCheck, keys: set[tuple]) -> list[tuple]:
    """A prompts row per workload of the matched windows whose prompts the plans cannot
    check."""
    return [
        (w, None, None, None, "not checked", "a plan does not define the workload")
        for w in sorted({k[3] for k in keys})
        if not check.checked(w)
    ]


def _paired(
    check: PromptCheck,
    key: tuple,
    a: dict[str, cv.Cells],
    b: dict[str, cv.Cells],
    refused: list[tuple],
) -> tuple[dict[str, cv.Cells], dict[str, cv.Cells]]:
    """Both sides without the prompts whose text or chat template differs (appended to
    refused, once per window's workload and method)."""
    engine, tp, method, workload = key[:4]
    template = check.template(method, tp)
    prompts = {p for side in (a, b) for cells in side.values() for (_, p) in cells}
    bad = {p: f"prompt text differs: {why}" for p in prompts if (why := check.text(workload, p))}
    if template:
        refused.append((workload, method, tp, None, "chat template differs", template))
        bad = dict.fromkeys(prompts, template)
    else:
        refused += [
            (workload, None, None, p, "text differs", why.split(": ", 1)[1])
            for p, why in sorted(bad.items())
        ]
    return tuple(
        {
            column: {c: v for c, v in cells.items() if c[1] not in bad}
            for column, cells in side.items()
        }
        for side in (a, b)
    )


def _shared(a: cv.Cells, b: cv.Cells) -> tuple[list[float], list[float]]:
    """Each side's values of the prompts both measured (any run)."""
    prompts = {p for _, p in a} & {p for _, p in b}
    return tuple(
        [v for (_, p), vs in sorted(side.items()) if p in prompts for v in vs] for side in (a, b)
    )


def _start(start: StartVariance) -> dict[str, float | None]:
    """The pooled start sd and df a change reports (None where there is no estimate)."""
    if not start.usable:
        return {"start_sd": None, "start_df": None}
    return {"start_sd": start.s2**0.5, "start_df": start.df}


def _change(
    key: tuple, metric: str, q: float, a: cv.Cells, b: cv.Cells, start: StartVariance
) -> Change | None:
    values_a, values_b = _shared(a, b)
    if not values_a:
        return None
    value_a, value_b = (float(np.quantile(v, q)) for v in (values_a, values_b))
    if q != 0.5:  # a tail quantile: a point estimate (no calibrated interval)
        n_prompts = len({p for _, p in a} & {p for _, p in b})
        return Change(key, metric, value_a, value_b, value_b / value_a, kind="point",
                      n_prompts=n_prompts)  # fmt: skip
    m = cs.measure(b, a, start)
    if m is None:
        return None
    s = m.result
    return Change(
        key, metric, value_a, value_b, s.speedup, ci_low=s.ci_low, ci_high=s.ci_high,
        reason=s.reason, n_prompts=s.n_prompts, n_runs=m.n_runs, start_source=m.source,
        p_value=s.p_value, rounds=m.rounds, **_start(start),
    )  # fmt: skip


def _attainment(key: tuple, a: cv.Cells, b: cv.Cells, start: StartVariance) -> Change | None:
    """share(B) - share(A) on the shared prompts, Newcombe's interval with the start term
    (analyze.compare.stats.attainment)."""
    met_a, met_b = _shared(a, b)
    if not met_a:
        return None
    rounds = (len(cs.runs_of(b)), len(cs.runs_of(a)))
    got = cs.attainment(met_b, met_a, rounds, start)
    share_a, share_b = sum(met_a) / len(met_a), sum(met_b) / len(met_b)
    ratio = share_b / share_a if share_a > 0 else (1.0 if share_b == 0 else math.inf)
    return Change(
        key, "attainment", share_a, share_b, ratio, kind="difference", difference=got.d,
        ci_low=got.ci_low, ci_high=got.ci_high, reason=got.reason,
        n_prompts=len({p for _, p in a} & {p for _, p in b}), n_runs=min(rounds),
        start_source=None if got.ci_low is None else "pooled", p_value=got.p_value,
        **_start(start),
    )  # fmt: skip


def load_label(
    load: str,
    rate: float | None,
    ramp: str | None,
    start: float | None,
    end: float | None,
    burstiness: float | None,
) -> str:
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
    .../poisson 4 rps (open loop, '+ cap N' with a max_concurrency cap); 'all windows' for a
    campaign-wide shift (SHIFT_WINDOW)."""
    *head, concurrency, load = key
    if key == SHIFT_WINDOW:
        return load
    if load == "closed":
        tail = f"c={concurrency}"
    else:
        tail = load + (f" cap {concurrency}" if concurrency is not None else "")
    return "/".join([*map(str, head), tail])


def _speedup_ratio(
    con: duckdb.DuckDBPyConnection, a: str, b: str
) -> dict[tuple[Any, ...], tuple[float, float]]:
    rows = con.execute(
        f"SELECT campaign_id, {', '.join(KEY[:-1])}, speedup FROM speedup "
        "WHERE campaign_id IN (?, ?) AND NOT is_control",
        [a, b],
    ).fetchall()
    by = {(r[0], (*r[1:7], "closed")): r[7] for r in rows}
    return {k: (by[(a, k)], by[(b, k)]) for (c, k) in by if c == a and (b, k) in by}
