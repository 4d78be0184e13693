"""speedup_decomposition (speedup_decomposition.sql) on hand-built rows: every factor is
worked out by hand in the docstrings, from decode tokens, verify steps and decode seconds.

Every request has 65 output tokens (64 decode tokens) and a TTFT of 0.5 s, so decode_s =
e2e_s - 0.5; a baseline token time of 0.1 s is 6.4 s of decoding, 10 tok/s.
"""

from __future__ import annotations

import math
from pathlib import Path

import duckdb
import pytest

from specsweep.analyze import build
from tests.support.analyze_rows import AR, fetch, one, req, write_db


def tok(
    method: str,
    prompt: str,
    decode_s: float,
    steps: int | None = None,
    *,
    run: int = 1,
    **overrides: object,
) -> dict:
    """A request of 64 decode tokens in decode_s seconds and `steps` verify steps (None: the
    engine gave no count); run r > 1 is marked in the window id (read back by _analyzed)."""
    window = f"w-{method}" + ("" if run == 1 else f"/run{run}")
    return req(
        method=method,
        prompt_id=prompt,
        ttft_s=0.5,
        e2e_s=0.5 + decode_s,
        output_tokens=65,
        spec_verify_ct=steps,
        window_id=window,
        **overrides,
    )


def _analyzed(tmp_path: Path, rows: list[dict]) -> Path:
    """Write the rows, set requests.run from the window id (/run<r>; 1 otherwise), analyze."""
    path = tmp_path / "decomposition.duckdb"
    write_db(path, rows)
    with duckdb.connect(str(path)) as con:
        con.execute(
            "UPDATE requests SET run = coalesce(try_cast("
            "regexp_extract(window_id, '/run(\\d+)$', 1) AS INTEGER), 1)"
        )
    build.run(path, baseline=AR)
    return path


def _row(path: Path, method: str) -> dict:
    return one(path, "SELECT * FROM speedup_decomposition WHERE method = ?", [method])


def one_run_rows() -> list[dict]:
    """Baseline token time: p1 0.1 s, p2 0.2 s, p3 0.1 s.
    dd: p1 16 steps in 3.2 s (gain 4, step 0.2 s); p2 two reps, 32 steps in 6.4 s (gain 2,
    step 0.2 s) and 16 in 3.2 s (gain 4, step 0.2 s); p3 32 steps in 12.8 s (gain 2, step
    0.4 s); p4 (the baseline never measured it: not in the speedup's set) 8 steps in 0.8 s;
    a failed request. slow: every prompt 16 steps in 12.8 s (gain 4, step 0.8 s). flat: 64
    steps in 6.4 * 1.1 s (gain 1, step 0.11 s). partial: p1 16 steps, p2 and p3 no count.
    plain (no verify counts at all) has no row."""
    base = [tok(AR, "p1", 6.4), tok(AR, "p2", 12.8), tok(AR, "p3", 6.4)]
    dd = [
        tok("dd", "p1", 3.2, 16),
        tok("dd", "p2", 6.4, 32, rep=0),
        tok("dd", "p2", 3.2, 16, rep=1),
        tok("dd", "p3", 12.8, 32),
        tok("dd", "p4", 0.8, 8),
        tok("dd", "p1", 1.0, 16, rep=1, ok=False, error_kind="http"),
    ]
    slow = [tok("slow", p, 12.8, 16) for p in ("p1", "p2", "p3")]
    flat = [tok("flat", p, 6.4 * 1.1 * (2 if p == "p2" else 1), 64) for p in ("p1", "p2", "p3")]
    partial = [tok("partial", "p1", 3.2, 16), tok("partial", "p2", 6.4), tok("partial", "p3", 3.2)]
    plain = [tok("plain", p, 6.4) for p in ("p1", "p2", "p3")]
    return [*base, *dd, *slow, *flat, *partial, *plain]


@pytest.fixture(scope="module")
def one_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _analyzed(tmp_path_factory.mktemp("one_run"), one_run_rows())


def test_factors_are_geometric_means_over_the_speedups_cells(one_run: Path) -> None:
    """Cells p1..p3 (p4 and the failed request are not in speedup_pairs):
    g = ln 4, (ln 2 + ln 4) / 2, ln 2 -> gain = 2^((2 + 1.5 + 1) / 3) = 2^1.5;
    s = ln 0.2, ln 0.2, ln 0.4 -> step time = (0.2 * 0.2 * 0.4)^(1/3) = 0.2 * 2^(1/3);
    b = ln 0.1, ln 0.2, ln 0.1 -> baseline token time = 0.1 * 2^(1/3); step cost = 2.
    Pooled, the acceptance would be 256 / 96 = 2.667 over p1..p3 (and 320 / 104 with p4)."""
    r = _row(one_run, "dd")
    assert (r["n"], r["n_baseline"], r["n_verified"], r["n_prompts"], r["n_runs"]) == (
        4,
        3,
        4,
        3,
        1,
    )
    assert r["acceptance_gain"] == pytest.approx(2**1.5)
    assert r["step_time_s"] == pytest.approx(0.2 * 2 ** (1 / 3))
    assert r["baseline_token_time_s"] == pytest.approx(0.1 * 2 ** (1 / 3))
    assert r["step_cost"] == pytest.approx(2.0)
    assert r["limited_by"] is None


def test_factors_multiply_back_to_the_speed_ratio(one_run: Path) -> None:
    """The same point by decode speeds: per prompt M / B = 20 / 10, sqrt(10 * 20) / 5,
    5 / 10; their geometric mean (2 * 2 sqrt 2 * 0.5)^(1/3) = sqrt 2 = gain / cost, and the
    speedup table's point estimate on the same requests."""
    r = _row(one_run, "dd")
    by_speeds = math.exp((math.log(2) + math.log(math.sqrt(200) / 5) + math.log(0.5)) / 3)
    assert by_speeds == pytest.approx(math.sqrt(2))
    assert r["acceptance_gain"] / r["step_cost"] == pytest.approx(by_speeds)
    assert r["speedup"] == pytest.approx(by_speeds)


def test_limited_by_reads_the_factors(one_run: Path) -> None:
    """slow: gain 4, step 0.8 s over 0.1, 0.2, 0.1 s: cost 0.8 / (0.1 * 2^(1/3)) = 6.35 > 4:
    'step cost'. flat: gain 1 <= 1.05, steps of 0.11, 0.22, 0.11 s: cost 1.1: 'acceptance'."""
    slow, flat = _row(one_run, "slow"), _row(one_run, "flat")
    assert slow["acceptance_gain"] == pytest.approx(4.0)
    assert slow["step_cost"] == pytest.approx(8 / 2 ** (1 / 3))
    assert slow["limited_by"] == "step cost"
    assert (flat["acceptance_gain"], flat["step_cost"]) == (pytest.approx(1.0), pytest.approx(1.1))
    assert flat["limited_by"] == "acceptance"


def test_a_request_without_a_verify_count_leaves_no_factors(one_run: Path) -> None:
    """partial: 1 of its 3 paired requests has a count; the factors of a subset would not
    be the speedup's, so they are NULL (the row stays, with n_verified = 1). plain and the
    baseline have no row."""
    p = _row(one_run, "partial")
    assert (p["n"], p["n_verified"]) == (3, 1)
    assert [p[k] for k in ("acceptance_gain", "step_time_s", "step_cost", "limited_by")] == [
        None
    ] * 4
    assert p["speedup"] is not None
    methods = {r["method"] for r in fetch(one_run, "SELECT method FROM speedup_decomposition")}
    assert methods == {"dd", "slow", "flat", "partial"}


def two_run_rows() -> list[dict]:
    """Two runs, baseline token time 0.1 s in every cell. tw (steps, decode_s):
    run 1: p1 (32, 3.2) and (8, 3.2); p2 (16, 6.4); p3 (32, 1.6)
    run 2: p1 (16, 1.6); p2 (64, 6.4); p3 (16, 3.2)"""
    rows = [tok(AR, p, 6.4, run=run) for run in (1, 2) for p in ("p1", "p2", "p3")]
    cells = {
        (1, "p1"): [(32, 3.2), (8, 3.2)],
        (1, "p2"): [(16, 6.4)],
        (1, "p3"): [(32, 1.6)],
        (2, "p1"): [(16, 1.6)],
        (2, "p2"): [(64, 6.4)],
        (2, "p3"): [(16, 3.2)],
    }
    for (run, p), reqs in cells.items():
        rows += [tok("tw", p, d, s, run=run, rep=i) for i, (s, d) in enumerate(reqs)]
    return rows


def test_cells_are_run_by_prompt_as_the_speedups(tmp_path: Path) -> None:
    """Cell log gains (in ln 2): r1 p1 (1 + 3) / 2 = 2, 2, 1; r2 2, 0, 2: mean 9 / 6, gain
    2^1.5 (per request instead: 11 / 7 ln 2, 2.97). Step times: r1 p1 sqrt(0.1 * 0.4) = 0.2,
    0.4, 0.05; r2 0.1, 0.1, 0.2: product 8e-6, geometric mean 0.1 sqrt 2: cost sqrt 2.
    gain / cost = 2 = the geometric mean of the cells' speed ratios 2, 1, 4, 4, 1, 2."""
    path = _analyzed(tmp_path, two_run_rows())
    r = _row(path, "tw")
    assert (r["n"], r["n_baseline"], r["n_runs"], r["n_prompts"]) == (7, 6, 2, 3)
    assert r["acceptance_gain"] == pytest.approx(2**1.5)
    assert r["step_time_s"] == pytest.approx(0.1 * math.sqrt(2))
    assert r["step_cost"] == pytest.approx(math.sqrt(2))
    assert r["speedup"] == pytest.approx((2 * 1 * 4 * 4 * 1 * 2) ** (1 / 6))
    assert r["acceptance_gain"] / r["step_cost"] == pytest.approx(r["speedup"])
