"""GPU energy views (energy_segments, window_energy, request_energy) and the energy_ratio
table on hand-built requests and gpu_samples; every figure is worked by hand in the
docstring."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from specsweep.analyze import build
from tests.support.analyze_rows import (
    fetch,
    gpu_sample,
    insert_rows,
    one,
    power_trace,
    req,
    write_db,
)

T = datetime(2026, 1, 1, 12, 0, 0)


def tenths(start: float, end: float) -> list[float]:
    """Sample times every 0.1 s from start to end, both included."""
    return [round(start + i / 10, 6) for i in range(round((end - start) * 10) + 1)]


def service(method: str, gpus: str = "0") -> dict[str, Any]:
    return {
        "service_id": f"svc-{method}",
        "campaign_id": "c1",
        "config_id": f"cfg-{method}",
        "engine": "sglang",
        "method": method,
        "tp": 1,
        "gpus": gpus,
        "host": "h",
        "launch_command": "serve",
        "requested_at": T,
        "state": "stopped",
    }


def analysed(
    tmp_path: Path,
    requests: list[dict],
    samples: list[dict],
    services: list[dict] = (),
    env: list[dict] = (),
) -> Path:
    path = tmp_path / "energy.duckdb"
    write_db(path, requests)
    insert_rows(path, "gpu_samples", samples)
    insert_rows(path, "services", list(services))
    insert_rows(path, "environment", list(env))
    build.run(path, baseline="autoregressive")
    return path


def seq(starts_ends: list[tuple[float, float]], tokens: list[int], **kw: Any) -> list[dict]:
    """Requests [start, end] with the given output tokens (ttft 0.1 s, prompts p1, p2, ...)."""
    return [
        req(start_s=s, e2e_s=e - s, ttft_s=0.1, output_tokens=n, prompt_id=f"p{i + 1}", **kw)
        for i, ((s, e), n) in enumerate(zip(starts_ends, tokens))
    ]


def test_constant_power_two_requests_back_to_back(tmp_path: Path) -> None:
    """300 W for 2 s on one GPU, two requests back to back ([0, 1] and [1, 2]) of 100 tokens:
    window energy = 300 * 2 = 600 J; 600 / 200 = 3 J/token; 1/3 token/J; mean power 300 W.
    Each request is alone in flight for its second: 300 J, 300 / 100 = 3 J/token."""
    path = analysed(tmp_path, seq([(0, 1), (1, 2)], [100, 100]), power_trace(tenths(0, 2), 300.0))
    w = one(path, "SELECT * FROM window_energy")
    assert w["energy_j"] == pytest.approx(600) and w["j_per_token"] == pytest.approx(3)
    assert w["tokens_per_j"] == pytest.approx(1 / 3) and w["mean_power_w"] == pytest.approx(300)
    assert (w["busy_s"], w["idle_energy_j"], w["sparse"]) == (2, 0, False)
    assert (w["energy_source"], w["n_gpus_counter"]) == ("power_trapezoid", 0)  # no counter
    assert w["cost_per_mtok_usd"] is None  # no price recorded
    shares = fetch(path, "SELECT attributed_j, j_per_token FROM request_energy")
    assert [r["attributed_j"] for r in shares] == pytest.approx([300, 300])
    assert [r["j_per_token"] for r in shares] == pytest.approx([3, 3])


def test_power_is_interpolated_at_the_span_ends_and_summed_over_gpus(tmp_path: Path) -> None:
    """One request [0.5, 2.5] (span). GPU 0 samples 100, 300, 100, 500 W at t = 0, 1, 2, 3:
    P(0.5) = 200, P(2.5) = 300 (linear), samples at 0 and 3 only serve that.
    Trapezoids: [0.5, 1] 0.5 * (200 + 300) / 2 = 125; [1, 2] 1 * (300 + 100) / 2 = 200;
    [2, 2.5] 0.5 * (100 + 300) / 2 = 100 -> 425 J. GPU 1 at a constant 100 W: 2 s * 100 = 200 J.
    Window: 625 J over 50 tokens = 12.5 J/token. Coverage: GPU 0 has 2 samples in the span,
    the largest gap of (0.5, 1, 2, 2.5) is 1.0 s = its period: not sparse."""
    samples = power_trace([0, 1, 2, 3], [100.0, 300.0, 100.0, 500.0])
    samples += power_trace([0, 1, 2, 3], 100.0, gpu_index=1)
    path = analysed(tmp_path, seq([(0.5, 2.5)], [50]), samples)
    w = one(path, "SELECT * FROM window_energy")
    assert w["energy_j"] == pytest.approx(625) and w["j_per_token"] == pytest.approx(12.5)
    assert (w["n_samples"], w["min_samples_per_gpu"], w["max_gap_s"], w["period_s"]) == (
        4,
        2,
        1.0,
        1.0,
    )
    assert (w["gpus_sampled"], w["n_gpus"], w["sparse"]) == ("0,1", 2, False)


def test_overlapping_requests_share_power_equally(tmp_path: Path) -> None:
    """400 W constant; A in flight [0, 2] with 100 tokens, B [1, 3] with 50 tokens.
    Window: 400 * 3 = 1200 J. A: [0, 1] alone 400 J + [1, 2] half of 400 = 200 -> 600 J,
    6 J/token. B: [1, 2] 200 + [2, 3] alone 400 -> 600 J, 12 J/token. Shares sum to 1200."""
    path = analysed(tmp_path, seq([(0, 2), (1, 3)], [100, 50]), power_trace(tenths(0, 3), 400.0))
    rows = fetch(
        path, "SELECT prompt_id, attributed_j, j_per_token FROM request_energy ORDER BY prompt_id"
    )
    assert [r["attributed_j"] for r in rows] == pytest.approx([600, 600])
    assert [r["j_per_token"] for r in rows] == pytest.approx([6, 12])
    assert one(path, "SELECT energy_j FROM window_energy")["energy_j"] == pytest.approx(1200)


def test_time_with_no_request_in_flight_is_idle_energy(tmp_path: Path) -> None:
    """400 W; A [0, 1], B [2, 3], 100 tokens each: window 1200 J of which [1, 2] = 400 J idle.
    A and B get 400 J each (4 J/token); 400 + 400 = 1200 - 400. Window J/token = 1200 / 200
    = 6: the idle second counts against the window, not against a request."""
    path = analysed(tmp_path, seq([(0, 1), (2, 3)], [100, 100]), power_trace(tenths(0, 3), 400.0))
    w = one(path, "SELECT * FROM window_energy")
    assert (w["energy_j"], w["idle_energy_j"]) == pytest.approx((1200, 400))
    assert w["j_per_token"] == pytest.approx(6)
    total = one(path, "SELECT sum(attributed_j) AS j FROM request_energy")["j"]
    assert total == pytest.approx(800)


def test_cost_per_million_tokens_uses_the_price_and_the_services_gpus(tmp_path: Path) -> None:
    """price 2.0 USD per GPU-hour, the service holds GPUs '0,1' (2; only GPU 0 sampled),
    busy 2 s, 200 tokens: 2.0 * 2 * 2 / 3600 / 200 * 1e6 = 11.111... USD per 1M tokens."""
    path = analysed(
        tmp_path,
        seq([(0, 1), (1, 2)], [100, 100]),
        power_trace(tenths(0, 2), 300.0),
        services=[service("autoregressive", "0,1")],
        env=[{"campaign_id": "c1", "host": "h", "key": "price.gpu_hour_usd", "value": "2.0"}],
    )
    w = one(path, "SELECT * FROM window_energy")
    assert (w["n_gpus"], w["gpu_hour_usd"]) == (2, 2.0)
    assert w["cost_per_mtok_usd"] == pytest.approx(2.0 * 2 * 2 / 3600 / 200 * 1e6)
    assert w["cost_per_mtok_usd"] == pytest.approx(11.1111, abs=1e-4)


def test_throttle_reasons_and_clock_drop_in_the_busy_span(tmp_path: Path) -> None:
    """Span [0, 1]. In it: 'sw_power_cap' at 0.2 and 'hw_slowdown,sw_power_cap' at 0.4 ->
    throttled, reasons 'hw_slowdown,sw_power_cap'; 'sw_thermal_slowdown' at 1.5 is outside.
    Busy clocks (util > 0): 1980 except 1700 at 0.6 -> median 1980, min 1700 < 0.9 * 1980 =
    1782: clock_drop. An idle sample (util 0) at 0.8 clocked 300 MHz is not counted."""
    samples = power_trace(tenths(0, 1.5), 200.0)
    by_t = {s["t_s"]: s for s in samples}
    by_t[0.2]["throttle_reasons"] = "sw_power_cap"
    by_t[0.4]["throttle_reasons"] = "hw_slowdown,sw_power_cap"
    by_t[1.5]["throttle_reasons"] = "sw_thermal_slowdown"
    by_t[0.6]["sm_clock_mhz"] = 1700.0
    by_t[0.8].update(sm_clock_mhz=300.0, util_gpu_pct=0.0)
    path = analysed(tmp_path, seq([(0, 1)], [10]), samples)
    w = one(path, "SELECT * FROM window_energy")
    assert (w["throttled"], w["throttle_reasons"]) == (True, "hw_slowdown,sw_power_cap")
    assert (w["sm_clock_min_mhz"], w["sm_clock_median_mhz"], w["clock_drop"]) == (1700, 1980, True)


def test_a_clock_within_ten_percent_is_no_drop(tmp_path: Path) -> None:
    """Busy clocks 1980 with one 1800 (>= 1782 = 0.9 * 1980): no drop, no throttle."""
    samples = power_trace(tenths(0, 1), 200.0)
    samples[5]["sm_clock_mhz"] = 1800.0
    w = one(analysed(tmp_path, seq([(0, 1)], [10]), samples), "SELECT * FROM window_energy")
    assert (w["clock_drop"], w["throttled"], w["throttle_reasons"]) == (False, False, "")


@pytest.mark.parametrize(
    ("times", "why"),
    [
        ([0.0, 0.1, 0.2, 0.3, 0.4, 2.0], "gap 1.6 s > 3 * 0.1 s period"),
        ([-1.0, 0.5, 3.0], "one sample in the span"),
    ],
)
def test_sparse_windows_are_left_out_of_energy_figures(
    tmp_path: Path, times: list[float], why: str
) -> None:
    """Span [0, 2]. Samples every 0.1 s up to 0.4 then 2.0: gaps of the span points are at
    most 1.6 s against a median period of 0.1 s -> sparse. Or a single sample inside the span
    (< 2 per GPU) -> sparse. A sparse window keeps energy_j but has no j_per_token and no
    request_energy rows."""
    path = analysed(tmp_path, seq([(0, 2)], [100]), power_trace(times, 300.0))
    w = one(path, "SELECT * FROM window_energy")
    assert w["sparse"] is True, why
    assert w["j_per_token"] is None and w["energy_j"] is not None
    assert fetch(path, "SELECT * FROM request_energy") == []


def test_a_cpu_campaign_has_no_energy_rows(tmp_path: Path) -> None:
    """No gpu_samples: every energy object is empty."""
    path = analysed(tmp_path, seq([(0, 1)], [10]), [])
    for name in ("energy_segments", "window_energy", "request_energy", "energy_ratio"):
        assert fetch(path, f"SELECT * FROM {name}") == [], name


def test_energy_ratio_is_the_paired_ratio_of_j_per_token(tmp_path: Path) -> None:
    """Both windows at a constant 300 W. Baseline: p1 [0, 1], p2 [1, 2], 100 tokens each ->
    3 J/token each. Method 'spec': p1 [0, 0.5] -> 150 J / 100 = 1.5; p2 [0.5, 1.5]
    -> 300 J / 100 = 3.0; p3 [1.5, 2] has no baseline request, so it is not paired.
    energy_ratio = the geometric mean of 1.5 / 3 and 3 / 3 = sqrt(0.5); two prompts give no
    interval (and no claim). Window J/token: spec 600 J / 300 tokens = 2 against 3 ->
    window_energy_ratio 2 / 3."""
    base = seq([(0, 1), (1, 2)], [100, 100])
    spec = seq([(0, 0.5), (0.5, 1.5), (1.5, 2)], [100, 100, 100], method="spec")
    samples = power_trace(tenths(0, 2), 300.0) + power_trace(tenths(0, 2), 300.0, method="spec")
    path = analysed(tmp_path, base + spec, samples)
    r = one(path, "SELECT * FROM energy_ratio")
    assert (r["method"], r["baseline"], r["n"], r["n_baseline"], r["n_prompts"]) == (
        "spec",
        "autoregressive",
        2,
        2,
        2,
    )
    assert r["energy_ratio"] == pytest.approx(0.5**0.5)
    assert r["ci_low"] is None and r["ci_reason"].startswith("2 prompts:")
    assert r["significant"] is None and r["is_control"] is False
    assert r["window_energy_ratio"] == pytest.approx(2 / 3)
    assert r["energy_source"] == "power_trapezoid"  # power only on both sides
    assert (r["method_j_per_token_p50"], r["baseline_j_per_token_p50"]) == pytest.approx(
        (2.25, 3.0)
    )


def test_gpu_sample_builder_defaults() -> None:
    """The row builder names every gpu_samples column of the DDL once."""
    row = gpu_sample(0.5, 250.0)
    assert (row["t_s"], row["power_w"], row["window_id"], row["throttle_reasons"]) == (
        0.5,
        250.0,
        "w-autoregressive",
        "",
    )


def test_energy_summary_sums_usable_windows_of_a_setting(tmp_path: Path) -> None:
    """Three windows of one setting, each one request [0, 1] of 50 tokens: w1 at 100 W
    (100 J), w2 at 300 W (300 J), w3 with a single sample (sparse, left out).
    j_per_token = (100 + 300) / (50 + 50) = 4; tokens_per_j = 0.25; mean power 400 J / 2 s =
    200 W. Price 1 USD per GPU-hour, 1 GPU, busy 1 s, 50 tokens: each window 1 * 1 * 1 /
    3600 / 50 * 1e6 = 5.555... USD per 1M tokens, so the token-weighted cost is the same."""
    requests = [
        req(start_s=0, e2e_s=1, ttft_s=0.1, output_tokens=50, window_id=w)
        for w in ("w1", "w2", "w3")
    ]
    samples = (
        power_trace(tenths(0, 1), 100.0, window_id="w1")
        + power_trace(tenths(0, 1), 300.0, window_id="w2")
        + power_trace([0.5], 300.0, window_id="w3")
    )
    path = analysed(
        tmp_path,
        requests,
        samples,
        env=[{"campaign_id": "c1", "host": "h", "key": "price.gpu_hour_usd", "value": "1"}],
    )
    s = one(path, "SELECT * FROM energy_summary")
    assert (s["n_windows"], s["n_sparse"], s["output_tokens_sum"]) == (3, 1, 100)
    assert (s["energy_j"], s["j_per_token"], s["tokens_per_j"], s["mean_power_w"]) == (
        pytest.approx(400),
        pytest.approx(4),
        pytest.approx(0.25),
        pytest.approx(200),
    )
    assert s["cost_per_mtok_usd"] == pytest.approx(1e6 / 3600 / 50)
