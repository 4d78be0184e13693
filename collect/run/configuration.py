"""One configuration's service start and its measurements, for the runner's workers.

`run_config` starts the service (restarting it once if it dies after it was ready), runs
its pending workloads and lands each unit in one transaction (`commit_unit`): its
requests, server metrics and `units` row, with the services that shared the host during
it. A campaign that is stopping (Ctrl-C, SIGTERM) cancels the measurement, which keeps
what it measured as an incomplete unit, and the service is stopped on the way out.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from functools import partial
from typing import Any

import httpx

from specsweep.collect.http.client import http_client
from specsweep.collect.plan.load import TraceWorkload
from specsweep.collect.plan.model import AgenticWorkload, RequestsWorkload, ServiceConfig, Workload
from specsweep.collect.plan.workloads import prompts
from specsweep.collect.run import openloop, replay
from specsweep.collect.run.campaign import Campaign
from specsweep.collect.run.endpoints import Endpoints
from specsweep.collect.run.fingerprint import (
    draft_facts,
    prompt_facts,
    put_environment,
    request_facts,
    workload_facts,
)
from specsweep.collect.run.replay import ReplayMissing
from specsweep.collect.run.service import Cancelled, Service, ServiceFailed
from specsweep.collect.run.windows import (
    Context,
    agentic_window,
    requests_window,
    warmup_rows,
)
from specsweep.collect.scheduling.replicas import replica_of
from specsweep.collect.telemetry import sampling
from specsweep.schema.store import Store, utcnow

log = logging.getLogger("specsweep.collect")


def run_config(
    c: Campaign,
    key: str,
    config: ServiceConfig,
    workloads: list[Workload],
    gpus: tuple[int, ...] | None,
    port_offset: int,
) -> None:
    """Start the service (on `gpus` when given) and run its workloads; a server that dies
    after it was ready is restarted once for the workloads left, then the configuration
    is skipped. Not started at all when its family keeps failing at start-up
    (`StartFailures`)."""
    doomed = c.start_failures.verdict(config)
    if doomed:
        _not_started(c, key, config, gpus, port_offset, doomed)
        return
    for attempt in (1, 2):
        pending = [
            w
            for w in workloads
            if not c.store.unit_done(c.campaign_id, config.config_id, w.name, c.run)
        ]
        if not pending or not _serve(c, key, config, pending, gpus, port_offset):
            return
        if attempt == 1:
            c.progress.note(f"restarting {config.method.name} (tp {config.tp}) once")


def _serve(
    c: Campaign,
    key: str,
    config: ServiceConfig,
    workloads: list[Workload],
    gpus: tuple[int, ...] | None,
    port_offset: int,
) -> bool:
    """One service start of job `key`; True when the server died after it had become
    ready."""
    service = Service(
        c.service_host, c.engine, config, c.log_dir, c.campaign_id, gpus, port_offset, c.stopping
    )
    service.row["run"], service.row["replica"] = c.run, replica_of(key)
    c.progress.status(f"starting {config.method.name} (tp {config.tp})")
    recorded = False
    c.spans[service.service_id] = (utcnow(), None)
    try:
        with service:
            c.store.append("services", [service.row])
            recorded = True
            asyncio.run(_until_stopping(c, _measure(c, key, service, workloads)))
    except ServiceFailed as exc:
        log.error("service failed: %s", exc)
        c.progress.note(f"[red]{exc}[/red]")
        if service.row["ready_at"] is None:
            c.start_failures.add(config, exc.cause)
        return service.row["ready_at"] is not None
    except Cancelled:
        return False
    finally:
        c.spans[service.service_id] = (c.spans[service.service_id][0], utcnow())
        if recorded:
            row = service.row
            c.store.execute(
                "UPDATE services SET state = ?, stopped_at = ?, error = ?, log_tail = ? "
                "WHERE service_id = ?",
                [row["state"], row["stopped_at"], row["error"], row["log_tail"], row["service_id"]],
            )
        else:
            c.store.append("services", [service.row])
    return False


def _not_started(
    c: Campaign,
    key: str,
    config: ServiceConfig,
    gpus: tuple[int, ...] | None,
    port_offset: int,
    why: str,
) -> None:
    """A services row for a configuration that was not started: failed, `error` says why."""
    service = Service(c.service_host, c.engine, config, c.log_dir, c.campaign_id, gpus, port_offset)
    service.row.update(
        run=c.run, replica=replica_of(key), error=f"not started: {why}",
        stopped_at=utcnow(),
    )  # fmt: skip
    c.store.append("services", [service.row])
    message = f"{config.method.name} (tp {config.tp}) not started: {why}"
    log.error("%s", message)
    c.progress.note(f"[red]{message}[/red]")


async def _until_stopping(c: Campaign, work: Coroutine[Any, Any, None]) -> None:
    """Run work; cancel it once the campaign is stopping (it keeps what it measured)."""
    task = asyncio.ensure_future(work)
    while not task.done():
        await asyncio.wait({task}, timeout=0.1)
        if c.stopping.is_set():
            task.cancel()
    task.result()


async def _measure(c: Campaign, key: str, service: Service, workloads: list[Workload]) -> None:
    store, progress, campaign_id = c.store, c.progress, c.campaign_id
    config = service.config
    biggest = max(max(w.concurrency) for w in workloads)
    limits = httpx.Limits(max_connections=biggest + 4, max_keepalive_connections=biggest + 4)
    api_key = service.engine.cfg.api_key()
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    calls = Endpoints(store, campaign_id, service.service_id, config.config_id)
    async with (
        http_client(
            limits=limits, timeout=None, headers=headers, event_hooks=calls.hooks()
        ) as http,
        sampling(c.service_host, service.row["gpus"], c.plan.telemetry) as sampler,
    ):
        ctx = Context(
            http,
            service.engine,
            service.base_url,
            campaign_id,
            config.config_id,
            service.service_id,
            config.method.name,
            config.tp,
            lambda: progress.request_done(key),
            telemetry=sampler,
            calls=calls,
            prefix_cache=c.plan.prefix_cache,
            slo=c.plan.slo,
            run=c.run,
            script=replay_script(c, config),
        )
        await _record_fingerprint(store, ctx, service, calls)
        put_environment(store, c.campaign_id, "campaign", workload_facts(ctx.engine, workloads))
        warm = await warmup_rows(ctx, workloads[0], c.plan.warmup_requests)
        for w in workloads:
            progress.status(f"{config.method.name} (tp {config.tp}) / {w.name}")
            started = utcnow()
            try:
                await ctx.engine.before_workload(ctx.http, ctx.base_url)
            except Exception as exc:  # HookFailed, or its request failed: the workload
                # cannot be measured as the plan asks (e.g. on a cache left warm)
                calls.record("before_workload", w.name, "before", exc)
                service.fail(str(exc) or type(exc).__name__)
            before = await _scrape(ctx, calls, w.name, "before")
            ctx.sink.clear()
            ctx.gpu_sink.clear()
            ctx.window_sink.clear()
            ctx.behind.clear()
            try:
                rows = await workload_rows(ctx, w)
            except ReplayMissing as exc:
                # the unit fails alone: nothing lands, the campaign ends 'partial' and a
                # resume (once the baseline's replies are there) measures it
                log.error("%s (tp %s): %s", config.method.name, config.tp, exc)
                progress.note(f"[red]{config.method.name} (tp {config.tp}): {exc}[/red]")
                continue
            except (asyncio.CancelledError, KeyboardInterrupt):
                # Ctrl-C / SIGTERM: keep what was measured, marked incomplete; resume redoes it
                commit_unit(
                    c,
                    service,
                    w.name,
                    warm + ctx.sink,
                    before,
                    started,
                    False,
                    ctx.gpu_sink,
                    ctx.window_sink,
                )
                raise
            for line in ctx.behind:
                progress.note(f"[yellow]{config.method.name} (tp {config.tp}) {line}[/yellow]")
            after = await _scrape(ctx, calls, w.name, "after")
            if not service.alive():
                service.fail("server died during the workload")
            commit_unit(
                c,
                service,
                w.name,
                warm + rows,
                before + after,
                started,
                True,
                ctx.gpu_sink,
                ctx.window_sink,
            )
            warm = []


def replay_script(c: Campaign, config: ServiceConfig) -> Any:
    """Where this service's replayed sessions get the baseline's replies: the first round's
    (collect.run.replay); None for the baseline in that round, which plays its own."""
    if config.method.name == c.plan.baseline and c.run == replay.SOURCE_RUN:
        return None
    source = replay.SOURCE_RUN
    return partial(replay.script, c.store, c.campaign_id, c.plan.baseline, config.tp, source)


def commit_unit(
    c: Campaign,
    service: Service,
    workload: str,
    rows: list[dict[str, Any]],
    metrics: list[dict[str, Any]],
    started: Any,
    complete: bool,
    gpu_samples: list[dict[str, Any]] | None = None,
    windows: list[dict[str, Any]] | None = None,
) -> None:
    """Land one unit of this run (replace_unit), with the services that shared the host
    during it."""
    now = utcnow()
    shared = sorted(
        sid
        for sid, (launched, stopped) in list(c.spans.items())
        if sid != service.service_id and launched < now and (stopped is None or stopped > started)
    )
    replace_unit(
        c.store,
        {
            "campaign_id": c.campaign_id,
            "config_id": service.config.config_id,
            "workload": workload,
            "service_id": service.service_id,
            "n_requests": sum(not r["is_warmup"] for r in rows),
            "complete": complete,
            "colocated_with": ",".join(shared),
            "started_at": started,
            "finished_at": now,
            "run": c.run,
        },
        {
            "requests": rows,
            "windows": windows or [],
            "server_metrics": metrics,
            "gpu_samples": gpu_samples or [],
        },
    )


def replace_unit(store: Store, unit: dict[str, Any], rows: dict[str, list[dict[str, Any]]]) -> None:
    """One transaction: drop what an interrupted earlier try left of the unit (on this host
    or, on a cluster, another node), then land its rows (requests, windows, server_metrics,
    gpu_samples) and its `units` row. Server metrics and GPU samples belong to the unit's
    run through their service."""
    key = [unit["campaign_id"], unit["config_id"], unit["workload"], unit["run"]]
    with store.transaction():
        for table in ("requests", "windows", "units"):  # fixed names
            store.execute(
                f"DELETE FROM {table} WHERE campaign_id = ? AND config_id = ? "
                "AND workload = ? AND run = ?",
                key,
            )
        for table in ("server_metrics", "gpu_samples"):
            store.execute(
                f"DELETE FROM {table} WHERE campaign_id = ? AND config_id = ? "
                "AND workload = ? AND service_id IN (SELECT service_id FROM "
                "services WHERE campaign_id = ? AND run = ?)",
                [*key[:3], key[0], key[3]],
            )
        for table, table_rows in rows.items():  # the fixed names above
            store.append(table, table_rows)
        store.append("units", [unit])


async def _scrape(
    ctx: Context, calls: Endpoints, workload: str, phase: str
) -> list[dict[str, Any]]:
    """Server metrics around a workload; none (and an endpoint_errors row) if it fails."""
    samples = await calls.call(
        "scrape", workload, phase, ctx.engine.scrape(ctx.http, ctx.base_url), []
    )
    now = utcnow()
    return [
        {
            "campaign_id": ctx.campaign_id,
            "service_id": ctx.service_id,
            "config_id": ctx.config_id,
            "workload": workload,
            "phase": phase,
            "scraped_at": now,
            **s,
        }
        for s in samples
    ]


async def _record_fingerprint(
    store: Store, ctx: Context, service: Service, calls: Endpoints
) -> None:
    """What the server says about itself (none if that fails; version, build), how it was
    launched, and what changes acceptance: the request body sent (prompt left out) and the
    draft model (collect/run/fingerprint.py)."""
    facts = await calls.call(
        "fingerprint", "", "start", ctx.engine.fingerprint(ctx.http, ctx.base_url), {}
    )
    facts.update(request_facts(ctx.engine))
    method = service.config.method
    facts.update(await asyncio.to_thread(prompt_facts, ctx.engine, method, service.host, facts))
    facts.update(await asyncio.to_thread(draft_facts, ctx.engine, method, service.host))
    prefix = f"service.{ctx.method}.tp{ctx.tp}"
    facts = {f"{prefix}.{k}": v for k, v in facts.items()}
    facts[f"{prefix}.launch_command"] = service.row["launch_command"]
    facts[f"{prefix}.startup_s"] = f"{service.row['startup_s']:.2f}"
    if service.row["gpus"]:  # where its gpu_samples come from (nvml has the energy counter)
        sampler = ctx.telemetry
        facts[f"{prefix}.telemetry"] = (
            f"{sampler.name} every {sampler.period_s:g} s" if sampler else "off"
        )
    put_environment(store, ctx.campaign_id, service.host.name, facts)


async def workload_rows(ctx: Context, w: Workload) -> list[dict[str, Any]]:
    """Every measured window of a workload, in plan order: closed-loop windows
    (collect/run/windows.py) or open-loop ones (collect/run/openloop.py)."""
    if isinstance(w, TraceWorkload):
        return await openloop.open_loop_window(
            ctx, w.name, openloop.trace_schedule(w), "trace", w.max_concurrency, {}
        )
    rows: list[dict[str, Any]] = []
    items = prompts(w.prompts) if isinstance(w, RequestsWorkload) else []
    for max_tokens in w.max_tokens:
        if isinstance(w, RequestsWorkload) and w.load is not None:
            subset = items[: w.prompt_limit(max_tokens)]
            rows += await openloop.rate_sweep(ctx, w, subset, max_tokens)
            continue
        for concurrency in w.concurrency:
            if isinstance(w, AgenticWorkload):
                rows += await agentic_window(ctx, w, max_tokens, concurrency)
            else:
                subset = items[: w.prompt_limit(max_tokens)]
                rows += await requests_window(ctx, w, subset, max_tokens, concurrency)
    return rows
