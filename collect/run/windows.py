"""Measured windows: send a workload's requests to one running service, build request rows.

What every window shares lives here: the Context, the requests row, the `windows` row with
the prefix-cache reset before it (open_window / close_window) and GPU samples. The windows
below are closed-loop; open-loop ones (arrival schedules) are collect/run/openloop.py's.

A closed-loop window is one (config, workload, max_tokens, concurrency): every prompt x repetition
(or every agentic session) runs through `concurrency` workers that each send one
request at a time, on connections opened before the window starts. Workers take items
in rep-major order, so repetitions of a prompt are not back to back. Every row carries
`start_s`, its t0 as a perf_counter offset from the window start, so a window's
throughput is sum(output_tokens) / (max(start_s + e2e_s) - min(start_s)). Where the
service holds GPUs, the samples the telemetry sampler took of them during the window
(with one before and one after it) become gpu_samples rows, t_s on the same clock.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from specsweep.collect.engines.base import Engine
from specsweep.collect.http import client
from specsweep.collect.http.loop_lag import LoopLag
from specsweep.collect.plan.load import Slo, TraceWorkload
from specsweep.collect.plan.model import AgenticWorkload, RequestsWorkload
from specsweep.collect.plan.workloads import (
    Prompt,
    category_of,
    messages,
    prompts,
    sessions,
    turn_message,
)
from specsweep.collect.run.endpoints import Endpoints
from specsweep.collect.telemetry import Sampler
from specsweep.schema.store import utcnow


@dataclass
class Context:
    """What every row of one service's measurements shares."""

    http: httpx.AsyncClient
    engine: Engine
    base_url: str
    campaign_id: str
    config_id: str
    service_id: str
    method: str
    tp: int
    on_done: Callable[[], None] = lambda: None
    sink: list[dict[str, Any]] = field(default_factory=list)  # rows as they are made
    telemetry: Sampler | None = None  # the service's GPU sampler (None: no GPUs, off)
    gpu_sink: list[dict[str, Any]] = field(default_factory=list)  # gpu_samples rows
    calls: Endpoints | None = None  # records a failed cache reset (None: not recorded)
    prefix_cache: str = "reset"  # the plan's prefix_cache: reset | keep
    slo: Slo | None = None  # the plan's latency objectives (a load's search reads them)
    window_sink: list[dict[str, Any]] = field(default_factory=list)  # windows rows
    lags: dict[str, LoopLag] = field(default_factory=dict)  # open windows' LoopLag (never stored)
    behind: list[str] = field(default_factory=list)  # warnings: windows the client fell behind
    run: int = 1  # which run of the campaign (the plan's `repeat`)
    # a `history: replay` window's script: (workload, max_tokens, concurrency) -> rep -> the
    # baseline's replies (collect.run.replay.script); None on the baseline's own service,
    # whose sessions play their own replies (they are the script)
    script: Callable[[AgenticWorkload, int, int], dict[int, list[str]]] | None = None

    def window_id(self, where: str) -> str:
        """A window's id: where it is (config/workload/...), and /run<r> in runs after the
        first (run 1's ids are those of a campaign without runs)."""
        return where + (f"/run{self.run}" if self.run > 1 else "")


def request_id(*key: object) -> str:
    """Deterministic id: the same measurement key always gives the same id, so a unit
    that landed twice would collide on the primary key instead of duplicating rows."""
    return hashlib.sha256("\x1f".join(map(str, key)).encode()).hexdigest()[:24]


async def send(ctx: Context, msgs: list[dict[str, str]], max_tokens: int) -> client.Result:
    path, body = ctx.engine.request(msgs, max_tokens)
    return await client.stream(
        ctx.http, ctx.base_url + path, body, ctx.engine.parser(), ctx.engine.cfg.request_timeout_s
    )


def row(ctx: Context, res: client.Result, window_start: float, **key: Any) -> dict[str, Any]:
    """One `requests` row from a result and its measurement key (which names the prompt's
    category: collect.plan.workloads.category_of)."""
    stats = {k: res.stats.get(k) for k in STAT_COLUMNS}
    if (lag := ctx.lags.get(key["window_id"])) is not None and not key["is_warmup"]:
        lag.take(res.chunk_times_s, res.shared)
    rid = request_id(
        ctx.campaign_id,
        ctx.config_id,
        key["workload"],
        key["window_id"],
        key["prompt_id"],
        key["rep"],
        key.get("session_id"),
        key.get("turn"),
        key["is_warmup"],
        ctx.service_id if key["is_warmup"] else "",
    )
    return {
        "request_id": rid,
        "campaign_id": ctx.campaign_id,
        "config_id": ctx.config_id,
        "service_id": ctx.service_id,
        "engine": ctx.engine.kind,
        "method": ctx.method,
        "tp": ctx.tp,
        "session_id": None,
        "turn": None,
        "history": None,
        "scheduled_s": None,
        "run": ctx.run,
        **key,
        "sent_at": res.sent_at,
        "start_s": max(0.0, res.t0 - window_start),
        "ttft_s": res.ttft_s,
        "e2e_s": res.e2e_s,
        "chunk_times_s": res.chunk_times_s,
        "chunk_tokens": res.chunk_tokens if res.chunk_tokens else None,
        **stats,
        "output_text": res.text,
        "ok": res.ok,
        "error_kind": res.error_kind,
        "error_message": res.error_message,
    }


STAT_COLUMNS = (
    "prompt_tokens", "cached_tokens", "output_tokens", "finish_reason", "spec_verify_ct",
    "draft_tokens", "accepted_tokens", "accept_length", "server_stats",
    # the acceptance details (collect/engines/acceptance.py)
    "engine_accept_length", "accept_histogram", "accepted_per_pos", "step_accepted",
)  # fmt: skip


async def run_workers(
    items: list[Any], concurrency: int, work: Callable[[Any], Awaitable[list[dict[str, Any]]]]
) -> list[dict[str, Any]]:
    """Run work(item) on `concurrency` workers pulling items in order; rows in item order."""
    results: list[list[dict[str, Any]]] = [[] for _ in items]
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(len(items)):
        queue.put_nowait(i)

    async def worker() -> None:
        while not queue.empty():
            i = queue.get_nowait()
            results[i] = await work(items[i])

    await asyncio.gather(*(worker() for _ in range(min(concurrency, len(items)) or 1)))
    return [r for rs in results for r in rs]


def window_key(workload: str, wid: str, max_tokens: int, concurrency: int) -> dict[str, Any]:
    """The row fields every request of a measured window shares."""
    return {
        "workload": workload,
        "window_id": wid,
        "max_tokens": max_tokens,
        "concurrency": concurrency,
        "is_warmup": False,
    }


def window_id(ctx: Context, workload: str, max_tokens: int, concurrency: int) -> str:
    return ctx.window_id(f"{ctx.config_id}/{workload}/{max_tokens}/c{concurrency}")


async def requests_window(
    ctx: Context, w: RequestsWorkload, items: list[Prompt], max_tokens: int, concurrency: int
) -> list[dict[str, Any]]:
    wid = window_id(ctx, w.name, max_tokens, concurrency)
    work_items = [(rep, p) for rep in range(w.repetitions) for p in items]
    key = window_key(w.name, wid, max_tokens, concurrency)
    opened = await open_window(ctx, key, len(work_items), max_concurrency=concurrency)
    await client.prewarm(
        ctx.http, ctx.base_url, min(concurrency, len(work_items)), ctx.engine.health_path
    )
    t_start = time.perf_counter()

    async def one(item: tuple[int, Prompt]) -> list[dict[str, Any]]:
        rep, p = item
        res = await send(ctx, messages(w.system, p.text), max_tokens)
        ctx.on_done()
        category = category_of(w, p.category)
        made = row(ctx, res, t_start, **key, prompt_id=p.prompt_id, rep=rep, category=category)
        ctx.sink.append(made)
        return [made]

    rows = await sampled(ctx, key, t_start, run_workers(work_items, concurrency, one))
    close_window(ctx, opened, t_start)
    return rows


async def sampled(
    ctx: Context, key: dict[str, Any], t_start: float, work: Awaitable[list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """Await a window's work, then put its GPU samples in ctx.gpu_sink: after waiting (a
    few periods at most) for each GPU's first sample past the end; when interrupted, what
    was sampled so far, at once."""
    if ctx.telemetry is None:
        return await work
    try:
        rows = await work
    except BaseException:
        ctx.gpu_sink += gpu_rows(ctx, key, t_start, time.perf_counter())
        raise
    t_end = time.perf_counter()
    await ctx.telemetry.wait_past(t_end)
    ctx.gpu_sink += gpu_rows(ctx, key, t_start, t_end)
    return rows


def gpu_rows(
    ctx: Context, key: dict[str, Any], t_start: float, t_end: float
) -> list[dict[str, Any]]:
    """gpu_samples rows of the window [t_start, t_end] (perf_counter)."""
    assert ctx.telemetry is not None
    return [
        {
            "campaign_id": ctx.campaign_id,
            "service_id": ctx.service_id,
            "config_id": ctx.config_id,
            "workload": key["workload"],
            "window_id": key["window_id"],
            "gpu_index": s.gpu,
            "t_s": s.t - t_start,
            **s.values,
        }
        for s in ctx.telemetry.take(t_start, t_end)
    ]


async def agentic_window(
    ctx: Context, w: AgenticWorkload, max_tokens: int, concurrency: int
) -> list[dict[str, Any]]:
    """Sessions (one per repetition); each turn sends the whole history so far: the plan's
    messages and, as the assistant's, this method's own earlier replies (history 'own') or
    the baseline's recorded ones (history 'replay', collect.run.replay). A replayed session
    stops where the baseline's did (a failed turn)."""
    script = ctx.script(w, max_tokens, concurrency) if replayed(ctx, w) else None
    mode = "own" if script is None else "replay"
    wid = window_id(ctx, w.name, max_tokens, concurrency)
    key = window_key(w.name, wid, max_tokens, concurrency)
    plays = sessions(w)  # session rep's turns: the plan's, or a ShareGPT conversation's
    n_turns = sum(len(p.turns) for p in plays)
    opened = await open_window(ctx, key, n_turns, max_concurrency=concurrency)
    await client.prewarm(
        ctx.http, ctx.base_url, min(concurrency, w.repetitions), ctx.engine.health_path
    )
    t_start = time.perf_counter()

    async def session(rep: int) -> list[dict[str, Any]]:
        history = [{"role": "system", "content": w.system}] if w.system else []
        replies = None if script is None else script[rep]
        rows = []
        for turn, spec in enumerate(plays[rep].turns):
            history.append(turn_message(spec))
            res = await send(ctx, list(history), max_tokens)
            ctx.on_done()
            rows.append(
                row(
                    ctx,
                    res,
                    t_start,
                    **key,
                    prompt_id=plays[rep].prompt_id(turn),
                    rep=rep,
                    session_id=f"{wid}/s{rep}",
                    turn=turn,
                    history=mode,
                    category=category_of(w, plays[rep].category),
                )
            )
            ctx.sink.append(rows[-1])
            if not res.ok:
                break  # the rest of the session has no reply to build on
            if replies is not None and turn >= len(replies):
                break  # the baseline's session ended at this turn: no reply of its to send
            reply = res.text if replies is None else replies[turn]
            history.append({"role": "assistant", "content": reply})
        return rows

    rows = await sampled(
        ctx, key, t_start, run_workers(list(range(w.repetitions)), concurrency, session)
    )
    close_window(ctx, opened, t_start)
    return rows


def replayed(ctx: Context, w: AgenticWorkload) -> bool:
    """Whether this service replays the baseline's replies in w: the plan asks for it and
    this is not the baseline's service (ctx.script is set for every other method)."""
    return w.history == "replay" and ctx.script is not None


# a closed-loop window's description in `windows`; an open-loop one overrides it
CLOSED_LOOP = {
    "load": "closed",
    "rate": None,
    "ramp": None,
    "ramp_start_rate": None,
    "ramp_end_rate": None,
    "burstiness": None,
    "seed": None,
    "schedule_span_s": None,
}


async def open_window(
    ctx: Context,
    key: dict[str, Any],
    n_scheduled: int,
    max_concurrency: int | None,
    schedule: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Before a window: reset the prefix cache (unless the plan keeps it); the window's
    `windows` row so far (close_window completes it); `schedule`: an open-loop window's
    load, rate, ramp, burstiness, seed and schedule span."""
    ctx.lags[key["window_id"]] = LoopLag().start()  # how late the loop runs (popped at close)
    if ctx.prefix_cache == "keep":
        how = "kept"
    elif ctx.calls is None:
        how = await ctx.engine.reset_cache(ctx.http, ctx.base_url)
    else:
        how = await ctx.calls.call(
            "reset_cache",
            key["workload"],
            "before",
            ctx.engine.reset_cache(ctx.http, ctx.base_url),
            "failed",
        )
    return {
        "campaign_id": ctx.campaign_id,
        "service_id": ctx.service_id,
        "config_id": ctx.config_id,
        "workload": key["workload"],
        "window_id": key["window_id"],
        "max_tokens": key["max_tokens"],
        **CLOSED_LOOP,
        **(schedule or {}),
        "max_concurrency": max_concurrency,
        "n_scheduled": n_scheduled,
        "cache_reset": how,
        "started_at": utcnow(),
        "run": ctx.run,
    }


def close_window(ctx: Context, window: dict[str, Any], t_start: float) -> None:
    """The window's row: its elapsed time and how late the client's loop ran in it; a
    warning in ctx.behind when it ran too late for the stamps (collect/http/loop_lag.py)."""
    elapsed = time.perf_counter() - t_start
    lag = ctx.lags.pop(window["window_id"])
    p99, worst = lag.stop()
    ctx.window_sink.append({**window, "elapsed_s": elapsed, "loop_lag_p99_s": p99,
                            "loop_lag_max_s": worst})  # fmt: skip
    if (line := lag.warning()) is not None:
        ctx.behind.append(f"window {window['window_id']}: {line}")


async def warmup_rows(
    ctx: Context, w: RequestsWorkload | AgenticWorkload, n: int
) -> list[dict[str, Any]]:
    """n warm-up requests (kept, flagged is_warmup, excluded from analysis)."""
    if isinstance(w, RequestsWorkload):
        p = prompts(w.prompts)[0]
        msgs, pid, own = messages(w.system, p.text), p.prompt_id, p.category
    elif isinstance(w, TraceWorkload):
        first = w.items()[0]
        msgs, pid, own = first.messages, first.prompt_id, first.category
    else:
        opening = sessions(w)[0]
        msgs, pid, own = [turn_message(opening.turns[0])], opening.prompt_id(0), opening.category
    rows = []
    t_start = time.perf_counter()
    for i in range(n):
        res = await send(ctx, msgs, min(w.max_tokens))
        key = {
            **window_key(w.name, f"{ctx.service_id}/warmup", min(w.max_tokens), 1),
            "is_warmup": True,
        }
        category = category_of(w, own)
        rows.append(row(ctx, res, t_start, **key, prompt_id=pid, rep=i, category=category))
    return rows
