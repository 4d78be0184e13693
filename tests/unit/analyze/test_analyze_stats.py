"""The speedup table on hand-built rows: the interval with the pooled start variance (issue
36), abstention, Holm across the campaign and the A/A control, each against figures computed
here by hand (plain Python sums; t and F quantiles from scipy or from tables), never by
stats.paired or stats.starts."""

from __future__ import annotations

import math
import statistics

import duckdb
import numpy as np
import pytest
from scipy import stats as sps

from specsweep.schema.keys import COMPARISON
from tests.support.analyze_rows import decode_req, fetch, in_rounds, one

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
    1 tok/s) are left out. speedup = (2.5 * 2 * 5/3) ** (1/3). One start per side: a point
    estimate, no interval, no claim (issue 36)."""
    rows = [*_rows("autoregressive", {"p1": 10, "p2": 20, "p3": 30, "p5": 1}),
            *_rows("dflash", {"p1": 25, "p2": 40, "p3": 50, "p4": 1000})]  # fmt: skip
    row = one(analyzed(rows), "SELECT * FROM speedup")
    assert row["method"] == "dflash" and row["baseline"] == "autoregressive"
    assert row["speedup"] == pytest.approx((2.5 * 2 * 5 / 3) ** (1 / 3))
    assert (row["n"], row["n_baseline"], row["n_prompts"]) == (3, 3, 3)
    assert row["method_decode_tps_p50"] == pytest.approx(40.0)
    assert row["baseline_decode_tps_p50"] == pytest.approx(20.0)
    assert row["ci_low"] is None and row["ci_reason"].startswith("one service start per side")
    assert row["significant"] is None and row["significant_raw"] is False
    assert row["is_control"] is False and row["aa_speedup"] is None


def test_too_few_prompts_give_no_interval_and_no_claim(analyzed):
    """Two prompts, 2x faster on both, three rounds: NULL interval with the reason, untested
    (p NULL), so neither significant nor adjusted."""
    rows = in_rounds([*_rows("autoregressive", {"p1": 10, "p2": 12}, reps=3),
                      *_rows("dflash", {"p1": 20, "p2": 25}, reps=3)])  # fmt: skip
    row = one(analyzed(rows), "SELECT * FROM speedup")
    assert row["speedup"] == pytest.approx(math.sqrt(2 * 25 / 12))
    assert row["ci_low"] is None and row["ci_high"] is None and row["p_value"] is None
    assert row["ci_reason"].startswith("2 prompts:")
    assert row["significant"] is None and row["significant_raw"] is False


def test_identical_ratios_give_no_zero_width_interval(analyzed):
    """Every prompt exactly 2x in every round: no spread between prompts or starts."""
    speeds = {f"p{i}": 10 + i for i in range(4)}
    rows = in_rounds([*_rows("autoregressive", speeds, reps=2),
                      *_rows("dflash", {p: 2 * v for p, v in speeds.items()}, reps=2)])  # fmt: skip
    row = one(analyzed(rows), "SELECT * FROM speedup")
    assert row["speedup"] == pytest.approx(2.0)
    assert row["ci_low"] is None and row["ci_reason"] == "no spread between prompts or starts"


def _jitter(method: str, run: int, prompt: str) -> float:
    """A start effect per (method, round), shared by every prompt of the start, and a little
    per-prompt noise: the baseline's starts move too."""
    start = {1: 1.0, 2: 1.03, 3: 0.98}[run] if method != "autoregressive" else \
        {1: 1.0, 2: 0.99, 3: 1.02}[run]  # fmt: skip
    return start * (1 + 0.005 * math.sin(run * 3.1 + int(prompt[1:])))


def test_not_significant_when_the_interval_holds_one(analyzed):
    """Ratios 2, 0.5, 4/3, 3/4: logs cancel to 0 on average: speedup about 1 in 3 rounds."""
    rows = in_rounds([*_rows("autoregressive", {"p1": 10, "p2": 20, "p3": 30, "p4": 40}),
                      *_rows("dflash", {"p1": 20, "p2": 10, "p3": 40, "p4": 30})],
                     factor=_jitter)  # fmt: skip
    row = one(analyzed(rows), "SELECT * FROM speedup")
    assert row["speedup"] == pytest.approx(1.0, rel=0.05)
    assert row["ci_low"] < 1 < row["ci_high"] and row["significant"] is False


def test_significantly_slower(analyzed):
    """Ratios 0.5, 7/12, 6/14, 0.5 in each of 3 rounds whose starts move speed by a few
    percent: below 1 with an interval that excludes it."""
    rows = in_rounds([*_rows("autoregressive", {"p1": 10, "p2": 12, "p3": 14, "p4": 16}),
                      *_rows("dflash", {"p1": 5, "p2": 7, "p3": 6, "p4": 8})],
                     factor=_jitter)  # fmt: skip
    row = one(analyzed(rows), "SELECT * FROM speedup")
    assert row["n_runs"] == 3 and row["ci_high"] < 1 and row["significant"] is True


def test_holm_across_the_campaign(analyzed):
    """Three methods, one window, three rounds that repeat one another exactly (no start
    effect, no cell noise: the start variance is pooled to 0 and V is the prompts' term):
    raw p-values (t tests by hand) adjusted by Holm by hand; a method whose raw interval
    excludes 1 can lose its claim once adjusted."""
    base = {f"p{i}": 10.0 + i for i in range(5)}
    jitter = [0.0, 0.1, -0.1, 0.05, -0.05]
    shifts = {"a": 0.5, "b": 0.105, "c": 0.02}
    rows = _rows("autoregressive", base)
    logs = {}
    for m, shift in shifts.items():
        logs[m] = [shift + j for j in jitter]
        rows += _rows(m, {p: v * math.exp(d) for (p, v), d in zip(base.items(), logs[m])})
    got = {r["method"]: r for r in fetch(analyzed(in_rounds(rows)), "SELECT * FROM speedup")}
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
        assert got[m]["n_family"] == 3 and got[m]["start_sd"] == pytest.approx(0, abs=1e-9)
        assert (got[m]["sim_ci_low"], got[m]["sim_ci_high"]) == pytest.approx(
            (math.exp(mean - half), math.exp(mean + half))
        )
        assert got[m]["sim_ci_low"] < got[m]["ci_low"]


def test_the_aa_control_is_a_check_not_a_claim(analyzed):
    """The baseline, its A/A control and dflash on 4 prompts in 3 rounds: the control's
    comparison is in the table (aa_speedup on every row of its window) but is no claim, and
    its starts count in the pooled start variance like any configuration's."""
    base = {f"p{i}": 10.0 + 2 * i for i in range(4)}
    rows = in_rounds([*_rows("autoregressive", base), *_rows("autoregressive-aa", base),
                      *_rows("dflash", {p: 1.3 * v for p, v in base.items()})],
                     factor=_jitter)  # fmt: skip
    path = analyzed(rows)
    got = {r["method"]: r for r in fetch(path, "SELECT * FROM speedup")}
    control, method = got["autoregressive-aa"], got["dflash"]
    assert control["is_control"] is True and control["significant"] is None
    assert control["p_holm"] is None and method["n_family"] == 1
    assert method["aa_speedup"] == pytest.approx(control["speedup"])
    assert method["start_sd"] == control["start_sd"] > 0  # one stratum, one estimate
    variance = one(path, "SELECT * FROM start_variance")
    assert (variance["configs"], variance["rounds"], variance["starts"]) == (3, 3, 9)
    assert variance["contrasts"] == 4 and variance["metric"] == "decode_tps"


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


def _mean(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs)


def _pooled_by_hand(cells: dict, windows: list[tuple]) -> tuple[float, float]:
    """(s2, df) of one stratum in plain Python (stats/starts.py's estimator without drift:
    these rows have no service starts): per window the config x round interaction of the
    cells' means over prompts and the three-way residual; A, B, Bancroft, Satterthwaite."""
    sum_i2 = sum_k = sum_kb = df_b = 0.0
    starts, configs, runs = set(), set(), set()
    for w in windows:
        ms = sorted({m for (w_, m, _, _) in cells if w_ == w})
        rs = sorted({r for (w_, _, r, _) in cells if w_ == w})
        ps = sorted({p for (w_, _, _, p) in cells if w_ == w})
        y = {(m, r, p): cells[(w, m, r, p)] for m in ms for r in rs for p in ps}
        m_cr = {(m, r): _mean(y[(m, r, p)] for p in ps) for m in ms for r in rs}
        m_cp = {(m, p): _mean(y[(m, r, p)] for r in rs) for m in ms for p in ps}
        m_rp = {(r, p): _mean(y[(m, r, p)] for m in ms) for r in rs for p in ps}
        m_c = {m: _mean(m_cr[(m, r)] for r in rs) for m in ms}
        m_r = {r: _mean(m_cr[(m, r)] for m in ms) for r in rs}
        m_p = {p: _mean(m_cp[(m, p)] for m in ms) for p in ps}
        g = _mean(m_c.values())
        sum_i2 += sum((m_cr[(m, r)] - m_c[m] - m_r[r] + g) ** 2 for m in ms for r in rs)
        k = (len(ms) - 1) * (len(rs) - 1)
        ss_e = sum((y[(m, r, p)] - m_cr[(m, r)] - m_cp[(m, p)] - m_rp[(r, p)] + m_c[m] + m_r[r]
                    + m_p[p] - g) ** 2 for m in ms for r in rs for p in ps)  # fmt: skip
        sum_k += k
        sum_kb += k * ss_e / (k * (len(ps) - 1)) / len(ps)
        df_b += k * (len(ps) - 1)
        starts |= {(m, r) for m in ms for r in rs}
        configs |= set(ms)
        runs |= set(rs)
    a, b = sum_i2 / sum_k, sum_kb / sum_k
    df_a = len(starts) - len(configs) - len(runs) + 1
    if a <= b * sps.f.ppf(0.75, df_a, df_b):
        return 0.0, df_a
    return a - b, (a - b) ** 2 / (a**2 / df_a + b**2 / df_b)


def _by_hand(pairs: list[dict]) -> dict[tuple, tuple[float, float, float, int]]:
    """The oracle, in plain Python: per (window, method, run, prompt) the mean of ln
    decode_tps; per stratum (tp, concurrency: one each window here) the pooled start
    variance; per comparison V = MS_p / (R P) + 2 s2 / R on Satterthwaite's df."""
    cells: dict[tuple, list[float]] = {}
    for r in pairs:
        method = r["method"] if r["role"] == "method" else r["baseline"]
        key = ((r["tp"], r["workload"]), method, r["run"], r["prompt_id"])
        cells.setdefault(key, []).append(math.log(r["decode_tps"]))
    cells = {k: _mean(v) for k, v in cells.items()}  # the baseline's repeats give one mean
    windows = sorted({k[0] for k in cells})
    pooled = {w: _pooled_by_hand(cells, [w]) for w in windows}  # one window per stratum
    out = {}
    for w in windows:
        s2, df_s = pooled[w]
        for m in sorted({k[1] for k in cells if k[0] == w} - {"autoregressive"}):
            rs = sorted({k[2] for k in cells if k[0] == w})
            ps = sorted({k[3] for k in cells if k[0] == w})
            d = [[cells[(w, m, r, p)] - cells[(w, "autoregressive", r, p)] for p in ps]
                 for r in rs]  # fmt: skip
            n_r, n_p = len(rs), len(ps)
            cols = [_mean(d[i][j] for i in range(n_r)) for j in range(n_p)]
            ms_p = n_r * statistics.variance(cols)
            a, b = ms_p / (n_r * n_p), 2 * s2 / n_r
            df = (a + b) ** 2 / (a**2 / (n_p - 1) + (b**2 / df_s if b > 0 else 0.0))
            mean, half = _mean(cols), sps.t.ppf(0.975, df) * math.sqrt(a + b)
            key = ("c1", "sglang", w[0], w[1], 256, 1, m)
            out[key] = (math.exp(mean), math.exp(mean - half), math.exp(mean + half), n_p)
    return out


def test_speedup_table_equals_an_independent_computation(analyzed):
    # 2 methods x 2 tp against the baseline, 7 prompts, 1 to 4 reps each (uneven), speeds
    # rounded to whole tok/s, 3 rounds whose starts move every configuration's speed; p7
    # only the baseline ran at tp 2, p8 only dflash ran: both are left out. Every interval
    # equals the plain-Python oracle's.
    rng = np.random.default_rng(4)
    extra = {("autoregressive", 2): ["p7"], ("dflash", 1): ["p8"], ("dflash", 2): ["p8"]}
    rows = []
    for run in (1, 2, 3):
        for tp in (1, 2):
            for method in ("autoregressive", "dflash", "eagle3"):
                start = float(rng.normal(1.0, 0.08))
                prompts = [f"p{i}" for i in range(7)] + extra.get((method, tp), [])
                rows += [decode_req(round(start * float(rng.integers(8, 40))), method=method,
                                    prompt_id=p, rep=r, tp=tp, run=run,
                                    window_id=f"w-{method}-{tp}/run{run}",
                                    service_id=f"svc-{method}-{tp}/run{run}",
                                    ttft_s=float(rng.uniform(0.1, 0.9)))
                         for p in prompts for r in range(int(rng.integers(1, 5)))]  # fmt: skip
    path = analyzed(rows)
    with duckdb.connect(str(path), read_only=True) as con:
        pairs = con.execute("SELECT * FROM speedup_pairs").df().to_dict("records")
    want = _by_hand(pairs)
    got = fetch(path, "SELECT * FROM speedup ORDER BY ALL")
    assert len(got) == len(want) == 4
    for row in got:
        expected = want[tuple(row[k] for k in COMPARISON)]
        assert (row["speedup"], row["ci_low"], row["ci_high"]) == pytest.approx(expected[:3])
        assert row["n_prompts"] == expected[3] == 7 and row["n_runs"] == 3
