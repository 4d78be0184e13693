"""Campaign plans: pydantic models loaded from YAML.

A plan names one host, one engine, the methods to compare (one of them the baseline),
the tensor-parallel sizes and the workloads. Every model forbids unknown fields, so a
typo fails before anything starts; `collect.plan.file.load_plan` turns validation errors
into a `PlanError` that names the field and the line of the YAML file.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from specsweep.collect.plan import families
from specsweep.collect.plan.components import (  # noqa: F401 - re-exported: plans import them from here
    NAME_PATTERN,
    ClusterField,
    Engine,
    Estimates,
    Host,
    LocalHost,
    ModelInfo,
    Name,
    ServiceConfig,
    Strict,
    Telemetry,
)
from specsweep.collect.plan.fields import Method
from specsweep.collect.plan.load import Slo
from specsweep.collect.plan.phases import BestOf, Phase, Search
from specsweep.collect.plan.workloads import (  # noqa: F401 - re-exported: many callers import them
    AgenticWorkload,
    RequestsWorkload,
    Workload,
    check_positive,
)
from specsweep.schema.controls import aa_control_name
from specsweep.schema.defaults import DEFAULT_BASELINE

# --- the plan ----------------------------------------------------------------------------


class Plan(Strict):
    name: Name = Field(description="Campaign name; with the plan's hash it forms campaign_id.")
    description: str = Field("", description="Free text shown in the report.")
    host: Host = Field(LocalHost(kind="local"), description="Where services run.")
    engine: Engine = Field(description="The inference server and its common settings.")
    methods: list[Method] = Field(min_length=1, description="Methods to compare.")
    baseline: Name = Field(
        DEFAULT_BASELINE, description="Method every other method is compared against."
    )
    aa_control: bool = Field(
        False,
        description="A/A control: start the baseline again as a "
        "second, separate service named `<baseline>-aa` (same args and "
        "workloads, its own config_id) in every round of every phase the baseline runs in, "
        "never a best_of pick: a negative control whose comparison with the baseline must "
        "come out not significant (docs/aa-control.md); the rounds' own baseline starts "
        "already measure the start-to-start spread. The name is reserved either way.",
    )
    tp: list[int] = Field([1], min_length=1, description="Tensor-parallel sizes.")
    warmup_requests: int = Field(
        1, ge=0, le=10, description="Unrecorded-in-analysis requests sent after each start."
    )
    workloads: list[Workload] = Field(min_length=1, description="Workloads run on every service.")
    phases: list[Phase] | None = Field(
        None,
        description="Ordered phases, each at one tp (default: one phase per tp with every "
        "method). A phase may run the fastest methods of an earlier one.",
    )
    search: Search | None = Field(
        None,
        description="Race every phase's methods (a phase's own `search` wins): start only the "
        "methods that can still be best at a load level, round by round, instead of every "
        "method in every round (docs/race.md). Not in the plan's hash.",
    )
    estimates: Estimates = Field(
        Estimates(),
        description="Assumed speeds for time estimates "
        "(ETA, `check`, `simulate`); measured figures from the store "
        "replace them as they exist.",
    )
    telemetry: Telemetry = Field(
        Telemetry(),
        description="GPU power, clocks, utilisation and "
        "memory sampled while each window runs (table gpu_samples).",
    )
    slo: Slo | None = Field(
        None,
        validate_default=True,
        description="Latency objectives for goodput and the highest rate that meets them "
        "(open-loop windows); analysis only (and a load's search), not part of the plan's hash.",
    )
    prefix_cache: Literal["reset", "keep"] = Field(
        "reset",
        description="Empty the server's prefix cache before every measured window "
        "(how, per engine: docs/open-loop.md 'Prefix cache hygiene'), or keep it warm across "
        "windows.",
    )
    gpu_hour_usd: float | None = Field(
        None,
        gt=0,
        description="Price of one GPU-hour (USD), for cost per million output "
        "tokens; stored in `environment` as price.gpu_hour_usd.",
    )
    repeat: int = Field(
        3,
        ge=1,
        le=100,
        description="Rounds of service starts: each round (a run) starts every "
        "configuration of each phase once, in a seeded counterbalanced order, and measures "
        "all its workloads on that start; the starts are the replicate every interval "
        "carries (docs/plan-guide.md 'Rounds of service starts', docs/statistics.md). With "
        "1, no interval is printed. Not in the plan's hash: more rounds add to a campaign.",
    )
    cluster: ClusterField = Field(
        None,
        description="Run across the nodes of a Ray cluster "
        "(collect/cluster/); not in the plan's hash.",
    )

    @field_validator("methods")
    @classmethod
    def _unique_methods(cls, methods: list[Method], info: ValidationInfo) -> list[Method]:
        """Expand families (after each method validated, so that a family's errors carry its
        YAML line), then check the concrete names."""
        methods = families.expand_all(methods)
        engine = info.data.get("engine")
        for m in methods:
            if m.tp is not None:
                _check_tp(m.tp, engine)
            for problem in engine.method_problems([*engine.args, *m.args]) if engine else []:
                raise ValueError(f"method {m.name!r}: {problem}")
        return methods

    @field_validator("baseline")
    @classmethod
    def _known_baseline(cls, baseline: str, info: ValidationInfo) -> str:
        methods = info.data.get("methods") or []
        names = [m.name for m in methods]
        baseline = families.one_member(baseline, methods)
        if names and baseline not in names:
            raise ValueError(f"baseline {baseline!r} is not one of the methods {names}")
        return baseline

    @model_validator(mode="after")
    def _add_aa_control(self) -> Plan:
        methods = families.with_aa_control(self.methods, self.baseline, self.aa_control)
        object.__setattr__(self, "methods", methods)  # frozen; phases never name the control
        return self

    @field_validator("tp")
    @classmethod
    def _valid_tp(cls, tp: list[int], info: ValidationInfo) -> list[int]:
        return _check_tp(tp, info.data.get("engine"))

    @field_validator("workloads")
    @classmethod
    def _unique_workloads(cls, workloads: list[Any], info: ValidationInfo) -> list[Any]:
        names = [w.name for w in workloads]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate workload names {names}")
        for m in info.data.get("methods") or []:
            unknown = sorted(set(m.workloads or []) - set(names))
            if unknown:
                raise ValueError(f"method {m.name!r} names unknown workloads {unknown}")
        return workloads

    def all_tps(self) -> list[int]:
        return sorted({t for m in self.methods for t in (m.tp or self.tp)})

    @field_validator("phases")
    @classmethod
    def _valid_phases(cls, phases: list[Phase] | None, info: ValidationInfo) -> list[Phase] | None:
        plan_methods = info.data.get("methods") or []
        methods = {m.name for m in plan_methods}
        phases = families.resolve_phases(phases, plan_methods)
        workloads = {w.name for w in info.data.get("workloads") or []}
        seen: list[str] = []
        for p in phases or []:
            _check_tp([p.tp], info.data.get("engine"))
            if p.name in seen:
                raise ValueError(f"duplicate phase name {p.name!r}")
            if isinstance(p.methods, BestOf) and p.methods.best_of not in seen:
                raise ValueError(
                    f"phase {p.name!r}: best_of {p.methods.best_of!r} is not an "
                    f"earlier phase {seen}"
                )
            unknown = sorted(set(p.methods if isinstance(p.methods, list) else []) - methods)
            unknown += sorted(set(p.workloads or []) - workloads)
            host = info.data.get("host")
            blocking = {b.name for b in host.blocking_services}
            unknown += sorted(set(p.stop_services) - blocking)
            if unknown:
                raise ValueError(
                    f"phase {p.name!r} names unknown methods/workloads/services {unknown}"
                )
            seen.append(p.name)
        return phases

    @field_validator("slo")
    @classmethod
    def _searches_need_an_slo(cls, slo: Slo | None, info: ValidationInfo) -> Slo | None:
        searching = [
            w.name
            for w in info.data.get("workloads") or []
            if getattr(w, "load", None) is not None and w.load.search
        ]
        if searching and slo is None:
            raise ValueError(
                f"workloads {searching} search for the max rate under the slo, "
                "but the plan has no slo"
            )
        return slo

    @field_validator("estimates")
    @classmethod
    def _known_speedups(cls, estimates: Estimates, info: ValidationInfo) -> Estimates:
        methods = info.data.get("methods") or []
        names = [m.name for m in methods]
        grouped = families.family_members(methods)
        unknown = sorted(set(estimates.speedup) - set(names) - set(grouped))
        if names and unknown:
            raise ValueError(f"speedup names unknown methods {unknown}; the plan has {names}")
        speedup = families.per_member(estimates.speedup, grouped)
        return estimates.model_copy(update={"speedup": speedup})

    def all_phases(self) -> list[Phase]:
        """The plan's phases, or one per tp with every method that runs at that tp."""
        if self.phases:
            return list(self.phases)
        return [
            Phase(
                name=f"tp{tp}",
                tp=tp,
                methods=[m.name for m in self.methods if tp in (m.tp or self.tp)],
            )
            for tp in self.all_tps()
        ]

    def search_of(self, phase: Phase) -> Search | None:
        """How the phase races its methods: its own `search`, else the plan's; None: every
        method runs in every round."""
        return phase.search or self.search

    def rounds_of(self, phase: Phase, repeat: int | None = None) -> int:
        """The most rounds the phase runs: a race's max_rounds, else `repeat` (the plan's by
        default)."""
        search = self.search_of(phase)
        return search.max_rounds if search else repeat or self.repeat

    def workloads_of(self, config: ServiceConfig) -> list[Workload]:
        """The workloads a service runs, in plan order."""
        return [
            w
            for w in self.workloads
            if config.method.runs(w.name)
            and (config.workloads is None or w.name in config.workloads)
        ]

    def phase_configs(self, phase: Phase, methods: list[str]) -> list[ServiceConfig]:
        """The services of a phase for the given methods, baseline first; the A/A control
        (plan order: last) wherever the baseline runs (docs/aa-control.md says why). A run
        starts them in its own order (collect.scheduling.order)."""
        chosen = {self.baseline, aa_control_name(self.baseline), *methods}
        ordered = sorted(self.methods, key=lambda m: m.name != self.baseline)
        return [
            ServiceConfig(
                method=m,
                tp=phase.tp,
                engine=self.engine,
                phase=phase.name,
                workloads=tuple(phase.workloads) if phase.workloads else None,
            )
            for m in ordered
            if m.name in chosen
        ]

    def configs(self) -> list[ServiceConfig]:
        """Services of every phase whose methods are known before the campaign runs."""
        return [
            c
            for p in self.all_phases()
            if not isinstance(p.methods, BestOf)
            for c in self.phase_configs(p, p.methods or [m.name for m in self.methods])
        ]

    def sha256(self) -> str:
        """Hash of what is measured: the plan's fields that differ from their defaults (so
        that a field added to specsweep with a default leaves existing plans' campaign_id,
        and resume, alone), without `estimates`, `gpu_hour_usd`, `slo`, `repeat`, `search` and
        `cluster` (assumed speeds, a price, latency objectives, more runs, which of them a race
        starts, and where they run change no measurement; a race's starts are the grid's
        rounds, cut short), nor the methods' `family` and `params` (labels of what the args already
        say: a family written as a grid hashes as the same methods written one by one)."""
        exclude: dict[str, Any] = {
            "estimates": True,
            "gpu_hour_usd": True,
            "slo": True,
            "repeat": True,
            "search": True,
            "cluster": True,
            "methods": {"__all__": {"family", "params"}},
            "phases": {"__all__": {"search"}},
        }
        text = self.model_dump_json(exclude_defaults=True, exclude=exclude)
        return hashlib.sha256(text.encode()).hexdigest()

    def campaign_id(self) -> str:
        return f"{self.name}-{self.sha256()[:12]}"


def _check_tp(tp: list[int], engine: Engine | None) -> list[int]:
    check_positive(tp)
    if engine is not None and engine.max_tp is not None and any(t > engine.max_tp for t in tp):
        raise ValueError(f"{engine.kind} services run with tp up to {engine.max_tp}, got {tp}")
    return tp
