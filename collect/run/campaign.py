"""The state one campaign run shares between the runner, its workers and each configuration's
run: the store, the plan, the host and engine, the progress display and the stop flag; the
campaign's `campaigns` row (begun, then finished with its status) and its `method_params`
rows, written with it; and what is left to run: each phase's methods (a best_of phase's
picked from the store) and its configurations with unfinished units."""

from __future__ import annotations

import re
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from specsweep.collect import engines
from specsweep.collect.hosts.base import Cluster, Host
from specsweep.collect.plan.families import family_members, numeric, resolve
from specsweep.collect.plan.model import Plan, ServiceConfig, Workload
from specsweep.collect.plan.phases import BestOf, Phase
from specsweep.collect.redact import redact
from specsweep.collect.run.progress import CampaignProgress
from specsweep.collect.scheduling.order import phase_seed, round_order
from specsweep.collect.scheduling.race import race_state, ranking, record_race
from specsweep.collect.scheduling.ranking import describe, pick, rank_methods
from specsweep.interrupt import Interrupted
from specsweep.schema.controls import aa_control_name
from specsweep.schema.store import Store, utcnow


class StartFailures:
    """A family whose services fail at start-up for one reason stops starting.

    When two members of a method family at one tp have failed at start-up with the same
    cause (the log line `failure_cause` picks: "ModuleNotFoundError: No module named
    'cutlass'", "RuntimeError: param_.max_trie_depth must be greater than 1"), the family's
    other members at that tp are not started in this run: a flag, a package or a path the
    whole family shares is wrong, and each start costs a model load (minutes on a large model
    at TP8). A cause that can depend on the member or on what runs beside it (memory, CUDA,
    NCCL, a port) never counts. A rerun starts them again. Workers are threads, hence the lock;
    a Ray cluster's nodes do not share it."""

    TRANSIENT = re.compile(r"memory|OutOfMemory|CUDA|NCCL|address already in use|timed? ?out", re.I)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._causes: dict[tuple[str, int], dict[str, str]] = {}  # (family, tp) -> method: cause

    def add(self, config: ServiceConfig, cause: str | None) -> None:
        family = config.method.family
        if family and cause and not self.TRANSIENT.search(cause):
            with self._lock:
                self._causes.setdefault((family, config.tp), {})[config.method.name] = cause

    def verdict(self, config: ServiceConfig) -> str | None:
        """Why `config` is not started (None: start it)."""
        with self._lock:
            failed = dict(self._causes.get((config.method.family or "", config.tp), {}))
        failed.pop(config.method.name, None)
        for cause in set(failed.values()):
            members = sorted(m for m, c in failed.items() if c == cause)
            if len(members) >= 2:
                return f"{' and '.join(members)} of its family failed at start-up with: {cause}"
        return None


@dataclass
class Campaign:
    """What every step of one campaign run shares."""

    store: Store
    plan: Plan
    campaign_id: str
    host: Host | Cluster  # a Cluster only on a cluster's driver, whose jobs run on its nodes
    engine: engines.Engine
    log_dir: Path
    progress: CampaignProgress
    stopping: threading.Event = field(default_factory=threading.Event)
    # service_id -> (launched, stopped or None): who shared the host during a unit
    spans: dict[str, tuple[datetime, datetime | None]] = field(default_factory=dict)
    only: list[tuple[str, int | None]] | None = None  # --only METHOD[/TP]: these configs only
    run: int = 1  # the run being measured (1..the plan's repeat, or a race's max_rounds)
    repeat: int | None = None  # collect run --repeat: the rounds of phases that do not race
    start_failures: StartFailures = field(default_factory=StartFailures)

    @property
    def service_host(self) -> Host:
        """The host this campaign starts its services on. A cluster's driver starts none (each
        job runs on a node, with a local host of its own there): asking it is a bug."""
        if not isinstance(self.host, Host):
            raise TypeError(
                f"{type(self.host).__name__} starts no service: its jobs run on its nodes"
            )
        return self.host

    @contextmanager
    def signals_stop(self) -> Iterator[Stop]:
        """While the workers run: SIGINT and SIGTERM only set `stopping` (and record which
        came); the runner's loop calls `Stop.check()` between waits, which runs the handler
        in place before (the CLI's raises specsweep.interrupt.Interrupted) or raises
        Interrupted itself, there and not at whatever line the main thread was on. (An
        exception raised inside concurrent.futures.wait can leave a future's lock held, and
        the worker that then finishes blocks on it for good.) Further signals change
        nothing: the workers are already stopping their servers (at most STOP_WAIT_S each);
        `kill -9` of specsweep ends its local servers too (collect.hosts.local). Outside the
        main thread this does nothing: Python delivers signals to the main thread only."""
        stop = Stop(self.stopping)
        if threading.current_thread() is not threading.main_thread():
            yield stop
            return
        previous = {s: signal.signal(s, stop.handle) for s in (signal.SIGINT, signal.SIGTERM)}
        stop.previous = previous
        try:
            yield stop
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)


@dataclass
class Stop:
    """The signal that asked the campaign to stop, raised where the runner checks it."""

    stopping: threading.Event
    received: int | None = None
    previous: dict[int, object] = field(default_factory=dict)

    def handle(self, signum: int, frame: object) -> None:
        if self.received is None:
            self.received = signum
        self.stopping.set()

    def check(self) -> None:
        """Raise what the first signal would have raised, if one came."""
        signum = self.received
        if signum is None:
            return
        handler = self.previous.get(signum)
        if callable(handler):
            handler(signum, None)  # the CLI's: Interrupted (specsweep.interrupt)
        raise Interrupted(signum)


def method_params_rows(plan: Plan, campaign_id: str) -> list[dict[str, object]]:
    """One row per parameter of each of the plan's methods (table method_params): the value
    as the plan wrote it (str()), value_num the same as a number (NULL for a bool or a word),
    family the method's family (its own name when it has none). A method without parameters
    has no rows."""
    return [
        {
            "campaign_id": campaign_id,
            "method": m.name,
            "family": m.family or m.name,
            "param": param,
            "value": str(value),
            "value_num": numeric(value),
        }
        for m in plan.methods
        for param, value in m.params.items()
    ]


def record_method_params(store: Store, plan: Plan, campaign_id: str) -> None:
    """Write the campaign's method_params rows, replacing any a previous run wrote (a resume
    writes the same rows again; labels, which the plan's hash leaves out, may have changed)."""
    with store.transaction():
        store.execute("DELETE FROM method_params WHERE campaign_id = ?", [campaign_id])
        store.append("method_params", method_params_rows(plan, campaign_id))


def begin_campaign(store: Store, plan: Plan, plan_text: str, campaign_id: str) -> None:
    """Add the campaign's `campaigns` row (status running), or mark a resumed one running."""
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


def finish_campaign(store: Store, campaign_id: str, status: str) -> None:
    """Set the campaign's status; finished_at only when it is complete."""
    finished = utcnow() if status == "complete" else None
    store.execute(
        "UPDATE campaigns SET status = ?, finished_at = ? WHERE campaign_id = ?",
        [status, finished, campaign_id],
    )


def campaign_status(c: Campaign, runs: int) -> str:
    """complete when no phase of any run has work left; partial when only unselected phases
    (or runs) do."""
    left = False
    for c.run in range(1, runs + 1):
        left = left or any(todo(c, p) for p in c.plan.all_phases())
    return "partial" if left else "complete"


def select_phases(plan: Plan, names: list[str] | None) -> list[Phase]:
    phases = plan.all_phases()
    if not names:
        return phases
    unknown = sorted(set(names) - {p.name for p in phases})
    if unknown:
        raise ValueError(f"unknown phase(s) {unknown}; the plan has {[p.name for p in phases]}")
    return [p for p in phases if p.name in names]


def select_configs(plan: Plan, specs: list[str] | None) -> list[tuple[str, int | None]] | None:
    """Parse --only values, METHOD or METHOD/TP (a family's name: all its members);
    ValueError naming what is unknown."""
    if not specs:
        return None
    methods, families = {m.name for m in plan.methods}, family_members(plan.methods)
    tps = {p.tp for p in plan.all_phases()}
    out: list[tuple[str, int | None]] = []
    for spec in specs:
        method, _, tp = spec.partition("/")
        if method not in methods | set(families):
            raise ValueError(f"--only {spec}: no method {method!r}; the plan has {sorted(methods)}")
        if tp and (not tp.isdigit() or int(tp) not in tps):
            raise ValueError(f"--only {spec}: tp must be one of the plan's {sorted(tps)}")
        out += [(m, int(tp) if tp else None) for m in resolve([method], families)]
    return out


def waves(plan: Plan, phases: list[Phase]) -> list[list[Phase]]:
    """The phases in waves, each run round by round before the next wave starts: a best_of
    phase whose source is raced (plan `search`) waits for the source's last round, when the
    race has decided its picks (collect.scheduling.race); every other phase is in its
    source's wave, as before races (round 1 of a best_of phase follows its source's round 1).
    One wave when nothing races."""
    depth: dict[str, int] = {}
    for p in plan.all_phases():
        source = p.methods.best_of if isinstance(p.methods, BestOf) else None
        raced = source is not None and plan.search_of(
            next(q for q in plan.all_phases() if q.name == source)
        )
        depth[p.name] = 0 if source is None else depth[source] + (1 if raced else 0)
    out: list[list[Phase]] = []
    for level in sorted({depth[p.name] for p in phases}):
        out.append([p for p in phases if depth[p.name] == level])
    return out


def phase_methods(c: Campaign, phase: Phase, announce: bool) -> list[str]:
    """The phase's methods; for {best_of, top}, the fastest in that phase (said if `announce`)."""
    if not isinstance(phase.methods, BestOf):
        return phase.methods or [m.name for m in c.plan.methods]
    source = next(p for p in c.plan.all_phases() if p.name == phase.methods.best_of)
    if c.plan.search_of(source) is not None:
        return _race_picks(c, phase, source, announce)
    ranked = rank_methods(
        c.store,
        c.campaign_id,
        source.tp,
        c.plan.baseline,
        source.workloads,
        phase_methods(c, source, False),
    )
    chosen = pick([r.method for r in ranked], phase.methods, c.plan.methods)
    if not announce:
        return chosen
    if not ranked:
        c.progress.note(
            f"phase {phase.name}: phase {source.name} has no results yet to choose "
            "methods from; only the baseline runs"
        )
    else:
        c.progress.note(
            f"phase {phase.name}: fastest in {source.name}: "
            + describe(ranked)
            + f"; running {chosen}"
        )
    return chosen


def _race_picks(c: Campaign, phase: Phase, source: Phase, announce: bool) -> list[str]:
    """A best_of phase's methods from its raced source: the race's survivors after its last
    round (collect.scheduling.race.ranking), picked as any best_of picks."""
    assert isinstance(phase.methods, BestOf)
    rounds = c.plan.rounds_of(source, c.repeat)
    state = race_state(c.store, c.campaign_id, c.plan, source,
                       phase_methods(c, source, False), rounds + 1)  # fmt: skip
    chosen = pick(ranking(state, c.plan.baseline), phase.methods, c.plan.methods)
    if announce:
        c.progress.note(
            f"phase {phase.name}: the race of {source.name} left "
            + (", ".join(ranking(state, c.plan.baseline)) or "no method but the baseline")
            + f"; running {chosen}"
        )
    return chosen


def todo(
    c: Campaign, phase: Phase, announce: bool = False, methods: list[str] | None = None
) -> list[tuple[ServiceConfig, list[Workload]]]:
    """The phase's configurations with unfinished units (methods: these, not the phase's), in
    the order this run (a round) starts them: collect.scheduling.order's counterbalanced one.
    None past the phase's rounds (collect run --repeat, or its race's max_rounds); a raced
    phase's round starts the race's survivors only (collect.scheduling.race), and `announce`
    says who they are and records the phase's `races` row."""
    out: list[tuple[ServiceConfig, list[Workload]]] = []
    if c.run > c.plan.rounds_of(phase, c.repeat):
        return out
    chosen = phase_methods(c, phase, announce) if methods is None else methods
    configs = {config.method.name: config for config in c.plan.phase_configs(phase, chosen)}
    if c.plan.search_of(phase) is not None:
        configs = _raced(c, phase, chosen, configs, announce)
    names = round_order(list(configs), phase_seed(c.campaign_id, phase.name), c.run)
    for config in (configs[name] for name in names):
        pending = [
            w
            for w in c.plan.workloads_of(config)
            if not c.store.unit_done(c.campaign_id, config.config_id, w.name, c.run)
        ]
        if pending:
            out.append((config, pending))
    return out


def _raced(c: Campaign, phase: Phase, chosen: list[str], configs: dict[str, ServiceConfig],
           announce: bool) -> dict[str, ServiceConfig]:  # fmt: skip
    """The configurations of a raced phase this round starts: the race's survivors, and the
    baseline's A/A control wherever the baseline starts. `announce` (re)writes the phase's
    races row, its priors fixed the first time (collect.scheduling.race.record_race)."""
    if announce:
        host = c.host.name if isinstance(c.host, Host) else None
        for line in record_race(c.store, c.campaign_id, c.plan, phase, chosen, host):
            c.progress.note(f"race {phase.name}: {line}")
    state = race_state(c.store, c.campaign_id, c.plan, phase, chosen, c.run)
    control = aa_control_name(c.plan.baseline)
    start = set(state.start) | ({control} if c.plan.baseline in state.start else set())
    if announce and state.rounds >= 1:
        c.progress.note(f"race {phase.name}: {state.describe()}")
    return {name: config for name, config in configs.items() if name in start}
