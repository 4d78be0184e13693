"""The order in which a round starts a phase's configurations: seeded, counterbalanced.

Service starts are the replicate of a campaign (stats/starts.py): a restart moves speed more
than prompts do, and conditions drift along a campaign (a host warms up, a neighbour comes
and goes). A fixed order (baseline first, every method after it, the same in every round)
turns drift into a bias that no number of rounds can see: a method started third after the
baseline is always measured three starts later. So each round starts every configuration of a
phase once, in this order:

- odd rounds (1, 3, 5, ...): a permutation of the configurations drawn from a seeded random
  generator (seed: the campaign id, the phase and the pair of rounds), so a rerun or a resume
  of the same campaign gets the same order, and another campaign another one;
- even rounds: the previous round's order reversed (a fold-over design: ABCD then DCBA).

In every pair of rounds each configuration's mean position is the same, (C - 1) / 2, so a
linear drift cancels exactly from every paired comparison's mean over the pair; with an odd
number of rounds the last one is a fresh random order (its drift has mean 0 over the draws and
is estimated and removed by the analysis: stats.starts). The baseline is in every round, so
its own starts give the start-to-start spread that the A/A control used to measure.
"""

from __future__ import annotations

import random
from collections.abc import Sequence


def round_order(names: Sequence[str], seed: str, run: int) -> list[str]:
    """`names` (a phase's methods) in the order round `run` (1, 2, ...) starts them."""
    order = sorted(names)
    random.Random(f"{seed}/pair{(run + 1) // 2}").shuffle(order)
    return order if run % 2 == 1 else order[::-1]


def phase_seed(campaign_id: str, phase: str) -> str:
    """The seed of a phase's rounds: one campaign's order is its own, stable on resume."""
    return f"{campaign_id}/{phase}"
