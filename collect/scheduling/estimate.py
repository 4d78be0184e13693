"""Duration estimates: seconds per (config, workload) and per config, in one place for the
runner's ETA, `check` and `simulate`.

Formulas (every time in seconds):

- request = TTFT + (output_tokens - 1) / decode tok/s, the definitions of DESIGN.md
  turned around; output_tokens = the mean measured for (workload, max_tokens) on any
  config of the plan (the methods are lossless, so it barely depends on the config), else
  max_tokens (every reply runs to its limit).
- assumed TTFT = prompt tokens / `estimates.prefill_tps`; prompt tokens = characters / 4
  (the usual English average). An agentic turn's prompt is the whole history: system,
  every message so far and every earlier reply (output_tokens each).
- window of a requests workload = ceil(n / c) * request, n = prompts x repetitions and c
  the concurrency (c workers pull the n requests, so they run in ceil(n / c) rounds);
  agentic: ceil(sessions / c) * the sum of a session's turns.
- config = start-up + the rest of a start + every window of every workload. The rest is
  the measured overhead of the config's earlier starts (warm-up requests, gaps between
  windows, the stop) plus the measured gap between starts, else the warm-up requests.
- a workload that this config measured whole before, with as many requests: the median
  wall time of those units, not the formula.

Measured means: in the results file, on the plan's host and its newest engine build there
(load_measured, below); every other figure is the plan's `estimates`.

Decode tok/s of one request for (method, tp, workload, concurrency c), the first that
exists:

1. measured: the median of (output_tokens - 1) / (e2e_s - ttft_s) over the store's
   measured requests (the analysis' rule, schema/measured.sql) of that method and tp (any
   campaign of this plan's configs: same engine, model and flags, see
   `ServiceConfig.config_id`, on the same host and build) on that workload at that c.
2. nearest measured, same method: the measured condition that differs least, in this
   order: same tp before another tp, same workload before another workload, the closest
   c (on a log scale), the closest tp; carried over with the plan's assumed ratios
   (decode_tps of the two tps, the concurrency slowdown at the two c).
3. the baseline's figure found the same way, times the method's assumed `speedup`.
4. assumed: decode_tps[tp] * speedup[method] / (1 + concurrency_slowdown * (c - 1)),
   decode_tps of the nearest listed tp when tp is not listed.

TTFT is measured for (method, tp, workload) at the closest c, else assumed. Start-up is
the median measured `services.startup_s` of the config, else of any config at that tp,
else the midpoint of `estimates.startup_s`.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from specsweep.collect.plan.load import OpenLoad, TraceWorkload
from specsweep.collect.plan.load import ramp_rates as openloop_rates
from specsweep.collect.plan.model import (
    AgenticWorkload,
    Plan,
    RequestsWorkload,
    ServiceConfig,
    Workload,
)
from specsweep.collect.plan.workloads import longest_session, prompts, request_count

CHARS_PER_TOKEN = 4.0
Key = tuple[str, int, str, int]  # method, tp, workload, concurrency


@dataclass(frozen=True)
class Figure:
    value: float
    source: str  # measured | nearest measured | baseline measured x assumed speedup | assumed


@dataclass
class Measured:
    """Figures from the store for the plan's configs on its host and newest engine build
    (load_measured says which services count)."""

    decode_tps: dict[Key, float] = field(default_factory=dict)
    ttft_s: dict[Key, float] = field(default_factory=dict)
    output_tokens: dict[tuple[str, int], float] = field(default_factory=dict)
    startup_s: dict[tuple[str, int], float] = field(default_factory=dict)  # (method, tp)
    # (method, tp, workload) -> (median wall seconds of a complete unit, its requests)
    unit_s: dict[tuple[str, int, str], tuple[float, float]] = field(default_factory=dict)
    overhead_s: dict[tuple[str, int], float] = field(default_factory=dict)  # a start's rest
    gap_s: float | None = None  # between one start's stop and the next one's request
    host: str | None = None
    build: str = ""  # the engine build the figures come from ('' where none was recorded)
    services: int = 0  # earlier starts the figures come from
    elsewhere: int = 0  # earlier starts of these configs on other hosts or builds: not used
    unreadable: str = ""  # why the results file could not be read (damaged, truncated)


def plan_config_ids(plan: Plan) -> dict[str, tuple[str, int]]:
    """config_id -> (method, tp) for every method at every tp of the plan's phases."""
    tps = {p.tp for p in plan.all_phases()}
    return {
        ServiceConfig(method=m, tp=t, engine=plan.engine).config_id: (m.name, t)
        for m in plan.methods
        for t in tps
    }


# --- what the store knows of earlier runs (load_measured) ---------------------------------
# Which earlier services count: those of the plan's configs on the plan's host (services.host,
# the host's `name` label), and of those only the starts of the newest engine build seen there
# (environment service.<method>.tp<N>.engine.version and .build_info, joined; '' where a
# service recorded neither): a file kept for a year holds other hosts and older builds, whose
# speeds say little about the next run; they are counted (Measured.elsewhere), never used.
# From those starts: speeds, TTFTs, reply lengths and start-ups as the module docstring says;
# per (config, workload) the median wall time of a complete unit and its requests; per config
# the median rest of a start (stopped_at - ready_at minus its units' wall time, over starts
# whose units all completed); the median gap between a start's stop and the next start's
# request in the same campaign (starts side by side give no gap).
SERVICES = """
SELECT s.service_id, s.host, s.requested_at,
       concat_ws(' ', v.value, b.value) AS build
FROM services AS s
LEFT JOIN environment AS v ON v.campaign_id = s.campaign_id AND v.host = s.host
     AND v.key = 'service.' || s.method || '.tp' || s.tp || '.engine.version'
LEFT JOIN environment AS b ON b.campaign_id = s.campaign_id AND b.host = s.host
     AND b.key = 'service.' || s.method || '.tp' || s.tp || '.engine.build_info'
WHERE list_contains(?, s.config_id) AND s.state <> 'failed'
ORDER BY s.requested_at
"""
# The rows the analysis measures, by the same rule (schema/measured.sql: not warm-up, not in
# a unit marked incomplete); decode_tps: the macro of schema/metrics.sql. Speeds from
# closed-loop windows only, measured_request_rows() (an open-loop window's load is its rate);
# reply lengths from every kept request.
REQUEST_FIGURES = """
SELECT config_id, workload, concurrency,
       median(decode_tps(output_tokens, e2e_s, ttft_s)), median(ttft_s)
FROM measured_request_rows()
WHERE ok AND output_tokens > 1 AND e2e_s > ttft_s AND list_contains(?, service_id)
GROUP BY ALL
"""
OUTPUT_TOKENS = """
SELECT workload, max_tokens, avg(output_tokens) FROM kept_request_rows()
WHERE ok AND list_contains(?, service_id) GROUP BY ALL
"""
STARTUPS = """
SELECT config_id, median(startup_s) FROM services
WHERE startup_s IS NOT NULL AND list_contains(?, service_id) GROUP BY ALL
"""
UNITS = """
SELECT config_id, workload, median(epoch(finished_at - started_at)), median(n_requests)
FROM units WHERE complete AND finished_at IS NOT NULL AND list_contains(?, service_id)
GROUP BY ALL
"""
OVERHEAD = """
SELECT s.config_id, median(epoch(s.stopped_at - s.ready_at) - u.busy)
FROM services AS s JOIN (
    SELECT service_id, sum(epoch(finished_at - started_at)) AS busy FROM units
    GROUP BY ALL HAVING bool_and(complete AND finished_at IS NOT NULL)
) AS u USING (service_id)
WHERE list_contains(?, s.service_id) AND s.stopped_at IS NOT NULL AND s.ready_at IS NOT NULL
GROUP BY ALL
"""
GAP = """
SELECT median(gap) FROM (
    SELECT service_id, epoch(requested_at - lag(stopped_at) OVER (
        PARTITION BY campaign_id ORDER BY requested_at)) AS gap
    FROM services)
WHERE gap >= 0 AND list_contains(?, service_id)
"""


def load_measured(store: Any, plan: Plan) -> Measured:
    """The store's figures for the plan's configs on the plan's host and newest engine build."""
    ids = plan_config_ids(plan)
    host = getattr(plan.host, "name", None) or getattr(plan.host, "address", None)
    services = store.execute(SERVICES, [list(ids)])
    here = [s for s in services if s[1] == host]
    build = here[-1][3] if here else ""
    chosen = [s[0] for s in here if s[3] == build]
    got = Measured(host=host, build=build, services=len(chosen),
                   elsewhere=len(services) - len(chosen))  # fmt: skip
    if not chosen:
        return got
    for config_id, workload, c, tps, ttft in store.execute(REQUEST_FIGURES, [chosen]):
        key = (*ids[config_id], workload, c)
        got.decode_tps[key], got.ttft_s[key] = tps, ttft
    for workload, max_tokens, tokens in store.execute(OUTPUT_TOKENS, [chosen]):
        got.output_tokens[(workload, max_tokens)] = tokens
    for config_id, startup in store.execute(STARTUPS, [chosen]):
        got.startup_s[ids[config_id]] = startup
    for config_id, workload, seconds, n in store.execute(UNITS, [chosen]):
        got.unit_s[(*ids[config_id], workload)] = (seconds, n)
    for config_id, seconds in store.execute(OVERHEAD, [chosen]):
        got.overhead_s[ids[config_id]] = max(seconds, 0.0)
    got.gap_s = store.execute(GAP, [chosen])[0][0]
    return got


class Estimator:
    """Seconds of configs and workloads from measured figures, else the plan's assumptions."""

    def __init__(self, plan: Plan, measured: Measured | None = None):
        self.plan, self.assume = plan, plan.estimates
        self.measured = measured or Measured()
        self._windows: dict[tuple[str, int], tuple[int, float]] = {}  # window_prompts's

    def window_prompts(self, w: RequestsWorkload, max_tokens: int) -> tuple[int, float]:
        """(prompts in the window, their mean prompt tokens incl. the system message), each
        workload's prompts read once (a simulation of rounds asks thousands of times)."""
        key = (w.name, max_tokens)
        if key not in self._windows:
            self._windows[key] = _window_prompts(w, max_tokens)
        return self._windows[key]

    # --- speeds ---------------------------------------------------------------------------

    def _load(self, c: int) -> float:
        return 1 / (1 + self.assume.concurrency_slowdown * (c - 1))

    def _tp_speed(self, tp: int) -> float:
        listed = self.assume.decode_tps
        return listed[min(listed, key=lambda t: (abs(t - tp), t))]

    def assumed_decode_tps(self, method: str, tp: int, c: int) -> float:
        return self._tp_speed(tp) * self.assume.speedup.get(method, 1.0) * self._load(c)

    def _nearest(self, method: str, tp: int, workload: str, c: int) -> tuple[Key, float] | None:
        mine = [(k, v) for k, v in self.measured.decode_tps.items() if k[0] == method]
        if not mine:
            return None
        return min(
            mine,
            key=lambda kv: (
                kv[0][1] != tp,
                kv[0][2] != workload,
                abs(math.log2(kv[0][3] / c)),
                abs(kv[0][1] - tp),
                kv[0],
            ),
        )

    def _carried(self, found: tuple[Key, float], tp: int, c: int) -> float:
        (_, t, _, k), value = found
        return value * self._tp_speed(tp) / self._tp_speed(t) * self._load(c) / self._load(k)

    def decode_tps(self, method: str, tp: int, workload: str, c: int) -> Figure:
        """One request's decode tok/s, and where it came from (see the module docstring)."""
        own = self._nearest(method, tp, workload, c)
        if own is not None:
            exact = own[0] == (method, tp, workload, c)
            figure = Figure(self._carried(own, tp, c), "measured" if exact else "nearest measured")
        elif (base := self._nearest(self.plan.baseline, tp, workload, c)) is not None:
            figure = Figure(
                self._carried(base, tp, c) * self.assume.speedup.get(method, 1.0),
                "baseline measured x assumed speedup",
            )
        else:
            figure = Figure(self.assumed_decode_tps(method, tp, c), "assumed")
        return figure

    def ttft_s(self, method: str, tp: int, workload: str, c: int, prompt_tokens: float) -> float:
        same = [(k, v) for k, v in self.measured.ttft_s.items() if k[:3] == (method, tp, workload)]
        if same:
            return min(same, key=lambda kv: (abs(math.log2(kv[0][3] / c)), kv[0]))[1]
        return prompt_tokens / self.assume.prefill_tps

    def output_tokens(self, workload: str, max_tokens: int) -> float:
        return self.measured.output_tokens.get((workload, max_tokens), float(max_tokens))

    def startup_s(self, method: str, tp: int) -> float:
        measured = self.measured.startup_s
        if (method, tp) in measured:
            return measured[(method, tp)]
        same_tp = [v for (_, t), v in measured.items() if t == tp]
        if same_tp:
            return statistics.median(same_tp)
        return sum(self.assume.startup_range()) / 2

    # --- durations ------------------------------------------------------------------------

    def request_s(
        self, config: ServiceConfig, workload: str, c: int, max_tokens: int, prompt_tokens: float
    ) -> float:
        m, tp = config.method.name, config.tp
        decode = self.decode_tps(m, tp, workload, c).value
        out = self.output_tokens(workload, max_tokens)
        return self.ttft_s(m, tp, workload, c, prompt_tokens) + max(out - 1, 0) / decode

    def workload_s(self, config: ServiceConfig, w: Workload) -> float:
        """Every measured window of one workload on one running service. An open-loop
        window lasts its schedule's expected span plus one request (the last one's reply).
        A unit of this config and workload measured whole with as many requests: its wall
        time."""
        unit = self.measured.unit_s.get((config.method.name, config.tp, w.name))
        if unit is not None and unit[1] == request_count(w):
            return unit[0]
        if isinstance(w, TraceWorkload):
            items = w.items()
            return items[-1].t_s + self.request_s(
                config, w.name, 1, w.max_tokens[0], _trace_prompt_tokens(w)
            )
        if isinstance(w, RequestsWorkload) and w.load is not None:
            spans = [sum(1 / r for r in _rates(w.load, rate)) for rate in w.load.windows()]
            return sum(
                span + self.request_s(config, w.name, 1, mt, self.window_prompts(w, mt)[1])
                for mt in w.max_tokens
                for span in spans
            )
        total = 0.0
        for max_tokens in w.max_tokens:
            for c in w.concurrency:
                if isinstance(w, AgenticWorkload):
                    session = sum(
                        self.request_s(config, w.name, c, max_tokens, p)
                        for p in agentic_prompt_tokens(w, self.output_tokens(w.name, max_tokens))
                    )
                    total += math.ceil(w.repetitions / c) * session
                else:
                    n, tokens = self.window_prompts(w, max_tokens)
                    rounds = math.ceil(n * w.repetitions / c)
                    total += rounds * self.request_s(config, w.name, c, max_tokens, tokens)
        return total

    def warmup_s(self, config: ServiceConfig, first: Workload) -> float:
        if isinstance(first, AgenticWorkload):
            tokens = agentic_prompt_tokens(first, 0)[0]
        elif isinstance(first, TraceWorkload):
            tokens = _trace_prompt_tokens(first)
        else:
            tokens = self.window_prompts(first, min(first.max_tokens))[1]
        one = self.request_s(config, first.name, 1, min(first.max_tokens), tokens)
        return self.plan.warmup_requests * one

    def rest_s(self, config: ServiceConfig, first: Workload) -> float:
        """A start's time outside start-up and units: the measured overhead of this config's
        earlier starts (warm-up, gaps between windows, the stop) and the gap before a start,
        else the assumed warm-up alone."""
        key = (config.method.name, config.tp)
        rest = self.measured.overhead_s.get(key)
        if rest is None:
            rest = self.warmup_s(config, first)
        return rest + (self.measured.gap_s or 0.0)

    def fixed_s(self, config: ServiceConfig, workloads: list[Workload] | None = None) -> float:
        """Start-up + warm-up (and the rest of a start where measured): the part of a
        config's time no measured request covers."""
        workloads = self.plan.workloads_of(config) if workloads is None else workloads
        startup = self.startup_s(config.method.name, config.tp)
        return startup + self.rest_s(config, workloads[0]) if workloads else 0.0

    def config_s(
        self,
        config: ServiceConfig,
        workloads: list[Workload] | None = None,
        startup_s: float | None = None,
    ) -> float:
        """Start-up + warm-up + the workloads (default: all the config runs) on one start."""
        workloads = self.plan.workloads_of(config) if workloads is None else workloads
        if not workloads:
            return 0.0
        startup = self.startup_s(config.method.name, config.tp) if startup_s is None else startup_s
        return (
            startup
            + self.rest_s(config, workloads[0])
            + sum(self.workload_s(config, w) for w in workloads)
        )


def tokens(text: str | None) -> float:
    return len(text or "") / CHARS_PER_TOKEN


def _rates(load: OpenLoad, rate: float | None) -> list[float]:
    """The rate of each gap of a window's schedule (a ramp's change request by request)."""
    n = load.window_requests(rate)
    if rate is not None:
        return [rate] * (n - 1)
    assert load.ramp is not None
    return [float(r) for r in openloop_rates(load.ramp, n)[1:]]


def _trace_prompt_tokens(w: TraceWorkload) -> float:
    return statistics.fmean(sum(tokens(m["content"]) for m in i.messages) for i in w.items())


def _window_prompts(w: RequestsWorkload, max_tokens: int) -> tuple[int, float]:
    """(prompts in the window, their mean prompt tokens incl. the system message)."""
    texts = [p.text for p in prompts(w.prompts)][: w.prompt_limit(max_tokens)]
    return len(texts), tokens(w.system) + statistics.fmean(tokens(t) for t in texts)


def agentic_prompt_tokens(w: AgenticWorkload, reply_tokens: float) -> list[float]:
    """Prompt tokens of each turn: the history so far, replies of reply_tokens each."""
    out, history = [], tokens(w.system)
    for i, turn in enumerate(longest_session(w)):
        history += tokens(turn.content) + (reply_tokens if i else 0)
        out.append(history)
    return out
