"""GPU energy views (energy_segments, window_energy, request_energy) and the energy_ratio
table on hand-built requests and gpu_samples; every figure is worked by hand in the
docstring.

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/analyze/test_analyze_energy.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.analyze_rows import (
    gpu_sample,
    one,
    power_trace,
)
from tests.unit.analyze.test_analyze_energy import analysed, seq  # noqa: F401


def test_nvml_counter_is_primary_and_the_trapezoid_is_the_check(tmp_path: Path) -> None:
    """GPU 0 at 300 W with its energy counter at 1000 + 300 t J, sampled every 0.1 s from
    t = -0.05 (so the span ends fall between samples): span [0, 2], counter E(2) - E(0) =
    (1000 + 600) - 1000 = 600 J = energy_j (source 'counter'), the trapezoid's 600 J beside it.
    Adding GPU 1 without a counter at 100 W: GPU 0 by its counter 600 J + GPU 1 by trapezoid
    200 J = 800 J, source 'mixed'; counter_energy_j NULL (not every GPU had the counter).
    (Before the counter became primary it was only this cross-check: test_energy_counter.py.)"""
    times = [round(-0.05 + i / 10, 6) for i in range(22)]
    samples = [gpu_sample(t, 300.0, energy_j=1000 + 300 * t) for t in times]
    path = analysed(tmp_path, seq([(0, 1), (1, 2)], [100, 100]), samples)
    w = one(path, "SELECT * FROM window_energy")
    assert (w["energy_j"], w["counter_energy_j"], w["trapezoid_energy_j"]) == pytest.approx(
        (600, 600, 600)
    )
    assert w["energy_source"] == "counter"
    path.unlink()
    samples += power_trace(times, 100.0, gpu_index=1)
    w = one(
        analysed(tmp_path, seq([(0, 1), (1, 2)], [100, 100]), samples),
        "SELECT * FROM window_energy",
    )
    assert w["energy_j"] == pytest.approx(800) and w["counter_energy_j"] is None
    assert (w["energy_source"], w["n_gpus_counter"]) == ("mixed", 1)
