"""Open-loop windows: send requests at the times an arrival schedule says, whatever is in flight.

`rate_sweep` runs a requests workload's `load:` windows (each rate, a ramp, the optional
search for the max rate under the SLO), `open_loop_window` one window, a trace's included;
the rows and the `windows` row are made as collect/run/windows.py makes them.

The schedule is built before the window starts (`schedule`, `trace_schedule`), and so are the
request bodies (a chat template rendered at send time would delay the send): during the window
the sender only sleeps until each arrival's time and starts its request as a task. Each row
records `scheduled_s` (the schedule's time) next to `start_s` (its t0, the actual send), both
offsets from the window start, so the lag start_s - scheduled_s is measured per request.

Keeping time: asyncio's selector sleeps in whole milliseconds, rounded up (epoll), so a plain
sleep wakes up to 1 ms late. The sender sleeps until `SPIN_S` before the arrival, then yields
to the event loop (other streams' replies are read meanwhile) until the time has come. The
spin costs CPU: up to SPIN_S per request (at 100 requests/s up to 10% of a core).
tests/bench/bench_schedule.py measures the lag with and without it.

With `max_concurrency`, a request whose time has come waits for a free slot (sleep then gate,
as vLLM's and AIPerf's senders; the schedule never catches up), and that wait counts as lag.
The first request is scheduled at 0 and each later one after a gap drawn from the arrival
process. Unlike vLLM (`get_request`, which rescales the whole schedule so that n requests span
exactly n / rate seconds), gaps are not rescaled: the schedule is a true Poisson (gamma,
constant) process, and windows record the realised span (windows.schedule_span_s) so that the
analysis reports the rate the schedule really offered next to the one asked for.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from specsweep.collect.http import client
from specsweep.collect.plan.load import OpenLoad, TraceWorkload, ramp_rates
from specsweep.collect.plan.model import RequestsWorkload
from specsweep.collect.plan.workloads import Prompt, category_of, messages
from specsweep.collect.run.windows import (
    Context,
    close_window,
    open_window,
    row,
    sampled,
    window_key,
)

SPIN_S = 0.002  # the last stretch before an arrival is spent yielding, not sleeping
PREWARM = 32  # connections opened before an uncapped window; more open on demand (in TTFT)


@dataclass(frozen=True)
class Arrival:
    """One request of an open-loop window."""

    t_s: float  # scheduled send, offset from the window start
    prompt_id: str
    rep: int
    messages: list[dict[str, str]]
    max_tokens: int
    category: str  # requests.category (collect.plan.workloads.category_of)


def offsets(load: OpenLoad, rate: float | None, n: int) -> np.ndarray:
    """Scheduled send offsets of n requests at `rate` (None: the load's ramp), seeded."""
    if rate is not None:
        rates = np.full(n, float(rate))
    else:
        assert load.ramp is not None
        rates = ramp_rates(load.ramp, n)
    rng = np.random.default_rng(load.seed)
    if load.arrival == "poisson":
        gaps = rng.exponential(1.0 / rates)
    elif load.arrival == "gamma":  # mean 1/rate, coefficient of variation 1/sqrt(shape)
        gaps = rng.gamma(load.burstiness, 1.0 / (rates * load.burstiness))
    else:
        gaps = 1.0 / rates
    gaps[0] = 0.0  # the first request opens the window
    return np.cumsum(gaps)


def schedule(
    load: OpenLoad, rate: float | None, items: list[Prompt], system: str | None, max_tokens: int
) -> list[Arrival]:
    """The window's arrivals: prompts in order, cycling (request i: prompt i mod n, rep i div n);
    each carries its prompt's category (the caller applies the workload's: rate_sweep)."""
    n = load.window_requests(rate)
    times = offsets(load, rate, n)
    return [
        Arrival(
            float(t),
            items[i % len(items)].prompt_id,
            i // len(items),
            messages(system, items[i % len(items)].text),
            max_tokens,
            items[i % len(items)].category,
        )
        for i, t in enumerate(times)
    ]


async def sleep_until(deadline: float, spin_s: float = SPIN_S) -> None:
    """Return at perf_counter() >= deadline: sleep most of the way, yield the rest."""
    while (left := deadline - time.perf_counter()) > 0:
        await asyncio.sleep(left - spin_s if left > spin_s else 0)


async def prepare(
    ctx: Any, arrivals: list[Arrival], cap: int | None
) -> list[tuple[str, dict[str, Any]]]:
    """Before the window: every request's (path, body), and connections opened for it."""
    bodies = [ctx.engine.request(a.messages, a.max_tokens) for a in arrivals]
    await client.prewarm(
        ctx.http, ctx.base_url, min(len(arrivals), cap or PREWARM), ctx.engine.health_path
    )
    return bodies


async def send_schedule(
    ctx: Any,
    arrivals: list[Arrival],
    bodies: list[tuple[str, dict]],
    cap: int | None,
    t_start: float,
    done: Callable[[Arrival, client.Result], None],
    spin_s: float = SPIN_S,
) -> None:
    """Send arrival i at t_start + its t_s (perf_counter); `done(arrival, result)` as each
    ends (the caller makes its row at once, so an interrupted window keeps what finished)."""
    gate = asyncio.Semaphore(cap) if cap else None
    timeout, url = ctx.engine.cfg.request_timeout_s, ctx.base_url

    async def one(a: Arrival, path: str, body: dict[str, Any]) -> None:
        if gate is None:
            res = await client.stream(ctx.http, url + path, body, ctx.engine.parser(), timeout)
        else:
            async with gate:
                res = await client.stream(ctx.http, url + path, body, ctx.engine.parser(), timeout)
        done(a, res)

    tasks: list[asyncio.Task[None]] = []
    try:
        for a, (path, body) in zip(arrivals, bodies, strict=True):
            await sleep_until(t_start + a.t_s, spin_s)
            tasks.append(asyncio.create_task(one(a, path, body)))
        await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def trace_schedule(w: TraceWorkload) -> list[Arrival]:
    """A trace's requests as arrivals on the trace's own clock (collect/plan/traces/read.py)."""
    return [
        Arrival(i.t_s, i.prompt_id, 0, i.messages, i.max_tokens, category_of(w, i.category))
        for i in w.items()
    ]


# --- open-loop windows ----------------------------------------------------------------


async def rate_sweep(
    ctx: Context, w: RequestsWorkload, items: list[Prompt], max_tokens: int
) -> list[dict[str, Any]]:
    """An open-loop workload's windows at one max_tokens: each swept rate (or the ramp), then,
    with `search: max_rate_under_slo`, bisection windows between the highest rate meeting the
    SLO target (with every lower rate) and the next swept rate (ctx.slo.attainment)."""
    load = w.load
    assert load is not None
    by_rate: dict[float | None, list[dict[str, Any]]] = {}
    items = [replace(p, category=category_of(w, p.category)) for p in items]

    async def window(rate: float | None) -> None:
        arrivals = schedule(load, rate, items, w.system, max_tokens)
        by_rate[rate] = await open_loop_window(
            ctx, w.name, arrivals, load.arrival, load.max_concurrency, load_fields(w, rate), rate
        )

    for rate in load.windows():
        await window(rate)
    if load.search and ctx.slo is not None:
        slo = ctx.slo
        passing = [slo.attainment(by_rate[r]) >= slo.target for r in load.rate]
        below = passing.index(False) if False in passing else len(passing)
        if 0 < below < len(passing):  # else: every rate passes, or the lowest already misses
            lo, hi = load.rate[below - 1], load.rate[below]
            for _ in range(load.search_steps):
                mid = float(f"{(lo + hi) / 2:.3g}")
                if mid in (lo, hi) or mid in by_rate:
                    break
                await window(mid)
                lo, hi = (mid, hi) if slo.attainment(by_rate[mid]) >= slo.target else (lo, mid)
    return [r for rows in by_rate.values() for r in rows]


def load_fields(w: RequestsWorkload, rate: float | None) -> dict[str, Any]:
    """The windows row's description of an open-loop window's schedule."""
    load = w.load
    assert load is not None
    ramp = load.ramp if rate is None else None
    return {
        "rate": rate,
        "ramp": ramp.strategy if ramp else None,
        "ramp_start_rate": ramp.start_rate if ramp else None,
        "ramp_end_rate": ramp.end_rate if ramp else None,
        "burstiness": load.burstiness if load.arrival == "gamma" else None,
        "seed": load.seed,
    }


def open_window_id(
    ctx: Context,
    workload: str,
    max_tokens: int | None,
    rate: float | None,
    fields: dict[str, Any],
    cap: int | None,
) -> str:
    """e.g. <config>/chat/64/r2 (rate 2/s), .../64/ramp-linear-1-8, .../trace; /cN: a cap."""
    if fields.get("ramp"):
        shape = f"ramp-{fields['ramp']}-{fields['ramp_start_rate']:g}-{fields['ramp_end_rate']:g}"
    else:
        shape = "trace" if rate is None else f"r{rate:g}"
    where = f"{ctx.config_id}/{workload}" + (f"/{max_tokens}" if max_tokens else "")
    return ctx.window_id(f"{where}/{shape}" + (f"/c{cap}" if cap else ""))


async def open_loop_window(
    ctx: Context,
    workload: str,
    arrivals: list[Arrival],
    load: str,
    cap: int | None,
    fields: dict[str, Any],
    rate: float | None = None,
) -> list[dict[str, Any]]:
    """One open-loop window: the schedule sent on time, one row per arrival."""
    max_tokens = max(a.max_tokens for a in arrivals)
    same = len({a.max_tokens for a in arrivals}) == 1
    wid = open_window_id(ctx, workload, max_tokens if same else None, rate, fields, cap)
    key = window_key(workload, wid, max_tokens, cap or 0)
    opened = await open_window(
        ctx, key, len(arrivals), cap, {"load": load, **fields, "schedule_span_s": arrivals[-1].t_s}
    )
    bodies = await prepare(ctx, arrivals, cap)
    rows: list[dict[str, Any]] = []
    t_start = time.perf_counter()

    def done(a: Arrival, res: client.Result) -> None:
        ctx.on_done()
        rows.append(
            row(
                ctx,
                res,
                t_start,
                **window_key(workload, wid, a.max_tokens, cap or 0),
                prompt_id=a.prompt_id,
                rep=a.rep,
                scheduled_s=a.t_s,
                category=a.category,
            )
        )
        ctx.sink.append(rows[-1])

    await sampled(
        ctx,
        key,
        t_start,
        _returning(rows, send_schedule(ctx, arrivals, bodies, cap, t_start, done)),
    )
    close_window(ctx, opened, t_start)
    return sorted(rows, key=lambda r: r["scheduled_s"])


async def _returning(rows: list[dict[str, Any]], work: Awaitable[None]) -> list[dict[str, Any]]:
    await work
    return rows
