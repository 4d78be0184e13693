"""best_setting (analyze/sql/best_setting.sql) on hand-built raw rows: a pick is made only
among claims the campaign's family-wise test backs, and it quotes the simultaneous interval.

bs (sglang), closed loop, 5 prompts, the baseline at 10 tok/s times a per-prompt factor B_p;
each method at a constant factor times B_p times its own small jitter (so every comparison has
a spread and an interval):
  c1: ddtree-b8 1.5x, ddtree-b16 1.8x, ddtree-b32 1.02x (jitter 8%: not backed), ngram 3.0x
  c8: ddtree-b8 1.2x, ddtree-b16 1.4x with jitter 40% (its interval holds 1)
  c32: ddtree-b8 0.8x, ngram 0.9x (nothing pays)
rt (vllm), open loop: ngram-k2 and ngram-k4 against the baseline at 2 and 32 req/s, 11
  requests (9 steady) on distinct prompts, TPOT jittered by prompt: at 2 req/s k4 is 2.5x,
  k2 2.0x; at 32 req/s both 0.5x (off).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from scipy import stats as sps

from specsweep.analyze import build
from specsweep.schema.store import Store
from tests.support.analyze_rows import (
    decode_req,
    fetch,
    ident,
    one,
    params,
    rows_in_rounds,
    rt_window,
    service,
)

AR = "autoregressive"
BASE = [1.0, 1.3, 0.8, 1.1, 0.9]
SMALL = [1.0, 1.01, 0.99, 1.02, 0.98]


def _jitter(size: float) -> list[float]:
    return [1 + size * x for x in (0.0, 1.0, -1.0, 0.5, -0.5)]


def _closed(method: str, conc: int, factor: float, jitter: list[float]) -> list[dict]:
    return [
        decode_req(
            10 * factor * b * j,
            **ident("bs", method, "sglang"),
            concurrency=conc,
            window_id=f"bs-{method}-c{conc}",
            prompt_id=f"p{i}",
        )
        for i, (b, j) in enumerate(zip(BASE, jitter))
    ]


CLOSED = {
    1: {
        "ddtree-b8": (1.5, SMALL),
        "ddtree-b16": (1.8, SMALL),
        "ddtree-b32": (1.02, _jitter(0.08)),
        "ngram": (3.0, SMALL),
    },
    8: {"ddtree-b8": (1.2, SMALL), "ddtree-b16": (1.4, _jitter(0.4))},
    32: {"ddtree-b8": (0.8, SMALL), "ngram": (0.9, SMALL)},
}
TPOT = {2.0: {"ngram-k2": 2.0, "ngram-k4": 2.5}, 32.0: {"ngram-k2": 0.5, "ngram-k4": 0.5}}


def _open(method: str, rate: float, speedup: float) -> tuple[list[dict], dict]:
    """rt_window with TPOT 20 ms / speedup, jittered by prompt (the method by its own 2%)."""
    own = (lambda i: 1.0) if method == AR else (lambda i: 1 + 0.02 * math.cos(3 * i))
    return rt_window(method, rate, lambda i: 0.02 * (1 + 0.1 * math.sin(i)) / speedup * own(i))


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("best") / "best.duckdb"
    requests = [r for conc in CLOSED for r in _closed(AR, conc, 1.0, [1.0] * 5)]
    for conc, methods in CLOSED.items():
        for method, (factor, jitter) in methods.items():
            requests += _closed(method, conc, factor, jitter)
    windows = []
    for rate, methods in TPOT.items():
        for method, speedup in {AR: 1.0, **methods}.items():
            rows, window = _open(method, rate, speedup)
            requests += rows
            windows.append(window)
    services = [
        service("bs", m, "sglang") for m in (AR, "ddtree-b8", "ddtree-b16", "ddtree-b32", "ngram")
    ]
    services += [service("rt", m, "vllm") for m in (AR, "ngram-k2", "ngram-k4")]
    family = [p for b in (8, 16, 32) for p in params("bs", f"ddtree-b{b}", "ddtree", budget=b)]
    family += params("rt", "ngram-k2", "ngram", k=2) + params("rt", "ngram-k4", "ngram", k=4)
    store = Store(path)  # three rounds repeating one another: intervals need 2+ starts a side
    for table, rows in (
        ("requests", rows_in_rounds("requests", requests)),
        ("services", rows_in_rounds("services", services)),
        ("method_params", family),
        ("windows", rows_in_rounds("windows", windows)),
    ):
        assert store.append(table, rows) == len(rows), table
    build.run(path, baseline=AR)
    return path


def best(db: Path, campaign: str, kind: str, load: float, family: str) -> dict[str, Any]:
    return one(
        db,
        "SELECT * FROM best_setting WHERE campaign_id = ? AND load_kind = ? AND "
        "load = ? AND family = ?",
        [campaign, kind, load, family],
    )


def test_the_pick_quotes_its_simultaneous_interval(db: Path) -> None:
    """c1 ddtree: b16 (1.8 x the jitter's geometric mean). Its interval is the t interval
    at level 1 - 0.05 / 8 (the campaign's 8 claims) on 4 df, computed here by hand."""
    pick = best(db, "bs", "concurrency", 1, "ddtree")
    assert (pick["method"], pick["params_label"], pick["decision"], pick["n_candidates"]) == (
        "ddtree-b16",
        "budget=16",
        "method",
        3,
    )
    logs = [math.log(1.8 * j) for j in SMALL]
    mean = sum(logs) / 5
    se = (sum((x - mean) ** 2 for x in logs) / 4) ** 0.5 / 5**0.5
    half = sps.t.ppf(1 - 0.05 / 16, 4) * se
    assert pick["speedup"] == pytest.approx(math.exp(mean))
    assert (pick["ci_low"], pick["ci_high"]) == pytest.approx(
        (math.exp(mean - half), math.exp(mean + half))
    )
    row = one(db, "SELECT * FROM speedup WHERE method = 'ddtree-b16' AND concurrency = 1")
    assert row["n_family"] == 8 and row["ci_low"] > pick["ci_low"]


def test_only_backed_claims_are_picked(db: Path) -> None:
    """c1 (any): ngram; b32's 1.02x is not backed, so the ddtree pick is not b32 whatever
    its estimate; c8: b16 has the higher estimate (1.4) but its interval holds 1, so b8;
    c32: none pays, speculation off."""
    assert best(db, "bs", "concurrency", 1, "(any)")["method"] == "ngram"
    b32 = one(db, "SELECT * FROM speedup WHERE method = 'ddtree-b32' AND concurrency = 1")
    assert not b32["significant"]
    c8 = best(db, "bs", "concurrency", 8, "ddtree")
    assert c8["method"] == "ddtree-b8"
    b16 = one(db, "SELECT * FROM speedup WHERE method = 'ddtree-b16' AND concurrency = 8")
    assert b16["speedup"] > c8["speedup"] and b16["ci_low"] < 1
    for family, n in (("ddtree", 1), ("ngram", 1), ("(any)", 2)):
        off = best(db, "bs", "concurrency", 32, family)
        assert (off["decision"], off["method"], off["speedup"], off["n_candidates"]) == (
            "off",
            None,
            None,
            n,
        )


def test_best_setting_per_rate(db: Path) -> None:
    """TPOT speedups: 2 req/s k4 (2.5 > 2.0), 32 req/s off (both 0.5)."""
    picks = {rate: best(db, "rt", "rate", rate, "ngram") for rate in (2.0, 32.0)}
    assert [picks[r]["method"] for r in (2.0, 32.0)] == ["ngram-k4", None]
    assert [picks[r]["decision"] for r in (2.0, 32.0)] == ["method", "off"]
    assert picks[2.0]["speedup"] == pytest.approx(2.5, rel=0.01)
    assert picks[2.0]["engine"] == "vllm" and picks[2.0]["params_label"] == "k=4"
    assert picks[2.0]["ci_low"] > 1
    assert not fetch(
        db, "SELECT * FROM best_setting WHERE campaign_id = 'rt' AND load_kind = 'concurrency'"
    )
