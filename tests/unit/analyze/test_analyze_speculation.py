"""The speculation objects (method_families, param_sweep, speedup_decomposition, best_setting,
position_acceptance, accepted_histogram) on hand-built raw rows written through Store.append
(the raw contracts check them), every figure worked by hand below. Decode speeds: decode_req
(61 tokens, 60 decode tokens in 60 / speed seconds); the baseline runs at 10 tok/s, so one
baseline token takes 0.1 s and a method's speedup is its speed / 10.

sw (sglang): family ddtree (param budget: b8, b16, b32) and ngram (no parameters).
  c1, prompts p1 p2: b8 15 tok/s, 30 steps each (acceptance 60 / 30 = 2.0, speedup 1.5);
    b16 20 and 15 tok/s in 20 and 30 steps (120 tokens / 50 steps = 2.4; sqrt(2 * 1.5));
    b32 12 tok/s, 15 steps (4.0, 1.2); ngram 30 tok/s, 20 steps (3.0, 3.0).
  c8, p1..p4: b8 12 (2.0, 1.2, every prompt the same: CI [1.2, 1.2]); b16 5, 14, 14, 14 in
    20 steps (3.0; median 14: 1.4, but resamples drawing p1 twice give 0.95: CI low < 1);
    b32 4 tok/s, 15 steps (4.0, 0.4).
  c32, p1 p2: b8 8 (0.8); b16 9 (0.9); b32 4 (0.4); ngram 9 tok/s in 60 steps (1.0, 0.9).
gr: a 2-parameter grid ddt (budget 8 | 16 x k 2 | 4, and mode = tree held by all), c1:
  b8-k2 12 (30 steps: 2.0), b16-k2 15 (20: 3.0), b8-k4 16 (24: 2.5), b16-k4 13 (15: 4.0).
rt (vllm, open loop): ngram-k2, ngram-k4 against the baseline at 2, 8, 32 req/s; 11 requests
  at 0..10 s (steady 1..9), 11 tokens, baseline TPOT 20 ms; k2 / k4 TPOT 10 / 8 ms at 2 req/s
  (speedups 2.0 / 2.5), 16 / 40 ms at 8 (1.25 / 0.5), 40 / 40 ms at 32 (0.5 / 0.5).
ps (vllm): acceptance details, one source per method (see the tests).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from specsweep.analyze import build
from specsweep.schema.store import Store
from tests.support.analyze_rows import (
    decode_req,
    fetch,
    ident,
    one,
    params,
    req,
    rows_in_rounds,
    rt_window,
    service,
)

AR = "autoregressive"
T = datetime(2026, 1, 1, 12, 0, 0)


def closed(
    campaign: str,
    method: str,
    conc: int,
    speeds: list[float],
    steps: list[int | None] | None = None,
    engine: str = "sglang",
) -> list[dict]:
    """One closed-loop window: prompt p{i+1} decoded at speeds[i] in steps[i] verify steps."""
    steps = steps or [None] * len(speeds)
    return [
        decode_req(
            s,
            **ident(campaign, method, engine),
            concurrency=conc,
            window_id=f"{campaign}-{method}-c{conc}",
            prompt_id=f"p{i + 1}",
            spec_verify_ct=n,
        )
        for i, (s, n) in enumerate(zip(speeds, steps))
    ]


def sw_rows() -> list[dict]:
    rows = []
    for conc, n in ((1, 2), (8, 4), (32, 2)):
        rows += closed("sw", AR, conc, [10] * n)
    rows += closed("sw", "ddtree-b8", 1, [15, 15], [30, 30])
    rows += closed("sw", "ddtree-b16", 1, [20, 15], [20, 30])
    rows += closed("sw", "ddtree-b32", 1, [12, 12], [15, 15])
    rows += closed("sw", "ngram", 1, [30, 30], [20, 20])
    rows += closed("sw", "ddtree-b8", 8, [12] * 4, [30] * 4)
    rows += closed("sw", "ddtree-b16", 8, [5, 14, 14, 14], [20] * 4)
    rows += closed("sw", "ddtree-b32", 8, [4] * 4, [15] * 4)
    rows += closed("sw", "ddtree-b8", 32, [8, 8], [30, 30])
    rows += closed("sw", "ddtree-b16", 32, [9, 9], [20, 20])
    rows += closed("sw", "ddtree-b32", 32, [4, 4], [15, 15])
    rows += closed("sw", "ngram", 32, [9, 9], [60, 60])
    return rows


GRID = {
    "ddt-b8-k2": (8, 2, 12, 30),
    "ddt-b16-k2": (16, 2, 15, 20),
    "ddt-b8-k4": (8, 4, 16, 24),
    "ddt-b16-k4": (16, 4, 13, 15),
}


RATE_TPOT = {2.0: (0.02, 0.01, 0.008), 8.0: (0.02, 0.016, 0.04), 32.0: (0.02, 0.04, 0.04)}


def rt_rows() -> tuple[list[dict], list[dict]]:
    rows, windows = [], []
    for rate, tpots in RATE_TPOT.items():
        for method, tpot in zip((AR, "ngram-k2", "ngram-k4"), tpots):
            got, window = rt_window(method, rate, lambda i, tpot=tpot: tpot)
            rows += got
            windows.append(window)
    return rows, windows


def detail(method: str, i: int, **kw: Any) -> dict[str, Any]:
    return req(**ident("ps", method, "vllm"), window_id=f"ps-{method}", prompt_id=f"p{i}", **kw)


FAILED = {
    "ok": False,
    "error_kind": "timeout",
    "ttft_s": None,
    "e2e_s": None,
    "output_tokens": None,
}


def ps_rows() -> list[dict]:
    return [
        detail("pp", 1, accepted_per_pos=[8, 5, 2], spec_verify_ct=10),
        detail("pp", 2, accepted_per_pos=[4, 1], spec_verify_ct=5),
        detail("pp", 3, accepted_per_pos=[9, 9, 9], spec_verify_ct=10, **FAILED),
        detail("pp", 4, accepted_per_pos=[9, 9, 9], spec_verify_ct=10, is_warmup=True),
        detail("hist", 1, accept_histogram=[2, 3, 5]),
        detail("hist", 2, accept_histogram=[0, 0, 4]),
        detail("steps", 1, step_accepted=[0, 2, 1, 2]),
        detail("steps", 2, step_accepted=[3]),
        detail("both", 1, accepted_per_pos=[3, 1], spec_verify_ct=4,
               accept_histogram=[1, 2, 1], step_accepted=[1, 0, 2, 1]),
        detail("none", 1, spec_verify_ct=4),
    ]  # fmt: skip


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("speculation") / "spec.duckdb"
    requests = sw_rows() + closed("gr", AR, 1, [10, 10]) + ps_rows()
    services = [
        service("sw", m, "sglang") for m in (AR, "ddtree-b8", "ddtree-b16", "ddtree-b32", "ngram")
    ]
    services += [service("gr", m, "sglang") for m in (AR, *GRID, "ngram-k4")]
    services += [service("rt", m, "vllm") for m in (AR, "ngram-k2", "ngram-k4")]
    services += [service("ps", m, "vllm") for m in ("pp", "hist", "steps", "both", "none")]
    method_params = [
        p for b in (8, 16, 32) for p in params("sw", f"ddtree-b{b}", "ddtree", budget=b)
    ]
    for method, (budget, k, speed, steps) in GRID.items():
        method_params += params("gr", method, "ddt", budget=budget, k=k, mode="tree")
        requests += closed("gr", method, 1, [speed, speed], [steps, steps])
    method_params += params("gr", "ngram-k4", "ngram-k4", k=4)  # by hand: one value, no sweep
    method_params += params("gr", "gone", "gone", k=1)  # no services row: not a method here
    method_params += params("rt", "ngram-k2", "ngram", k=2) + params("rt", "ngram-k4", "ngram", k=4)
    open_rows, windows = rt_rows()
    # sw in three rounds that repeat one another: its sweep's intervals need 2+ starts a side
    sw = [r for r in requests if r["campaign_id"] == "sw"]
    requests = [r for r in requests if r["campaign_id"] != "sw"] + rows_in_rounds("requests", sw)
    services = [{**s, "run": 1} for s in services if s["campaign_id"] != "sw"] + rows_in_rounds(
        "services", [s for s in services if s["campaign_id"] == "sw"])  # fmt: skip
    store = Store(path)
    for table, rows in (
        ("requests", requests + open_rows),
        ("services", services),
        ("method_params", method_params),
        ("windows", windows),
    ):
        assert store.append(table, rows) == len(rows), table  # nothing quarantined
    build.run(path, baseline=AR)
    return path


def by(rows: list[dict], *keys: str) -> dict:
    return {tuple(r[k] for k in keys) if len(keys) > 1 else r[keys[0]]: r for r in rows}


def test_method_families(db: Path) -> None:
    rows = by(fetch(db, "SELECT * FROM method_families"), "campaign_id", "method")
    assert len(rows) == 5 + 6 + 3 + 5  # every method with a services row, 'gone' not
    assert [
        rows["sw", m][c] for m in (AR, "ddtree-b16") for c in ("family", "params_label", "n_params")
    ] == [AR, "", 0, "ddtree", "budget=16", 1]
    assert rows["gr", "ddt-b16-k4"]["params_label"] == "budget=16, k=4, mode=tree"
    assert (rows["gr", "ngram-k4"]["family"], rows["gr", "ngram-k4"]["n_params"]) == ("ngram-k4", 1)


def test_param_sweep_peaks_apart(db: Path) -> None:
    """c1: speedup peaks at budget 16 (sqrt(20/10 * 15/10) = sqrt 3, the geometric mean of its
    two prompts' ratios), acceptance at 32 (4.0); two prompts give no interval, so nothing
    is significant; c8: b16's prompts at 0.5, 1.4, 1.4, 1.4x have a geometric mean of 1.08x,
    below b8's 1.2x (the median said 1.4x), and its interval reaches below 1; ngram (no
    parameters) has no rows."""
    rows = fetch(
        db, "SELECT * FROM param_sweep WHERE campaign_id = 'sw' ORDER BY concurrency, value_num"
    )
    assert {(r["family"], r["param"], r["held"]) for r in rows} == {("ddtree", "budget", "")}
    c1 = [r for r in rows if r["concurrency"] == 1]
    assert [r["value"] for r in c1] == ["8", "16", "32"]
    assert [r["value_num"] for r in c1] == [8.0, 16.0, 32.0]
    assert [r["speedup"] for r in c1] == pytest.approx([1.5, 3**0.5, 1.2])
    assert [r["accept_length"] for r in c1] == pytest.approx([2.0, 2.4, 4.0])
    assert [r["best_speedup"] for r in c1] == [False, True, False]
    assert [r["best_acceptance"] for r in c1] == [False, False, True]
    assert all(r["significant"] is None and r["n"] == 6 for r in c1)  # 2 prompts x 3 rounds
    c8 = [r for r in rows if r["concurrency"] == 8]
    assert [r["best_speedup"] for r in c8] == [True, False, False]  # the point, not the CI
    assert c8[1]["ci_low"] < 1 and not c8[1]["significant"]
    assert len([r for r in rows if r["concurrency"] == 32]) == 3


def test_param_sweep_two_parameter_grid_holds_the_other(db: Path) -> None:
    """budget swept at k=2: 1.2 (b8) < 1.5 (b16); at k=4: 1.6 (b8) > 1.3 (b16); k swept at
    budget 8: 1.2 < 1.6, at 16: 1.5 > 1.3. mode (one value) is held, never swept."""
    rows = by(
        fetch(db, "SELECT * FROM param_sweep WHERE campaign_id = 'gr'"), "param", "held", "method"
    )
    assert len(rows) == 8
    best = {key: r["best_speedup"] for key, r in rows.items()}
    assert best == {
        ("budget", "k=2, mode=tree", "ddt-b8-k2"): False,
        ("budget", "k=2, mode=tree", "ddt-b16-k2"): True,
        ("budget", "k=4, mode=tree", "ddt-b8-k4"): True,
        ("budget", "k=4, mode=tree", "ddt-b16-k4"): False,
        ("k", "budget=8, mode=tree", "ddt-b8-k2"): False,
        ("k", "budget=8, mode=tree", "ddt-b8-k4"): True,
        ("k", "budget=16, mode=tree", "ddt-b16-k2"): True,
        ("k", "budget=16, mode=tree", "ddt-b16-k4"): False,
    }
    # acceptance 2.0 < 3.0 at k=2 and 2.5 < 4.0 at k=4: budget 16 both times
    assert rows["budget", "k=4, mode=tree", "ddt-b16-k4"]["best_acceptance"] is True
    assert rows["budget", "k=4, mode=tree", "ddt-b16-k4"]["accept_length"] == pytest.approx(4.0)


def decomposition(db: Path, method: str, conc: int) -> dict[str, Any]:
    return one(
        db,
        "SELECT * FROM speedup_decomposition WHERE campaign_id = 'sw' AND method = ?"
        " AND concurrency = ?",
        [method, conc],
    )


def test_decomposition_factors(db: Path) -> None:
    """b16 at c1, over the speedup's cells p1, p2: acceptance 60 / 20 = 3 and 60 / 30 = 2:
    gain sqrt 6; a step takes 3 s / 20 = 0.15 s and 4 s / 30 = 0.133 s: geometric mean
    sqrt(0.02) = 0.1414 s = sqrt 2 baseline tokens (0.1 s); gain / cost = sqrt 3, the
    geometric mean of the speed ratios 2 and 1.5 (tests/unit/analyze/test_decomposition.py has
    the full cases)."""
    r = decomposition(db, "ddtree-b16", 1)
    assert (r["n"], r["n_baseline"], r["n_verified"]) == (6, 6, 6)  # 2 prompts x 3 rounds
    assert r["acceptance_gain"] == pytest.approx(6**0.5)
    assert r["step_time_s"] == pytest.approx(0.02**0.5)
    assert r["baseline_token_time_s"] == pytest.approx(0.1)
    assert r["step_cost"] == pytest.approx(2**0.5)
    assert r["speedup"] == pytest.approx(3**0.5)
    assert r["limited_by"] is None


def test_decomposition_names_what_limits_a_slow_method(db: Path) -> None:
    """b32 at c8: 4.0 tokens per step but a step takes 15 s / 15 = 1 s = 10 baseline tokens:
    0.4, step cost. ngram at c32: 1.0 token per step of (60 / 9) / 60 s = 1.11 tokens: 0.9,
    acceptance."""
    slow = decomposition(db, "ddtree-b32", 8)
    assert (slow["acceptance_gain"], slow["step_cost"]) == (pytest.approx(4.0), pytest.approx(10))
    assert slow["speedup"] == pytest.approx(0.4)
    assert slow["limited_by"] == "step cost"
    flat = decomposition(db, "ngram", 32)
    assert (flat["acceptance_gain"], flat["step_cost"]) == (
        pytest.approx(1.0),
        pytest.approx(10 / 9),
    )
    assert flat["limited_by"] == "acceptance"


def test_decomposition_identity_and_rows(db: Path) -> None:
    """acceptance gain / step cost = the speedup table's point estimate on every row (one
    request set, one estimator); one row per non-baseline comparison with verify counts
    (sw's 11, gr's 4), none for the baseline; ps's windows have no baseline to compare
    with, so no speedup to decompose: no rows."""
    rows = fetch(db, "SELECT * FROM speedup_decomposition WHERE campaign_id IN ('sw', 'gr')")
    assert len(rows) == 11 + 4 and AR not in {r["method"] for r in rows}
    for r in rows:
        assert r["acceptance_gain"] / r["step_cost"] == pytest.approx(r["speedup"])
    assert not fetch(db, "SELECT * FROM speedup_decomposition WHERE campaign_id = 'ps'")


def positions(db: Path, method: str) -> list[tuple]:
    rows = fetch(
        db, "SELECT * FROM position_acceptance WHERE method = ? ORDER BY position", [method]
    )
    return [(r["position"], r["steps"], r["accepted"], r["rate"], r["source"]) for r in rows]


def test_position_acceptance_from_each_source(db: Path) -> None:
    """per_pos: [8, 5, 2] in 10 steps + [4, 1] in 5 (the failed and the warm-up request left
    out): 12, 6, 2 of 15. histogram [2, 3, 5] + [0, 0, 4]: 14 steps, >= 1 accepted 3 + 5 + 4
    = 12, >= 2 5 + 4 = 9. steps [0, 2, 1, 2] + [3]: 5 steps, >= 1 4, >= 2 3, >= 3 1 (the
    first request's 4 steps count at position 3 with none accepted). A request with all
    three is read from accepted_per_pos; one with none has no rows."""
    assert positions(db, "pp") == [
        (1, 15, 12, pytest.approx(0.8), "per_pos"),
        (2, 15, 6, pytest.approx(0.4), "per_pos"),
        (3, 15, 2, pytest.approx(2 / 15), "per_pos"),
    ]
    assert positions(db, "hist") == [
        (1, 14, 12, pytest.approx(12 / 14), "histogram"),
        (2, 14, 9, pytest.approx(9 / 14), "histogram"),
    ]
    assert positions(db, "steps") == [
        (1, 5, 4, pytest.approx(0.8), "steps"),
        (2, 5, 3, pytest.approx(0.6), "steps"),
        (3, 5, 1, pytest.approx(0.2), "steps"),
    ]
    assert positions(db, "both") == [(1, 4, 3, 0.75, "per_pos"), (2, 4, 1, 0.25, "per_pos")]
    assert positions(db, "none") == []


def histogram(db: Path, method: str) -> list[tuple]:
    rows = fetch(
        db, "SELECT * FROM accepted_histogram WHERE method = ? ORDER BY accepted", [method]
    )
    return [(r["accepted"], r["steps"], r["share"], r["source"]) for r in rows]


def test_accepted_histogram_shares(db: Path) -> None:
    """histogram [2, 3, 5] + [0, 0, 4] = 2, 3, 9 of 14; steps [0, 2, 1, 2] + [3]: one step
    each with 0, 1 and 3 accepted, two with 2, of 5; the request with all three is read from
    its histogram; accepted_per_pos alone gives none."""
    assert histogram(db, "hist") == [
        (0, 2, pytest.approx(2 / 14), "histogram"),
        (1, 3, pytest.approx(3 / 14), "histogram"),
        (2, 9, pytest.approx(9 / 14), "histogram"),
    ]
    assert histogram(db, "steps") == [
        (0, 1, 0.2, "steps"),
        (1, 1, 0.2, "steps"),
        (2, 2, 0.4, "steps"),
        (3, 1, 0.2, "steps"),
    ]
    assert histogram(db, "both") == [
        (0, 1, 0.25, "histogram"),
        (1, 2, 0.5, "histogram"),
        (2, 1, 0.25, "histogram"),
    ]
    assert histogram(db, "pp") == [] and histogram(db, "none") == []
