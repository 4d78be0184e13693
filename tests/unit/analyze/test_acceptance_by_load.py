"""acceptance_by_load (acceptance_by_load.sql) on hand-built rows: every figure worked out
by hand in the docstrings from decode tokens, verify steps and decode seconds.

Closed loop (campaign c1, sglang): every request has 65 output tokens (64 decode tokens) and
a TTFT of 0.5 s. The baseline decodes a token in 0.1 s at concurrency 1 (6.4 s) and 0.2 s at
concurrency 4 (12.8 s), on p1..p3. dd verifies p1 and p3 in 16 steps (gain 4) and p2 in 32
(gain 2) at both levels; a step takes 0.2 s at concurrency 1 and 0.6 s at concurrency 4.

Open loop (campaign rt, vllm): 11 requests at 0..10 s (steady: p1..p9, trim 0.1 of a 10 s
schedule), 11 output tokens (10 decode tokens). The baseline's TPOT is 20 ms; dd verifies an
even-numbered prompt in 5 steps (gain 2) and an odd one in 2 (gain 5), a step taking 30 ms at
2 req/s and 45 ms at 4 req/s.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from specsweep.analyze import build
from specsweep.schema.store import Store
from tests.support.analyze_rows import AR, SERVICE_T, fetch, ident, one, req, rows_in_rounds

STEPS = {"p1": 16, "p2": 32, "p3": 16}
BASE_TOKEN_S = {1: 0.1, 4: 0.2}
STEP_S = {1: 0.2, 4: 0.6}


def closed(method: str, conc: int, prompt: str, decode_s: float, steps: int | None) -> dict:
    return req(
        **ident("c1", method, "sglang"),
        window_id=f"w-{method}-c{conc}",
        concurrency=conc,
        prompt_id=prompt,
        ttft_s=0.5,
        e2e_s=0.5 + decode_s,
        output_tokens=65,
        spec_verify_ct=steps,
    )


def closed_rows() -> list[dict]:
    rows = []
    for conc in (1, 4):
        for p, steps in STEPS.items():
            rows.append(closed(AR, conc, p, 64 * BASE_TOKEN_S[conc], None))
            rows.append(closed("dd", conc, p, steps * STEP_S[conc], steps))
    return rows


def open_rows(method: str, rate: float, step_s: float) -> tuple[list[dict], dict]:
    """A window of campaign rt at `rate`; the baseline at a TPOT of 20 ms, dd at 5 or 2 steps
    of step_s each."""
    wid = f"rt-{method}-{rate:g}"
    rows = []
    for i in range(11):
        steps = None if method == AR else (5 if i % 2 == 0 else 2)
        decode_s = 10 * 0.02 if steps is None else steps * step_s
        row = req(**ident("rt", method, "vllm"), window_id=wid, prompt_id=f"p{i}",
                  concurrency=0, start_s=float(i), ttft_s=0.1, e2e_s=0.1 + decode_s,
                  output_tokens=11, spec_verify_ct=steps)  # fmt: skip
        rows.append({**row, "scheduled_s": float(i)})
    window = {
        "campaign_id": "rt", "service_id": f"svc-rt-{method}", "config_id": f"cfg-rt-{method}",
        "workload": "chat", "window_id": wid, "max_tokens": 256, "load": "poisson",
        "rate": rate, "ramp": None, "ramp_start_rate": None, "ramp_end_rate": None,
        "burstiness": None, "seed": 1, "max_concurrency": None, "n_scheduled": 11,
        "schedule_span_s": 10.0, "cache_reset": "flush_cache", "started_at": SERVICE_T,
        "elapsed_s": 12.0,
    }  # fmt: skip
    return rows, window


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("by_load") / "by_load.duckdb"
    requests, windows = closed_rows(), []
    for rate, step_s in ((2.0, 0.03), (4.0, 0.045)):
        for method in (AR, "dd"):
            rows, window = open_rows(method, rate, step_s)
            requests += rows
            windows.append(window)
    requests = [{**r, "category": "chat"} for r in requests]  # required by RequestsSchema
    store = Store(path)  # three rounds repeating one another: intervals need 2+ starts a side
    for table, rows in (("requests", requests), ("windows", windows)):
        rows = rows_in_rounds(table, rows)
        assert store.append(table, rows) == len(rows), table
    build.run(path, baseline=AR)
    return path


def row(db: Path, campaign: str, kind: str, load: float) -> dict:
    return one(
        db,
        "SELECT * FROM acceptance_by_load WHERE campaign_id = ? AND load_kind = ? AND load = ?",
        [campaign, kind, load],
    )


GAIN_CLOSED = 2 ** (5 / 3)  # exp((ln 4 + ln 2 + ln 4) / 3)


def test_closed_loop_acceptance_stays_while_step_cost_grows(db: Path) -> None:
    """Concurrency 1: gain 2^(5/3) = 3.17, step 0.2 s over a 0.1 s token: cost 2, speedup
    3.17 / 2. Concurrency 4: the same gain, step 0.6 s over 0.2 s: cost 3 (1.5 times the
    lowest load's), speedup 3.17 / 3. Pooled acceptance: 192 tokens / 64 steps = 3."""
    one_, four = row(db, "c1", "concurrency", 1), row(db, "c1", "concurrency", 4)
    assert (one_["method"], one_["engine"], one_["n_prompts"], one_["n"]) == ("dd", "sglang", 3, 9)
    for r, conc in ((one_, 1), (four, 4)):
        assert r["acceptance_gain"] == pytest.approx(GAIN_CLOSED)
        assert r["accept_length"] == pytest.approx(3.0)
        assert r["step_time_s"] == pytest.approx(STEP_S[conc])
        assert r["baseline_token_time_s"] == pytest.approx(BASE_TOKEN_S[conc])
        assert r["step_cost"] == pytest.approx(STEP_S[conc] / BASE_TOKEN_S[conc])
        assert r["speedup"] == pytest.approx(GAIN_CLOSED / r["step_cost"])
        assert r["lowest_load"] == 1
        assert r["ci_low"] < r["speedup"] < r["ci_high"]
    assert four["acceptance_vs_lowest"] == pytest.approx(1.0)
    assert four["step_cost_vs_lowest"] == pytest.approx(1.5)


def test_open_loop_factors_come_from_the_steady_paired_prompts(db: Path) -> None:
    """Steady prompts p1..p9: five odd (gain 5), four even (gain 2): gain = 5^(5/9) 2^(4/9).
    Step 30 ms over the baseline's 20 ms token: cost 1.5 at 2 req/s; 45 ms: 2.25 at 4 req/s
    (1.5 times the lowest rate's). Pooled over all 11 requests of the rate, steady or not:
    110 tokens / (6 * 5 + 5 * 2) steps = 2.75."""
    gain = 5 ** (5 / 9) * 2 ** (4 / 9)
    two, four = row(db, "rt", "rate", 2.0), row(db, "rt", "rate", 4.0)
    assert (two["method"], two["engine"], two["n_prompts"], two["n"]) == ("dd", "vllm", 9, 27)
    assert two["effective_concurrency"] is None
    for r, cost in ((two, 1.5), (four, 2.25)):
        assert r["acceptance_gain"] == pytest.approx(gain)
        assert r["accept_length"] == pytest.approx(2.75)
        assert r["step_cost"] == pytest.approx(cost)
        assert r["baseline_token_time_s"] == pytest.approx(0.02)
    assert four["step_cost_vs_lowest"] == pytest.approx(1.5)
    assert four["acceptance_vs_lowest"] == pytest.approx(1.0)


def test_open_loop_factors_multiply_back_to_the_tpot_speedup(db: Path) -> None:
    """The identity on rate_speedup's own request set: per steady prompt, the baseline's TPOT
    over dd's is 0.02 / (5 * 0.03 / 10) = 4/3 (even) or 0.02 / (2 * 0.03 / 10) = 10/3 (odd):
    geometric mean (4/3)^(4/9) (10/3)^(5/9), which is gain / cost."""
    by_tpot = math.exp((4 * math.log(4 / 3) + 5 * math.log(10 / 3)) / 9)
    r = row(db, "rt", "rate", 2.0)
    assert r["speedup"] == pytest.approx(by_tpot)
    assert r["acceptance_gain"] / r["step_cost"] == pytest.approx(by_tpot)
    assert r["ci_low"] < by_tpot < r["ci_high"]


def test_no_row_for_the_baseline_and_one_per_load(db: Path) -> None:
    rows = fetch(db, "SELECT method, load_kind, load FROM acceptance_by_load ORDER BY ALL")
    assert [tuple(r.values()) for r in rows] == [
        ("dd", "concurrency", 1.0),
        ("dd", "concurrency", 4.0),
        ("dd", "rate", 2.0),
        ("dd", "rate", 4.0),
    ]
