"""Best-of ranking on hand-built rows: the paired speedup, its agreement with the report's
speedup table on the same rows, and the tie / overlapping-interval rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from specsweep.collect.scheduling.ranking import Ranked, describe, rank_methods
from specsweep.schema.store import Store
from tests.support.fixtures.schema import request_row

BASE = "autoregressive"


def speed_row(i: int, method: str, prompt: str, tps: float, **changes: Any) -> dict[str, Any]:
    """A request of decode speed tps: 11 tokens, ttft 0.1 s, e2e = 0.1 + 10 / tps."""
    e2e = 0.1 + 10 / tps
    return request_row(
        i,
        method=method,
        prompt_id=prompt,
        ttft_s=0.1,
        e2e_s=e2e,
        output_tokens=11,
        chunk_times_s=[0.1, e2e],
        **changes,
    )


def store_of(tmp_path: Path, specs: list[tuple]) -> Store:
    """specs: (method, prompt, tps, {column changes}) in order; returns the filled store."""
    store = Store(tmp_path / "r.duckdb")
    rows = [speed_row(i, m, p, tps, **extra) for i, (m, p, tps, extra) in enumerate(specs)]
    assert store.append("requests", rows) == len(rows)
    return store


def test_scores_are_median_window_speedups(tmp_path: Path) -> None:
    """baseline 10 tok/s on p0, p1 in w1 and on p0 in w2; a: 20 in w1 (2.0x), 10 in w2 (1.0x),
    median 1.5; b: 40 in w1 (4.0x); c: 5 (0.5x). Two prompts at most: no window has an
    interval (too few prompts). Another tp, a failed request and another campaign are not
    counted."""
    w2 = {"workload": "w2"}
    specs = [
        (BASE, "p0", 10, {}),
        (BASE, "p1", 10, {}),
        (BASE, "p0", 10, w2),
        ("a", "p0", 20, {}),
        ("a", "p1", 20, {}),
        ("a", "p0", 10, w2),
        ("b", "p0", 40, {}),
        ("b", "p1", 40, {}),
        ("c", "p0", 5, {}),
        ("a", "p0", 1000, {"tp": 4}),
        ("c", "p1", 1000, {"ok": False, "error_kind": "http"}),
    ]
    store = store_of(tmp_path, specs)
    ranked = rank_methods(store, "camp", 1, BASE)
    assert [r.method for r in ranked] == ["b", "a", "c"]
    assert [round(r.score, 6) for r in ranked] == [4.0, 1.5, 0.5]
    assert [(r.ci_low, r.ci_high) for r in ranked] == [(None, None)] * 3
    assert ranked[1].overlaps(ranked[0])
    assert describe(ranked).startswith("b 4.00x [no interval], a 1.50x [no interval]")
    assert [r.n_windows for r in ranked] == [1, 2, 1]
    assert rank_methods(store, "other-campaign", 1, BASE) == []


def test_paired_ranking_agrees_with_the_report_where_an_unpaired_median_does_not(
    tmp_path: Path,
) -> None:
    """Baseline on p0..p5 at 10..60 tok/s (median 35). x is 1.2x on every prompt (median 42:
    1.2x paired and unpaired). y is exactly as fast as the baseline, but its requests on the
    slow prompts p0..p2 failed: its unpaired median is 50 (50 / 35 = 1.43x, "fastest"), its
    paired speedup on p3..p5 is 50 / 50 = 1.0x. The ranking says x at exactly 1.2x, as the
    report's paired speedup would; no interval from constant ratios (no spread)."""
    failed = {"ok": False, "error_kind": "http"}
    specs = []
    for k, tps in enumerate([10, 20, 30, 40, 50, 60]):
        specs += [
            (BASE, f"p{k}", tps, {}),
            ("x", f"p{k}", tps * 1.2, {}),
            ("y", f"p{k}", tps, failed if k < 3 else {}),
        ]
    store = store_of(tmp_path, specs)
    ranked = rank_methods(store, "camp", 1, BASE)
    assert [r.method for r in ranked] == ["x", "y"]
    ok = store.execute(
        "SELECT method, prompt_id, decode_tps(output_tokens, e2e_s, ttft_s), 0 "
        "FROM requests WHERE ok"
    )
    unpaired = {m: pd.Series([t for mm, _, t, _ in ok if mm == m]).median() for m in "xy"}
    base_median = pd.Series([t for m, _, t, _ in ok if m == BASE]).median()
    assert unpaired["y"] / base_median > unpaired["x"] / base_median  # what the old rule did
    assert all(r.ci_low is None for r in ranked)
    assert round(ranked[0].score, 9) == 1.2 and round(ranked[1].score, 9) == 1.0


def test_equal_scores_are_ordered_by_name(tmp_path: Path) -> None:
    specs = [(BASE, "p0", 10, {}), ("zeta", "p0", 20, {}), ("alpha", "p0", 20, {})]
    ranked = rank_methods(store_of(tmp_path, specs), "camp", 1, BASE)
    assert [r.method for r in ranked] == ["alpha", "zeta"]


def test_overlapping_intervals_are_named_not_separable() -> None:
    """b's interval [1.1, 1.5] overlaps the leader a's [1.3, 1.9]; c's [0.8, 1.0] does not."""
    ranked = [
        Ranked("a", 1.6, 1.3, 1.9, 1),
        Ranked("b", 1.3, 1.1, 1.5, 1),
        Ranked("c", 0.9, 0.8, 1.0, 1),
    ]
    assert ranked[1].overlaps(ranked[0]) and not ranked[2].overlaps(ranked[0])
    assert describe(ranked) == (
        "a 1.60x [1.30, 1.90], b 1.30x [1.10, 1.50], c 0.90x [0.80, 1.00] (not separable from a: b)"
    )
    assert describe(ranked[::2]) == "a 1.60x [1.30, 1.90], c 0.90x [0.80, 1.00]"


def test_a_window_without_shared_prompts_is_left_out(tmp_path: Path) -> None:
    specs = [(BASE, "p0", 10, {}), ("a", "p1", 20, {})]
    assert rank_methods(store_of(tmp_path, specs), "camp", 1, BASE) == []


def test_only_the_source_phases_rows_of_the_first_run_count(tmp_path: Path) -> None:
    """The choice CI once saw flip: a leads b on the source phase's workload (rewrite) (2.0x vs
    1.5x); the best_of phase then measures a on w2 at the same tp (0.5x), which would make
    a's median 1.25x and hand the lead to b; a second run's rows would move it again.
    Restricted to the source phase's workloads and methods of run 1, the order stays."""
    w2, run2 = {"workload": "w2"}, {"run": 2}
    specs = [
        (BASE, "p0", 10, {}),
        ("a", "p0", 20, {}),
        ("b", "p0", 15, {}),
        (BASE, "p0", 10, w2),
        ("a", "p0", 5, w2),
        (BASE, "p0", 10, run2),
        ("b", "p0", 40, run2),
        ("z", "p0", 90, {}),
    ]
    store = store_of(tmp_path, specs)
    assert [r.method for r in rank_methods(store, "camp", 1, BASE)] == ["z", "b", "a"]
    kept = rank_methods(store, "camp", 1, BASE, workloads=["rewrite"], methods=["a", "b"])
    assert [(r.method, round(r.score, 6)) for r in kept] == [("a", 2.0), ("b", 1.5)]
    assert [r.method for r in rank_methods(store, "camp", 1, BASE, run=2)] == ["b"]
