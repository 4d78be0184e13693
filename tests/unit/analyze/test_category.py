"""category_speedup and category_pooled (analyze/category.py, category_cells.sql) on
hand-built rows; every figure worked out by hand in the docstrings.

Every request has 65 output tokens (64 decode tokens) and a TTFT of 0.5 s. The baseline
decodes every prompt in 6.4 s (10 tok/s) at concurrency 1 and 12.8 s at concurrency 4. A dd
request of s steps in t s decodes at 64 / t tok/s (its ratio to the baseline) with acceptance
64 / s. Categories (requests.category) are set by prompt.
"""

from __future__ import annotations

import math
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from specsweep.analyze import build, category
from tests.support.analyze_rows import AR, fetch, in_rounds, one, req, write_db

# workload -> prompt -> (category, dd's steps, dd's decode seconds at concurrency 1)
PROMPTS = {
    "mtbench": {
        "p1": ("writing", 16, 3.2),  # ratio 2, acceptance 4
        "p2": ("writing", 32, 3.2),  # ratio 2, acceptance 2
        "p3": ("writing", 16, 1.6),  # ratio 4, acceptance 4
        "p4": ("writing", 32, 6.4),  # ratio 1, acceptance 2
        "p5": ("math", 16, 3.2),
        "p6": ("math", 16, 3.2),
    },
    "humaneval": {
        "h1": ("code", 16, 3.2),  # ratio 2, acceptance 4
        "h2": ("code", 16, 6.4),  # ratio 1, acceptance 4
        "h3": ("code", 8, 1.6),  # ratio 4, acceptance 8
    },
    "sharegpt": {
        "s1": ("code", 16, 3.2),  # ratio 2, acceptance 4
        "s2": ("code", 32, 12.8),  # ratio 1/2, acceptance 2
    },
}


def tok(method: str, workload: str, prompt: str, conc: int, decode_s: float, steps) -> dict:
    return req(method=method, workload=workload, prompt_id=prompt, concurrency=conc,
               window_id=f"w-{method}-{workload}-c{conc}", ttft_s=0.5, e2e_s=0.5 + decode_s,
               output_tokens=65, spec_verify_ct=steps)  # fmt: skip


def rows() -> list[dict]:
    out = []
    for workload, prompts in PROMPTS.items():
        for p, (_, steps, secs) in prompts.items():
            out += [tok(AR, workload, p, 1, 6.4, None), tok("dd", workload, p, 1, secs, steps)]
            out.append(tok("plain", workload, p, 1, 6.4, None))  # no verify counts
    for p in PROMPTS["mtbench"]:  # concurrency 4: dd no faster than the baseline
        out += [tok(AR, "mtbench", p, 4, 12.8, None), tok("dd", "mtbench", p, 4, 12.8, 64)]
    return out


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("category") / "category.duckdb"
    write_db(path, in_rounds(rows()))  # three rounds: intervals need 2+ starts a side
    with duckdb.connect(str(path)) as con:
        for prompts in PROMPTS.values():
            for p, (cat, _, _) in prompts.items():
                con.execute("UPDATE requests SET category = ? WHERE prompt_id = ?", [cat, p])
    build.run(path, baseline=AR)
    return path


def t_interval(logs: list[float]) -> tuple[float, float]:
    """exp(mean -/+ t_{n-1, 0.975} sd / sqrt n), written out for the check."""
    n, mean = len(logs), sum(logs) / len(logs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    half = stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
    return math.exp(mean - half), math.exp(mean + half)


def window(db: Path, workload: str, category: str, conc: int = 1, method: str = "dd") -> dict:
    return one(db, "SELECT * FROM category_speedup WHERE workload = ? AND category = ? AND "
               "concurrency = ? AND method = ?", [workload, category, conc, method])  # fmt: skip


def test_a_window_restricted_to_a_category(db: Path) -> None:
    """writing at concurrency 1: ratios 2, 2, 4, 1 -> speedup 16^(1/4) = 2, interval the paired
    t on ln 2, ln 2, ln 4, 0; acceptance 4, 2, 4, 2 -> sqrt 8, interval the t on their logs;
    pooled acceptance 256 tokens / 96 steps."""
    r = window(db, "mtbench", "writing")
    assert (r["n_prompts"], r["n"], r["n_baseline"], r["n_verified"]) == (4, 12, 12, 12)
    assert r["speedup"] == pytest.approx(2.0)
    lo, hi = t_interval([math.log(2), math.log(2), math.log(4), 0.0])
    assert (r["ci_low"], r["ci_high"]) == (pytest.approx(lo), pytest.approx(hi))
    assert r["acceptance_gain"] == pytest.approx(math.sqrt(8))
    lo, hi = t_interval([math.log(4), math.log(2), math.log(4), math.log(2)])
    assert (r["acceptance_low"], r["acceptance_high"]) == (pytest.approx(lo), pytest.approx(hi))
    assert r["accept_length"] == pytest.approx(256 / 96)
    assert r["is_control"] is False and r["n_runs"] == 3


def test_below_three_prompts_a_point_estimate_without_interval(db: Path) -> None:
    """math: 2 prompts, ratio 2 and acceptance 4 each: the figures, no interval, the reason."""
    r = window(db, "mtbench", "math")
    assert (r["speedup"], r["acceptance_gain"]) == (pytest.approx(2.0), pytest.approx(4.0))
    assert [r[k] for k in ("ci_low", "ci_high", "acceptance_low", "acceptance_high")] == [None] * 4
    assert r["ci_reason"].startswith("2 prompts") and r["acceptance_reason"].startswith("2 prompts")


def test_a_method_without_verify_counts_has_a_speedup_and_no_acceptance(db: Path) -> None:
    r = window(db, "mtbench", "writing", method="plain")
    assert r["speedup"] == pytest.approx(1.0)
    assert (r["accept_length"], r["acceptance_gain"]) == (None, None)
    assert r["acceptance_reason"] == "no verify counts"


def test_pooled_over_the_concurrency_1_windows_of_one_max_tokens(db: Path) -> None:
    """code at concurrency 1: humaneval's h1..h3 and sharegpt's s1, s2, five prompts: ratios
    2, 1, 4, 2, 1/2 -> 2^(3/5); acceptance 4, 4, 8, 4, 2 -> 2^(10/5) = 4. writing pools only
    mtbench at concurrency 1 (the concurrency-4 window, ratio 1, stays out): speedup 2."""
    code = one(db, "SELECT * FROM category_pooled WHERE category = 'code' AND method = 'dd'")
    assert (code["workloads"], code["n_windows"], code["n_prompts"]) == (
        "humaneval, sharegpt", 2, 5)  # fmt: skip
    assert code["speedup"] == pytest.approx(2 ** (3 / 5))
    lo, hi = t_interval([math.log(x) for x in (2, 1, 4, 2, 0.5)])
    assert (code["ci_low"], code["ci_high"]) == (pytest.approx(lo), pytest.approx(hi))
    assert code["acceptance_gain"] == pytest.approx(4.0)
    assert code["accept_length"] == pytest.approx(5 * 64 / (16 + 16 + 8 + 16 + 32))
    writing = one(db, "SELECT * FROM category_pooled WHERE category = 'writing' AND method = 'dd'")
    assert (writing["speedup"], writing["n_prompts"]) == (pytest.approx(2.0), 4)


def test_concurrency_4_has_its_own_window_rows(db: Path) -> None:
    r = window(db, "mtbench", "writing", conc=4)
    assert (r["speedup"], r["acceptance_gain"]) == (pytest.approx(1.0), pytest.approx(1.0))
    keys = fetch(db, "SELECT DISTINCT concurrency FROM category_speedup ORDER BY 1")
    assert [k["concurrency"] for k in keys] == [1, 4]


@pytest.mark.parametrize("seed", range(6))
def test_matrix_is_pandas_pivot_of_the_first_non_null_value(seed: int) -> None:
    """category.matrix (numpy) against the pivot_table it replaced: sorted runs and prompts,
    the first non-null value of each cell, None when a cell has none (missing, or null)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    cells = pd.DataFrame(
        {
            "run": rng.integers(1, 4, n),
            "prompt": rng.choice(["p3", "p1", "p10", "p2"], n),
            "d": np.where(rng.random(n) < 0.15, np.nan, rng.normal(size=n)),
        }
    )
    grid = cells.pivot_table(
        index="run", columns="prompt", values="d", aggfunc="first", dropna=False
    )
    want = None if grid.isna().to_numpy().any() else grid.to_numpy(float)
    got = category.matrix(cells, "d", "prompt")
    assert (got is None) == (want is None)
    if want is not None:
        np.testing.assert_array_equal(got, want)
