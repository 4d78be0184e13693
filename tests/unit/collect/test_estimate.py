"""Duration estimates on hand-built plans and store rows, the ETA's correction, and the
`check` / `simulate` commands."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from specsweep.collect.plan.file import parse_plan
from specsweep.collect.run.progress import Eta
from specsweep.collect.scheduling.estimate import Estimator, agentic_prompt_tokens, load_measured
from specsweep.collect.scheduling.schedule import Job
from specsweep.schema.store import Store
from tests.support.fixtures.schema import request_row, unit_row

REPO = Path(__file__).resolve().parents[3]
PLAN = """
name: est
engine: {kind: sglang, model: /models/m, chat_template: "{{ messages }}"}
methods:
  - {name: autoregressive}
  - {name: fast, args: [--fast]}
warmup_requests: 1
estimates:
  startup_s: [60, 80]
  decode_tps: {1: 20, 4: 50}
  speedup: {fast: 2.0}
  prefill_tps: 100
  concurrency_slowdown: 0.5
workloads:
  - name: w
    prompts: {kind: inline, texts: ["A400", "B800"]}
    max_tokens: [101]
    concurrency: [1, 2]
    repetitions: 3
  - name: agent
    kind: agentic
    system: "S40"
    turns: [{role: user, content: "U160"}, {role: tool, content: "T80"}]
    max_tokens: [41]
    repetitions: 2
phases:
  - {name: tp1, tp: 1}
  - {name: tp4, tp: 4, methods: {best_of: tp1, top: 1}}
"""
for _mark in ("A400", "B800", "S40", "U160", "T80"):  # texts of known length
    PLAN = PLAN.replace(_mark, _mark[0].lower() * int(_mark[1:]))


def plan():  # noqa: ANN201 - Plan
    return parse_plan(PLAN)


def config(p, method: str = "autoregressive", tp: int = 1):  # noqa: ANN001, ANN201
    return (
        next(c for c in p.configs() if c.method.name == method and c.tp == tp)
        if tp == 1
        else p.phase_configs(p.all_phases()[1], [method])[-1]
    )


def test_assumed_durations_by_hand() -> None:
    p = plan()
    est = Estimator(p)
    ar = config(p)
    # prompts 100 and 200 tokens (chars / 4): mean 150 -> TTFT 1.5 s at 100 tok/s prefill
    # c=1: 6 requests in 6 rounds of 1.5 + 100/20 = 6.5 s -> 39 s
    # c=2: decode 20 / (1 + 0.5) tok/s, 3 rounds of 1.5 + 100 / (20/1.5) = 9.0 s -> 27 s
    w, agent = p.workloads
    assert est.workload_s(ar, w) == pytest.approx(39 + 27)
    # agentic: turn prompts 10+40 = 50 and 50 + 40 (reply) + 20 = 110 tokens
    assert agentic_prompt_tokens(agent, 40) == [50, 110]
    # 2 sessions one after another; the reply in turn 2's history is 41 tokens:
    # (50/100 + 40/20) + (111/100 + 40/20) = 5.61 s each
    assert est.workload_s(ar, agent) == pytest.approx(11.22)
    # config: start-up midpoint 70 + one warm-up (first prompt mean, c=1) 6.5 + workloads
    assert est.config_s(ar) == pytest.approx(70 + 6.5 + 66 + 11.22)
    assert est.fixed_s(ar) == pytest.approx(76.5)
    # a method's assumed speed is the baseline's times its speedup; tp 8 takes tp 4's
    assert est.decode_tps("fast", 1, "w", 1).value == 40
    assert est.decode_tps("autoregressive", 8, "w", 1).value == 50


def _service_row(config_id: str, startup_s: float | None = None, **changes: object) -> dict:
    return {
        "service_id": f"svc-{config_id}",
        "campaign_id": "camp",
        "config_id": config_id,
        "engine": "sglang",
        "method": "autoregressive",
        "tp": 1,
        "gpus": "1",
        "host": "localhost",
        "launch_command": "x",
        "requested_at": datetime(2024, 5, 1),
        "ready_at": datetime(2024, 5, 1),
        "stopped_at": None,
        "startup_s": startup_s,
        "state": "stopped",
        "error": None,
        "log_tail": None,
        "transport": "direct",
    } | changes


def _store(tmp_path: Path, rows: list[dict], services: list[dict] = (), **more: list) -> Store:
    store = Store(tmp_path / "r.duckdb")
    store.append("requests", rows)
    store.append("services", list(services))
    for table, extra in more.items():
        store.append(table, extra)
    return store


def _row(
    i: int,
    config_id: str,
    method: str,
    tp: int,
    workload: str,
    c: int,
    decode_tps: float,
    output_tokens: int = 101,
    ttft: float = 0.5,
) -> dict:
    e2e = ttft + (output_tokens - 1) / decode_tps
    return request_row(
        i,
        config_id=config_id,
        service_id=f"svc-{config_id}",
        method=method,
        tp=tp,
        workload=workload,
        concurrency=c,
        ttft_s=ttft,
        e2e_s=e2e,
        output_tokens=output_tokens,
        max_tokens=101,
        chunk_times_s=[ttft, e2e],
        chunk_tokens=None,
    )


def test_measured_figures_and_the_nearest_fallbacks(tmp_path: Path) -> None:
    p = plan()
    ar1, fast1 = config(p), config(p, "fast")
    ar4 = config(p, "autoregressive", 4)
    rows = [
        # the baseline at tp1 on w, c=1: decode 10, 10, 16 tok/s -> median 10
        _row(0, ar1.config_id, "autoregressive", 1, "w", 1, 10),
        _row(1, ar1.config_id, "autoregressive", 1, "w", 1, 10),
        _row(2, ar1.config_id, "autoregressive", 1, "w", 1, 16, output_tokens=51),
        _row(3, "other-plan", "autoregressive", 1, "w", 1, 999),  # another config: ignored
        _row(4, ar1.config_id, "autoregressive", 1, "w", 1, 10, ttft=0.1).copy() | {"ok": False},
    ]
    services = [_service_row(ar1.config_id, startup_s=30.0), _service_row("other-plan")]
    with _store(tmp_path, rows, services) as store:
        est = Estimator(p, load_measured(store, p))
    fig = est.decode_tps("autoregressive", 1, "w", 1)
    assert (fig.value, fig.source) == (10, "measured")
    # other concurrency: carried with the slowdown 1 / (1 + 0.5 (c - 1))
    fig = est.decode_tps("autoregressive", 1, "w", 2)
    assert (fig.value, fig.source) == (pytest.approx(10 / 1.5), "nearest measured")
    # other tp: carried with the assumed tp ratio 50 / 20
    assert est.decode_tps("autoregressive", 4, "agent", 1).value == pytest.approx(25)
    # a method with no rows: the baseline's figure times its assumed speedup
    fig = est.decode_tps("fast", 1, "w", 1)
    assert (fig.value, fig.source) == (20, "baseline measured x assumed speedup")
    # mean output tokens of (w, 101) = (101 + 101 + 51) / 3; start-up measured per config,
    # another config at the same tp takes the median of that tp's
    assert est.output_tokens("w", 101) == pytest.approx(253 / 3)
    assert est.startup_s("autoregressive", 1) == 30 == est.startup_s("fast", 1)
    assert est.startup_s("autoregressive", 4) == 70  # nothing at tp4: the assumed midpoint
    assert est.ttft_s("autoregressive", 1, "w", 2, 1000) == 0.5  # measured at c=1
    assert est.ttft_s("fast", 1, "w", 1, 150) == 1.5  # assumed
    assert fast1.config_id != ar4.config_id


def test_an_own_measurement_beats_the_baseline(tmp_path: Path) -> None:
    p = plan()
    rows = [
        _row(0, config(p, "fast").config_id, "fast", 1, "agent", 2, 30),
        _row(1, config(p).config_id, "autoregressive", 1, "w", 1, 10),
    ]
    services = [_service_row(config(p, m).config_id) for m in ("fast", "autoregressive")]
    with _store(tmp_path, rows, services) as store:
        est = Estimator(p, load_measured(store, p))
    # same method, other workload and concurrency: 30 * (1 + 0.5) at c=1
    fig = est.decode_tps("fast", 1, "w", 1)
    assert (fig.value, fig.source) == (pytest.approx(45), "nearest measured")


def _env(campaign: str, host: str, version: str) -> dict:
    key = "service.autoregressive.tp1.engine.version"
    return {"campaign_id": campaign, "host": host, "key": key, "value": version}


def test_only_the_plan_host_and_its_newest_build_count(tmp_path: Path) -> None:
    p = plan()  # host: local, name localhost
    ar = config(p).config_id
    t0 = datetime(2024, 5, 1)
    # one start per campaign: (campaign, host, build, when, decode tok/s)
    starts = [("c1", "localhost", "v1", 0, 10), ("c2", "localhost", "v2", 1, 20),
              ("c3", "gpu-box", "v2", 2, 99), ("c4", "localhost", "v1", -1, 5)]  # fmt: skip
    rows, services, env = [], [], []
    for i, (camp, host, build, day, tps) in enumerate(starts):
        sid = f"svc-{camp}"
        rows.append(
            _row(i, ar, "autoregressive", 1, "w", 1, tps) | {"service_id": sid, "campaign_id": camp}
        )
        services.append(
            _service_row(
                ar,
                30.0 + i,
                service_id=sid,
                campaign_id=camp,
                host=host,
                requested_at=t0 + timedelta(days=day),
            )
        )
        env.append(_env(camp, host, build))
    with _store(tmp_path, rows, services, environment=env) as store:
        got = load_measured(store, p)
    # the newest start on localhost is c2's (v2): only v2's starts on localhost count
    assert (got.host, got.build, got.services, got.elsewhere) == ("localhost", "v2", 1, 3)
    assert got.decode_tps[("autoregressive", 1, "w", 1)] == pytest.approx(20)
    assert got.startup_s[("autoregressive", 1)] == 31.0
    # no start on this host: nothing measured, the plan's estimates
    with _store(tmp_path / "x", [], [services[2]]) as store:
        none = load_measured(store, p)
    assert (none.services, none.elsewhere, none.decode_tps) == (0, 1, {})


def test_a_workload_timed_whole_and_the_rest_of_a_start(tmp_path: Path) -> None:
    p = plan()
    ar, fast = config(p), config(p, "fast")
    w, agent = p.workloads
    t0 = datetime(2024, 5, 1)

    def at(s: float) -> datetime:
        return t0 + timedelta(seconds=s)

    # two starts of one campaign: ar ready at 10 s, its units w (12 requests, 50 s) and agent
    # (4 requests: another count than the plan's, 20 s), stopped at 100 s: 100 - 10 - 70 =
    # 20 s of the rest; fast requested 6 s after, at 106 s: the gap
    services = [
        _service_row(ar.config_id, 10.0, requested_at=t0, ready_at=at(10), stopped_at=at(100)),
        _service_row(fast.config_id, 10.0, requested_at=at(106), ready_at=at(116),
                     stopped_at=at(150)),
    ]  # fmt: skip
    units = [
        unit_row(config_id=ar.config_id, service_id=f"svc-{ar.config_id}", workload="w",
                 n_requests=12, started_at=at(15), finished_at=at(65)),
        unit_row(config_id=ar.config_id, service_id=f"svc-{ar.config_id}", workload="agent",
                 n_requests=4, started_at=at(70), finished_at=at(90)),
    ]  # fmt: skip
    with _store(tmp_path, [], services, units=units) as store:
        got = load_measured(store, p)
    assert got.overhead_s == {("autoregressive", 1): 20.0}  # fast has no units: none
    assert got.gap_s == 6.0
    est, assumed = Estimator(p, got), Estimator(p)
    # w sends 2 prompts x 3 repetitions x 2 concurrencies = 12: its measured 50 s; agent
    # sends 2 sessions x 2 turns = 4 as well: its 20 s
    assert est.workload_s(ar, w) == 50.0 and est.workload_s(ar, agent) == 20.0
    assert est.workload_s(fast, w) == assumed.workload_s(fast, w)  # never measured
    # a start: start-up 10 + its measured rest 20 + the gap 6 + 70 s of units
    assert est.config_s(ar) == pytest.approx(10 + 20 + 6 + 70)
    # fast: no measured rest, so the assumed warm-up, plus the gap
    assert est.fixed_s(fast) == pytest.approx(10 + assumed.warmup_s(fast, w) + 6)


def test_eta_scales_what_is_left_by_what_was_measured() -> None:
    now = [0.0]
    eta = Eta(clock=lambda: now[0])  # serial (a CPU host)
    eta.add(Job("a", 0, 100), requests=10, fixed_s=20)
    eta.add(Job("b", 0, 60), requests=4, fixed_s=20)
    assert eta.seconds_left() == 160
    eta.started("a")
    now[0] = 15.0  # still starting: 100 - 15 left, at least the request part 80
    assert eta.seconds_left() == 85 + 60
    now[0] = 40.0
    for _ in range(5):
        eta.request_done("a")
    # work done 20 + 5 * 8 = 60 estimated seconds took 40: ratio 2/3
    assert eta.ratio() == pytest.approx(2 / 3)
    assert eta.seconds_left() == pytest.approx((40 + 60) * 2 / 3)
    now[0] = 80.0
    for _ in range(5):
        eta.request_done("a")
    eta.finished("a")  # 100 estimated seconds took 80
    assert eta.seconds_left() == pytest.approx(60 * 0.8)


def test_packed_eta_replays_the_scheduler() -> None:
    eta = Eta(gpus=[0, 1], packed=True, clock=lambda: 0.0)
    for key in "abc":
        eta.add(Job(key, 1, 100), requests=1, fixed_s=0)
    assert eta.seconds_left() == 200  # two GPUs: two rounds


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "specsweep.collect", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
