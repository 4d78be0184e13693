"""What `collect check` says from the plan alone: each phase's services and request counts
(`service_lines`), and the window sizing checks: a closed-loop window must hold enough requests
to keep its nominal concurrency in flight, or what is measured at "concurrency c" is a lower load.

The analysis measures what a window actually held (config_summary.effective_concurrency =
sum(e2e_s) / window span); this module warns before the run, from the plan alone.
"""

from __future__ import annotations

from math import ceil

from specsweep.collect.plan.model import AgenticWorkload, Method, Plan, RequestsWorkload
from specsweep.collect.plan.phases import BestOf
from specsweep.collect.plan.workloads import prompts, request_count
from specsweep.schema.controls import aa_control_name

MIN_REQUESTS_PER_SLOT = 4
"""A closed-loop window at concurrency c should hold at least 4 * c requests (sessions, for an
agentic workload).

Why 4. In a closed loop each of the c slots sends its next request when its last one returns.
With n requests of equal length L they run in ceil(n / c) waves, so the window spans
ceil(n / c) * L while the requests are busy n * L in total, and the mean number in flight is

    effective = n * L / (ceil(n / c) * L) = n / ceil(n / c).

For n in (m c, (m + 1) c] that is n / (m + 1) > m / (m + 1) * c, and n = m c gives c exactly,
so over every n >= k c the effective concurrency stays above k / (k + 1) of c: 1/2 for k = 1,
2/3 for k = 2, 3/4 for k = 3, 4/5 for k = 4, while the window costs time in proportion to k.
Below 4 c it can fall to about half: 9 requests at c = 4 keep 9 / 3 = 3 in flight, c + 1
requests keep (c + 1) / 2. With unequal lengths the slots refill as requests end, and Graham's
list-scheduling bound (span <= n L_mean / c + (1 - 1/c) L_max) gives, when no request is much
longer than the mean, effective >= c n / (n + c - 1) > 4/5 c for n >= 4 c as well; a single
wave (n = c) of varied lengths can fall to about half. At c = 1 the loop is always full.
So k = 4 keeps a window within 20% of its nominal concurrency at a modest cost.
"""


def effective_concurrency(n: int, c: int) -> float:
    """Mean requests in flight of n equal-length requests at concurrency c: n / ceil(n / c)."""
    return n / ceil(n / c)


def varied_concurrency(n: int, c: int) -> float:
    """The least mean in flight when lengths vary but none is longer than the mean by much
    (Graham's bound with L_max = L_mean): c n / (n + c - 1); never above
    effective_concurrency(n, c), since ceil(n / c) <= (n + c - 1) / c."""
    return c * n / (n + c - 1)


def _windows(workload: RequestsWorkload | AgenticWorkload) -> list[tuple[int | None, int, str]]:
    """(max_tokens or None when every window is alike, requests per window, what they are)."""
    reps = workload.repetitions
    if isinstance(workload, AgenticWorkload):
        return [(None, reps, "sessions (repetitions)")]
    n_prompts = len(prompts(workload.prompts))
    sizes = {
        mt: min(n_prompts, workload.prompt_limit(mt) or n_prompts) for mt in workload.max_tokens
    }
    if len(set(sizes.values())) == 1:  # one line for all max_tokens
        sizes = {None: next(iter(sizes.values()))}
    return [
        (mt, n * reps, f"requests ({n} prompts x {reps} repetitions)") for mt, n in sizes.items()
    ]


def _range(n: int, c: int) -> str:
    """'2.3 to 4.0' (varied to equal lengths), or one figure where the two agree."""
    low, high = f"{varied_concurrency(n, c):.1f}", f"{effective_concurrency(n, c):.1f}"
    return high if low == high else f"{low} (lengths varying) to {high} (equal lengths)"


def window_warnings(plan: Plan) -> list[str]:
    """One line per closed-loop workload window and concurrency level c > 1 whose window holds
    fewer than MIN_REQUESTS_PER_SLOT * c requests, naming the workload and its fields, with
    the in-flight range varied_concurrency .. effective_concurrency."""
    lines = []
    for i, workload in enumerate(plan.workloads):
        closed = isinstance(workload, AgenticWorkload) or (
            isinstance(workload, RequestsWorkload) and workload.load is None
        )
        if not closed:
            continue
        for max_tokens, n, what in _windows(workload):
            at = f", max_tokens {max_tokens}" if max_tokens is not None else ""
            for c in sorted(set(workload.concurrency)):
                if c == 1 or n >= MIN_REQUESTS_PER_SLOT * c:
                    continue
                lines.append(
                    f"workload {workload.name!r} (workloads[{i}]{at}): concurrency {c} with "
                    f"{n} {what} per window keeps about {_range(n, c)} of {c} in flight on "
                    f"average; give it at least {MIN_REQUESTS_PER_SLOT * c} "
                    f"({MIN_REQUESTS_PER_SLOT} x concurrency: raise `repetitions` or the "
                    f"prompts) or lower `concurrency`"
                )
    return lines


def service_lines(plan: Plan) -> list[str]:
    """Each phase's services and their request counts, then the plan's total (the prompt
    sets are read to count them: ResourceError when one is not fetched)."""
    per_workload = {w.name: request_count(w) for w in plan.workloads}
    total, lines = 0, []
    for phase in plan.all_phases():
        picked = phase.methods if isinstance(phase.methods, BestOf) else None
        names = phase.methods if not picked and phase.methods else [m.name for m in plan.methods]
        configs = plan.phase_configs(phase, [] if picked else names)
        each = picked and picked.per == "family"
        detail = (
            f"; plus the {picked.top} fastest {'of each family ' if each else ''}"
            f"of phase {picked.best_of}"
            if picked
            else ""
        )
        lines.append(f"phase {phase.name} (tp {phase.tp}){detail}:")
        for config in configs:
            wnames = [w.name for w in plan.workloads_of(config)]
            count = sum(per_workload[n] for n in wnames)
            chosen = _picks(plan, picked) if config.method.name == plan.baseline else 0
            total += count * (1 + chosen)  # the top N counted as the baseline's size, once
            lines.append(
                f"  {config.method.name}{_family_label(config.method)} (config "
                f"{config.config_id}): {count} requests ({', '.join(wnames)})"
            )
    rounds = f" a round, {total * plan.repeat} in its {plan.repeat} rounds"
    lines.append(
        f"plan {plan.name} is valid: campaign {plan.campaign_id()}, "
        f"about {total} measured requests{rounds if plan.repeat > 1 else ''}"
    )
    return lines


def _picks(plan: Plan, picked: BestOf | None) -> int:
    """How many methods a best_of phase runs besides its baseline, at most."""
    if picked is None:
        return 0
    if picked.per != "family":
        return picked.top
    control = aa_control_name(plan.baseline)
    others = [m for m in plan.methods if m.name not in (plan.baseline, control)]
    families = {m.family or m.name for m in others}
    return picked.top * len(families)


def _family_label(method: Method) -> str:
    """' [family ddtree: budget=8]' for a method with parameters, '' for one without."""
    if not method.params:
        return ""
    values = ", ".join(f"{p}={v}" for p, v in sorted(method.params.items()))
    return f" [family {method.family or method.name}: {values}]"
