"""Bootstrap functions and the speedup table, on hand-built data."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest
from analyze_rows import decode_req, fetch, one

from analyze import stats
from schema.paired import paired_speedup


def _naive_medians(by_prompt: list[np.ndarray], counts: np.ndarray) -> np.ndarray:
    """Reference: build every resample explicitly and take np.median."""
    return np.array([
        np.median(np.concatenate([np.repeat(v, c) for v, c in zip(by_prompt, row)]))
        for row in counts
    ])  # fmt: skip


def test_resample_counts_shape_and_totals():
    counts = stats.resample_counts(np.random.default_rng(1), n_prompts=7, n_boot=50)
    assert counts.shape == (50, 7)
    assert (counts.sum(axis=1) == 7).all()


def test_vectorised_medians_equal_explicit_resamples():
    # uneven reps (1 to 4 per prompt), odd and even resample sizes both occur
    rng = np.random.default_rng(3)
    by_prompt = [rng.normal(50, 10, size=rng.integers(1, 5)) for _ in range(9)]
    values = np.concatenate(by_prompt)
    prompt_idx = np.repeat(np.arange(9), [len(v) for v in by_prompt])
    counts = stats.resample_counts(rng, n_prompts=9, n_boot=300)
    got = stats.resampled_medians(values, prompt_idx, counts)
    np.testing.assert_allclose(got, _naive_medians(by_prompt, counts), rtol=0, atol=1e-12)


def test_bootstrap_point_estimate_by_hand():
    # method values 25, 40, 50 (median 40); baseline 10, 20, 30 (median 20) -> 2.0
    point, lo, hi = stats.bootstrap_ratio_of_medians([[25], [40], [50]], [[10], [20], [30]])
    assert point == pytest.approx(2.0)
    # both sides rank the prompts alike, so every resample's medians come from one prompt:
    # the ratio is 25/10, 40/20 or 50/30, and the CI lies within [5/3, 2.5]
    assert 5 / 3 - 1e-12 <= lo <= point <= hi <= 2.5 + 1e-12


def test_bootstrap_ci_is_the_95_percent_percentile_interval():
    # the contract: default_rng(20260101) draws one 2000 x n_prompts index matrix; the CI is
    # the 2.5th and 97.5th percentile of the ratio of medians over those explicit resamples
    rng = np.random.default_rng(8)
    m = [rng.normal(20, 4, size=2) for _ in range(15)]
    b = [rng.normal(15, 4, size=2) for _ in range(15)]
    counts = stats.resample_counts(np.random.default_rng(20260101), n_prompts=15, n_boot=2000)
    ratios = _naive_medians(m, counts) / _naive_medians(b, counts)
    _, lo, hi = stats.bootstrap_ratio_of_medians(m, b)
    assert (lo, hi) == pytest.approx(tuple(np.percentile(ratios, [2.5, 97.5])), rel=1e-12)


def test_bootstrap_is_deterministic():
    rng = np.random.default_rng(11)
    m = [rng.normal(20, 3, size=3) for _ in range(12)]
    b = [rng.normal(18, 3, size=3) for _ in range(12)]
    assert stats.bootstrap_ratio_of_medians(m, b) == stats.bootstrap_ratio_of_medians(m, b)
    assert stats.bootstrap_ratio_of_medians(m, b, seed=1) != stats.bootstrap_ratio_of_medians(m, b)


def test_bootstrap_ci_degenerate_when_all_equal():
    # every method request 20, every baseline request 8: each resample gives 20 / 8 = 2.5
    point, lo, hi = stats.bootstrap_ratio_of_medians([[20.0, 20.0]] * 5, [[8.0, 8.0]] * 5)
    assert point == lo == hi == 2.5


def test_bootstrap_ci_contains_point_on_noisy_data():
    rng = np.random.default_rng(5)
    base = [rng.normal(30, 4, size=2) for _ in range(40)]
    method = [v * 1.5 + rng.normal(0, 2, size=2) for v in base]
    point, lo, hi = stats.bootstrap_ratio_of_medians(method, base)
    assert lo < point < hi
    assert lo > 1.3 and hi < 1.7


def test_bootstrap_rejects_unpaired_prompts():
    with pytest.raises(ValueError):
        stats.bootstrap_ratio_of_medians([[1.0], [2.0]], [[1.0]])
    with pytest.raises(ValueError):
        stats.bootstrap_ratio_of_medians([[1.0], []], [[1.0], [2.0]])


def _rows(method: str, speeds: dict[str, float], reps: int = 1, **kw) -> list[dict]:
    return [
        decode_req(tps, method=method, prompt_id=p, rep=r, window_id=f"w-{method}", **kw)
        for p, tps in speeds.items()
        for r in range(reps)
    ]


def test_speedup_uses_shared_prompts_only(analyzed):
    # baseline p1..p3: 10, 20, 30 (median 20); method p1..p3: 25, 40, 50 (median 40) -> 2.0
    # p4 only the method has (1000 tok/s) and p5 only the baseline has (1 tok/s) are ignored;
    # counting them would give median(25, 40, 50, 1000) = 45 / median(1, 10, 20, 30) = 15 = 3.0
    rows = [
        *_rows("autoregressive", {"p1": 10, "p2": 20, "p3": 30, "p5": 1}),
        *_rows("dflash", {"p1": 25, "p2": 40, "p3": 50, "p4": 1000}),
    ]
    row = one(analyzed(rows), "SELECT * FROM speedup")
    assert row["method"] == "dflash" and row["baseline"] == "autoregressive"
    assert row["speedup"] == pytest.approx(2.0)
    assert (row["n"], row["n_baseline"], row["n_prompts"]) == (3, 3, 3)
    assert row["method_decode_tps_p50"] == pytest.approx(40.0)
    assert row["baseline_decode_tps_p50"] == pytest.approx(20.0)
    assert row["ci_low"] <= row["speedup"] <= row["ci_high"]
    assert row["significant"] is True  # CI within [5/3, 2.5], see the pure test above


def test_speedup_degenerate_ci_with_identical_requests(analyzed):
    # 4 prompts x 2 reps, baseline always 10 tok/s, method always 20: CI = [2.0, 2.0]
    speeds = {f"p{i}": 10 for i in range(4)}
    rows = [*_rows("autoregressive", speeds, reps=2),
            *_rows("dflash", {p: 20 for p in speeds}, reps=2)]  # fmt: skip
    row = one(analyzed(rows), "SELECT * FROM speedup")
    assert row["ci_low"] == row["ci_high"] == pytest.approx(2.0)
    assert (row["n"], row["n_prompts"]) == (8, 4)


def test_not_significant_when_ci_straddles_one(analyzed):
    # baseline 10, 20, 30, 40; method 20, 10, 40, 30: both medians 25 -> speedup 1.0
    # a resample of p1,p1,p1,p2 gives 20 / 10 = 2.0, one of p2,p2,p2,p1 gives 10 / 20 = 0.5
    rows = [*_rows("autoregressive", {"p1": 10, "p2": 20, "p3": 30, "p4": 40}),
            *_rows("dflash", {"p1": 20, "p2": 10, "p3": 40, "p4": 30})]  # fmt: skip
    row = one(analyzed(rows), "SELECT * FROM speedup")
    assert row["speedup"] == pytest.approx(1.0)
    assert row["ci_low"] < 1 < row["ci_high"]
    assert row["significant"] is False


def test_significantly_slower(analyzed):
    # every method value (5..8) is below every baseline value (10..16): every ratio < 1
    # point = median(5, 7, 6, 8) / median(10, 12, 14, 16) = 6.5 / 13 = 0.5
    rows = [*_rows("autoregressive", {"p1": 10, "p2": 12, "p3": 14, "p4": 16}),
            *_rows("dflash", {"p1": 5, "p2": 7, "p3": 6, "p4": 8})]  # fmt: skip
    row = one(analyzed(rows), "SELECT * FROM speedup")
    assert row["speedup"] == pytest.approx(0.5)
    assert row["ci_high"] < 1 and row["significant"] is True


def test_window_ratios(analyzed):
    # three concurrent requests (start 0) of 61 tokens per window, on p1..p3
    # baseline: 10 tok/s, ttft 0.4, 0.5, 0.6 -> e2e = ttft + 6.0, last end 6.6
    # method:   20 tok/s, ttft 0.1, 0.25, 0.7 -> e2e = ttft + 3.0, last end 3.7
    # throughput_speedup = (183 / 3.7) / (183 / 6.6) = 6.6 / 3.7
    # ttft_ratio = median 0.25 / median 0.5 = 0.5 (the means would give 0.35 / 0.5)
    # method: 60 decode tokens in 20, 20, 30 verify steps -> pooled (60 * 3) / 70 = 18 / 7
    # (the stored accept_length is not read: the one definition is recomputed)
    base = [decode_req(10, prompt_id=f"p{i}", ttft_s=t) for i, t in enumerate((0.4, 0.5, 0.6))]
    method = [
        decode_req(20, method="dflash", prompt_id=f"p{i}", ttft_s=t, accept_length=9.0,
                   spec_verify_ct=steps)
        for i, (t, steps) in enumerate(((0.1, 20), (0.25, 20), (0.7, 30)))
    ]
    row = one(analyzed([*base, *method]), "SELECT * FROM speedup")
    assert row["throughput_speedup"] == pytest.approx(6.6 / 3.7)
    assert row["ttft_ratio"] == pytest.approx(0.5)
    assert row["accept_length_tw"] == pytest.approx(18 / 7)


def test_no_row_without_a_baseline_at_the_same_load_point(analyzed):
    # dflash ran at tp 4 as well, where no baseline ran: only the tp 1 comparison exists
    rows = [*_rows("autoregressive", {"p1": 10}), *_rows("dflash", {"p1": 20}),
            *_rows("dflash", {"p1": 20}, tp=4)]  # fmt: skip
    assert [r["tp"] for r in fetch(analyzed(rows), "SELECT tp FROM speedup")] == [1]


def test_baseline_is_a_bound_parameter(analyzed):
    # against baseline "dflash" (20 tok/s), autoregressive (10 tok/s) has speedup 0.5
    rows = [*_rows("autoregressive", {"p1": 10}), *_rows("dflash", {"p1": 20})]
    path = analyzed(rows, baseline="dflash")
    row = one(path, "SELECT * FROM speedup")
    assert (row["method"], row["baseline"]) == ("autoregressive", "dflash")
    assert row["speedup"] == pytest.approx(0.5)
    assert one(path, "SELECT baseline FROM analysis_params")["baseline"] == "dflash"


def _pandas_speedups(pairs: pd.DataFrame) -> dict[tuple, dict]:
    """The oracle: build_speedup before issue 12, the whole speedup_pairs view grouped in
    pandas, per prompt_id lists for paired_speedup, pandas medians for the rest."""
    out = {}
    for key, rows in pairs.groupby(stats.GROUP_KEY, sort=True):
        method, base = rows[rows["role"] == "method"], rows[rows["role"] == "baseline"]
        by_prompt = [{p: g.to_numpy(dtype=float) for p, g in s.groupby("prompt_id")["decode_tps"]}
                     for s in (method, base)]  # fmt: skip
        result = paired_speedup(*by_prompt)
        assert result is not None
        out[key] = {
            "baseline": rows["baseline"].iat[0], "speedup": result.speedup,
            "ci_low": result.ci_low, "ci_high": result.ci_high,
            "significant": result.significant, "n": len(method), "n_baseline": len(base),
            "n_prompts": result.n_prompts,
            "ttft_ratio": method["ttft_s"].median() / base["ttft_s"].median(),
            "method_decode_tps_p50": method["decode_tps"].median(),
            "baseline_decode_tps_p50": base["decode_tps"].median(),
        }  # fmt: skip
    return out


def test_speedup_table_equals_the_pandas_path(analyzed):
    # 2 methods x 2 tp against the baseline, 7 prompts, 1 to 4 reps each (uneven), speeds
    # rounded to whole tok/s (ties), ttft varied; p7 only the baseline ran at tp 2, p8 only
    # dflash ran: both are left out. Every column equals the old pandas path's exactly.
    rng = np.random.default_rng(4)
    extra = {("autoregressive", 2): ["p7"], ("dflash", 1): ["p8"], ("dflash", 2): ["p8"]}
    rows = []
    for tp in (1, 2):
        for method in ("autoregressive", "dflash", "eagle3"):
            prompts = [f"p{i}" for i in range(7)] + extra.get((method, tp), [])
            rows += [decode_req(float(rng.integers(8, 40)), method=method, prompt_id=p, rep=r,
                                tp=tp, window_id=f"w-{method}-{tp}",
                                ttft_s=float(rng.uniform(0.1, 0.9)))
                     for p in prompts for r in range(int(rng.integers(1, 5)))]  # fmt: skip
    path = analyzed(rows)
    with duckdb.connect(str(path), read_only=True) as con:
        want = _pandas_speedups(con.execute("SELECT * FROM speedup_pairs").df())
    got = fetch(path, "SELECT * FROM speedup ORDER BY ALL")
    assert len(got) == len(want) == 4
    for row in got:
        expected = want[tuple(row[k] for k in stats.GROUP_KEY)]
        assert {k: row[k] for k in expected} == expected
        assert (row["n_boot"], row["seed"]) == (stats.N_BOOT, stats.SEED)
