"""Replayed agentic histories: the baseline's recorded replies as every other method's script.

An agentic workload with `history: replay` (collect.plan.model.AgenticWorkload) sends, at
turn k of session `rep`, the plan's messages of turns 0..k with the BASELINE's replies of
turns 0..k-1 as the assistant messages, so that every method's turn-k prompt is the
baseline's and turns pair across methods (docs/agentic-pairing.md). The replies are the
baseline's `requests.output_text` of the same (campaign, tp, workload, max_tokens,
concurrency, run, rep), in a unit that landed complete: a complete unit is never measured
again, so the script cannot change after a method has replayed it.

Rounds (plan `repeat`): every round replays the FIRST round's replies (SOURCE_RUN), the
baseline's own included from round 2 on, so that a session's turn-k prompt is the same in
every round and for every method, as the crossing of rounds with prompts needs
(stats/paired.py), and so that only round 1 has an order to keep: in later rounds the
baseline starts wherever the counterbalanced order puts it (collect.scheduling.order), since the
replies it would have to produce first are already there.

In round 1 the baseline must therefore have run the session first: `waits_for` gives the
runner the baseline's jobs a method's job waits for; `script` raises `ReplayMissing`, naming
the workload and the sessions, when the replies are not there (the baseline failed, was left
out with --only, or ran on another node of a Ray cluster), never falling back to the
method's own replies.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from specsweep.collect.plan.model import AgenticWorkload, Plan, ServiceConfig, Workload
from specsweep.schema.store import Store

# the baseline's turns of one window's sessions, in a unit that landed complete
BASELINE_TURNS = """
SELECT r.rep, r.turn, r.ok, r.output_text
FROM requests AS r
JOIN units AS u USING (campaign_id, config_id, workload, run)
WHERE r.campaign_id = ? AND r.method = ? AND r.tp = ? AND r.workload = ? AND r.max_tokens = ?
  AND r.concurrency = ? AND r.run = ? AND r.session_id IS NOT NULL AND NOT r.is_warmup
  AND u.complete
ORDER BY r.rep, r.turn
"""


SOURCE_RUN = 1  # the round whose baseline replies every round replays


class ReplayMissing(RuntimeError):
    """The baseline's replies a replayed session needs are not in the store."""


def replays(w: Workload) -> bool:
    return isinstance(w, AgenticWorkload) and w.history == "replay"


def script(
    store: Store,
    campaign_id: str,
    baseline: str,
    tp: int,
    run: int,
    w: AgenticWorkload,
    max_tokens: int,
    concurrency: int,
) -> dict[int, list[str]]:
    """rep -> the baseline's replies in round `run` (SOURCE_RUN for every round: the module
    docstring) of turns 0, 1, ... of that session, up to its first failed or missing turn
    (where the baseline's own session stopped). ReplayMissing when a session has no baseline
    turn at all."""
    rows = store.execute(
        BASELINE_TURNS, [campaign_id, baseline, tp, w.name, max_tokens, concurrency, run]
    )
    found = replies(rows)
    missing = [rep for rep in range(w.repetitions) if rep not in found]
    if missing:
        sessions = ", ".join(f"s{rep}" for rep in missing)
        raise ReplayMissing(
            f"workload {w.name!r} (history: replay), session(s) {sessions} of max_tokens "
            f"{max_tokens}, concurrency {concurrency}, run {run}: the baseline {baseline!r} "
            f"(tp {tp}) has no recorded replies to replay; it runs first, so it failed or was "
            "left out (--only)"
        )
    return found


def replies(rows: Iterable[Sequence[Any]]) -> dict[int, list[str]]:
    """(rep, turn, ok, output_text) rows, ordered by rep then turn -> rep -> the texts of
    its ok turns 0, 1, ... in order, cut at the first turn that failed or is missing (a rep
    whose turn 0 failed maps to [])."""
    out: dict[int, list[str]] = {}
    for rep, turn, ok, text in rows:
        texts = out.setdefault(rep, [])
        if ok and turn == len(texts):  # after a failed or missing turn, none is next again
            texts.append(text)
    return out


def waits_for(
    plan: Plan,
    config: ServiceConfig,
    workloads: Iterable[Workload],
    jobs: Mapping[str, tuple[Any, ServiceConfig, list[Workload]]],
    run: int = SOURCE_RUN,
) -> frozenset[str]:
    """Keys of the queued jobs of the plan's baseline (same tp) that run a replayed workload
    this job runs: in the round that records the replies (SOURCE_RUN), a method's job starts
    after them (the `after` of collect.scheduling.schedule: serial or packed). The baseline's
    own job, and every job of a later round, waits for nothing."""
    baseline = plan.baseline
    names = {w.name for w in workloads if replays(w)}
    if config.method.name == baseline or not names or run != SOURCE_RUN:
        return frozenset()
    return frozenset(
        key
        for key, (_, other, theirs) in jobs.items()
        if other.method.name == baseline
        and other.tp == config.tp
        and names & {w.name for w in theirs}
    )
