"""The CT200 campaign's shape on 8 logical GPUs of this CPU machine (plans/dry-ct200-shape.yaml).

A real campaign: `specsweep run` in a subprocess, llama-server serving SmolLM2 on the
CPU behind the vLLM adapter (tests/bench/ct200/dry_vllm.py), a blocking service whose start and
stop are real commands (tests/bench/ct200/gpu0_blocker.py). What it checks, from the `services`
and `requests` rows and the two timestamp logs the helpers write:

- no TP1 or TP4 service got GPU 0, and every service given GPU 0 started after the blocker
  stopped and stopped before it started again (the fake vllm also saw the blocker dead);
- the blocker was stopped once, before the first TP8 service, and started again after the
  last TP8 service stopped;
- TP4 and TP8 ran the baseline and, of each method family, exactly the TP1 method with the
  highest measured paired speedup (`best_of: tp1, top: 1, per: family`; the geometric mean
  over prompts of the decode-speed ratio, computed here in SQL, not by
  collect.scheduling.ranking).

It prints the real makespan beside `simulate`'s prediction for the same plan (not asserted:
the machine is shared). docs/gpu8-ct200.md holds a run's numbers.

The Ray path (issue 28's "one node per GPU set"): the same plan with `cluster: {kind: ray}` on
a local Ray cluster whose one worker node is the 8-GPU host as docs/cluster.md starts it:
GPUs 1-7 (CUDA_VISIBLE_DEVICES=1,...,7, logical here) and the custom resource
`specsweep:gpu0-service`, because GPU 0 runs the blocking service. The same checks hold, except
that on Ray the blocker is stopped and started around each TP8 configuration (each is a task
of its own), not once around the phase.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

try:
    import ray
except ImportError:  # the Ray test says why it is skipped
    ray = None

from specsweep.collect.plan.file import load_plan
from specsweep.collect.scheduling.estimate import Estimator, Measured
from specsweep.collect.scheduling.schedule import makespan
from specsweep.collect.scheduling.simulation import simulate_plan
from tests.bench.ct200.idle import idle_share
from tests.support.collect_cli import collect_run

REPO = Path(__file__).resolve().parents[3]
PLAN = REPO / "plans" / "dry-ct200-shape.yaml"
FAMILY = {"ngram": "ngram", "draft-n1": "draft", "draft-n4": "draft"}  # the plan's, by hand

# per method at tp 1: exp(mean over prompts of (mean ln decode tok/s of the method's
# requests of that prompt - the baseline's)), over the prompts both measured; one window
SCORES = """
WITH speeds AS (
    SELECT method, prompt_id, avg(ln((output_tokens - 1) / (e2e_s - ttft_s))) AS ln_tps
    FROM requests
    WHERE tp = 1 AND NOT is_warmup AND ok AND output_tokens > 1 AND e2e_s > ttft_s
    GROUP BY method, prompt_id
),
base AS (SELECT prompt_id, ln_tps FROM speeds WHERE method = 'autoregressive')
SELECT s.method, exp(avg(s.ln_tps - b.ln_tps)) AS score
FROM speeds AS s JOIN base AS b USING (prompt_id)
WHERE s.method <> 'autoregressive'
GROUP BY s.method
ORDER BY score DESC, s.method
"""


def test_idle_share_counts_gpu_seconds_in_the_span() -> None:
    # 2 GPUs over 10 s: GPU 0 busy 0-5 s, GPU 1 busy 0-10 s, a job on GPU 1 at 12-20 s
    # outside the span: 15 of 20 GPU-seconds used, a quarter idle
    busy = [((0,), 0.0, 5.0), ((1,), 0.0, 10.0), ((1,), 12.0, 20.0)]
    assert idle_share(busy, [0, 1], 0.0, 10.0) == pytest.approx(0.25)
    # over GPU 0 only: 5 of 10 s; a wide job (0-3) from 8 s counts 2 s on GPU 0 alone
    assert idle_share(busy, [0], 0.0, 10.0) == pytest.approx(0.5)
    wide = [((0, 1, 2, 3), 8.0, 11.0)]
    assert idle_share(wide, [0], 0.0, 10.0) == pytest.approx(0.8)
    assert idle_share(wide, [0, 1, 2, 3, 4, 5, 6, 7], 0.0, 10.0) == pytest.approx(1 - 8 / 80)


def _plan_copy(tmp_path: Path) -> Path:
    """The plan with its state folder in tmp_path and its helper scripts by absolute path, in
    one round (the checks below are one round's: the blocker stopped once, one pick each)."""
    text = PLAN.read_text().replace("results/dry-ct200", str(tmp_path / "state"))
    text = text.replace(" tests/bench/", f" {REPO}/tests/bench/") + "\nrepeat: 1\n"
    copy = tmp_path / "dry-ct200-shape.yaml"
    copy.write_text(text)
    return copy


def _blocker(action: str, state: Path) -> None:
    script = REPO / "tests" / "bench" / "ct200" / "gpu0_blocker.py"
    subprocess.run([sys.executable, str(script), action, str(state)], check=True)


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _run(tmp_path: Path, cluster: str = "") -> tuple[Path, list, list, tuple, float]:
    """Run the plan (with a cluster block when given) with the blocker up; return the plan
    copy, the services and TP1 scores read back, the campaign's span and the wall time."""
    plan, state, db = _plan_copy(tmp_path), tmp_path / "state", tmp_path / "dry.duckdb"
    if cluster:
        plan.write_text(plan.read_text() + cluster)
    _blocker("start", state)
    t0 = time.monotonic()
    try:
        run = subprocess.run(
            collect_run(plan, db, tmp_path / "logs"),
            cwd=REPO, capture_output=True, text=True, timeout=420,
        )  # fmt: skip
    finally:
        wall = time.monotonic() - t0
        _blocker("stop", state)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    with duckdb.connect(str(db), read_only=True) as con:
        services = con.execute(
            "SELECT method, tp, gpus, state, epoch(requested_at), epoch(stopped_at) "
            "FROM services ORDER BY requested_at"
        ).fetchall()
        scores = con.execute(SCORES).fetchall()
        span = con.execute("SELECT epoch(started_at), epoch(finished_at) FROM campaigns").fetchone()
    return plan, services, scores, span, wall


def _check(state: Path, services: list, scores: list) -> list[tuple[float, float]]:
    """The checks both paths share; returns the windows (stopped, started again) in which
    the blocker was down."""
    events = [e["event"] for e in _jsonl(state / "blocker.jsonl")]
    times = [e["t"] for e in _jsonl(state / "blocker.jsonl")]
    launches = _jsonl(state / "launches.jsonl")
    assert all(s[3] == "stopped" for s in services), services  # every service ran
    # the test's start, then (stop, start) pairs from the campaign, then the test's stop
    assert events[0] == "start" and events[-1] == "stop", events
    assert events[1:-1] == ["stop", "start"] * ((len(events) - 2) // 2), events
    down = list(zip(times[1:-1:2], times[2:-1:2], strict=True))
    on_gpu0 = [s for s in services if "0" in s[2].split(",")]
    assert on_gpu0 and all(s[1] == 8 for s in on_gpu0)
    for s in on_gpu0:  # each service on GPU 0 ran inside one window of the blocker's absence
        assert any(stop < s[4] and s[5] < start for stop, start in down), (s, down)
    assert all(not x["blocker_alive"] for x in launches if "0" in x["gpus"].split(","))
    assert all(x["blocker_alive"] for x in launches if x["tp"] < 8)

    per_family = {}
    for method, _score in scores:  # highest first: the first of each family is its best
        per_family.setdefault(FAMILY[method], method)
    for tp in (4, 8):
        ran = {s[0] for s in services if s[1] == tp}
        assert ran - {"autoregressive"} == set(per_family.values()), (tp, ran, scores)
    return down


def _print_makespans(capsys, plan, services, span, wall, scores, label="dry run") -> None:  # noqa: ANN001
    """Real makespan and GPU idle share beside simulate's (plan estimates, seed 0)."""
    sim = simulate_plan(load_plan(plan), Estimator(load_plan(plan), Measured()), seed=0)
    first, last = min(s[4] for s in services), max(s[5] for s in services)
    busy = [(tuple(map(int, s[2].split(","))), s[4], s[5]) for s in services]
    slots = [(slot.gpus, slot.start, slot.end) for slot in sim.packed]
    sim_end, gpus = makespan(sim.packed), list(range(8))
    with capsys.disabled():
        print(
            f"\n{label}: real makespan {last - first:.1f} s (first service requested -> last "
            f"stopped; campaign row {span[1] - span[0]:.1f} s, subprocess {wall:.1f} s); "
            f"simulate predicted {sim_end:.1f} s (lower bound {sim.bound:.1f} s, "
            f"dependency-aware {sim.dependency_bound:.1f} s); real / predicted = "
            f"{(last - first) / sim_end:.2f}\n"
            f"GPU idle share, GPUs 0-7: real {idle_share(busy, gpus, first, last):.1%}, "
            f"simulated {idle_share(slots, gpus, 0.0, sim_end):.1%}; GPUs 1-7: real "
            f"{idle_share(busy, gpus[1:], first, last):.1%}, simulated "
            f"{idle_share(slots, gpus[1:], 0.0, sim_end):.1%}\n"
            f"TP1 scores: {', '.join(f'{m} {s:.2f}x' for m, s in scores)}"
        )
