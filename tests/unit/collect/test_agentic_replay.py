"""Agentic `history: replay` without a server: the plan field, the script read from the store
(complete units only; a missing session fails naming the workload and the session), and
the ordering that makes a method's job wait for the baseline's."""

from __future__ import annotations

from pathlib import Path

import pytest

from specsweep.collect.plan.file import PlanError, parse_plan
from specsweep.collect.plan.model import AgenticWorkload, Plan, ServiceConfig
from specsweep.collect.run.replay import ReplayMissing, replies, script, waits_for
from specsweep.collect.scheduling.schedule import Job, Scheduler
from specsweep.schema.store import Store

PLAN = """\
name: t
engine:
  kind: vllm
  model: m
methods:
  - name: autoregressive
  - name: ngram
    args: ["--spec-type", "ngram-simple"]
tp: [1, 2]
workloads:
  - name: plain
    prompts: {kind: inline, texts: [hello]}
    max_tokens: [8]
  - name: ag
    kind: agentic
    turns:
      - {role: user, content: write a function}
      - {role: tool, content: tests pass}
    max_tokens: [8]
    repetitions: 2
"""


def _plan(history: str | None = "replay", text: str = PLAN) -> Plan:
    extra = f"    history: {history}\n" if history else ""
    return parse_plan(text + extra, "p.yaml")


# --- the plan field -------------------------------------------------------------------------


def test_history_defaults_to_own_and_leaves_the_campaign_id_alone() -> None:
    own, replay = _plan(None), _plan("replay")
    assert own.workloads[1].history == "own" and replay.workloads[1].history == "replay"
    assert _plan("own").campaign_id() == own.campaign_id() != replay.campaign_id()


def test_a_bad_history_names_the_field_and_its_line() -> None:
    with pytest.raises(PlanError) as info:
        _plan("replays")
    line = (PLAN + "    history: replays\n").splitlines().index("    history: replays") + 1
    assert f"workloads.1.history (line {line}): Input should be 'own' or 'replay'" in str(
        info.value
    ), str(info.value)


def test_history_is_an_agentic_field_only() -> None:
    text = PLAN.replace(
        "    max_tokens: [8]\n  - name: ag",
        "    max_tokens: [8]\n    history: replay\n  - name: ag",
    )
    with pytest.raises(PlanError, match=r"history.*[Ee]xtra inputs are not permitted"):
        parse_plan(text, "p.yaml")


# --- the script -----------------------------------------------------------------------------


def test_replies_stop_at_the_first_failed_or_missing_turn() -> None:
    rows = [
        (0, 0, True, "a0"),
        (0, 1, True, "a1"),
        (0, 2, True, "a2"),
        (1, 0, True, "b0"),
        (1, 1, False, None),
        (1, 2, True, "b2"),  # failed at 1
        (2, 0, False, None),  # failed at 0
        (3, 0, True, "d0"),
        (3, 2, True, "d2"),
    ]  # turn 1 missing
    assert replies(rows) == {0: ["a0", "a1", "a2"], 1: ["b0"], 2: [], 3: ["d0"]}


def _land(
    store: Store,
    method: str,
    turns: dict[int, list[str | None]],
    complete: bool = True,
    tp: int = 1,
    run: int = 1,
) -> None:
    """Hand-built requests of one agentic window (max_tokens 8, concurrency 1) and its unit:
    turns = rep -> output texts by turn (None: the turn failed)."""
    config = f"cfg-{method}-{tp}"
    for rep, texts in turns.items():
        for turn, text in enumerate(texts):
            store.execute(
                "INSERT INTO requests (request_id, campaign_id, config_id, service_id, engine, "
                "method, tp, workload, window_id, prompt_id, max_tokens, rep, concurrency, "
                "session_id, turn, is_warmup, sent_at, start_s, ok, output_text, run, history) "
                "VALUES (?, 'c', ?, 's', 'llamacpp', ?, ?, 'ag', 'w', ?, 8, ?, 1, ?, ?, false, "
                "now(), 0, ?, ?, ?, 'own')",
                [
                    f"{config}-{run}-{rep}-{turn}",
                    config,
                    method,
                    tp,
                    f"ag/turn{turn}",
                    rep,
                    f"w/s{rep}",
                    turn,
                    text is not None,
                    text,
                    run,
                ],
            )
    store.execute(
        "INSERT INTO units VALUES ('c', ?, 'ag', 's', 1, ?, '', now(), now(), ?)",
        [config, complete, run],
    )


def _script(store: Store, **kw: object) -> dict[int, list[str]]:
    w = _plan().workloads[1]
    assert isinstance(w, AgenticWorkload)
    args = {"tp": 1, "run": 1, "max_tokens": 8, "concurrency": 1, **kw}
    return script(
        store,
        "c",
        "autoregressive",
        args["tp"],
        args["run"],
        w,
        args["max_tokens"],
        args["concurrency"],
    )


def test_the_script_is_the_baselines_replies_of_the_same_window(tmp_path: Path) -> None:
    store = Store(tmp_path / "r.duckdb")
    _land(store, "autoregressive", {0: ["a0", "a1"], 1: ["b0", None]})
    _land(store, "ngram", {0: ["n0", "n1"], 1: ["m0", "m1"]})  # another method: not read
    _land(store, "autoregressive", {0: ["x0", "x1"], 1: ["y0", "y1"]}, tp=2)  # other tp
    _land(store, "autoregressive", {0: ["r0", "r1"], 1: ["q0", "q1"]}, run=2)  # other run
    assert _script(store) == {0: ["a0", "a1"], 1: ["b0"]}
    assert _script(store, run=2) == {0: ["r0", "r1"], 1: ["q0", "q1"]}


def test_a_session_without_baseline_replies_fails_naming_workload_and_session(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "r.duckdb")
    _land(store, "autoregressive", {0: ["a0", "a1"]})  # session s1 never ran
    with pytest.raises(
        ReplayMissing,
        match=r"workload 'ag' .*session\(s\) s1 of max_tokens "
        r"8, concurrency 1, run 1.*'autoregressive'",
    ):
        _script(store)
    with pytest.raises(ReplayMissing, match=r"session\(s\) s0, s1 .*run 1"):
        _script(store, concurrency=2)  # no such baseline window at all


def test_an_incomplete_baseline_unit_is_no_script(tmp_path: Path) -> None:
    """An interrupted unit is measured again on resume: its replies would change."""
    store = Store(tmp_path / "r.duckdb")
    _land(store, "autoregressive", {0: ["a0", "a1"], 1: ["b0", "b1"]}, complete=False)
    with pytest.raises(ReplayMissing, match="s0, s1"):
        _script(store)


# --- ordering -------------------------------------------------------------------------------


def _jobs(history: str) -> tuple[Plan, dict[str, tuple[None, ServiceConfig, list]]]:
    plan = _plan(history)
    configs = {
        (m.name, tp): ServiceConfig(method=m, tp=tp, engine=plan.engine)
        for m in plan.methods
        for tp in (1, 2)
    }
    jobs = {f"tp{tp}:{m}": (None, c, list(plan.workloads)) for (m, tp), c in configs.items()}
    jobs["tp1:autoregressive#2"] = (None, configs["autoregressive", 1], [plan.workloads[0]])
    return plan, jobs


def test_a_replaying_method_waits_for_the_baselines_jobs_at_its_tp() -> None:
    plan, jobs = _jobs("replay")
    ngram = jobs["tp1:ngram"][1]
    # the baseline's replica #2 holds only the plain workload: not waited for
    assert waits_for(plan, ngram, plan.workloads, jobs) == {"tp1:autoregressive"}
    assert waits_for(plan, ngram, plan.workloads[:1], jobs) == frozenset()  # no replay there
    base = jobs["tp1:autoregressive"][1]
    assert waits_for(plan, base, plan.workloads, jobs) == frozenset()
    own, own_jobs = _jobs("own")
    assert waits_for(own, own_jobs["tp1:ngram"][1], own.workloads, own_jobs) == frozenset()


def test_packed_the_method_starts_only_once_the_baseline_finished() -> None:
    """Four free GPUs: without the wait both tp-1 jobs would start together."""
    plan, jobs = _jobs("replay")
    queued = {"tp1:autoregressive": jobs["tp1:autoregressive"]}
    s = Scheduler([0, 1, 2, 3], packed=True)
    s.add(Job("tp1:autoregressive", 1, 10.0))
    s.add(
        Job(
            "tp1:ngram",
            1,
            50.0,
            after=waits_for(plan, jobs["tp1:ngram"][1], plan.workloads, queued),
        )
    )
    assert [j.key for j, _ in s.start()] == ["tp1:autoregressive"]
    assert s.start() == []
    s.finish("tp1:autoregressive")
    assert [j.key for j, _ in s.start()] == ["tp1:ngram"]
