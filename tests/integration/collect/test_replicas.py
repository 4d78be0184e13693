"""Replicas: which configurations are split and how (hand-built estimates), the scheduler on
several hosts, the CT200 plan simulated with replicas, and the runner starting replica jobs
(services.replica) with a broken server binary.

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/collect/test_replicas.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import duckdb
import pytest
import yaml

from specsweep.collect.plan.file import load_plan, parse_plan
from specsweep.collect.run import runner
from specsweep.collect.scheduling.estimate import Estimator
from specsweep.collect.scheduling.replicas import Candidate, replica_of, split
from specsweep.collect.scheduling.schedule import makespan
from specsweep.collect.scheduling.simulation import simulate_plan
from tests.support.collect_cli import collect_argv, llama_engine, run_here
from tests.unit.collect.test_replicas import REPO, _plan  # noqa: F401


def test_ct200_simulated_with_replicas() -> None:
    plan = load_plan(REPO / "plans/ct200-qwen36.yaml")
    est = Estimator(plan)
    plain = simulate_plan(plan, est, seed=None, replicas=False, rounds=1)
    sim = simulate_plan(plan, est, seed=None, rounds=1)
    packed = makespan(sim.packed)
    assert packed < makespan(plain.packed)
    assert any(replica_of(k) > 1 for k in sim.configs)
    # round 1 within 1.05x of what the dependencies allow (TP4 picks wait for all of TP1,
    # TP8 runs alone); the area bound itself is out of reach: its ratio stays above 1.1
    assert packed <= 1.05 * sim.dependency_bound
    assert packed / sim.bound > 1.1
    two = simulate_plan(plan, est, seed=None, hosts=2, rounds=1)
    assert makespan(two.packed) < 0.6 * packed
    assert makespan(two.packed) <= 1.1 * two.dependency_bound
    # the plan's 3 rounds: later rounds queue the picks at once, and the rounds' order costs
    # a few percent against longest-first (docs/planning.md 'Packing')
    every = simulate_plan(plan, est, seed=None)
    assert makespan(every.packed) <= 1.06 * every.dependency_bound


def test_simulate_prints_each_host_count() -> None:
    done = subprocess.run(
        collect_argv("simulate", "plans/ct200-qwen36.yaml", "--hosts", "1,2,4"),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith("    ")]
    assert [r[0] for r in rows] == ["hosts", "1", "2", "4"] and rows[2][1] == "16"
    bad = subprocess.run(
        collect_argv("simulate", "plans/ct200-qwen36.yaml", "--hosts", "0,x"),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2


@pytest.mark.parametrize("replicas", [True, False])
def test_the_runner_starts_replicas_on_gpus_of_their_own(tmp_path: Path, replicas: bool) -> None:
    text, db = _plan(tmp_path, replicas), tmp_path / "r.duckdb"
    plan = parse_plan(text)
    est = Estimator(plan)
    configs = plan.phase_configs(plan.all_phases()[0], ["autoregressive", "ngram"])
    batch = [Candidate(f"tp1:{c.config_id}", c, tuple(plan.workloads_of(c)), 1) for c in configs]
    shares = split(est, batch, usable=4)[batch[0].key]
    if replicas:  # whole workloads, disjoint, together the configuration's
        assert sorted(w.name for r in shares for w in r.workloads) == ["w0", "w1", "w2", "w3"]
        assert len(shares) == 4
    runner.run(plan, text, db, tmp_path / "logs", show_progress=False)
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT method, config_id, replica, gpus FROM services ORDER BY method, replica"
        ).fetchall()
    ar = [r for r in rows if r[0] == "autoregressive"]
    assert len({r[1] for r in ar}) == 1  # one configuration
    # each replica is a service start of its own (same config_id), with its GPUs recorded
    assert sorted({r[2] for r in ar}) == ([1, 2, 3, 4] if replicas else [1])
    assert all(r[3] for r in rows)


def test_replicas_of_a_real_server_share_the_workloads(
    tmp_path: Path, llama_server: str, smollm_model: str
) -> None:
    text = yaml.safe_dump(
        {
            "name": "replicas-live",
            "repeat": 1,  # one round: this test is not about rounds
            "host": {"kind": "local", "gpus": [0, 1]},
            "engine": llama_engine(
                llama_server, smollm_model, ["-t", "1", "-c", "1024", "-np", "1"]
            ),
            "methods": [{"name": "autoregressive"}],
            "warmup_requests": 1,
            # assumed 750 s a request (warm-up included): four replicas, one workload each, two
            # at a time, pack in less than two
            "estimates": {"startup_s": [1, 1], "decode_tps": {1: 0.004}},
            "workloads": [
                {
                    "name": f"w{i}",
                    "prompts": {
                        "kind": "inline",
                        "texts": ["Say hi.", "Say yes.", "Say no.", "Count to three."],
                    },
                    "max_tokens": [4],
                }
                for i in range(4)
            ],
        }
    )
    db = run_here(text, tmp_path)
    with duckdb.connect(str(db), read_only=True) as con:
        services = con.execute(
            "SELECT service_id, config_id, replica, gpus, requested_at, "
            "stopped_at FROM services ORDER BY replica"
        ).fetchall()
        units = con.execute(
            "SELECT u.workload, s.replica FROM units u JOIN services s "
            "USING (service_id) WHERE u.complete ORDER BY 1"
        ).fetchall()
        status = con.execute("SELECT status FROM campaigns").fetchone()[0]
    assert [s[2] for s in services] == [1, 2, 3, 4] and len({s[1] for s in services}) == 1
    # whole workloads, each in one replica; together the configuration's four
    assert sorted(w for w, _ in units) == ["w0", "w1", "w2", "w3"]
    assert sorted(r for _, r in units) == [1, 2, 3, 4]
    for a in services:  # replicas that ran at the same time had GPUs of their own
        for b in services:
            if a < b and a[4] < b[5] and b[4] < a[5]:
                assert a[3] != b[3]
    assert status == "complete"
    run_here(text, tmp_path)
    with duckdb.connect(str(db), read_only=True) as con:  # resume: nothing left to start
        assert con.execute("SELECT count(*) FROM services").fetchone() == (4,)
