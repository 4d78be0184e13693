"""Open-loop load: arrival schedules (their statistics, seeds, ramps), the sender's clock, bad
load/SLO fields named with their line, and a campaign whose windows are sent on schedule to an
engine-shaped server on loopback."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import numpy as np
import pytest

from specsweep.collect.plan.file import PlanError, parse_plan
from specsweep.collect.plan.load import OpenLoad, Ramp, Slo
from specsweep.collect.plan.workloads import Prompt, request_count
from specsweep.collect.run import openloop
from tests.support.collect_cli import external_plan
from tests.unit.collect.test_plan import BASE, edit, line_of, problems


def _gaps(load: OpenLoad, rate: float | None, n: int) -> np.ndarray:
    return np.diff(openloop.offsets(load, rate, n))


def test_poisson_gaps_have_the_rate_and_unit_variation() -> None:
    gaps = _gaps(OpenLoad(rate=[4.0], requests=20_000, seed=1), 4.0, 20_000)
    assert gaps.mean() == pytest.approx(0.25, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.05)


@pytest.mark.parametrize("burstiness", [0.25, 4.0])
def test_gamma_gaps_keep_the_rate_and_vary_as_one_over_sqrt_burstiness(burstiness: float) -> None:
    load = OpenLoad(arrival="gamma", burstiness=burstiness, rate=[10.0], requests=20_000, seed=2)
    gaps = _gaps(load, 10.0, 20_000)
    assert gaps.mean() == pytest.approx(0.1, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(burstiness**-0.5, rel=0.08)


def test_constant_arrivals_are_evenly_spaced_and_start_at_zero() -> None:
    times = openloop.offsets(OpenLoad(arrival="constant", rate=[5.0], requests=6), 5.0, 6)
    assert times.tolist() == pytest.approx([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])


def test_a_seed_fixes_the_schedule_and_another_seed_changes_it() -> None:
    a = openloop.offsets(OpenLoad(rate=[2.0], requests=50, seed=5), 2.0, 50)
    b = openloop.offsets(OpenLoad(rate=[2.0], requests=50, seed=5), 2.0, 50)
    c = openloop.offsets(OpenLoad(rate=[2.0], requests=50, seed=6), 2.0, 50)
    assert a[0] == 0.0 and np.array_equal(a, b) and not np.array_equal(a, c)


def test_ramps_follow_vllms_formulas_by_request_index() -> None:
    linear = OpenLoad(
        arrival="constant", ramp=Ramp(strategy="linear", start_rate=1, end_rate=5), requests=5
    )
    # request i at rate 1 + 4 * i/4: gaps 1/2, 1/3, 1/4, 1/5 (the first request opens at 0)
    assert _gaps(linear, None, 5).tolist() == pytest.approx([1 / 2, 1 / 3, 1 / 4, 1 / 5])
    expo = OpenLoad(
        arrival="constant", ramp=Ramp(strategy="exponential", start_rate=1, end_rate=16), requests=5
    )
    assert _gaps(expo, None, 5).tolist() == pytest.approx([1 / 2, 1 / 4, 1 / 8, 1 / 16])


def test_a_schedule_cycles_the_prompts_rep_major() -> None:
    items = [Prompt("p/0", "a"), Prompt("p/1", "b")]
    arrivals = openloop.schedule(OpenLoad(rate=[1.0], requests=5), 1.0, items, "sys", 32)
    assert [(a.prompt_id, a.rep) for a in arrivals] == [
        ("p/0", 0),
        ("p/1", 0),
        ("p/0", 1),
        ("p/1", 1),
        ("p/0", 2),
    ]
    assert arrivals[1].messages == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "b"},
    ]
    assert {a.max_tokens for a in arrivals} == {32}


def test_duration_sets_the_requests_per_window() -> None:
    load = OpenLoad(rate=[0.5, 4.0], duration_s=10)
    assert [load.window_requests(r) for r in load.windows()] == [5, 40]


def test_sleep_until_never_returns_early() -> None:
    async def late_by() -> list[float]:
        out = []
        for i in range(40):
            deadline = time.perf_counter() + 0.0003 * (i % 7)
            await openloop.sleep_until(deadline)
            out.append(time.perf_counter() - deadline)
        return out

    assert min(asyncio.run(late_by())) >= 0


# --- bad fields ---------------------------------------------------------------------------

LOAD = "max_tokens: [64]\n    load: {rate: [1, 2], requests: 10}"


@pytest.mark.parametrize(
    ("new", "field", "marker"),
    [
        (
            "max_tokens: [64]\n    load: {rate: [1, -2], requests: 10}",
            "workloads.0.load.rate",
            "rate: [1, -2]",
        ),
        (
            "max_tokens: [64]\n    load: {rate: [1], requests: 10, burst: 2}",
            "workloads.0.load.burst",
            "burst",
        ),
        (
            "max_tokens: [64]\n    load: {rate: [1], ramp: {strategy: linear, start_rate: 1, "
            "end_rate: 2}, requests: 10}",
            "workloads.0.load",
            "ramp",
        ),
        ("max_tokens: [64]\n    load: {rate: [1]}", "workloads.0.load", "    load:"),
        (
            "max_tokens: [64]\n    load: {rate: [1], requests: 10, burstiness: 2}",
            "workloads.0.load",
            "burstiness",
        ),
        (
            "max_tokens: [64]\n    load: {rate: [1], requests: 10, max_concurrency: 0}",
            "workloads.0.load.max_concurrency",
            "max_concurrency",
        ),
        (
            "max_tokens: [64]\n    concurrency: [2]\n    load: {rate: [1], requests: 10}",
            "workloads.0",
            "- name: w",
        ),  # the workload: two of its fields clash
    ],
)
def test_bad_load_fields_are_named_with_their_line(new: str, field: str, marker: str) -> None:
    text = edit("max_tokens: [64]", new)
    with pytest.raises(PlanError) as info:
        parse_plan(text, "bad.yaml")
    found = problems(str(info.value))
    line = line_of(text, marker)
    assert any(
        (f == field or f.startswith(field + ".")) and n in (line, line - 1) for f, n in found
    ), str(info.value)


@pytest.mark.parametrize(
    ("slo", "field", "words"),
    [
        ("slo: {ttft_ms: -5}\n", "slo.ttft_ms", "greater than 0"),
        ("slo: {target: 0.99}\n", "slo", "at least one of ttft_ms"),
        ("slo: {tpot_ms: 50, target: 1.5}\n", "slo.target", "less than or equal to 1"),
        ("slo: {ttft_ms: 500, p99: true}\n", "slo.p99", "Extra inputs"),
    ],
)
def test_bad_slo_fields_are_named_with_their_line(slo: str, field: str, words: str) -> None:
    text = BASE + slo
    with pytest.raises(PlanError, match=words) as info:
        parse_plan(text, "bad.yaml")
    assert (field, line_of(text, "slo:")) in problems(str(info.value)), str(info.value)


def test_a_missing_trace_file_is_named() -> None:
    text = BASE + "  - {name: tr, kind: trace, path: /nonexistent/trace.jsonl}\n"
    with pytest.raises(PlanError, match="nonexistent/trace.jsonl"):
        parse_plan(text, "bad.yaml")


def test_slo_and_defaults_leave_the_campaign_id_alone() -> None:
    plain = parse_plan(BASE)
    assert parse_plan(BASE + "slo: {ttft_ms: 500}\n").campaign_id() == plain.campaign_id()
    assert parse_plan(BASE + "prefix_cache: reset\n").campaign_id() == plain.campaign_id()
    assert parse_plan(BASE + "prefix_cache: keep\n").campaign_id() != plain.campaign_id()
    assert request_count(parse_plan(edit("max_tokens: [64]", LOAD)).workloads[0]) == 20


# --- a campaign on schedule ---------------------------------------------------------------


TRACE = Path(__file__).resolve().parents[3] / "plans" / "traces" / "example.jsonl"


def _plan(url: str) -> str:
    return external_plan(
        url,
        name="open-loop",
        engine={"kind": "vllm", "model": "m"},
        methods=[{"name": "autoregressive"}],
        warmup_requests=0,
        slo={"ttft_ms": 500},
        workloads=[
            {
                "name": "open",
                "prompts": {"kind": "inline", "texts": ["a", "b", "c"]},
                "max_tokens": [16],
                "load": {
                    "arrival": "poisson",
                    "rate": [20, 40],
                    "requests": 12,
                    "seed": 4,
                    "max_concurrency": 8,
                },
            },
            {
                "name": "closed",
                "prompts": {"kind": "inline", "texts": ["a"]},
                "max_tokens": [16],
                "concurrency": [2],
                "repetitions": 2,
            },
            {"name": "replay", "kind": "trace", "path": str(TRACE), "time_scale": 0.25},
        ],
    )


def test_a_search_without_an_slo_is_refused() -> None:
    text = edit(
        "max_tokens: [64]",
        "max_tokens: [64]\n    load: {rate: [1, 2], requests: 4, search: max_rate_under_slo}",
    )
    with pytest.raises(PlanError, match="search for the max rate under the slo"):
        parse_plan(text, "bad.yaml")


def test_a_request_meets_the_slo_only_when_it_meets_every_objective() -> None:
    slo = Slo(ttft_ms=100, tpot_ms=10)
    assert slo.met(True, 0.1, 0.1 + 9 * 0.01, 10)  # exactly on both limits
    assert not slo.met(True, 0.101, 0.15, 10)  # TTFT over
    assert not slo.met(True, 0.05, 0.05 + 9 * 0.0101, 10)  # TPOT over
    assert slo.met(True, 0.05, 9.0, 1)  # one token: no TPOT to miss
    assert not slo.met(False, 0.01, 0.02, 10)  # a failed request never meets it
    assert (
        Slo(e2e_ms=500).attainment(
            [
                {"ok": True, "ttft_s": 0.1, "e2e_s": 0.4, "output_tokens": 5},
                {"ok": True, "ttft_s": 0.1, "e2e_s": 0.6, "output_tokens": 5},
                {"ok": False, "ttft_s": None, "e2e_s": None, "output_tokens": None},
                {"ok": True, "ttft_s": 0.2, "e2e_s": 0.5, "output_tokens": 5},
            ]
        )
        == 0.5
    )
