"""The speedup table on hand-built rows: the paired t interval on per-prompt log ratios,
abstention, Holm across the campaign and the A/A control, each against figures computed here
by hand (plain Python sums; t quantiles from scipy or from tables), never by schema.paired."""

from __future__ import annotations

import math
import statistics

import duckdb
import numpy as np
import pytest
from analyze_rows import decode_req, fetch, one
from scipy import stats as sps

from analyze import stats

T2_975 = 4.302652729911275  # Student t, 2 degrees of freedom, 97.5th percentile
T3_975 = 3.182446305284263


def _rows(method: str, speeds: dict[str, float], reps: int = 1, **kw) -> list[dict]:
    kw.setdefault("window_id", f"w-{method}-{kw.get('workload', 'chat')}")
    return [decode_req(tps, method=method, prompt_id=p, rep=r, **kw)
            for p, tps in speeds.items() for r in range(reps)]  # fmt: skip


def _t_by_hand(logs: list[float], t_quantile: float) -> tuple[float, float, float]:
    """exp(mean), exp(mean -/+ t * sd / sqrt(n)) of per-prompt log ratios."""
    mean, se = statistics.fmean(logs), statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - t_quantile * se), math.exp(mean + t_quantile * se)


def test_speedup_uses_shared_prompts_only(analyzed):
    """Ratios 2.5, 2, 5/3 on p1..p3; p4 (method only, 1000 tok/s) and p5 (baseline only,
    1 tok/s) are left out. speedup = (2.5 * 2 * 5/3) ** (1/3); t on 2 df."""
    rows = [*_rows("autoregressive", {"p1": 10, "p2": 20, "p3": 30, "p5": 1}),
            *_rows("dflash", {"p1": 25, "p2": 40, "p3": 50, "p4": 1000})]  # fmt: skip
    row = one(analyzed(rows), "SELECT * FROM speedup")
    point, lo, hi = _t_by_hand([math.log(2.5), math.log(2), math.log(5 / 3)], T2_975)
    assert row["method"] == "dflash" and row["baseline"] == "autoregressive"
    assert (row["speedup"], row["ci_low"], row["ci_high"]) == pytest.approx((point, lo, hi))
    assert (row["n"], row["n_baseline"], row["n_prompts"], row["df"]) == (3, 3, 3, 2)
    assert row["method_decode_tps_p50"] == pytest.approx(40.0)
    assert row["baseline_decode_tps_p50"] == pytest.approx(20.0)
    assert row["significant"] is True and row["significant_raw"] is True
    assert row["is_control"] is False and row["aa_speedup"] is None


def test_too_few_prompts_give_no_interval_and_no_claim(analyzed):
    """Two prompts, 2x faster on both: NULL interval with the reason, untested (p NULL), so
    neither significant nor adjusted."""
    rows = [*_rows("autoregressive", {"p1": 10, "p2": 12}, reps=3),
            *_rows("dflash", {"p1": 20, "p2": 25}, reps=3)]  # fmt: skip
    row = one(analyzed(rows), "SELECT * FROM speedup")
    assert row["speedup"] == pytest.approx(math.sqrt(2 * 25 / 12))
    assert row["ci_low"] is None and row["ci_high"] is None and row["p_value"] is None
    assert row["ci_reason"].startswith("2 prompts:")
    assert row["significant"] is None and row["significant_raw"] is False


def test_identical_ratios_give_no_zero_width_interval(analyzed):
    speeds = {f"p{i}": 10 + i for i in range(4)}
    rows = [*_rows("autoregressive", speeds, reps=2),
            *_rows("dflash", {p: 2 * v for p, v in speeds.items()}, reps=2)]  # fmt: skip
    row = one(analyzed(rows), "SELECT * FROM speedup")
    assert row["speedup"] == pytest.approx(2.0)
    assert row["ci_low"] is None and row["ci_reason"] == "no spread between prompts"


def test_not_significant_when_the_interval_holds_one(analyzed):
    """Ratios 2, 0.5, 4/3, 3/4: logs cancel to 0 on average: speedup 1."""
    rows = [*_rows("autoregressive", {"p1": 10, "p2": 20, "p3": 30, "p4": 40}),
            *_rows("dflash", {"p1": 20, "p2": 10, "p3": 40, "p4": 30})]  # fmt: skip
    row = one(analyzed(rows), "SELECT * FROM speedup")
    assert row["speedup"] == pytest.approx(1.0)
    assert row["ci_low"] < 1 < row["ci_high"] and row["significant"] is False


def test_significantly_slower(analyzed):
    """Ratios 0.5, 7/12, 6/14, 0.5: t on 3 df, all below 1."""
    rows = [*_rows("autoregressive", {"p1": 10, "p2": 12, "p3": 14, "p4": 16}),
            *_rows("dflash", {"p1": 5, "p2": 7, "p3": 6, "p4": 8})]  # fmt: skip
    row = one(analyzed(rows), "SELECT * FROM speedup")
    point, lo, hi = _t_by_hand([math.log(x) for x in (0.5, 7 / 12, 6 / 14, 0.5)], T3_975)
    assert (row["speedup"], row["ci_low"], row["ci_high"]) == pytest.approx((point, lo, hi))
    assert row["ci_high"] < 1 and row["significant"] is True


def test_holm_across_the_campaign(analyzed):
    """Three methods, one window: raw p-values (t tests by hand) adjusted by Holm by hand;
    a method whose raw interval excludes 1 can lose its claim once adjusted."""
    base = {f"p{i}": 10.0 + i for i in range(5)}
    jitter = [0.0, 0.1, -0.1, 0.05, -0.05]
    shifts = {"a": 0.5, "b": 0.105, "c": 0.02}
    rows = _rows("autoregressive", base)
    logs = {}
    for m, shift in shifts.items():
        logs[m] = [shift + j for j in jitter]
        rows += _rows(m, {p: v * math.exp(d) for (p, v), d in zip(base.items(), logs[m])})
    got = {r["method"]: r for r in fetch(analyzed(rows), "SELECT * FROM speedup")}
    raw = {}
    for m, ls in logs.items():
        t = statistics.fmean(ls) / (statistics.stdev(ls) / math.sqrt(5))
        raw[m] = 2 * sps.t.sf(abs(t), 4)
        assert got[m]["p_value"] == pytest.approx(raw[m])
    order = sorted(raw, key=raw.get)  # a, b, c
    adjusted, running = {}, 0.0
    for rank, m in enumerate(order):
        running = max(running, min(1.0, (3 - rank) * raw[m]))
        adjusted[m] = running
    for m in shifts:
        assert got[m]["p_holm"] == pytest.approx(adjusted[m])
        assert got[m]["significant"] is bool(adjusted[m] < 0.05)
    assert raw["b"] < 0.05 and got["b"]["significant_raw"] and adjusted["b"] >= 0.05
    # simultaneous intervals: level 1 - 0.05 / 3 on 4 df, wider than the raw 95% ones
    se = statistics.stdev(jitter) / math.sqrt(5)
    half = sps.t.ppf(1 - 0.05 / 6, 4) * se
    for m in shifts:
        mean = statistics.fmean(logs[m])
        assert got[m]["n_family"] == 3
        assert (got[m]["sim_ci_low"], got[m]["sim_ci_high"]) == pytest.approx(
            (math.exp(mean - half), math.exp(mean + half))
        )
        assert got[m]["sim_ci_low"] < got[m]["ci_low"]


def test_the_aa_control_sets_the_noise_floor(analyzed):
    """Two workloads, each with the baseline, its A/A control and dflash on 4 prompts.
    service_var = max(0, mean over the A/A windows of (a_w^2 - var(d_w) / 4)); dflash's
    interval adds it, with Satterthwaite df; the control is not a claim."""
    rows, aa_logs, m_logs = [], {}, {}
    for w, (aa_shift, m_shift) in {"chat": (0.08, 0.3), "code": (-0.06, 0.25)}.items():
        base = {f"p{i}": 10.0 + 2 * i for i in range(4)}
        noise = [0.01, -0.02, 0.015, -0.005]
        aa_logs[w] = [aa_shift + n for n in noise]
        m_logs[w] = [m_shift + 2 * n for n in noise]
        rows += _rows("autoregressive", base, workload=w)
        rows += _rows(
            "autoregressive-aa",
            {p: v * math.exp(d) for (p, v), d in zip(base.items(), aa_logs[w])},
            workload=w,
        )
        rows += _rows(
            "dflash", {p: v * math.exp(d) for (p, v), d in zip(base.items(), m_logs[w])}, workload=w
        )
    got = {(r["workload"], r["method"]): r for r in fetch(analyzed(rows), "SELECT * FROM speedup")}
    terms = [statistics.fmean(a) ** 2 - statistics.variance(a) / 4 for a in aa_logs.values()]
    s2 = max(0.0, statistics.fmean(terms))
    assert s2 > 0
    control, method = got[("chat", "autoregressive-aa")], got[("chat", "dflash")]
    assert control["is_control"] is True and control["significant"] is None
    assert control["p_holm"] is None and control["service_var"] == 0
    assert method["aa_speedup"] == pytest.approx(control["speedup"])
    assert method["aa_speedup"] == pytest.approx(math.exp(statistics.fmean(aa_logs["chat"])))
    assert method["service_var"] == pytest.approx(s2)
    v_p = statistics.variance(m_logs["chat"]) / 4
    df = (v_p + s2) ** 2 / (v_p**2 / 3 + s2**2 / 2)
    half = sps.t.ppf(0.975, df) * math.sqrt(v_p + s2)
    mean = statistics.fmean(m_logs["chat"])
    assert method["df"] == pytest.approx(df)
    assert (method["ci_low"], method["ci_high"]) == pytest.approx(
        (math.exp(mean - half), math.exp(mean + half))
    )


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
        decode_req(
            20,
            method="dflash",
            prompt_id=f"p{i}",
            ttft_s=t,
            accept_length=9.0,
            spec_verify_ct=steps,
        )
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
    params = one(path, "SELECT * FROM analysis_params")
    assert (params["baseline"], params["aa_method"]) == ("dflash", "dflash-aa")


def _by_hand(pairs: list[dict]) -> dict[tuple, tuple[float, float, float, int]]:
    """The oracle, in plain Python: per comparison, per prompt the mean of ln decode_tps of
    each side, their differences, exp(mean) and the t interval on n - 1 df."""
    groups: dict[tuple, dict] = {}
    for r in pairs:
        key = tuple(r[k] for k in stats.GROUP_KEY)
        groups.setdefault(key, {}).setdefault(r["prompt_id"], {"method": [], "baseline": []})
        groups[key][r["prompt_id"]][r["role"]].append(math.log(r["decode_tps"]))
    out = {}
    for key, prompts in groups.items():
        logs = [
            statistics.fmean(s["method"]) - statistics.fmean(s["baseline"])
            for s in prompts.values()
        ]
        t = sps.t.ppf(0.975, len(logs) - 1)
        out[key] = (*_t_by_hand(logs, t), len(logs))
    return out


def test_speedup_table_equals_an_independent_computation(analyzed):
    # 2 methods x 2 tp against the baseline, 7 prompts, 1 to 4 reps each (uneven), speeds
    # rounded to whole tok/s; p7 only the baseline ran at tp 2, p8 only dflash ran: both
    # are left out. Every interval equals the plain-Python oracle's.
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
        pairs = con.execute("SELECT * FROM speedup_pairs").df().to_dict("records")
    want = _by_hand(pairs)
    got = fetch(path, "SELECT * FROM speedup ORDER BY ALL")
    assert len(got) == len(want) == 4
    for row in got:
        expected = want[tuple(row[k] for k in stats.GROUP_KEY)]
        assert (row["speedup"], row["ci_low"], row["ci_high"]) == pytest.approx(expected[:3])
        assert row["n_prompts"] == expected[3] == 7
