"""The campaign runner: every configuration of a plan, every workload, into the store.

Units of work are (campaign, config, workload). Each unit's request rows, server
metrics and its `units` row land in one transaction, so after any interruption a unit
is either complete or absent; rerunning the same plan skips complete units (resume) and
starts each configuration with unfinished units once, running all of them on that start.
A configuration whose server fails to start is recorded in `services` with its log tail
and skipped; the campaign goes on.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from collect import engines, hosts
from collect.engines.base import HookFailed
from collect.measure import Context, warmup_rows, workload_rows
from collect.phases import BestOf, Phase, rank_methods
from collect.plan import Plan, ServiceConfig, Workload
from collect.progress import CampaignProgress
from collect.redact import redact
from collect.resources import resolve_model
from collect.service import Service, ServiceFailed
from collect.workloads import request_count
from schema.store import Store, utcnow

log = logging.getLogger("specsweep.collect")


@dataclass
class Campaign:
    """What every step of one campaign run shares."""

    store: Store
    plan: Plan
    campaign_id: str
    host: hosts.Host
    engine: engines.Adapter
    log_dir: Path
    progress: CampaignProgress


def run(
    plan: Plan,
    plan_text: str,
    db_path: Path,
    log_dir: Path,
    show_progress: bool = True,
    phases: list[str] | None = None,
) -> str:
    """Run (or resume) the plan's campaign, or only the named phases; returns campaign_id."""
    campaign_id = plan.campaign_id()
    selected = select_phases(plan, phases)
    with Store(db_path) as store:
        _begin(store, plan, plan_text, campaign_id)
        status = "interrupted"
        host = hosts.create(plan.host)
        try:
            for pid in getattr(host, "reap_orphans", list)():  # remote hosts only
                log.warning("stopped a server (pid %s) left running by an interrupted run", pid)
            engine = engines.create(plan.engine)
            engine.prepare(host)
            _record_environment(store, campaign_id, host, plan)
            with CampaignProgress(0, enabled=show_progress) as progress:
                c = Campaign(store, plan, campaign_id, host, engine, log_dir / campaign_id,
                             progress)
                for phase in selected:
                    _run_phase(c, phase)
                status = _status(c)
        finally:
            host.close()
            _finish(store, campaign_id, status)
    return campaign_id


def select_phases(plan: Plan, names: list[str] | None) -> list[Phase]:
    phases = plan.all_phases()
    if not names:
        return phases
    unknown = sorted(set(names) - {p.name for p in phases})
    if unknown:
        raise ValueError(f"unknown phase(s) {unknown}; the plan has {[p.name for p in phases]}")
    return [p for p in phases if p.name in names]


def _run_phase(c: Campaign, phase: Phase) -> None:
    todo = _todo(c, phase, announce=True)
    if not todo:
        return
    c.progress.add_total(sum(request_count(w) for _, ws in todo for w in ws))
    try:
        with _stopped(c, phase.stop_services):
            for config, workloads in todo:
                _run_config(c, config, workloads)
    except BlockingServiceError as exc:
        log.error("phase %s skipped: %s", phase.name, exc)
        c.progress.note(f"[red]phase {phase.name} skipped: {exc}[/red]")


class BlockingServiceError(RuntimeError):
    """A blocking service would not stop; its phase is skipped."""


@contextmanager
def _stopped(c: Campaign, names: list[str]) -> Iterator[None]:
    """Stop the named blocking services for the block; start every one that was stopped
    again afterwards, whatever happens inside (failure, Ctrl-C)."""
    services = {s.name: s for s in getattr(c.plan.host, "blocking_services", [])}
    stopped = []
    try:
        for name in names:
            rc, _, err = c.host.run(services[name].stop, timeout_s=300)
            if rc != 0:
                raise BlockingServiceError(f"could not stop blocking service {name!r} (exit {rc}): "
                                   f"{redact(err.strip())[-500:]}")
            stopped.append(name)
            c.progress.note(f"stopped blocking service {name}")
        yield
    finally:
        for name in reversed(stopped):
            rc, _, err = c.host.run(services[name].start, timeout_s=300)
            if rc != 0:
                log.error("could not start blocking service %s again (exit %s): %s",
                          name, rc, redact(err.strip())[-500:])
                c.progress.note(f"[red]blocking service {name} did NOT start again[/red]")
            else:
                c.progress.note(f"started blocking service {name} again")


def _status(c: Campaign) -> str:
    """complete when no phase has work left; partial when only unselected phases do."""
    return "complete" if not any(_todo(c, p) for p in c.plan.all_phases()) else "partial"


def _phase_methods(c: Campaign, phase: Phase, announce: bool) -> list[str]:
    """The phase's methods; for {best_of, top}, the fastest measured in that phase (said on
    the console when `announce`)."""
    if not isinstance(phase.methods, BestOf):
        return phase.methods or [m.name for m in c.plan.methods]
    source = next(p for p in c.plan.all_phases() if p.name == phase.methods.best_of)
    ranked = rank_methods(c.store, c.campaign_id, source.tp, c.plan.baseline)
    chosen = [m for m, _ in ranked[: phase.methods.top]]
    if not announce:
        return chosen
    if not ranked:
        c.progress.note(f"phase {phase.name}: phase {source.name} has no results yet to choose "
                        "methods from; only the baseline runs")
    else:
        c.progress.note(f"phase {phase.name}: fastest in {source.name}: "
                        + ", ".join(f"{m} {x:.2f}x" for m, x in ranked) + f"; running {chosen}")
    return chosen


def _todo(
    c: Campaign, phase: Phase, announce: bool = False
) -> list[tuple[ServiceConfig, list[Workload]]]:
    out = []
    for config in c.plan.phase_configs(phase, _phase_methods(c, phase, announce)):
        pending = [
            w
            for w in c.plan.workloads_of(config)
            if not c.store.unit_done(c.campaign_id, config.config_id, w.name)
        ]
        if pending:
            out.append((config, pending))
    return out


def _run_config(c: Campaign, config: ServiceConfig, workloads: list[Workload]) -> None:
    """Start the service and run its workloads; a server that dies after it was ready is
    restarted once for the workloads left, then the configuration is skipped."""
    for attempt in (1, 2):
        pending = [w for w in workloads
                   if not c.store.unit_done(c.campaign_id, config.config_id, w.name)]
        if not pending or not _serve(c, config, pending):
            return
        if attempt == 1:
            c.progress.note(f"restarting {config.method.name} (tp {config.tp}) once")


def _serve(c: Campaign, config: ServiceConfig, workloads: list[Workload]) -> bool:
    """One service start; True when the server died after it had become ready."""
    service = Service(c.host, c.engine, config, c.log_dir, c.campaign_id)
    c.progress.status(f"starting {config.method.name} (tp {config.tp})")
    recorded = False
    try:
        with service:
            c.store.append("services", [service.row])
            recorded = True
            asyncio.run(_measure(c, service, workloads))
    except ServiceFailed as exc:
        log.error("service failed: %s", exc)
        c.progress.note(f"[red]{exc}[/red]")
        return service.row["ready_at"] is not None
    finally:
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


async def _measure(c: Campaign, service: Service, workloads: list[Workload]) -> None:
    store, progress, campaign_id = c.store, c.progress, c.campaign_id
    config = service.config
    biggest = max(max(w.concurrency) for w in workloads)
    limits = httpx.Limits(max_connections=biggest + 4, max_keepalive_connections=biggest + 4)
    key = service.engine.cfg.api_key()
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx.AsyncClient(limits=limits, timeout=None, headers=headers) as http:
        ctx = Context(
            http,
            service.engine,
            service.base_url,
            campaign_id,
            config.config_id,
            service.service_id,
            config.method.name,
            config.tp,
            progress.advance,
        )
        await _record_fingerprint(store, ctx, service)
        warm = await warmup_rows(ctx, workloads[0], c.plan.warmup_requests)
        for w in workloads:
            progress.status(f"{config.method.name} (tp {config.tp}) / {w.name}")
            started = utcnow()
            try:
                await ctx.engine.before_workload(ctx.http, ctx.base_url)
            except HookFailed as exc:
                service.fail(str(exc))
            before = await _scrape(ctx, w.name, "before")
            ctx.sink.clear()
            try:
                rows = await workload_rows(ctx, w)
            except (asyncio.CancelledError, KeyboardInterrupt):
                # Ctrl-C / SIGTERM: keep what was measured, marked incomplete; resume redoes it
                _commit_unit(c, service, w.name, warm + ctx.sink, before, started, False)
                raise
            after = await _scrape(ctx, w.name, "after")
            if not service.alive():
                service.fail("server died during the workload")
            _commit_unit(c, service, w.name, warm + rows, before + after, started, True)
            warm = []


def _commit_unit(c: Campaign, service: Service, workload: str, rows: list[dict[str, Any]],
                 metrics: list[dict[str, Any]], started: Any, complete: bool) -> None:
    """One transaction: drop what an interrupted earlier try left of this unit, then land
    its requests, server metrics and `units` row."""
    key = [c.campaign_id, service.config.config_id, workload]
    with c.store.transaction():
        for table in ("requests", "server_metrics", "units"):  # fixed names
            c.store.execute(f"DELETE FROM {table} WHERE campaign_id = ? AND config_id = ? "
                            "AND workload = ?", key)
        c.store.append("requests", rows)
        c.store.append("server_metrics", metrics)
        c.store.append("units", [{
            "campaign_id": c.campaign_id, "config_id": service.config.config_id,
            "workload": workload, "service_id": service.service_id,
            "n_requests": sum(not r["is_warmup"] for r in rows), "complete": complete,
            "started_at": started, "finished_at": utcnow(),
        }])


async def _scrape(ctx: Context, workload: str, phase: str) -> list[dict[str, Any]]:
    samples = await ctx.engine.scrape(ctx.http, ctx.base_url)
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


async def _record_fingerprint(store: Store, ctx: Context, service: Service) -> None:
    facts = await ctx.engine.fingerprint(ctx.http, ctx.base_url)
    prefix = f"service.{ctx.method}.tp{ctx.tp}"
    facts = {f"{prefix}.{k}": v for k, v in facts.items()}
    facts[f"{prefix}.launch_command"] = service.row["launch_command"]
    facts[f"{prefix}.startup_s"] = f"{service.row['startup_s']:.2f}"
    _put_environment(store, ctx.campaign_id, service.host.name, facts)


def _record_environment(store: Store, campaign_id: str, host: hosts.Host, plan: Plan) -> None:
    facts = host.fingerprint()
    facts["engine.kind"] = plan.engine.kind
    # a package:// model only exists on this machine; other paths are the host's
    facts["engine.model"] = (
        resolve_model(plan.engine.model) if plan.host.kind == "local" else plan.engine.model
    )
    facts["specsweep.version"] = _version()
    if hasattr(host, "gpu_processes"):  # what else runs on the GPUs as the campaign starts
        facts["gpu.processes"] = json.dumps(host.gpu_processes(), sort_keys=True)
    _put_environment(store, campaign_id, host.name, facts)


def _put_environment(store: Store, campaign_id: str, host: str, facts: dict[str, str]) -> None:
    """Latest value wins: a resumed campaign refreshes what it measured again."""
    with store.transaction():
        for key in facts:
            store.execute(
                "DELETE FROM environment WHERE campaign_id = ? AND host = ? AND key = ?",
                [campaign_id, host, key],
            )
        store.append(
            "environment",
            [
                {"campaign_id": campaign_id, "host": host, "key": k, "value": str(v)}
                for k, v in facts.items()
            ],
        )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("specsweep")
    except PackageNotFoundError:
        return "unknown"


def _begin(store: Store, plan: Plan, plan_text: str, campaign_id: str) -> None:
    exists = store.execute("SELECT 1 FROM campaigns WHERE campaign_id = ?", [campaign_id])
    if exists:
        store.execute(
            "UPDATE campaigns SET status = 'running', finished_at = NULL WHERE campaign_id = ?",
            [campaign_id],
        )
        return
    store.append(
        "campaigns",
        [
            {
                "campaign_id": campaign_id,
                "plan_name": plan.name,
                "plan_sha256": plan.sha256(),
                "plan_yaml": redact(plan_text),
                "baseline": plan.baseline,
                "started_at": utcnow(),
                "finished_at": None,
                "status": "running",
            }
        ],
    )


def _finish(store: Store, campaign_id: str, status: str) -> None:
    finished = utcnow() if status == "complete" else None
    store.execute(
        "UPDATE campaigns SET status = ?, finished_at = ? WHERE campaign_id = ?",
        [status, finished, campaign_id],
    )
