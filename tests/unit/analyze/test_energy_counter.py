"""NVML's energy counter as the primary energy source (energy_segments, window_energy,
request_energy, energy_summary) and the power trapezoid as the fallback, on hand-built
requests and gpu_samples; every figure is worked by hand in the docstring (docs/energy.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from specsweep.analyze import build
from specsweep.analyze.energy import combined_source
from tests.support.analyze_rows import (
    fetch,
    gpu_sample,
    insert_rows,
    one,
    power_trace,
    req,
    write_db,
)


def analysed(tmp_path: Path, requests: list[dict], samples: list[dict]) -> Path:
    path = tmp_path / "counter.duckdb"
    write_db(path, requests)
    insert_rows(path, "gpu_samples", samples)
    build.run(path, baseline="autoregressive")
    return path


def request(start: float, end: float, tokens: int, prompt: str = "p1", **kw: Any) -> dict:
    return req(
        start_s=start, e2e_s=end - start, ttft_s=0.1, output_tokens=tokens, prompt_id=prompt, **kw
    )


def counter_trace(points: dict[float, float], watts: float | None = 300.0, **kw: Any) -> list[dict]:
    """gpu_samples with the energy counter at {t_s: joules} and a constant (wrong) power."""
    return [gpu_sample(t, watts, energy_j=e, **kw) for t, e in points.items()]


def test_the_counter_gives_100_j_where_the_power_samples_say_600(tmp_path: Path) -> None:
    """One request [0, 2] of 50 tokens. GPU 0 reports 300 W throughout (trapezoid: 2 s * 300 W
    = 600 J) but its counter reads 990, 1000, 1010, 1070, 1090, 1100, 1120 J at t = -0.5, 0,
    0.5, ..., 2.5: E(2) - E(0) = 1100 - 1000 = 100 J. The counter wins: energy_j 100,
    mean power 100 / 2 = 50 W, 100 / 50 = 2 J/token; the request alone gets all 100 J;
    trapezoid_energy_j keeps the 600 J for comparison."""
    counter = {
        -0.5: 990.0,
        0.0: 1000.0,
        0.5: 1010.0,
        1.0: 1070.0,
        1.5: 1090.0,
        2.0: 1100.0,
        2.5: 1120.0,
    }
    path = analysed(tmp_path, [request(0, 2, 50)], counter_trace(counter))
    w = one(path, "SELECT * FROM window_energy")
    assert (w["energy_source"], w["n_gpus_counter"], w["sparse"]) == ("counter", 1, False)
    assert w["energy_j"] == pytest.approx(100) and w["counter_energy_j"] == pytest.approx(100)
    assert w["trapezoid_energy_j"] == pytest.approx(600)
    assert (w["mean_power_w"], w["j_per_token"]) == pytest.approx((50, 2))
    r = one(path, "SELECT * FROM request_energy")
    assert (r["attributed_j"], r["j_per_token"], r["energy_source"]) == (
        pytest.approx(100),
        pytest.approx(2),
        "counter",
    )
    segs = fetch(path, "SELECT DISTINCT energy_source FROM energy_segments")
    assert segs == [{"energy_source": "counter"}]


def test_the_counter_is_interpolated_at_request_boundaries(tmp_path: Path) -> None:
    """Counter (offset 5e6 J since driver load) at t = 0, 1, 2, 3: +0, +100, +400, +500 J, so
    slopes 100, 300, 100 W; power says a flat 250 W. A [0.5, 1.5] 50 tokens, B [1.25, 2.5]
    100 tokens. E(0.5) = 50, E(1) = 100, E(1.25) = 100 + 0.25 * 300 = 175,
    E(1.5) = 250, E(2) = 400, E(2.5) = 450.
    Pieces: [0.5, 1] 50 A; [1, 1.25] 75 A; [1.25, 1.5] 75 shared -> 37.5 each;
    [1.5, 2] 150 B; [2, 2.5] 50 B. A = 50 + 75 + 37.5 = 162.5 J (3.25 J/token);
    B = 37.5 + 150 + 50 = 237.5 J (2.375 J/token); window E(2.5) - E(0.5) = 400 J.
    (The flat 250 W would have given A 0.75 * 250 + 0.25 * 250 / 2 = 218.75 J.)"""
    base = 5e6
    counter = {0.0: base, 1.0: base + 100, 2.0: base + 400, 3.0: base + 500}
    path = analysed(
        tmp_path,
        [request(0.5, 1.5, 50, "pA"), request(1.25, 2.5, 100, "pB")],
        counter_trace(counter, 250.0),
    )
    rows = fetch(
        path, "SELECT prompt_id, attributed_j, j_per_token FROM request_energy ORDER BY prompt_id"
    )
    assert [r["attributed_j"] for r in rows] == pytest.approx([162.5, 237.5])
    assert [r["j_per_token"] for r in rows] == pytest.approx([3.25, 2.375])
    segs = fetch(
        path, "SELECT t_start_s, t_end_s, energy_j, n_in_flight FROM energy_segments ORDER BY seg"
    )
    assert [(s["t_start_s"], s["t_end_s"]) for s in segs] == [
        (0.5, 1.0),
        (1.0, 1.25),
        (1.25, 1.5),
        (1.5, 2.0),
        (2.0, 2.5),
    ]
    assert [s["energy_j"] for s in segs] == pytest.approx([50, 75, 75, 150, 50])
    assert [s["n_in_flight"] for s in segs] == [1, 1, 2, 1, 1]
    w = one(path, "SELECT energy_j, idle_energy_j FROM window_energy")
    assert (w["energy_j"], w["idle_energy_j"]) == pytest.approx((400, 0))


def test_a_counter_read_faster_than_it_steps_drops_its_repeats(tmp_path: Path) -> None:
    """The H100 case (2026-12-05): NVML steps the counter every 0.1 s, the sampler reads it
    every 0.05 s, so every other read repeats. Reads at t = 0, .05, .1, .15, .2, .25, .3:
    0, 0, 10, 10, 20, 20, 20 J. Repeats dropped: steps (0, 0), (0.1, 10), (0.2, 20), slope
    100 W, and past the last step the same rate to the last read: (0.3, 30). Request A
    [0.11, 0.14] of 3 tokens falls between two equal reads: it gets 0.03 s * 100 W = 3 J
    (the raw reads would give it 0 J and an infinite ratio). B [0.21, 0.29]: 8 J, from the
    extrapolated tail. Window: E(0.29) - E(0.11) = 18 J."""
    counter = {0.0: 0.0, 0.05: 0.0, 0.1: 10.0, 0.15: 10.0, 0.2: 20.0, 0.25: 20.0, 0.3: 20.0}
    path = analysed(
        tmp_path,
        [request(0.11, 0.14, 3, "pA"), request(0.21, 0.29, 8, "pB")],
        counter_trace({t: 1e4 + e for t, e in counter.items()}, 250.0),
    )
    rows = fetch(
        path, "SELECT prompt_id, attributed_j, j_per_token FROM request_energy ORDER BY prompt_id"
    )
    assert [r["attributed_j"] for r in rows] == pytest.approx([3.0, 8.0])
    assert [r["j_per_token"] for r in rows] == pytest.approx([1.0, 1.0])
    w = one(path, "SELECT energy_j, energy_source FROM window_energy")
    assert (w["energy_j"], w["energy_source"]) == (pytest.approx(18.0), "counter")


def test_a_gpu_without_the_counter_falls_back_to_the_trapezoid(tmp_path: Path) -> None:
    """nvidia-smi rows (energy_j NULL) of 100, 200, 300 W at t = 0, 1, 2, one request [0, 2]
    of 40 tokens: trapezoids 1 * (100 + 200) / 2 + 1 * (200 + 300) / 2 = 150 + 250 = 400 J,
    10 J/token; every row says 'power_trapezoid' and there is no counter figure."""
    path = analysed(tmp_path, [request(0, 2, 40)], power_trace([0, 1, 2], [100.0, 200.0, 300.0]))
    w = one(path, "SELECT * FROM window_energy")
    assert (w["energy_source"], w["n_gpus_counter"], w["counter_energy_j"]) == (
        "power_trapezoid",
        0,
        None,
    )
    assert w["energy_j"] == pytest.approx(400) and w["trapezoid_energy_j"] == pytest.approx(400)
    r = one(path, "SELECT * FROM request_energy")
    assert (r["attributed_j"], r["energy_source"]) == (pytest.approx(400), "power_trapezoid")
    s = one(path, "SELECT * FROM energy_summary")
    assert (s["energy_source"], s["n_windows_counter"], s["j_per_token"]) == (
        "power_trapezoid",
        0,
        pytest.approx(10),
    )


def test_one_gpu_by_counter_one_by_trapezoid_is_mixed(tmp_path: Path) -> None:
    """Request [0, 2]. GPU 0: counter 0, 30, 130, 160 J at t = -1, 0, 2, 3 (power 300 W,
    ignored): 130 - 30 = 100 J. GPU 1: no counter, 100 W at t = -1, 0, 1, 2, 3: 200 J.
    Window 300 J, 'mixed', 1 of 2 GPUs by counter; trapezoid of both GPUs' power =
    2 * (300 + 100) = 800 J; counter_energy_j NULL (not every GPU)."""
    samples = counter_trace({-1.0: 0.0, 0.0: 30.0, 2.0: 130.0, 3.0: 160.0})
    samples += power_trace([-1, 0, 1, 2, 3], 100.0, gpu_index=1)
    path = analysed(tmp_path, [request(0, 2, 60)], samples)
    w = one(path, "SELECT * FROM window_energy")
    assert (w["energy_source"], w["n_gpus_counter"], w["n_gpus"]) == ("mixed", 1, 2)
    assert w["energy_j"] == pytest.approx(300) and w["trapezoid_energy_j"] == pytest.approx(800)
    assert w["counter_energy_j"] is None


def test_a_counter_that_does_not_cover_the_span_is_not_used(tmp_path: Path) -> None:
    """Request [0, 2]; GPU 0 at 300 W every 0.5 s from 0 to 2, its counter only from t = 0.5
    (a read failed at 0): the counter cannot give E(0) without holding it flat, so the GPU
    falls back to the trapezoid: 2 s * 300 W = 600 J, 'power_trapezoid'."""
    samples = [
        gpu_sample(t, 300.0, energy_j=None if t < 0.5 else 1000 + 10 * t)
        for t in (0.0, 0.5, 1.0, 1.5, 2.0)
    ]
    w = one(analysed(tmp_path, [request(0, 2, 10)], samples), "SELECT * FROM window_energy")
    assert (w["energy_source"], w["energy_j"]) == ("power_trapezoid", pytest.approx(600))


def test_a_gpu_with_only_the_counter_uses_it(tmp_path: Path) -> None:
    """No power_w at all, counter 0, 10, 50, 70 J at t = -1, 0, 1, 2, request [0, 1.5]:
    E(1.5) = 50 + 0.5 * 20 = 60, E(0) = 10 -> 50 J; no power, so no trapezoid figure."""
    samples = counter_trace({-1.0: 0.0, 0.0: 10.0, 1.0: 50.0, 2.0: 70.0}, watts=None)
    w = one(analysed(tmp_path, [request(0, 1.5, 25)], samples), "SELECT * FROM window_energy")
    assert (w["energy_source"], w["energy_j"], w["trapezoid_energy_j"]) == (
        "counter",
        pytest.approx(50),
        None,
    )


def test_energy_summary_says_mixed_when_its_windows_differ(tmp_path: Path) -> None:
    """One setting, windows w1 (counter: 100 J/s, so 100 J over [0, 1], samples every 0.5 s
    from -0.5 to 1.5) and w2 (trapezoid: 300 W, 300 J), one request [0, 1] of 50 tokens each:
    energy 400 J over 100 tokens = 4 J/token, source 'mixed', 1 window by counter."""
    requests = [request(0, 1, 50, window_id=w) for w in ("w1", "w2")]
    samples = counter_trace({t: 1000.0 + 100.0 * t for t in (-0.5, 0, 0.5, 1, 1.5)}, window_id="w1")
    samples += power_trace([-0.5, 0, 0.5, 1, 1.5], 300.0, window_id="w2")
    s = one(analysed(tmp_path, requests, samples), "SELECT * FROM energy_summary")
    assert (s["energy_source"], s["n_windows_counter"], s["n_windows"]) == ("mixed", 1, 2)
    assert (s["energy_j"], s["j_per_token"]) == pytest.approx((400, 4))


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["counter", "counter"], "counter"),
        (["power_trapezoid"], "power_trapezoid"),
        (["counter", "power_trapezoid"], "mixed"),
        (["counter", "mixed"], "mixed"),
        ([], None),
    ],
)
def test_energy_ratio_source_is_the_requests_one_source(
    values: list[str], expected: str | None
) -> None:
    assert combined_source(pd.Series(values, dtype=object)) == expected
