"""What `check` and `simulate` print: makespans, bounds, where the figures came from, the
packed order, host counts, and the device time of the plan's rounds against one start per
configuration with what the rounds buy."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from specsweep.collect.plan.load import TraceWorkload
from specsweep.collect.plan.model import Plan, RequestsWorkload, ServiceConfig, Workload
from specsweep.collect.plan.workloads import request_count
from specsweep.collect.scheduling.estimate import Estimator, Measured, load_measured
from specsweep.collect.scheduling.replicas import replica_of
from specsweep.collect.scheduling.schedule import Slot, makespan
from specsweep.collect.scheduling.simulation.jobs import Simulation, simulate_plan
from specsweep.writing import file_fault


def measured_from(db: Path | None, plan: Plan) -> Measured:
    """The store's figures for the plan, or none when no results file is given or it cannot
    be read (`unreadable` says why: the estimate then stands on the plan's speeds)."""
    if db is None:
        return Measured()
    if not db.exists():
        raise FileNotFoundError(f"results file {db} does not exist")
    from specsweep.schema.store import Store

    try:
        with Store(db) as store:
            return load_measured(store, plan)
    except Exception as exc:
        why = file_fault(exc)
        if why is None:
            raise
        return Measured(unreadable=why)


def basis(db: Path | None, m: Measured) -> str:
    """Where the estimate's figures come from, in words."""
    if db is None:
        return "assumed (plan)"
    if m.unreadable:
        return f"assumed (plan): {m.unreadable}"
    if not m.services:
        return f"assumed (plan): {db} has no earlier start of these configurations on {m.host}"
    build = f"engine build {m.build}" if m.build else "engine build not recorded"
    return (f"measured in {db} on {m.host}, {build} ({m.services} earlier starts) "
            "where it has them, else assumed")  # fmt: skip


def sources(est: Estimator, configs: Iterable[ServiceConfig]) -> Counter[str]:
    """Where the decode speed of each measured window comes from."""
    return Counter(
        est.decode_tps(c.method.name, c.tp, w.name, conc).source
        for c in configs
        for w in est.plan.workloads_of(c)
        for _ in w.max_tokens
        for conc in w.concurrency
    )


def duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m {seconds % 60:02d}s"


def clock(seconds: float) -> str:
    seconds = round(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def gpu_list(gpus: Iterable[int]) -> str:
    """0,1,2,3 -> 0-3; 1,3 -> 1,3; none -> cpu."""
    runs: list[list[int]] = []
    for g in sorted(gpus):
        if runs and g == runs[-1][-1] + 1:
            runs[-1].append(g)
        else:
            runs.append([g])
    return (
        ",".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ",".join(map(str, r)) for r in runs) or "cpu"
    )


def summary_lines(sim: Simulation, est: Estimator) -> list[str]:
    """Makespans, bounds and where the figures came from (for `check` and `simulate`)."""
    first = {k.partition("#")[0]: c for k, (_, c) in sim.configs.items() if sim.round_of[k] == 1}
    configs = list(first.values())
    got = sources(est, configs)
    serial, packed = makespan(sim.serial), makespan(sim.packed)
    lines = [
        "decode speeds per window: "
        + ", ".join(f"{n} {source}" for source, n in sorted(got.items(), key=lambda kv: -kv[1]))
    ]
    timed = [
        (c.method.name, c.tp, w.name) in est.measured.unit_s
        and est.measured.unit_s[(c.method.name, c.tp, w.name)][1] == request_count(w)
        for c in configs
        for w in est.plan.workloads_of(c)
    ]
    if any(timed):
        lines.append(f"workloads timed whole by an earlier start: {sum(timed)} of {len(timed)}")
    measured_starts = sum((c.method.name, c.tp) in est.measured.startup_s for c in configs)
    low, high = est.assume.startup_range()
    lines.append(
        f"start-ups: {measured_starts} of {len(configs)} measured, the others "
        f"assumed {low:g}-{high:g} s"
    )
    rounds = len(sim.serial_rounds)
    if rounds > 1:
        lines.append(f"{rounds} rounds, one after another, each starting every configuration once")
    lines.append(f"serial order (one service at a time): {duration(serial)}")
    if not sim.gpus:
        lines.append("a CPU host runs one service at a time: no packed order")
        return lines
    plural = "s" if len(sim.reserved) > 1 else ""
    held = f", GPU{plural} {gpu_list(sim.reserved)} only for alone phases" if sim.reserved else ""
    hosts = f"{sim.hosts} hosts, each with " if sim.hosts > 1 else ""
    lines.append(f"packed order on {hosts}GPUs {gpu_list(sim.gpus)}{held}: {duration(packed)}")
    over = f", shared by {sim.hosts} hosts" if sim.hosts > 1 else ""
    lines.append(
        f"lower bound {duration(sim.bound)} (alone jobs back to back + the other "
        f"jobs' GPU-seconds / {len(sim.gpus) - len(sim.reserved)} unreserved GPUs"
        f"{over}); packed / lower bound = {packed / sim.bound:.2f}"
    )
    dep = sim.dependency_bound
    lines.append(
        f"dependency-aware lower bound {duration(dep)} (also sees best_of waits and "
        f"wide jobs that cannot run side by side); packed / it = {packed / dep:.2f}"
    )
    return lines


def gantt_lines(sim: Simulation) -> list[str]:
    """The packed order as a table: job (replica i >= 2 as method#i), host, GPUs, start, end;
    with several rounds, a line `round r of R` before each round's rows."""
    slots = sorted(sim.packed, key=lambda s: (sim.round_of[s.job.key], s.start, s.gpus))
    lines = _table(sim, slots)
    rounds = len(sim.packed_rounds)
    if rounds == 1:
        return lines
    out, seen = [lines[0]], 0
    for slot, line in zip(slots, lines[1:], strict=True):
        if sim.round_of[slot.job.key] != seen:
            seen = sim.round_of[slot.job.key]
            out.append(f"round {seen} of {rounds}")
        out.append(line)
    return out


def _table(sim: Simulation, slots: list[Slot]) -> list[str]:
    """The header and one aligned row per slot (gantt_lines)."""
    rows = [("phase", "method", "tp", "host", "GPUs", "start", "end")]
    for slot in slots:
        phase, config = sim.configs[slot.job.key]
        i = replica_of(slot.job.key)
        host = slot.gpus[0] // sim.stride if slot.gpus and sim.stride else 0
        local = [g - host * sim.stride for g in slot.gpus]
        rows.append(
            (
                phase.name,
                config.method.name + (f"#{i}" if i > 1 else ""),
                str(config.tp),
                str(host + 1),
                gpu_list(local),
                clock(slot.start),
                clock(slot.end),
            )
        )
    if sim.hosts == 1:
        rows = [row[:3] + row[4:] for row in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def hosts_lines(plan: Plan, est: Estimator, seed: int | None, counts: list[int]) -> list[str]:
    """Packed makespan on each host count (copies of the plan's host), with replicas and
    without, beside its area bound and dependency-aware bound."""
    rows = [
        (
            "hosts",
            "GPUs",
            "packed",
            "no replicas",
            "replicas",
            "area bound",
            "packed/area",
            "dependency bound",
            "packed/dep",
        )
    ]
    for n in counts:
        sim = simulate_plan(plan, est, seed, hosts=n)
        plain = makespan(simulate_plan(plan, est, seed, hosts=n, replicas=False).packed)
        packed, area, dep = makespan(sim.packed), sim.bound, sim.dependency_bound
        extra = sum(replica_of(k) > 1 for k in sim.configs)
        rows.append(
            (
                str(n),
                str(n * len(sim.gpus)),
                duration(packed),
                duration(plain),
                f"+{extra}",
                duration(area),
                f"{packed / area:.3f}",
                duration(dep),
                f"{packed / dep:.3f}",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def device_time_lines(plan: Plan, est: Estimator, sim: Simulation) -> list[str]:
    """The device time of the plan's rounds against one start per configuration (repeat 1;
    a plan of repeat 1: against the default's rounds), in the order the runner takes
    (packed with host.pack on GPUs, else serial), as a range: every start-up not measured
    at the low, then the high end of estimates.startup_s; then what the rounds buy."""
    rounds = plan.repeat if plan.repeat > 1 else DEFAULT_ROUNDS
    low, high = est.assume.startup_range()
    times = [round_times(plan, est, rounds, startup) for startup in sorted({low, high})]
    one = span([t[0] for t in times])
    every = span([sum(t) for t in times])
    ratio = sum(times[-1]) / times[-1][0] if times[-1][0] else float(rounds)
    packed = bool(sim.gpus) and plan.host.pack
    how = f"packed on GPUs {gpu_list(sim.gpus)}" if packed else "one service at a time"
    head = f"device time ({how}; start-ups not measured at {low:g}-{high:g} s):"
    if plan.repeat == 1:
        text = f"{head} repeat 1, one start per configuration: {one}; the default {rounds} rounds"
        return [f"{text}: {every} ({ratio:.1f}x)", rounds_buy(plan, sim), *race_lines(plan, times)]
    return [
        f"{head} {rounds} rounds {every}, against {one} for one start per configuration "
        f"(repeat 1): {ratio:.1f}x",
        rounds_buy(plan, sim),
        *race_lines(plan, times),
    ]


def race_lines(plan: Plan, times: list[list[float]]) -> list[str]:
    """A raced plan's device time as a range against the grid's `repeat` rounds, a round
    costing what one round of every configuration does (`times`: each start-up assumption's
    round makespans): from every level decided after `first_rounds` rounds to nothing decided
    by `max_rounds`. Where in the range it ends depends on the arms' gaps against the start
    spread (docs/race.md: about 2 (2.5 sd / within)^2 rounds), which no plan knows. Counted
    as if every phase raced by the first raced phase's rule; the grid phases' own rounds are
    in the line above."""
    raced = [(p, s) for p in plan.all_phases() if (s := plan.search_of(p)) is not None]
    if not raced:
        return []
    phase, rule = raced[0]
    per_round = [sum(t) / len(t) for t in times if t]
    low, high = min(per_round) * rule.first_rounds, max(per_round) * rule.max_rounds
    grid = span([r * plan.repeat for r in per_round])
    names = ", ".join(p.name for p, _ in raced)
    share = f"{rule.first_rounds / plan.repeat:.2f}x-{rule.max_rounds / plan.repeat:.2f}x"
    return [
        f"race (phase {names}: within {rule.within:.0%}, confidence {rule.confidence:.0%}, "
        f"{rule.first_rounds}-{rule.max_rounds} rounds): {duration(low)}-{duration(high)}, "
        f"against {grid} for the grid's {plan.repeat} rounds ({share}); it ends early when "
        f"the arms' gaps are wide against the start-to-start spread (docs/race.md)"
    ]


DEFAULT_ROUNDS: int = Plan.model_fields["repeat"].default


def round_times(plan: Plan, est: Estimator, rounds: int, startup_s: float) -> list[float]:
    """Each round's makespan in the runner's order, every start-up not measured startup_s."""
    sim = simulate_plan(plan, est, seed=None, rounds=rounds, startup_s=startup_s)
    packed = bool(sim.gpus) and plan.host.pack
    return [makespan(r) for r in (sim.packed_rounds if packed else sim.serial_rounds)]


def span(values: list[float]) -> str:
    """'8m 13s-8m 41s', or one duration where the range is one."""
    low, high = duration(min(values)), duration(max(values))
    return low if low == high else f"{low}-{high}"


def rounds_buy(plan: Plan, sim: Simulation) -> str:
    """What the plan's rounds buy, in one line: intervals that carry the start-to-start
    variance, and the fewest independent start contrasts it rests on in any stratum
    (stats.starts: (configurations - 1) x (rounds - 1)); with 1 round, no interval."""
    from specsweep.stats.starts import MIN_CONTRASTS

    rounds = plan.repeat
    if rounds == 1:
        return (
            "repeat 1 buys point estimates only: one start per configuration, so no interval "
            "is printed (2 or more rounds give intervals that carry the start-to-start variance)"
        )
    sizes = {k: len(v) for k, v in strata(plan, sim).items() if len(v) > 1}
    if not sizes:
        return (
            f"what {rounds} rounds buy: nothing to compare (one configuration at each tp and load)"
        )
    where = min(sizes, key=lambda k: (sizes[k], k))
    configs = sizes[where]
    contrasts = (configs - 1) * (rounds - 1)
    text = (
        f"what {rounds} rounds buy: intervals that carry the start-to-start variance, pooled "
        "per tp and load from (configurations - 1) x (rounds - 1) independent start "
        f"contrasts (fewest: {contrasts}, {where} with {configs} configurations)"
    )
    if contrasts < MIN_CONTRASTS:
        text += f"; below {MIN_CONTRASTS} there is no interval: ask for more rounds"
    return text + "; repeat 1 prints none"


def strata(plan: Plan, sim: Simulation) -> dict[str, set[str]]:
    """Round 1's configurations by the stratum the start variance is pooled in (analyze
    .starts: tp and load level): 'tp 1, concurrency 4' -> config_ids."""
    out: dict[str, set[str]] = {}
    for key, (_, config) in sim.configs.items():
        if sim.round_of[key] > 1:
            continue
        for w in plan.workloads_of(config):
            for level in load_levels(w):
                out.setdefault(f"tp {config.tp}, {level}", set()).add(config.config_id)
    return out


def load_levels(w: Workload) -> list[str]:
    """A workload's load levels: its concurrencies, an open-loop load's rates."""
    if isinstance(w, TraceWorkload):
        return ["trace"]
    if isinstance(w, RequestsWorkload) and w.load is not None:
        return [f"rate {r:g}" if r is not None else "ramp" for r in w.load.windows()]
    return [f"concurrency {c}" for c in w.concurrency]


def report_lines(
    plan: Plan, db: Path | None, seed: int | None, gantt: bool, hosts: list[int] | None = None
) -> list[str]:
    """`check`'s time estimate (seed None: start-ups at their midpoint) or, with the
    packed order's table, `simulate`'s report; with `hosts`, the packed order on each of
    those host counts too (the table for the first)."""
    est = Estimator(plan, measured_from(db, plan))
    counts = hosts or [1]
    sim = simulate_plan(plan, est, seed, hosts=counts[0])
    head = [f"time estimate, speeds {basis(db, est.measured)}:"]
    if est.measured.elsewhere:
        head.append(f"  {est.measured.elsewhere} earlier start(s) of these configurations on "
                    "other hosts or engine builds: not used")  # fmt: skip
    body = summary_lines(sim, est) + device_time_lines(plan, est, sim)
    if hosts and not sim.gpus:
        body.append("--hosts: the plan's host has no GPUs; several CPU hosts are not simulated")
    if hosts and sim.gpus:
        body += [
            f"on {', '.join(map(str, counts))} host(s) of GPUs {gpu_list(sim.gpus)} "
            "each (a job never spans hosts):",
            *(f"  {line}" for line in hosts_lines(plan, est, seed, counts)),
        ]
    where = f" on {counts[0]} hosts" if counts[0] > 1 else ""
    table = [f"packed order (simulated{where}):", *gantt_lines(sim)] if gantt and sim.gpus else []
    return head + [f"  {line}" for line in body] + table
