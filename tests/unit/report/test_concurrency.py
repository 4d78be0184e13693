"""Effective concurrency in the report: the nominal ticks of the concurrency charts carry it
beneath them, and the per-window throughput table has its column (charts.concurrency_ticks).
The speedup rows' effective_concurrency comes from analyze's speedup_sweep
(tests/unit/analyze/test_speedup_sweep.py)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from specsweep.report import charts
from specsweep.report.charts import concurrency_ticks
from specsweep.report.context import throughput_table

KEY = {"engine": "llama.cpp", "tp": 1, "workload": "chat", "max_tokens": 64}


def _labels(ax) -> list[str]:
    return [t.get_text() for t in ax.get_xticklabels()]


def test_ticks_show_the_mean_effective_concurrency_beneath_the_nominal() -> None:
    """At 4: two windows held 3.0 and 2.8 in flight: mean 2.9; at 1: 1.0."""
    frame = pd.DataFrame({"concurrency": [1, 4, 4], "effective_concurrency": [1.0, 3.0, 2.8]})
    fig, ax = plt.subplots()
    concurrency_ticks(ax, frame)
    assert _labels(ax) == ["1\n1.0", "4\n2.9"]
    assert ax.get_xlabel() == "concurrency (nominal; effective below)"
    plt.close(fig)


def test_without_the_column_the_ticks_are_nominal() -> None:
    fig, ax = plt.subplots()
    concurrency_ticks(ax, pd.DataFrame({"concurrency": [1, 8]}))
    assert _labels(ax) == ["1", "8"] and ax.get_xlabel() == "concurrency"
    plt.close(fig)


def test_throughput_chart_and_table_carry_it() -> None:
    rows = pd.DataFrame(
        [
            {
                **KEY,
                "method": "autoregressive",
                "concurrency": c,
                "n": 9,
                "throughput_tps": t,
                "effective_concurrency": e,
                "ttft_p50_s": 0.1,
                "ttft_p99_s": 0.2,
                "error_rate": 0.0,
            }
            for c, t, e in ((1, 10.0, 1.0), (4, 30.0, 3.0))
        ]
    )
    fig, ax = plt.subplots()
    charts.plot_throughput_by_concurrency(ax, rows, {"autoregressive": (0.0, 0.0, 1.0)})
    assert _labels(ax) == ["1\n1.0", "4\n3.0"]
    plt.close(fig)
    table = str(throughput_table(rows))
    assert "eff. conc." in table and "&4&3.0&9&30.0&" in table.replace(" ", "")
