"""The speedup table over a campaign of several runs (requests.run): runs crossed with
prompts (every prompt in every run), the two-way variance, per-run speedups, the share of one
run's variance that comes from runs. Hand-built rows through the real DDL and `specsweep
analyze`'s build; expected figures from plain-Python sums of squares."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import duckdb
import pytest
from scipy import stats as sps

from specsweep.analyze import build
from tests.support.analyze_rows import decode_req, fetch, one, write_db

N_PROMPTS = 12


def _level(p: int) -> float:
    """The baseline's decode speed on prompt p: 10.0 to 11.1 tok/s."""
    return 10.0 + 0.1 * p


def _run_rows(run: int, method: str, factor: float, prompts: range) -> list[dict]:
    """One run's window of `method`: factor * _level(p) tok/s on each prompt (the method's
    prompts jittered by up to 3%, a fixed pattern), 2 reps (the second 1% faster). run r >
    1's window_id ends in /run<r>, as collect writes it."""
    window = f"w-{method}" + ("" if run == 1 else f"/run{run}")
    jitter = (
        (lambda p: 1.0)
        if method == "autoregressive"
        else (lambda p: 1 + 0.03 * math.sin(p * 1.7 + run))
    )
    return [decode_req(factor * _level(p) * jitter(p) * (1 + 0.01 * rep), method=method,
                       window_id=window,
                       prompt_id=f"p{p:02d}", rep=rep, request_id=f"{window}-{p}-{rep}")
            for p in prompts for rep in range(2)]  # fmt: skip


def _analyzed(tmp_path: Path, rows: list[dict]) -> Path:
    """Write the rows, number runs from the window ids (/run<r>; run 1 otherwise), analyze."""
    path = tmp_path / "runs.duckdb"
    write_db(path, rows)
    with duckdb.connect(str(path)) as con:
        con.execute("UPDATE requests SET run = coalesce(try_cast("
                    "regexp_extract(window_id, '/run(\\d+)$', 1) AS INTEGER), 1)")  # fmt: skip
    build.run(path, baseline="autoregressive")
    return path


def _campaign(factors: list[float]) -> list[dict]:
    """Run r: the baseline at _level(p), dflash at 2 * factors[r - 1] * _level(p)."""
    prompts = range(N_PROMPTS)
    return [row for r, f in enumerate(factors, start=1)
            for row in (*_run_rows(r, "autoregressive", 1.0, prompts),
                        *_run_rows(r, "dflash", 2.0 * f, prompts))]  # fmt: skip


def _cells(path: Path) -> list[list[float]]:
    """d[r][p] = mean ln decode_tps of the method - of the baseline, from the view's rows,
    in plain Python."""
    rows = fetch(path, "SELECT role, run, prompt_id, decode_tps FROM speedup_pairs")
    runs, prompts = sorted({r["run"] for r in rows}), sorted({r["prompt_id"] for r in rows})
    logs: dict[tuple, list[float]] = {}
    for r in rows:
        logs.setdefault((r["role"], r["run"], r["prompt_id"]), []).append(math.log(r["decode_tps"]))
    return [
        [
            statistics.fmean(logs[("method", run, p)])
            - statistics.fmean(logs[("baseline", run, p)])
            for p in prompts
        ]
        for run in runs
    ]


def _mean_squares(d: list[list[float]]) -> tuple[float, float, float]:
    r, p = len(d), len(d[0])
    grand = sum(map(sum, d)) / (r * p)
    rows = [sum(x) / p for x in d]
    cols = [sum(d[i][j] for i in range(r)) / r for j in range(p)]
    ms_p = r * sum((c - grand) ** 2 for c in cols) / (p - 1)
    ms_r = p * sum((x - grand) ** 2 for x in rows) / (r - 1)
    ss_e = sum((d[i][j] - rows[i] - cols[j] + grand) ** 2 for i in range(r) for j in range(p))
    return ms_p, ms_r, ss_e / ((r - 1) * (p - 1))


def test_one_run_gives_a_point_and_no_interval(tmp_path: Path) -> None:
    """One start per side: how far another start would land was never sampled, so the
    speedup is a point estimate with the reason, and no claim (issue 36)."""
    path = _analyzed(tmp_path, _campaign([1.0]))
    row = one(path, "SELECT * FROM speedup")
    logs = _cells(path)[0]
    assert row["speedup"] == pytest.approx(math.exp(statistics.fmean(logs)))
    assert row["ci_low"] is None and row["ci_high"] is None and row["p_value"] is None
    assert row["ci_reason"].startswith("one service start per side")
    assert row["significant"] is None and row["significant_raw"] is False
    assert row["n_runs"] == 1 and row["n_prompts"] == N_PROMPTS
    assert row["run_speedup_min"] is None and row["between_run_share"] is None


def test_two_configurations_in_two_runs_leave_one_contrast(tmp_path: Path) -> None:
    """The baseline and dflash in 2 runs: 4 starts, 2 configurations, 2 rounds leave one
    independent start contrast; an interval on it covered 90% (stats/starts.py): none."""
    row = one(_analyzed(tmp_path, _campaign([1.0, 1.5])), "SELECT * FROM speedup")
    assert row["ci_low"] is None and "1 independent start contrast" in row["ci_reason"]


def test_a_faster_run_widens_the_interval(tmp_path: Path) -> None:
    """dflash is 1.5x faster in run 2 of 3 only. With two configurations the pooled start
    variance is the comparison's own run term (stats/starts.py): 2 s2 = (MS_r - MS_e) / P,
    so V = (MS_p + MS_r - MS_e) / (R P) on Satterthwaite's df (by hand), far wider than the
    prompts-only interval of the same rows, and nearly all one run's variance is between
    runs."""
    factors = [1.0, 1.5, 1.0]
    path = _analyzed(tmp_path, _campaign(factors))
    row = one(path, "SELECT * FROM speedup")
    assert row["n_runs"] == len(factors) and row["n_prompts"] == N_PROMPTS
    d = _cells(path)
    assert row["run_speedup_min"] == pytest.approx(math.exp(min(map(statistics.fmean, d))))
    assert row["run_speedup_max"] == pytest.approx(math.exp(max(map(statistics.fmean, d))))
    assert row["between_run_share"] > 0.9
    ms_p, ms_r, ms_e = _mean_squares(d)
    r, p = len(d), N_PROMPTS
    combo = ms_p + ms_r - ms_e
    df = combo**2 / (ms_p**2 / (p - 1) + ms_r**2 / (r - 1) + ms_e**2 / ((r - 1) * (p - 1)))
    half = sps.t.ppf(0.975, df) * math.sqrt(combo / (r * p))
    mean = sum(map(sum, d)) / (r * p)
    assert row["df"] == pytest.approx(df)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(
        (math.exp(mean - half), math.exp(mean + half))
    )
    assert row["start_sd"] == pytest.approx(math.sqrt((ms_r - ms_e) / p / 2))
    flat = [x for run in d for x in run]
    prompts_only = sps.t.ppf(0.975, len(flat) - 1) * statistics.stdev(flat) / math.sqrt(len(flat))
    assert half > 3 * prompts_only


def test_runs_that_agree_leave_the_share_near_zero(tmp_path: Path) -> None:
    """Three runs at the same factor (only the jitter moves between runs): every run's
    speedup is within 2% of 2.0 and little of the variance is between runs."""
    row = one(_analyzed(tmp_path, _campaign([1.0, 1.0, 1.0])), "SELECT * FROM speedup")
    assert row["n_runs"] == 3
    assert row["run_speedup_min"] == pytest.approx(2.0, rel=0.02)
    assert row["run_speedup_max"] == pytest.approx(2.0, rel=0.02)
    assert row["between_run_share"] < 0.1


def test_a_prompt_missing_from_one_run_is_left_out(tmp_path: Path) -> None:
    """dflash lacks p03 in run 2: p03 is left out of every run on both sides. Run 3 only the
    baseline measured: left out. 11 prompts x 2 runs x 2 reps per side remain."""
    rows = [r for r in _campaign([1.0, 1.0])
            if not (r["window_id"] == "w-dflash/run2" and r["prompt_id"] == "p03")]  # fmt: skip
    rows += _run_rows(3, "autoregressive", 1.0, range(N_PROMPTS))
    path = _analyzed(tmp_path, rows)
    row = one(path, "SELECT * FROM speedup")
    assert (row["n_runs"], row["n_prompts"], row["n"], row["n_baseline"]) == (2, 11, 44, 44)
    got = fetch(path, "SELECT DISTINCT run, prompt_id FROM speedup_pairs ORDER BY ALL")
    assert {r["prompt_id"] for r in got} == {f"p{p:02d}" for p in range(N_PROMPTS)} - {"p03"}
    assert {r["run"] for r in got} == {1, 2}
