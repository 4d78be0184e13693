"""Simulated campaigns as collect runs them (issue 36): the coverage tests' model.

A campaign has C configurations (the baseline first in the list, then the methods), R rounds
and a set of windows (a prompt count and a concurrency each; prompts differ per window). Each
round starts every configuration once, in collect's order (collect.scheduling.order: a seeded
permutation, reversed in the next round; or, for the design before issue 36, the plan's order
in every round), and measures all of that configuration's windows on that start. ln decode
speed of a request:

    base[w, p] + ln true[c] + effect[c, w, p] + start[c, r] + drift t[c, r] + noise

- start[c, r] ~ N(0, start_sd): one draw per start, shared by every window of the start;
- t[c, r]: the start's position in the campaign's order (0, 1, ...), drift per start;
- effect: how the method's speedup varies by prompt, N(0, prompt_sd), or skewed (an
  exponential of sd prompt_sd, centred): 0 for the baseline;
- noise ~ N(0, noise) per request, `reps` requests per prompt.

The speedups of the methods over the baseline are exactly true[c] / true[0] in the
geometric mean over prompts' distribution (the effects are centred in ln).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from specsweep.collect.scheduling.order import round_order

# the default campaign's closed-loop windows: (workload, prompts, concurrency)
WINDOWS = (("rewrite", 8, 1), ("rewrite", 8, 4), ("chat", 8, 1), ("chat", 8, 4),
           ("summarize", 8, 1), ("agentic", 8, 1))  # fmt: skip


@dataclass(frozen=True)
class Design:
    """One cell of the simulation grid."""

    true: tuple[float, ...] = (1.0, 1.0, 1.0, 1.0, 1.0)  # per configuration, baseline first
    rounds: int = 3
    windows: tuple[tuple[str, int, int], ...] = WINDOWS  # (workload, prompts, concurrency)
    start_sd: float = 0.05
    drift: float = 0.0
    prompt_sd: float = 0.1
    skew: bool = False
    noise: float = 0.1
    reps: int = 2
    order: str = "counterbalanced"  # or "fixed": the plan's order in every round (before #36)
    start_sds: tuple[float, ...] | None = field(default=None)  # per configuration, if they differ

    @property
    def names(self) -> list[str]:
        return ["autoregressive", *(f"m{i}" for i in range(1, len(self.true)))]


def positions(design: Design, seed: str) -> np.ndarray:
    """t[c, r]: each start's position in the campaign's order."""
    names = design.names
    t = np.zeros((len(names), design.rounds))
    for r in range(design.rounds):
        order = round_order(names, seed, r + 1) if design.order == "counterbalanced" else names
        for pos, name in enumerate(order):
            t[names.index(name), r] = r * len(names) + pos
    return t


def campaign(
    rng: np.random.Generator,
    design: Design,
    seed: str,
    prompts: np.random.Generator | None = None,
) -> list[dict]:
    """One campaign's requests: dicts of method, run (1..R), workload, concurrency, prompt_id,
    rep, speed (decode tok/s), start (position of its service start). prompts draws the
    prompts' base speeds and the methods' effects (default rng): two campaigns given
    generators of one seed measure the same prompts, as two campaigns of one plan do."""
    prompts = prompts or rng
    names, t = design.names, positions(design, seed)
    sds = np.asarray(design.start_sds or [design.start_sd] * len(names))
    start = rng.normal(0.0, 1.0, t.shape) * sds[:, None] + design.drift * t
    rows = []
    for workload, n_prompts, concurrency in design.windows:
        base = prompts.normal(np.log(100), 0.3, n_prompts)
        if design.skew:
            effect = (
                prompts.exponential(design.prompt_sd, (len(names), n_prompts)) - design.prompt_sd
            )
        else:
            effect = prompts.normal(0.0, design.prompt_sd, (len(names), n_prompts))
        effect[0] = 0.0
        for c, name in enumerate(names):
            level = base + np.log(design.true[c]) + effect[c]
            for r in range(design.rounds):
                noise = rng.normal(0.0, design.noise, (n_prompts, design.reps))
                speed = np.exp(level[:, None] + start[c, r] + noise)
                rows += [
                    {"method": name, "run": r + 1, "workload": workload,
                     "concurrency": concurrency, "prompt_id": f"{workload}-p{p:02d}", "rep": k,
                     "speed": float(speed[p, k]), "start": float(t[c, r])}
                    for p in range(n_prompts) for k in range(design.reps)
                ]  # fmt: skip
    return rows
