"""The open-loop objects (slo_targets, open_requests, open_windows, cache_hygiene,
rate_attainment, rate_speedup, rate_limits) on hand-built raw rows written through
Store.append (the raw contracts check them), every figure worked by hand below.

c1 (SLO ttft 500 ms, tpot 100 ms; target and trim by default: 0.99, 0.1), one window c1-w1:
  11 requests scheduled at 0, 1, ..., 10 s (S = 10), lag 0.001 * ((9 - i) % 11) s, so the lags
  are 0, 1, ..., 10 ms (p50 5 ms, p99 9.9 ms, max 10 ms) and request 9 is sent at exactly 9 s.
  Steady: scheduled in [1, 9] -> requests 1..9 (both edges in), 0 and 10 out.
  ttft 0.1 s (request 1: 0.6 s), 11 tokens, tpot 0.02 * i (request 0: 0.01); request 5 failed;
  request 10 has 1 token (no TPOT, e2e 0.1). e2e = ttft + 10 * tpot.
  Steady ok TPOTs 0.02, 0.04, 0.06, 0.08, 0.12, 0.14, 0.16, 0.18: p50 0.10, p99 (quantile_cont,
  position 0.99 * 7 = 6.93) 0.16 + 0.93 * 0.02 = 0.1786; e2e 0.5, 0.7, 0.8, 0.9, 1.3, 1.5,
  1.7, 1.9: p50 1.1, p99 1.886; TTFT: seven 0.1 and one 0.6: p50 0.1, p99 0.1 + 0.93 * 0.5.
  Good (ok, ttft <= 0.5, tpot <= 0.1 or none): requests 0, 2, 3, 4, 10 -> 5 of 11; steady good
  2, 3, 4 -> 3 of 9. elapsed 12 s: goodput 5/12, achieved 10/12, output_tps (9*11 + 1)/12.
  Completion: sent in [1, 9]: requests 1..9 (9); ok ending in it shifted by the steady median
  E2E 1.1, [2.1, 10.1]: 2 (2.507), 3, 4, 6, 7, 8 (9.701; 9 ends at 10.9, 10 at 10.11) -> 6/9 < 0.9
  and 3 short: saturated, 'completion'. Cached 50 of 100 on even requests: 300/1000.
c2 (no SLO): saturation cases over S = 20 (steady [2, 18], 17 steady requests, thirds of 5;
  completions counted in [2, 18] shifted by the median steady E2E, which is the middle third's:
  growth 0.11, small 0.03, so request 2 (ends 2.06 / 2.02) and 18 (18.21 / 18.06) fall out:
  15 of 17, 2 short, not saturated by completion),
  schedule lag, warm-up and an interrupted unit.
c3 (SLO ttft 500 ms, target 0.9, trim 0.2): autoregressive and dflash at 1, 2, 4, 8 req/s in 3
  rounds (a service start per method and round; round 1's windows keep the names
  c3-<method>-<rate>), 40 requests each at 0..39 s (steady [7.8, 31.2]: 8..31); dflash's TPOT is
  half the baseline's per prompt (speedup 2) except at 4 req/s (x 1.25: speedup 0.8), where the
  baseline failed requests 16..23 in every round (16 pairs left; 32 of 40 good; saturated). The
  rounds are alike (the TPOT ratios' start variance pools to 0) but for the baseline at 2 req/s,
  whose first 1, 0, 3 requests are slow (ttft 0.6 s): 39, 40, 37 of 40. Attainment: baseline
  120, 116, 96, 120 of 120 -> max rate 2 (8 passes above the failing 4 and does not count);
  dflash 15 of 120 at 1 req/s -> NULL. Strict, on rate_attainment's lower bound: at 1 req/s the
  one configuration with failures (dflash, 5 of 40 in every round) shows no spread (X2 = 0),
  but 2 contrasts are too few to pool on: s2 = 0 with its sampling variance, a t quantile on
  about 1400 df, and the baseline's 120 of 120 gets 0.969 >= 0.9 (Wilson's 120 / (120 + z^2) to
  4 digits); at 2 req/s the baseline's 39, 40, 37 give X2 = 3.62, s2 = 0.645 and a lower bound
  of 0.39 -> strict 1 (Wilson on 116 of 120, 0.917, would have passed 2); at 8 req/s every
  request met the SLO, so the spread is the engine's over every rate (X2 = 3.62 <
  chi2_6(0.75) = 7.84 over 6 contrasts: pooled, Wilson's). Plus a closed-loop window per method
  for cache_hygiene.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest
from scipy import stats

from specsweep.analyze import attainment, build
from specsweep.collect.plan.load import Slo
from tests.support.analyze_rows import (
    AR,
    fetch,
    one,
    open_req,
    req,
    store_rows,
    window,
)

DF = "dflash"
Z = 1.959963984540054


def wilson(k: int, n: int) -> tuple[float, float]:
    """The 95% Wilson score interval, written out again for the test."""
    p = k / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z / (1 + Z * Z / n) * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def env(campaign: str, **values: str) -> list[dict[str, Any]]:
    return [
        {"campaign_id": campaign, "host": "campaign", "key": f"slo.{k}", "value": v}
        for k, v in values.items()
    ]


def c1_rows() -> tuple[list[dict], list[dict]]:
    rows = []
    for i in range(11):
        common = {
            "campaign_id": "c1",
            "window_id": "c1-w1",
            "prompt_id": f"p{i}",
            "cached_tokens": 50 if i % 2 == 0 else 0,
        }
        lag = 0.001 * ((9 - i) % 11)
        if i == 5:
            rows.append(open_req(5.0, lag, failed=True, **{**common, "cached_tokens": None}))
        elif i == 10:
            rows.append(open_req(10.0, lag, tokens=1, **common))
        else:
            rows.append(
                open_req(
                    float(i),
                    lag,
                    ttft=0.6 if i == 1 else 0.1,
                    tpot=0.01 if i == 0 else 0.02 * i,
                    **common,
                )
            )
    return rows, [window("c1", "c1-w1", rate=1.0, n=11, span=10.0, elapsed=12.0)]


def twenty(window_id: str, ttft_of: Any, failed: set[int] = frozenset(), **kw: Any) -> list[dict]:
    """21 requests of c2 at 0..20 s, 2 tokens, e2e = ttft + 0.01."""
    return [
        open_req(
            float(i),
            ttft=ttft_of(i),
            tpot=0.01,
            tokens=2,
            failed=i in failed,
            campaign_id="c2",
            window_id=window_id,
            prompt_id=f"p{i}",
            **kw,
        )
        for i in range(21)
    ]


def thirds(first: float, last: float, other: float):
    return lambda i: first if 2 <= i <= 6 else last if 14 <= i <= 18 else other


def c2_rows() -> tuple[list[dict], list[dict]]:
    rows = twenty("c2-growth", thirds(0.05, 0.2, 0.1))
    rows.append(
        {**open_req(0.0, campaign_id="c2", window_id="c2-growth", prompt_id="w"), "is_warmup": True}
    )
    rows += twenty("c2-small", thirds(0.01, 0.05, 0.02))
    rows += twenty("c2-completion", lambda i: 0.1, failed=set(range(10, 21)))
    rows += twenty("c2-both", thirds(0.05, 0.5, 0.5), failed={10, 11, 12})
    rows += [
        open_req(
            i * 0.01,
            0.002,
            ttft=0.01,
            tpot=0.01,
            tokens=2,
            campaign_id="c2",
            window_id="c2-behind",
            prompt_id=f"p{i}",
            concurrency=4,
        )
        for i in range(11)
    ]
    rows += [
        open_req(float(i), campaign_id="c2", window_id="c2-cut", workload="cut", prompt_id=f"p{i}")
        for i in range(3)
    ]
    rows += [
        open_req(
            i * 0.5,
            ttft=1.79,
            tpot=0.01,
            tokens=2,
            campaign_id="c2",
            window_id="c2-long",
            workload="long",
            prompt_id=f"p{i}",
        )
        for i in range(11)
    ]
    # a cap of 1 in flight: due every 0.5 s, each takes 1 s, so request i goes out at i s
    rows += [
        open_req(
            i * 0.5,
            i * 0.5,
            ttft=0.1,
            tpot=0.09,
            tokens=11,
            campaign_id="c2",
            window_id="c2-capped",
            workload="capped",
            prompt_id=f"p{i}",
            concurrency=1,
        )
        for i in range(21)
    ]
    rows += [
        open_req(s, campaign_id="c2", window_id="c2-ramp", workload="ramp", prompt_id=f"p{i}")
        for i, s in enumerate((0.0, 2.0, 3.0, 3.5, 4.0))
    ]
    wins = [
        window("c2", w, rate=r, n=21, span=20.0, elapsed=21.0)
        for w, r in (
            ("c2-growth", 1.0),
            ("c2-small", 1.5),
            ("c2-completion", 2.0),
            ("c2-both", 3.0),
        )
    ]
    wins += [
        window("c2", "c2-behind", rate=100.0, n=11, span=0.1, elapsed=0.2, max_concurrency=4),
        window("c2", "c2-cut", rate=5.0, n=3, span=2.0, elapsed=3.0, workload="cut"),
        window("c2", "c2-long", rate=2.0, n=11, span=5.0, elapsed=6.8, workload="long"),
        window(
            "c2",
            "c2-capped",
            rate=2.0,
            n=21,
            span=10.0,
            elapsed=21.0,
            workload="capped",
            max_concurrency=1,
        ),
        window(
            "c2",
            "c2-ramp",
            rate=None,
            n=5,
            span=4.0,
            elapsed=5.0,
            workload="ramp",
            ramp="linear",
            ramp_start_rate=0.5,
            ramp_end_rate=2.0,
        ),
    ]
    return rows, wins


SLOW_AR_2 = {1: 1, 2: 0, 3: 3}  # c3: requests 0..k-1 of autoregressive at 2 req/s are slow


def c3_request(method: str, rate: float, run: int, i: int, wid: str, svc: str) -> dict:
    """Request i of c3's window of `method` at `rate` in round `run` (module docstring)."""
    tpot = 0.04 + 0.001 * (i % 5)
    if method == DF:  # with a jitter of its own, so the ratios have a spread
        tpot *= (1.25 if rate == 4.0 else 0.5) * (1 + 0.01 * ((3 * i) % 5 - 2))
    slow_df = (method, rate) == (DF, 1.0) and i >= 5
    slow = slow_df or ((method, rate) == (AR, 2.0) and i < SLOW_AR_2[run])
    row = open_req(
        float(i),
        ttft=0.6 if slow else 0.1,
        tpot=tpot,
        tokens=61,
        failed=(method, rate) == (AR, 4.0) and 16 <= i <= 23,
        campaign_id="c3",
        window_id=wid,
        service_id=svc,
        method=method,
        prompt_id=f"p{i}",
        cached_tokens={(DF, 2.0): 10, (DF, 8.0): 50}.get((method, rate), 0),
    )
    return {**row, "run": run}


def c3_rows() -> tuple[list[dict], list[dict]]:
    rows, wins = [], []
    for run, rate, method in itertools.product((1, 2, 3), (1.0, 2.0, 4.0, 8.0), (AR, DF)):
        tail = "" if run == 1 else f"/run{run}"  # round 1 keeps the names the tests use
        wid, svc = f"c3-{method}-{rate:g}{tail}", f"svc-{method}{tail}"
        rows += [c3_request(method, rate, run, i, wid, svc) for i in range(40)]
        reset = "kept" if (method, rate) == (DF, 8.0) else "flush_cache"
        wins.append(window("c3", wid, method, rate=rate, n=40, span=39.0, elapsed=40.0,
                           cache_reset=reset, service_id=svc, run=run))  # fmt: skip
    for method, cached in ((AR, 0), (DF, 30)):
        wid = f"c3-{method}-closed"
        rows += [
            req(
                campaign_id="c3",
                window_id=wid,
                method=method,
                prompt_id=f"p{i}",
                cached_tokens=cached,
            )
            for i in range(2)
        ]
        wins.append(
            window(
                "c3",
                wid,
                method,
                rate=None,
                n=2,
                span=None,
                elapsed=3.0,
                load="closed",
                seed=None,
                max_concurrency=1,
            )
        )
    return rows, wins


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("openloop") / "open.duckdb"
    requests, windows = [], []
    for rows, wins in (c1_rows(), c2_rows(), c3_rows()):  # one round unless c3's says
        requests += [{"run": 1, **r} for r in rows]
        windows += [{"run": 1, **w} for w in wins]
    units = [
        {
            "campaign_id": "c2",
            "config_id": f"cfg-{AR}",
            "workload": "cut",
            "service_id": f"svc-{AR}",
            "n_requests": 3,
            "complete": False,
            "colocated_with": "",
            "started_at": req()["sent_at"],
            "finished_at": req()["sent_at"],
        }
    ]
    environment = env("c1", ttft_ms="500.0", tpot_ms="100.0") + env(
        "c3", ttft_ms="500.0", target="0.9", trim="0.2"
    )
    campaigns = [
        {
            "campaign_id": "c2",
            "plan_name": "c2",
            "plan_sha256": "ab" * 32,
            "plan_yaml": "name: c2\n",
            "baseline": AR,
            "started_at": req()["sent_at"],
            "finished_at": None,
            "status": "running",
        }
    ]
    store_rows(
        path,
        requests=requests,
        windows=windows,
        units=units,
        environment=environment,
        campaigns=campaigns,
    )
    build.run(path, baseline=AR)
    return path


def win(path: Path, window_id: str) -> dict[str, Any]:
    return one(path, "SELECT * FROM open_windows WHERE window_id = ?", [window_id])


def test_wilson_macro_matches_hand_computed_intervals() -> None:
    con = duckdb.connect()
    con.execute(build.read_sql("wilson.sql"))
    got = dict(zip(["lo0", "hi0", "lo10", "hi10", "lo8", "hi8", "none"], con.execute(
        "SELECT wilson_lo(0, 10), wilson_hi(0, 10), wilson_lo(10, 10), wilson_hi(10, 10), "
        "wilson_lo(8, 10), wilson_hi(8, 10), wilson_lo(NULL, 10)").fetchone()))  # fmt: skip
    assert got["lo0"] == 0 and got["hi0"] == pytest.approx(Z * Z / (10 + Z * Z), rel=1e-12)
    assert got["lo10"] == pytest.approx(10 / (10 + Z * Z), rel=1e-12)
    assert got["hi10"] == pytest.approx(1, rel=1e-12)
    # 8 of 10: centre (0.8 + 0.19207) / 1.38415 = 0.71674, half 0.22658 (textbook 0.490..0.943)
    assert (round(got["lo8"], 4), round(got["hi8"], 4)) == (0.4902, 0.9433)
    assert got["none"] is None
    assert con.execute("SELECT wilson_lo(0, 0), wilson_hi(3, 0)").fetchone() == (None, None)


def test_slo_targets_read_strings_and_apply_defaults(db: Path) -> None:
    rows = {r["campaign_id"]: r for r in fetch(db, "SELECT * FROM slo_targets")}
    assert rows["c1"] == {
        "campaign_id": "c1",
        "ttft_ms": 500.0,
        "tpot_ms": 100.0,
        "e2e_ms": None,
        "target": 0.99,
        "trim": 0.1,
        "has_slo": True,
    }
    assert rows["c2"] == {
        "campaign_id": "c2",
        "ttft_ms": None,
        "tpot_ms": None,
        "e2e_ms": None,
        "target": 0.99,
        "trim": 0.1,
        "has_slo": False,
    }
    assert (
        rows["c3"]["ttft_ms"],
        rows["c3"]["tpot_ms"],
        rows["c3"]["target"],
        rows["c3"]["trim"],
    ) == (500.0, None, 0.9, 0.2)


def test_open_requests_tpot_lag_steady_and_slo(db: Path) -> None:
    rows = fetch(db, "SELECT * FROM open_requests WHERE window_id = 'c1-w1' ORDER BY scheduled_s")
    assert [r["steady"] for r in rows] == [False] + [True] * 9 + [False]
    assert [r["lag_s"] for r in rows] == pytest.approx([0.001 * ((9 - i) % 11) for i in range(11)])
    tpot = [r["tpot_s"] for r in rows]
    assert tpot[5] is None and tpot[10] is None  # failed; one token
    assert tpot[:5] + tpot[6:10] == pytest.approx(
        [0.01, 0.02, 0.04, 0.06, 0.08, 0.12, 0.14, 0.16, 0.18]
    )
    assert [r["meets_slo"] for r in rows] == [
        True,
        False,
        True,
        True,
        True,
        False,
        False,
        False,
        False,
        False,
        True,
    ]
    # collect's Slo.met (the search's rule, from the actual send) agrees with the SQL's
    # from-send rule on every row (here lags of at most 10 ms move no request across 500 ms)
    slo = Slo(ttft_ms=500, tpot_ms=100)
    raw = fetch(
        db,
        "SELECT ok, ttft_s, e2e_s, output_tokens FROM requests "
        "WHERE window_id = 'c1-w1' ORDER BY scheduled_s",
    )
    assert [slo.met(**r) for r in raw] == [r["meets_slo_from_send"] for r in rows]
    assert [r["meets_slo_from_send"] for r in rows] == [r["meets_slo"] for r in rows]


def test_trim_from_the_campaign_moves_the_steady_edges(db: Path) -> None:
    steady = fetch(
        db,
        "SELECT prompt_id FROM open_requests WHERE window_id = 'c3-dflash-1' "
        "AND steady ORDER BY scheduled_s",
    )
    assert [r["prompt_id"] for r in steady] == [f"p{i}" for i in range(8, 32)]  # [7.8, 31.2]


def test_open_window_of_c1(db: Path) -> None:
    w = win(db, "c1-w1")
    assert (w["method"], w["n_scheduled"], w["n_sent"], w["n_ok"], w["n_steady"]) == (
        AR,
        11,
        11,
        10,
        9,
    )
    expect = {
        "scheduled_rps": 1.0,
        "achieved_rps": 10 / 12,
        "lag_p50_s": 0.005,
        "lag_p99_s": 0.0099,
        "lag_max_s": 0.010,
        "ttft_p50_s": 0.1,
        "ttft_p99_s": 0.1 + 0.93 * 0.5,
        "tpot_p50_s": 0.10,
        "tpot_p99_s": 0.1786,
        "e2e_p50_s": 1.1,
        "e2e_p99_s": 1.886,
        "output_tps": 100 / 12,
        "completion_ratio": 6 / 9,
        "cached_share": 0.3,
    }
    assert {k: w[k] for k in expect} == pytest.approx(expect, rel=1e-9)
    # p99 lag 9.9 ms is over 1 ms but under 0.1 / rate = 100 ms: on schedule
    assert w["behind_schedule"] is False
    assert (w["saturated"], w["saturation_reason"]) == (True, "completion")


def test_goodput_and_attainment_with_wilson_intervals(db: Path) -> None:
    w = win(db, "c1-w1")
    lo, hi = wilson(5, 11)
    slo_lo, slo_hi = wilson(3, 9)
    expect = {
        "n_good": 5,
        "n_good_steady": 3,
        "goodput_rps": 5 / 12,
        "attainment": 5 / 11,
        "attainment_lo": lo,
        "attainment_hi": hi,
        "goodput_lo": 11 / 12 * lo,
        "goodput_hi": 11 / 12 * hi,
        "attainment_steady": 3 / 9,
        "attainment_steady_lo": slo_lo,
        "attainment_steady_hi": slo_hi,
    }
    assert {k: w[k] for k in expect} == pytest.approx(expect, rel=1e-12)
    assert (round(lo, 4), round(hi, 4)) == (0.2127, 0.7199)  # by hand: 0.4663 -/+ 0.2536


@pytest.mark.parametrize(("window_id", "reason", "first", "last"), [
    ("c2-growth", "ttft_growth", 0.05, 0.2),   # 4x and 150 ms; 15 of 17 complete
    ("c2-small", None, 0.01, 0.05),            # 5x but only 40 ms
    ("c2-completion", "completion", 0.1, None),  # 8 of 17 complete; no ok late request
    ("c2-both", "both", 0.05, 0.5),            # 13 of 17 complete, and 10x
])  # fmt: skip
def test_saturation(
    db: Path, window_id: str, reason: str | None, first: float, last: float | None
) -> None:
    w = win(db, window_id)
    assert (w["saturation_reason"], w["saturated"]) == (reason, reason is not None)
    assert w["ttft_first_third_s"] == pytest.approx(first)
    assert w["ttft_last_third_s"] == (None if last is None else pytest.approx(last))
    ratio = {
        "c2-growth": 15 / 17,
        "c2-small": 15 / 17,
        "c2-completion": 8 / 17,
        "c2-both": 13 / 17,
    }[window_id]
    assert w["completion_ratio"] == pytest.approx(ratio)


def test_requests_longer_than_the_trim_do_not_look_like_saturation(db: Path) -> None:
    """11 requests every 0.5 s (S = 5, steady [0.5, 4.5]: 9 sent), each 1.8 s long, no
    queueing. Completions in the unshifted interval would be the sends at 0..2.5 (ratio 6/9);
    shifted by the median E2E 1.8, [2.3, 6.3] holds every steady send's end: 9/9."""
    w = win(db, "c2-long")
    assert (w["completion_ratio"], w["saturated"]) == (pytest.approx(1.0), False)


def test_a_cap_that_holds_sends_back_is_saturation_not_only_lag(db: Path) -> None:
    """c2-capped: 21 requests due every 0.5 s (S = 10, steady [1, 9]: 17 due), one in flight
    at a time, each 1 s long, so request i is sent at i s and ends at i + 1. Completions in
    [1, 9] shifted by the median E2E 1.0, [2, 10]: requests 1..9 (9 of 17 due, 8 short), so
    the server did not keep up, though every request it got was fast (TTFT flat, 0.1 s)."""
    w = win(db, "c2-capped")
    assert w["completion_ratio"] == pytest.approx(9 / 17)
    assert (w["saturated"], w["saturation_reason"], w["behind_schedule"]) == (
        True,
        "completion",
        True,
    )
    # lag i * 0.5 at scheduled i * 0.5: one second of lag per second of schedule
    assert w["lag_growth"] == pytest.approx(1.0)


def test_a_level_lag_at_100_per_second_is_not_behind_schedule(db: Path) -> None:
    """c2-behind: every request 2 ms late. The lag does not grow (lag_growth 0), so the
    server got the rate 2 ms later; the from-schedule TTFT carries the 2 ms: 0.01 + 0.002."""
    w = win(db, "c2-behind")
    assert (w["scheduled_rps"], w["lag_p99_s"], w["lag_growth"], w["behind_schedule"]) == (
        pytest.approx(100),
        pytest.approx(0.002),
        pytest.approx(0, abs=1e-9),
        False,
    )
    assert (w["ttft_p50_s"], w["ttft_from_schedule_p50_s"]) == (
        pytest.approx(0.01),
        pytest.approx(0.012),
    )
    assert w["max_concurrency"] == 4


def test_no_slo_leaves_goodput_columns_null_and_warmup_and_cut_units_out(db: Path) -> None:
    w = win(db, "c2-growth")
    cols = [
        "n_good",
        "goodput_rps",
        "goodput_lo",
        "goodput_hi",
        "attainment",
        "attainment_lo",
        "attainment_hi",
        "attainment_steady",
        "attainment_steady_lo",
        "attainment_steady_hi",
    ]
    assert all(w[c] is None for c in cols)
    assert one(
        db,
        "SELECT count(*) AS n, count(meets_slo) AS met FROM open_requests WHERE campaign_id = 'c2'",
    ) == {"n": 21 * 4 + 11 + 5 + 11 + 21, "met": 0}
    # the campaign's counts hold them too; the interrupted unit's 3 rows wait for resume
    assert one(
        db,
        "SELECT n_measured, n_measured_open, n_in_incomplete, n_warmup "
        "FROM campaign_summary WHERE campaign_id = 'c2'",
    ) == {"n_measured": 132, "n_measured_open": 132, "n_in_incomplete": 3, "n_warmup": 1}
    assert w["n_sent"] == 21  # the warm-up request is not one of them
    assert fetch(db, "SELECT * FROM open_windows WHERE window_id = 'c2-cut'") == []
    assert fetch(db, "SELECT * FROM cache_hygiene WHERE window_id = 'c2-cut'") == []


def test_rate_speedup_in_rate_space(db: Path) -> None:
    rows = {r["rate"]: r for r in fetch(db, "SELECT * FROM rate_speedup WHERE campaign_id = 'c3'")}
    assert sorted(rows) == [1.0, 2.0, 4.0, 8.0]
    assert {r["method"] for r in rows.values()} == {DF}
    for rate, speedup, pairs in ((1.0, 2.0, 24), (2.0, 2.0, 24), (4.0, 0.8, 16), (8.0, 2.0, 24)):
        r = rows[rate]
        # every prompt's ratio within 2% of the same: a narrow interval around it
        assert r["tpot_speedup"] == pytest.approx(speedup, rel=0.01)
        assert speedup * 0.98 < r["tpot_speedup_lo"] < r["tpot_speedup_hi"] < speedup * 1.02
        assert (r["n_pairs"], r["significant"], r["is_control"]) == (pairs, True, False)
    # a point estimate over the rounds (no interval: rate_speedup.sql)
    assert [rows[r]["goodput_ratio"] for r in (1.0, 2.0, 4.0, 8.0)] == pytest.approx(
        [15 / 120, 120 / 116, 120 / 96, 1.0]
    )
    assert [rows[r]["baseline_saturated"] for r in (1.0, 2.0, 4.0, 8.0)] == [
        False,
        False,
        True,
        False,
    ]
    assert not any(rows[r]["method_saturated"] for r in rows)
    # 8 req/s: dflash kept the cache (and 50% cached); 2 req/s: 10% cached is not > 0.1
    assert [rows[r]["cache_mismatch"] for r in (1.0, 2.0, 4.0, 8.0)] == [False, False, False, True]


def test_rate_limits(db: Path) -> None:
    rows = {r["method"]: r for r in fetch(db, "SELECT * FROM rate_limits WHERE campaign_id = 'c3'")}
    assert rows[AR] | {"campaign_id": None} == {
        "campaign_id": None,
        "tp": 1,
        "method": AR,
        "workload": "chat",
        "max_tokens": 256,
        "n_rates": 4,
        "lowest_rate": 1.0,
        "highest_rate": 8.0,
        "target": 0.9,
        "max_rate_under_slo": 2.0,
        "max_rate_under_slo_strict": 1.0,
        "strict_reason": None,  # 2 req/s has an interval: its lower bound decided
        "saturation_rate": 4.0,
        "stops_paying_rate": None,
        "pays_at_rate": None,
        "compared": False,  # the baseline has no rate_speedup row of its own
    }
    df = rows[DF]
    assert (
        df["max_rate_under_slo"],
        df["max_rate_under_slo_strict"],
        df["saturation_rate"],
        df["stops_paying_rate"],
        df["pays_at_rate"],
    ) == (None, None, None, 4.0, 1.0)
    assert df["compared"] and (df["lowest_rate"], df["highest_rate"]) == (1.0, 8.0)
    c2 = one(db, "SELECT * FROM rate_limits WHERE campaign_id = 'c2' AND workload = 'chat'")
    assert (c2["max_rate_under_slo"], c2["saturation_rate"], c2["target"]) == (None, 1.0, 0.99)
    ramp = one(db, "SELECT * FROM rate_limits WHERE workload = 'ramp'")  # no single rate
    assert (ramp["n_rates"], ramp["max_rate_under_slo"], ramp["saturation_rate"]) == (0, None, None)
    c1 = one(db, "SELECT * FROM rate_limits WHERE campaign_id = 'c1'")  # one start: no bound
    assert (c1["max_rate_under_slo_strict"], c1["strict_reason"]) == (None, attainment.ONE_START)


def test_the_figures_rows_are_built_by_analyze(db: Path) -> None:
    """rate_sweep rings dflash's stops-paying rate (4 req/s) among its rate_speedup rows;
    rate_points carries rate_attainment's figures at each swept rate and the ramp's window as
    it is (tests/unit/analyze/test_rate_sweep.py works both out on hand-built rows)."""
    sweep = fetch(db, "SELECT * FROM rate_sweep WHERE campaign_id = 'c3' ORDER BY rate")
    assert [(r["rate"], r["is_crossover"]) for r in sweep if r["method"] == DF] == [
        (1.0, False), (2.0, False), (4.0, True), (8.0, False),
    ]  # fmt: skip
    points = fetch(
        db,
        "SELECT p.attainment AS p, a.attainment AS a, p.goodput_lo AS pl, a.goodput_lo AS al"
        " FROM rate_points AS p JOIN rate_attainment AS a"
        " USING (campaign_id, tp, method, workload, max_tokens, rate)",
    )
    assert points and all((r["p"], r["pl"]) == (r["a"], r["al"]) for r in points)
    ramp = one(db, "SELECT * FROM rate_points WHERE workload = 'ramp'")
    window = one(db, "SELECT * FROM open_windows WHERE workload = 'ramp'")
    assert ramp["rate"] is None and ramp["window_id"] == window["window_id"]
    assert ramp["attainment"] == window["attainment"]


def williams(starts: list[tuple[list[int], int]], contrasts: int) -> tuple[float, float]:
    """(s2 before its truncation at 0, Var(s2)) of analyze/attainment.py's docstring, written
    out again: starts holds each informative configuration's good counts and its requests per
    start (never pooled: fewer than 4 contrasts here)."""
    x2 = d = w = spread = 0.0
    for good, n in starts:
        k, r = np.asarray(good, float), len(good)
        p = k.sum() / (n * r)
        x2 += ((k - n * p) ** 2 / (n * p * (1 - p))).sum()
        d += r - 1
        w += p * (1 - p) * r * (1 - 1 / r) * (n - 1)
    s2 = (x2 - d) / w
    for good, n in starts:
        p = sum(good) / (n * len(good))
        spread += (len(good) - 1) * (1 + (n - 1) * max(s2, 0.0) * p * (1 - p)) ** 2
    return s2, 2 * spread / w**2 * max(1.0, d / contrasts)


def quasi_score(good: int, n: int, r: int, s2: float, var_s2: float) -> tuple[float, float]:
    """The interval of good of r starts x n requests, on a grid of 1e-6 in attainment."""
    total, pairs = n * r, r * n * (n - 1)
    pt = (good + 0.5) / (total + 1)
    v_t = pt * (1 - pt) / total + s2 * (pt * (1 - pt)) ** 2 * pairs / total**2
    df = 2 * v_t**2 / (((pt * (1 - pt)) ** 2 * pairs / total**2) ** 2 * var_s2)
    p0 = np.linspace(1e-6, 1 - 1e-6, 999_999)
    v = p0 * (1 - p0) / total + s2 * (p0 * (1 - p0)) ** 2 * pairs / total**2
    inside = p0[(good / total - p0) ** 2 <= stats.t.ppf(0.975, df) ** 2 * v]
    return inside.min(), 1.0 if good == total else inside.max()


def test_rate_attainment_carries_the_start_variance(db: Path) -> None:
    rows = {
        (r["method"], r["rate"]): r
        for r in fetch(db, "SELECT * FROM rate_attainment WHERE campaign_id = 'c3'")
    }
    alike = rows[(AR, 1.0)]  # dflash's 5, 5, 5 of 40 show no spread, on 2 contrasts
    assert (alike["n_starts"], alike["n_scheduled"], alike["n_good"], alike["pooled"]) == (
        3, 120, 120, False)  # fmt: skip
    s2, var_s2 = williams([([5, 5, 5], 40)], contrasts=2)
    assert s2 < 0 and alike["start_sd_logit"] == 0.0  # truncated at 0, its variance kept
    lo = quasi_score(120, 40, 3, 0.0, var_s2)[0]
    assert (alike["attainment_lo"], alike["attainment_hi"]) == pytest.approx((lo, 1.0), abs=2e-6)
    assert alike["attainment_lo"] == pytest.approx(wilson(120, 120)[0], abs=1e-4)
    assert alike["attainment_df"] > 1000 and alike["dispersion_from"] == "rate"
    spread = rows[(AR, 2.0)]  # 39, 40, 37 of 40
    s2, var_s2 = williams([([39, 40, 37], 40)], contrasts=2)
    assert s2 == pytest.approx(0.6448367, rel=1e-6)
    lo, hi = quasi_score(116, 40, 3, s2, var_s2)
    assert (spread["attainment_lo"], spread["attainment_hi"]) == pytest.approx((lo, hi), abs=2e-6)
    assert (spread["attainment"], spread["start_min"], spread["start_max"]) == pytest.approx(
        (116 / 120, 37 / 40, 1.0))  # fmt: skip
    assert (spread["start_sd_logit"] ** 2, spread["pooled"]) == (pytest.approx(s2), False)
    # the old bound, the requests of three starts as one binomial sample, would pass 0.9
    assert spread["attainment_lo"] < 0.9 < wilson(116, 120)[0]
    assert (spread["goodput_rps"], spread["goodput_lo"]) == pytest.approx((116 / 120, lo), abs=2e-6)
    # dflash at 2 req/s met it in every request: its bound carries the baseline's spread
    clean = rows[(DF, 2.0)]
    assert clean["attainment_lo"] == pytest.approx(quasi_score(120, 40, 3, s2, var_s2)[0], abs=2e-6)
    assert clean["attainment_lo"] < wilson(120, 120)[0]
    # 8 req/s: every request met it, so the spread is the engine's over every rate (pooled)
    assert (rows[(AR, 8.0)]["dispersion_from"], rows[(AR, 8.0)]["pooled"]) == ("engine", True)
    assert rows[(AR, 8.0)]["attainment_lo"] == pytest.approx(wilson(120, 120)[0])


def test_one_start_or_no_slo_has_no_attainment_interval(db: Path) -> None:
    c1 = one(db, "SELECT * FROM rate_attainment WHERE campaign_id = 'c1'")
    assert (c1["n_starts"], c1["attainment"], c1["attainment_lo"], c1["ci_reason"]) == (
        1, pytest.approx(5 / 11), None, attainment.ONE_START)  # fmt: skip
    assert (c1["goodput_rps"], c1["goodput_lo"]) == (pytest.approx(5 / 12), None)
    c2 = one(db, "SELECT * FROM rate_attainment WHERE campaign_id = 'c2' AND rate = 1.0")
    assert (c2["attainment"], c2["ci_reason"], c2["goodput_reason"]) == (None, "no SLO", "no SLO")


def test_starts_that_never_miss_anywhere_leave_no_spread_to_estimate() -> None:
    perfect = attainment.Starts(
        np.array([40.0, 40.0]), np.array([40.0, 40.0]), (("a", 1), ("a", 2))
    )
    assert attainment.dispersion([perfect], "engine").reason == attainment.NO_SPREAD


def test_a_ramp_window_has_a_scheduled_rate_and_no_rate_speedup(db: Path) -> None:
    w = win(db, "c2-ramp")  # 5 requests over 4 s: (5 - 1) / 4
    assert (w["rate"], w["ramp"], w["ramp_end_rate"], w["scheduled_rps"]) == (
        None,
        "linear",
        2.0,
        1.0,
    )
    assert fetch(db, "SELECT * FROM rate_speedup WHERE workload = 'ramp'") == []


def test_only_a_ttft_objective_ignores_tpot(db: Path) -> None:
    # c3 gives ttft_ms only: dflash's slow TPOT at 4 req/s costs no attainment
    assert [win(db, f"c3-{m}-4")["n_good"] for m in (AR, DF)] == [32, 40]
    assert win(db, "c3-dflash-1")["n_good"] == 5  # ttft 0.6 s misses 500 ms


def test_cache_hygiene_covers_both_kinds_of_window(db: Path) -> None:
    rows = {
        r["window_id"]: r for r in fetch(db, "SELECT * FROM cache_hygiene WHERE campaign_id = 'c3'")
    }
    closed = rows["c3-dflash-closed"]
    assert (
        closed["load"],
        closed["concurrency"],
        closed["cached_share"],
        closed["baseline_window_id"],
        closed["cache_mismatch"],
    ) == ("closed", 1, pytest.approx(0.3), "c3-autoregressive-closed", True)
    assert rows["c3-autoregressive-closed"]["cache_mismatch"] is None  # the baseline's own
    kept = rows["c3-dflash-8"]
    assert (kept["cache_reset"], kept["baseline_cache_reset"], kept["cache_mismatch"]) == (
        "kept",
        "flush_cache",
        True,
    )
    assert rows["c3-dflash-2"]["cached_share"] == pytest.approx(0.1)
    assert rows["c3-dflash-2"]["cache_mismatch"] is False
    assert len(rows) == 8 * 3 + 2  # 8 open-loop windows a round, 3 rounds; 2 closed-loop
    # a round's window is held against the baseline's of the same round (its pair)
    later = rows["c3-dflash-8/run2"]
    assert (later["run"], later["baseline_window_id"]) == (2, "c3-autoregressive-8/run2")


def test_closed_loop_rows_stay_out_of_the_open_loop_objects(db: Path) -> None:
    assert one(db, "SELECT count(*) AS n FROM open_requests WHERE window_id LIKE '%closed'") == {
        "n": 0
    }
    assert one(db, "SELECT count(*) AS n FROM request_metrics WHERE scheduled_s IS NOT NULL") == {
        "n": 0
    }


def test_a_file_without_open_loop_rows_has_empty_open_loop_tables(tmp_path: Path) -> None:
    path = tmp_path / "closed.duckdb"
    store_rows(path, requests=[req(prompt_id="p1"), req(method=DF, prompt_id="p1")])
    build.run(path, baseline=AR)
    with duckdb.connect(str(path), read_only=True) as con:
        counts = build.object_counts(con)
    assert counts["request_metrics"] == 2
    assert all(
        counts[name] == 0
        for name in (
            "slo_targets",
            "open_requests",
            "open_windows",
            "cache_hygiene",
            "rate_speedup",
            "rate_limits",
            "rate_sweep",
            "rate_points",
        )
    )
