"""The speedup table over a campaign of several runs (requests.run): runs, then prompts
within each run, resampled; per-run speedups; the share of the interval's variance that
comes from runs. Hand-built rows through the real DDL and `python -m analyze`'s build."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pytest
from analyze_rows import decode_req, fetch, one, write_db

from analyze import build, stats
from schema.paired import flat_ratio_of_medians, paired_speedup

N_PROMPTS = 12


def _level(p: int) -> float:
    """The baseline's decode speed on prompt p: 10.0 to 11.1 tok/s."""
    return 10.0 + 0.1 * p


def _run_rows(run: int, method: str, factor: float, prompts: range) -> list[dict]:
    """One run's window of `method`: factor * _level(p) tok/s on each prompt, 2 reps (the
    second 1% faster). run r > 1's window_id ends in /run<r>, as collect writes it."""
    window = f"w-{method}" + ("" if run == 1 else f"/run{run}")
    return [decode_req(factor * _level(p) * (1 + 0.01 * rep), method=method, window_id=window,
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


def _pairs(path: Path) -> tuple[np.ndarray, ...]:
    """speedup_pairs as (decode_tps, run, prompt ordinal) per role, method then baseline."""
    rows = fetch(path, "SELECT role, run, prompt_id, decode_tps FROM speedup_pairs")
    prompts = sorted({r["prompt_id"] for r in rows})
    out = []
    for role in ("method", "baseline"):
        side = [r for r in rows if r["role"] == role]
        out += [np.array([r["decode_tps"] for r in side]), np.array([r["run"] - 1 for r in side]),
                np.array([prompts.index(r["prompt_id"]) for r in side])]  # fmt: skip
    return tuple(out)


def test_one_run_is_the_prompt_bootstrap(tmp_path: Path) -> None:
    """Same floats as paired_speedup on the prompts' pooled reps; no spread columns."""
    row = one(_analyzed(tmp_path, _campaign([1.0])), "SELECT * FROM speedup")
    by_prompt = [{f"p{p:02d}": [f * _level(p), f * _level(p) * 1.01] for p in range(N_PROMPTS)}
                 for f in (2.0, 1.0)]  # fmt: skip
    want = paired_speedup(*by_prompt)
    assert want is not None
    assert row["speedup"] == pytest.approx(want.speedup, rel=1e-12)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((want.ci_low, want.ci_high), rel=1e-12)
    assert row["n_runs"] == 1 and row["n_prompts"] == N_PROMPTS
    assert row["run_speedup_min"] is None and row["run_speedup_max"] is None
    assert row["between_run_share"] is None


@pytest.mark.parametrize("factors", [[1.0, 1.5], [1.0, 1.5, 1.0]])
def test_a_faster_run_widens_the_interval(tmp_path: Path, factors: list[float]) -> None:
    """dflash is 1.5x faster in run 2 only. Per run alone: median(2 * f * levels) /
    median(levels) = 2.0 in runs 1 and 3, 3.0 in run 2. The interval resamples runs, so it
    is far wider than the prompts-only one over the same rows, and nearly all its variance
    is between runs."""
    path = _analyzed(tmp_path, _campaign(factors))
    row = one(path, "SELECT * FROM speedup")
    assert row["n_runs"] == len(factors) and row["n_prompts"] == N_PROMPTS
    assert row["run_speedup_min"] == pytest.approx(2.0)
    assert row["run_speedup_max"] == pytest.approx(3.0)
    assert row["between_run_share"] > 0.9
    m_v, _, m_p, b_v, _, b_p = _pairs(path)
    _, lo, hi = flat_ratio_of_medians(m_v, m_p, b_v, b_p)
    assert row["ci_high"] - row["ci_low"] > 3 * (hi - lo)
    assert row["ci_low"] < 2.1 and row["ci_high"] > 2.9


def test_runs_that_agree_leave_the_share_near_zero(tmp_path: Path) -> None:
    """Three runs with the same speeds: every run's speedup is 2.0, the share about 0."""
    row = one(_analyzed(tmp_path, _campaign([1.0, 1.0, 1.0])), "SELECT * FROM speedup")
    assert row["n_runs"] == 3
    assert row["run_speedup_min"] == pytest.approx(2.0)
    assert row["run_speedup_max"] == pytest.approx(2.0)
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


def test_the_table_is_the_schema_function_on_the_view(tmp_path: Path) -> None:
    """Two speedup columns computed from the view's rows by schema.paired directly."""
    from schema.paired import flat_runs_ratio_of_medians

    path = _analyzed(tmp_path, _campaign([1.0, 1.3, 0.9]))
    row = one(path, "SELECT * FROM speedup")
    point, lo, hi, spread = flat_runs_ratio_of_medians(*_pairs(path))
    assert (row["speedup"], row["ci_low"], row["ci_high"]) == pytest.approx((point, lo, hi))
    assert row["between_run_share"] == pytest.approx(spread.between_run_share)
    assert (row["n_boot"], row["seed"]) == (stats.N_BOOT, stats.SEED)
