"""Match two campaigns' windows and prompts and compare them metric by metric (the package
docstring has the columns; analyze.compare.stats the statistics)."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import replace
from typing import Any

import duckdb
import numpy as np

from analyze.compare import stats as cs
from analyze.compare.change import METRICS, Change, Comparison
from analyze.compare.prompts import PromptCheck, prompt_check
from analyze.environment_diff import environment
from schema.controls import aa_control_name
from schema.paired import holm

KEY = ("engine", "tp", "method", "workload", "max_tokens", "concurrency", "load")
COLUMNS = ("decode_tps", "ttft_s", "tpot_s", "accept_length")  # ROWS_SQL's, in its order
# (campaign, the window's columns, load_label's arguments, run, prompt, the metrics); ? x4
ROWS_SQL = """
SELECT campaign_id, engine, tp, method, workload, max_tokens, concurrency,
       'closed', NULL::DOUBLE, NULL::VARCHAR, NULL::DOUBLE, NULL::DOUBLE, NULL::DOUBLE,
       run, prompt_id, decode_tps, ttft_s, tpot_s,
       accept_length_of(output_tokens, spec_verify_ct)
FROM request_metrics WHERE ok AND campaign_id IN (?, ?)
UNION ALL
SELECT o.campaign_id, o.engine, o.tp, o.method, o.workload, o.max_tokens, o.max_concurrency,
       o.load, o.rate, o.ramp, w.ramp_start_rate, w.ramp_end_rate, w.burstiness,
       r.run, o.prompt_id, decode_tps(o.output_tokens, o.e2e_s, o.ttft_s), o.ttft_s, o.tpot_s,
       accept_length_of(o.output_tokens, r.spec_verify_ct)
FROM open_requests AS o
JOIN windows AS w ON w.campaign_id = o.campaign_id AND w.window_id = o.window_id
JOIN requests AS r ON r.campaign_id = o.campaign_id AND r.request_id = o.request_id
WHERE o.ok AND o.steady AND o.campaign_id IN (?, ?)
"""
# (campaign, the window's columns, load_label's arguments, run, prompt, met 0/1): steady
# requests of windows whose campaign has an SLO; ? x2: a, b
ATTAINMENT_SQL = """
SELECT o.campaign_id, o.engine, o.tp, o.method, o.workload, o.max_tokens, o.max_concurrency,
       o.load, o.rate, o.ramp, w.ramp_start_rate, w.ramp_end_rate, w.burstiness,
       r.run, o.prompt_id, o.meets_slo::INTEGER
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
Values = dict[str, dict[tuple, dict[str, cs.Cells]]]


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
) -> Values:
    """values[campaign][window key][column][(run, prompt)]: the positive values of a query
    whose rows are (campaign, 6 window columns, 6 load_label arguments, run, prompt, values)."""
    out: Values = {a: _nested(), b: _nested()}
    params = [a, b] * (sql.count("?") // 2)
    for row in con.execute(sql, params).fetchall():
        key, cell = (*row[1:7], load_label(*row[7:13])), (row[13], row[14])
        for column, value in zip(columns, row[15:]):
            if value is not None and (value > 0 or column == "met"):
                out[row[0]][key][column][cell].append(value)
    return out


def compare(con: duckdb.DuckDBPyConnection, a_spec: str, b_spec: str) -> Comparison:
    a, b = resolve(con, a_spec), resolve(con, b_spec)
    values = _read(con, ROWS_SQL, a, b, COLUMNS)
    same_slo = con.execute(SLO_SQL, [a, b]).fetchone()
    met = _read(con, ATTAINMENT_SQL, a, b, ("met",)) if same_slo and same_slo[0] else {a: {}, b: {}}
    baselines = dict(con.execute(BASELINES_SQL, [a, b]).fetchall())
    check = prompt_check(con, a, b)
    noise = {
        k: n
        for k, rows in _aa(values, baselines, COLUMNS, cs.aa_rows).items()
        if (n := cs.aa_noise(rows))
    }
    share = cs.share_noise(
        _aa(met, baselines, ("met",), lambda c, b_: [(c, b_)]).get(("met", False), [])
    )
    shared = (set(values[a]) & set(values[b])) | (set(met[a]) & set(met[b]))
    changes, prompts = [], _unchecked(check, shared)
    for key in sorted(set(values[a]) & set(values[b]), key=str):
        a_side, b_side = _paired(check, key, values[a][key], values[b][key], prompts)
        changes += [
            c
            for metric, (column, q, _) in METRICS.items()
            if (
                c := _change(
                    key,
                    metric,
                    q,
                    a_side.get(column, {}),
                    b_side.get(column, {}),
                    noise.get((column, _closed(key))),
                )
            )
        ]
    for key in sorted(set(met[a]) & set(met[b]), key=str):
        a_side, b_side = _paired(check, key, met[a][key], met[b][key], [])
        if (c := _attainment(key, a_side.get("met", {}), b_side.get("met", {}), share)) is not None:
            changes.append(c)
    adjusted = holm([c.p_value for c in changes])
    n_family = sum(p is not None for p in adjusted)
    changes = [replace(c, p_holm=p, n_family=n_family) for c, p in zip(changes, adjusted)]
    changes.sort(key=lambda c: (not c.significant, -c.effect))
    return Comparison(
        a,
        b,
        changes,
        sorted(set(values[a]) - set(values[b]), key=str),
        sorted(set(values[b]) - set(values[a]), key=str),
        _speedup_ratio(con, a, b),
        environment(con, a, b),
        sorted(set(prompts), key=str),
    )


def _closed(key: tuple) -> bool:
    return key[-1] == "closed"


def _aa(
    values: Values, baselines: dict[str, str], columns: tuple[str, ...], rows: Any
) -> dict[tuple[str, bool], list]:
    """rows(control cells, baseline cells) of every A/A window of either campaign (the
    control, aa_control_name(baseline), and the baseline in the same window), collected per
    (column, closed loop)."""
    out: dict[tuple[str, bool], list] = defaultdict(list)
    for campaign, windows in values.items():
        base = baselines.get(campaign)
        for key, sides in windows.items():
            base_key = (*key[:2], base, *key[3:])
            if base is None or key[2] != aa_control_name(base) or base_key not in windows:
                continue
            for column in columns:
                out[(column, _closed(key))] += rows(sides[column], windows[base_key][column])
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
    a: dict[str, cs.Cells],
    b: dict[str, cs.Cells],
    refused: list[tuple],
) -> tuple[dict[str, cs.Cells], dict[str, cs.Cells]]:
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


def _shared(a: cs.Cells, b: cs.Cells) -> tuple[list[float], list[float]]:
    """Each side's values of the prompts both measured (any run)."""
    prompts = {p for _, p in a} & {p for _, p in b}
    return tuple(
        [v for (_, p), vs in sorted(side.items()) if p in prompts for v in vs] for side in (a, b)
    )


def _change(
    key: tuple, metric: str, q: float, a: cs.Cells, b: cs.Cells, noise: cs.Noise | None
) -> Change | None:
    values_a, values_b = _shared(a, b)
    if not values_a:
        return None
    value_a, value_b = (float(np.quantile(v, q)) for v in (values_a, values_b))
    if q != 0.5:  # a tail quantile: a point estimate (no calibrated interval)
        return Change(
            key,
            metric,
            value_a,
            value_b,
            value_b / value_a,
            kind="point",
            n_prompts=len({p for _, p in a} & {p for _, p in b}),
        )
    m = cs.measure(b, a, noise)
    if m is None:
        return None
    s = m.result
    return Change(
        key,
        metric,
        value_a,
        value_b,
        s.speedup,
        ci_low=s.ci_low,
        ci_high=s.ci_high,
        reason=s.reason,
        n_prompts=s.n_prompts,
        n_runs=m.n_runs,
        drift=m.drift,
        service_var=m.service_var,
        p_value=s.p_value,
    )


def _attainment(key: tuple, a: cs.Cells, b: cs.Cells, noise: cs.Noise | None) -> Change | None:
    """share(B) - share(A) on the shared prompts, Newcombe's interval (compare_stats)."""
    met_a, met_b = _shared(a, b)
    if not met_a:
        return None
    x_a, n_a, x_b, n_b = int(sum(met_a)), len(met_a), int(sum(met_b)), len(met_b)
    runs_a, runs_b = len(cs.runs_of(a)), len(cs.runs_of(b))
    s2 = 0.0 if noise is None else noise.s2 / 2 * (1 / runs_a + 1 / runs_b)
    d, lo, hi = cs.newcombe(x_b, n_b, x_a, n_a, service_var=s2)
    share_a, share_b = x_a / n_a, x_b / n_b
    ratio = share_b / share_a if share_a > 0 else (1.0 if share_b == 0 else math.inf)
    return Change(
        key,
        "attainment",
        share_a,
        share_b,
        ratio,
        kind="difference",
        difference=d,
        ci_low=lo,
        ci_high=hi,
        n_prompts=len({p for _, p in a} & {p for _, p in b}),
        n_runs=min(runs_a, runs_b),
        drift="none" if noise is None else "aa",
        service_var=s2,
        p_value=cs.newcombe_p(x_b, n_b, x_a, n_a, s2),
    )


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
    .../poisson 4 rps (open loop, '+ cap N' with a max_concurrency cap)."""
    *head, concurrency, load = key
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
