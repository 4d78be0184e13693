"""speedup_prediction (speedup_prediction.sql) on hand-built rows, worked out by hand.

Campaign c1 on vLLM, workload chat, prompts p1..p3, 65 output tokens (64 decode tokens) and a
TTFT of 0.5 s everywhere. The baseline decodes a token in 0.1 s (6.4 s). Family `synth`, draft
length 4 by the counters (400 draft tokens in 100 drafting steps; 392 for s4, whose drafts were
cut short near the end of a reply, as llama.cpp's are: 3.92 is still draft length 4), acceptance
L set by the counters (accepted = (L - 1) * 100), and no per-request verify counts (vLLM 0.24):

    method  L  step time  decode_s = 64 * step / L  speedup = L * 0.1 / step  step cost
    s2      2  0.25 s     8.0                        0.8                      2.5
    s3      3  0.25 s     5.333                      1.2                      2.5
    s4      4  0.30 s     4.8                        4/3                      3.0

Leave one out within the family and draft length:
    s2: siblings 2.5, 3.0 -> sqrt(7.5) = 2.7386; predicted 2 / 2.7386 = 0.7303 (error -8.7%)
    s3: siblings 2.5, 3.0 -> 2.7386; predicted 3 / 2.7386 = 1.0954 (error -8.7%)
    s4: siblings 2.5, 2.5 -> 2.5; predicted 4 / 2.5 = 1.6 (error +20%)
The 95% prediction interval (two siblings: t975(1) = 12.7062, sqrt(1 + 1/2)):
    s2: ln 2.5, ln 3.0: sd = (ln 3 - ln 2.5) / sqrt 2 = 0.12892, half = 12.7062 * 0.12892 *
        1.22474 = 2.0063; [2 / exp(ln 2.7386 + 2.0063), 2 / exp(ln 2.7386 - 2.0063)]
        = [0.0982, 5.43]: 0.8 is inside
    s4: siblings equal, sd 0: the interval is the point 1.6, and 4/3 is outside
`lone` (family of its own, draft length 2) has no sibling, and neither has `short` (family
`synth` at draft length 2: 200 draft tokens in 100 steps, L = 2, decode 4.0 s); `counted` has
per-request verify counts (16 steps for 64 tokens: L = 4 from the requests) and no draft
counters; `sglang` has
them with per-request draft counts too (48 drafted tokens in 16 steps: K = 3, as SGLang's
/generate reports them), so its draft length comes from the requests.
"""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path

import pytest

from specsweep.analyze import build
from tests.support.analyze_rows import AR, fetch, insert_rows, params, req, service, write_db

T = datetime(2026, 1, 1, 12, 0, 0)
PROMPTS = ("p1", "p2", "p3")


def _requests(
    method: str, decode_s: float, steps: int | None = None, drafted: int | None = None
) -> list[dict]:
    return [
        req(
            campaign_id="c1",
            engine="vllm",
            method=method,
            service_id=f"svc-c1-{method}",
            config_id=f"cfg-c1-{method}",
            prompt_id=p,
            ttft_s=0.5,
            e2e_s=0.5 + decode_s,
            output_tokens=65,
            spec_verify_ct=steps,
            draft_tokens=drafted,
        )
        for p in PROMPTS
    ]


def _counters(method: str, drafts: int, draft_tokens: int, accepted: int) -> list[dict]:
    rows = []
    for name, value in (
        ("spec_decode_num_drafts", drafts),
        ("spec_decode_num_draft_tokens", draft_tokens),
        ("spec_decode_num_accepted_tokens", accepted),
    ):
        for phase, v in (("before", 0), ("after", value)):
            rows.append(
                {
                    "campaign_id": "c1",
                    "service_id": f"svc-c1-{method}",
                    "config_id": f"cfg-c1-{method}",
                    "workload": "chat",
                    "phase": phase,
                    "source": "metrics",
                    "name": f"vllm:{name}_total",
                    "labels": "{}",
                    "value": v,
                    "scraped_at": T,
                }
            )
    return rows


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("prediction") / "p.duckdb"
    rows = _requests(AR, 6.4)
    for method, decode_s in (
        ("s2", 8.0),
        ("s3", 64 * 0.25 / 3),
        ("s4", 4.8),
        ("lone", 4.0),
        ("short", 4.0),
    ):
        rows += _requests(method, decode_s)
    rows += _requests("counted", 3.2, steps=16)
    rows += _requests("sglang", 3.2, steps=16, drafted=48)
    write_db(path, rows)
    methods = (AR, "s2", "s3", "s4", "lone", "short", "counted", "sglang")
    insert_rows(path, "services", [{**service("c1", m, "vllm")} for m in methods])
    insert_rows(
        path,
        "method_params",
        [
            *params("c1", "s2", "synth", k=4, acc="2"),
            *params("c1", "s3", "synth", k=4, acc="3"),
            *params("c1", "s4", "synth", k=4, acc="4"),
            *params("c1", "short", "synth", k=2, acc="2"),
        ],
    )
    insert_rows(
        path,
        "server_metrics",
        [
            *_counters("s2", 100, 400, 100),
            *_counters("s3", 100, 400, 200),
            *_counters("s4", 100, 392, 300),
            *_counters("lone", 100, 200, 100),
            *_counters("short", 100, 200, 100),
        ],
    )
    build.run(path, baseline=AR)
    return path


def _rows(db: Path) -> dict[str, dict]:
    return {r["method"]: r for r in fetch(db, "SELECT * FROM speedup_prediction")}


def test_measured_factors_from_the_window_counters(db: Path) -> None:
    r = _rows(db)
    assert set(r) == {"s2", "s3", "s4", "lone", "short", "counted", "sglang"}  # no baseline row
    for m, length, k, speedup, cost in (
        ("s2", 2, 4.0, 0.8, 2.5),
        ("s3", 3, 4.0, 1.2, 2.5),
        ("s4", 4, 3.92, 4 / 3, 3.0),
    ):
        assert r[m]["acceptance_source"] == "window counters"
        assert r[m]["accept_length"] == pytest.approx(length)
        assert r[m]["draft_tokens_per_step"] == pytest.approx(k)
        assert r[m]["speedup"] == pytest.approx(speedup)
        assert r[m]["step_cost"] == pytest.approx(cost)
        assert r[m]["baseline_token_time_s"] == pytest.approx(0.1)
        assert r[m]["step_time_s"] == pytest.approx(cost * 0.1)


def test_leave_one_out_prediction(db: Path) -> None:
    r = _rows(db)
    g = math.sqrt(2.5 * 3.0)
    assert (r["s2"]["n_siblings"], r["s2"]["predicted_step_cost"]) == (2, pytest.approx(g))
    assert r["s2"]["predicted_speedup"] == pytest.approx(2 / g)
    assert r["s2"]["prediction_error"] == pytest.approx((2 / g) / 0.8 - 1)
    assert r["s3"]["predicted_speedup"] == pytest.approx(3 / g)
    assert r["s4"]["predicted_step_cost"] == pytest.approx(2.5)
    assert r["s4"]["prediction_error"] == pytest.approx(1.6 / (4 / 3) - 1)
    assert all(r[m]["reason"] is None for m in ("s2", "s3", "s4"))


def test_prediction_interval_from_the_siblings_scatter(db: Path) -> None:
    r = _rows(db)
    sd = (math.log(3.0) - math.log(2.5)) / math.sqrt(2)
    half = 12.7062 * sd * math.sqrt(1 + 1 / 2)
    m = math.log(math.sqrt(2.5 * 3.0))
    assert r["s2"]["sibling_log_sd"] == pytest.approx(sd)
    assert r["s2"]["pred_low"] == pytest.approx(2 / math.exp(m + half))
    assert r["s2"]["pred_high"] == pytest.approx(2 / math.exp(m - half))
    assert r["s2"]["within_interval"] is True
    assert r["s4"]["pred_low"] == pytest.approx(1.6) == r["s4"]["pred_high"]
    assert r["s4"]["within_interval"] is False
    # fewer than two siblings: no scatter, no interval
    for m_ in ("lone", "short", "counted", "sglang"):
        assert (r[m_]["pred_low"], r[m_]["within_interval"]) == (None, None)


def test_rows_without_a_prediction_say_why(db: Path) -> None:
    r = _rows(db)
    assert r["lone"]["accept_length"] == pytest.approx(2.0)
    assert r["lone"]["predicted_speedup"] is None
    assert r["lone"]["reason"] == "no other window of the same family and draft length"
    # same family, draft length 2 against the others' 4: not a sibling, and not theirs
    assert (r["short"]["n_siblings"], r["short"]["predicted_speedup"]) == (0, None)
    assert r["short"]["reason"] == "no other window of the same family and draft length"
    assert r["counted"]["acceptance_source"] == "requests"
    assert r["counted"]["accept_length"] == pytest.approx(4.0)  # 64 tokens / 16 steps
    assert r["counted"]["reason"] == "no draft-length counters"


def test_draft_length_from_per_request_counts(db: Path) -> None:
    r = _rows(db)["sglang"]
    assert (r["acceptance_source"], r["accept_length"]) == ("requests", pytest.approx(4.0))
    assert r["draft_tokens_per_step"] == pytest.approx(3.0)  # 3 x 48 / (3 x 16)
    assert r["step_cost"] == pytest.approx(4.0 / 2.0)  # speedup 6.4 / 3.2 = 2
    assert r["reason"] == "no other window of the same family and draft length"
