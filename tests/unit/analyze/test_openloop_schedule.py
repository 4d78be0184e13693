"""Latency from the scheduled send (issue 24, item 4) on hand-built raw rows: open_requests'
ttft_from_schedule_s / e2e_from_schedule_s and the two meets_slo rules, open_windows' lag
growth, behind_schedule, withheld goodput and from-send columns, rate_speedup's and
rate_limits' handling of a window that fell behind. Every figure is worked by hand below.

s1 (SLO ttft 500 ms, tpot 100 ms), rate 2 req/s, 21 requests due at 0.5 i s (S = 10, steady
  [1, 9]: i = 2..18, 17 requests), 11 tokens, tpot 0.09, ttft 0.1 -> e2e 1.0:
  s1-ar-2, uncapped, on time (lag exactly 0); i = 3, 7 have ttft 0.6 (miss either way): good
  19 of 21 from send and from schedule; elapsed 11 s (last sent at 10, 1.0 s long; i = 3, 7
  are 1.5 s long but end earlier).
  s1-df-2, cap 1: each request holds the slot 1.0 s, so request i goes out at i s: lag 0.5 i,
  ttft from schedule 0.1 + 0.5 i (<= 0.5 only for i = 0): good 1 of 21 from schedule, 21 of
  21 from send. Lag grows 1 s per s (lag_growth 1.0 > 0.1): behind. Lags 0, 0.5, ..., 10:
  p90 at position 0.9 * 20 = 18 -> 9.0 s. Steady ttft from schedule 0.1 + 0.5 i, i = 2..18:
  p50 (i = 10) 5.1, p99 at position 0.99 * 16 = 15.84 between i = 17 (8.6) and 18 (9.1):
  8.6 + 0.84 * 0.5 = 9.02; e2e from schedule = 1.0 + 0.5 i: p50 6.0. elapsed 21 s (last sent
  at 20): goodput from send 21 / 21 = 1.0.
  s1-jitter (workload jitter), uncapped, 11 requests at 0.5 i: request 1 sent 0.5 ms early,
  request 2 1 ms late, the rest on time.
s2 (SLO ttft 100 s: everything meets it), AR at rate 1 (11 requests at i s, on time) and at
  rate 2 capped as s1-df-2 (attainment 1.0 from schedule too, but behind).
s3 (SLO e2e 2000 ms), s3-level, cap 4: 21 requests at 0.5 i, every one 0.3 s late (a level
  lag: lag_growth 0, not behind), ttft 0.1, tpot 0.09 for even i (e2e 1.0), 0.17 for odd i
  (e2e 1.8). From send all 21 meet 2 s; from schedule e2e 1.3 (even, 11 of 21) or 2.1 (odd,
  miss). elapsed 10.3 + 1.0 = 11.3 s. Steady e2e from schedule: nine 1.3 (i = 2, 4, .., 18),
  eight 2.1: p50 1.3, p99 2.1 (from send 1.0 and 1.8).
s4: no SLO, one on-time window of 3 requests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from specsweep.analyze import build
from tests.support.analyze_rows import AR, fetch, one, open_req, store_rows, window

DF = "dflash"


def env(campaign: str, **values: str) -> list[dict[str, Any]]:
    return [
        {"campaign_id": campaign, "host": "campaign", "key": f"slo.{k}", "value": v}
        for k, v in values.items()
    ]


def capped(campaign: str, wid: str, method: str = AR) -> list[dict]:
    """21 requests due every 0.5 s, one in flight, 1.0 s each: request i is sent at i s."""
    return [
        open_req(
            0.5 * i,
            0.5 * i,
            ttft=0.1,
            tpot=0.09,
            campaign_id=campaign,
            window_id=wid,
            method=method,
            prompt_id=f"p{i}",
            concurrency=1,
        )
        for i in range(21)
    ]


def s1_rows() -> tuple[list[dict], list[dict]]:
    rows = [
        open_req(
            0.5 * i,
            ttft=0.6 if i in (3, 7) else 0.1,
            tpot=0.09,
            campaign_id="s1",
            window_id="s1-ar-2",
            prompt_id=f"p{i}",
        )
        for i in range(21)
    ]
    rows += capped("s1", "s1-df-2", DF)
    lags = {1: -0.0005, 2: 0.001}
    rows += [
        open_req(
            0.5 * i,
            lags.get(i, 0.0),
            campaign_id="s1",
            window_id="s1-jitter",
            workload="jitter",
            prompt_id=f"p{i}",
        )
        for i in range(11)
    ]
    wins = [
        window("s1", "s1-ar-2", rate=2.0, n=21, span=10.0, elapsed=11.0),
        window("s1", "s1-df-2", DF, rate=2.0, n=21, span=10.0, elapsed=21.0, max_concurrency=1),
        window("s1", "s1-jitter", rate=2.0, n=11, span=5.0, elapsed=6.0, workload="jitter"),
    ]
    return rows, wins


def s2_rows() -> tuple[list[dict], list[dict]]:
    rows = [
        open_req(float(i), campaign_id="s2", window_id="s2-1", prompt_id=f"p{i}") for i in range(11)
    ]
    rows += capped("s2", "s2-2")
    wins = [
        window("s2", "s2-1", rate=1.0, n=11, span=10.0, elapsed=11.0),
        window("s2", "s2-2", rate=2.0, n=21, span=10.0, elapsed=21.0, max_concurrency=1),
    ]
    return rows, wins


def s3_rows() -> tuple[list[dict], list[dict]]:
    rows = [
        open_req(
            0.5 * i,
            0.3,
            ttft=0.1,
            tpot=0.09 if i % 2 == 0 else 0.17,
            campaign_id="s3",
            window_id="s3-level",
            prompt_id=f"p{i}",
            concurrency=4,
        )
        for i in range(21)
    ]
    return rows, [
        window("s3", "s3-level", rate=2.0, n=21, span=10.0, elapsed=11.3, max_concurrency=4)
    ]


def s4_rows() -> tuple[list[dict], list[dict]]:
    rows = [
        open_req(float(i), campaign_id="s4", window_id="s4-1", prompt_id=f"p{i}") for i in range(3)
    ]
    return rows, [window("s4", "s4-1", rate=1.0, n=3, span=2.0, elapsed=3.0)]


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("schedule") / "schedule.duckdb"
    requests, windows = [], []
    for rows, wins in (s1_rows(), s2_rows(), s3_rows(), s4_rows()):
        requests += rows
        windows += wins
    environment = (
        env("s1", ttft_ms="500", tpot_ms="100")
        + env("s2", ttft_ms="100000")
        + env("s3", e2e_ms="2000")
    )
    store_rows(path, requests=requests, windows=windows, environment=environment)
    build.run(path, baseline=AR)
    return path


def win(path: Path, window_id: str) -> dict[str, Any]:
    return one(path, "SELECT * FROM open_windows WHERE window_id = ?", [window_id])


def test_from_schedule_latency_adds_the_lag_per_request(db: Path) -> None:
    rows = fetch(db, "SELECT * FROM open_requests WHERE window_id = 's1-df-2' ORDER BY scheduled_s")
    # request 4: due at 2.0 s, sent at 4.0 s (lag 2.0), ttft 0.1, e2e 0.1 + 10 * 0.09 = 1.0
    r = rows[4]
    assert (r["lag_s"], r["ttft_s"], r["e2e_s"]) == (pytest.approx(2.0), 0.1, pytest.approx(1.0))
    assert (r["ttft_from_schedule_s"], r["e2e_from_schedule_s"]) == (
        pytest.approx(2.1),
        pytest.approx(3.0),
    )
    assert [x["ttft_from_schedule_s"] for x in rows] == pytest.approx(
        [0.1 + 0.5 * i for i in range(21)]
    )
    # TTFT from send meets 500 ms everywhere; from schedule only request 0 does
    assert [x["meets_slo_from_send"] for x in rows] == [True] * 21
    assert [x["meets_slo"] for x in rows] == [True] + [False] * 20


def test_a_capped_window_that_fell_behind(db: Path) -> None:
    w = win(db, "s1-df-2")
    expect = {
        "lag_growth": 1.0,
        "lag_p90_s": 9.0,
        "ttft_p50_s": 0.1,
        "ttft_from_schedule_p50_s": 5.1,
        "ttft_from_schedule_p99_s": 9.02,
        "e2e_p50_s": 1.0,
        "e2e_from_schedule_p50_s": 6.0,
        "tpot_p50_s": 0.09,
        "attainment": 1 / 21,
        "attainment_from_send": 1.0,
        "goodput_from_send_rps": 1.0,
    }
    assert {k: w[k] for k in expect} == pytest.approx(expect, rel=1e-9)
    assert (w["n_good"], w["n_good_from_send"]) == (1, 21)
    assert w["attainment"] < w["attainment_from_send"]
    assert w["behind_schedule"] is True
    assert (w["goodput_rps"], w["goodput_lo"], w["goodput_hi"]) == (None, None, None)
    assert w["goodput_reason"] == (
        "behind schedule: lag grew 1.00 s per s of schedule (p90 lag 9.00 s)"
    )


def test_an_uncapped_on_time_window_gives_equal_figures(db: Path) -> None:
    w = win(db, "s1-ar-2")
    assert (w["lag_growth"], w["behind_schedule"], w["goodput_reason"]) == (0.0, False, None)
    for send, sched in (
        ("ttft_p50_s", "ttft_from_schedule_p50_s"),
        ("ttft_p99_s", "ttft_from_schedule_p99_s"),
        ("e2e_p50_s", "e2e_from_schedule_p50_s"),
        ("e2e_p99_s", "e2e_from_schedule_p99_s"),
        ("attainment_from_send", "attainment"),
        ("goodput_from_send_rps", "goodput_rps"),
    ):
        assert w[send] == w[sched], (send, sched)
    assert (w["n_good"], w["attainment"], w["goodput_rps"]) == (
        19,
        pytest.approx(19 / 21),
        pytest.approx(19 / 11),
    )


def test_a_level_lag_keeps_goodput_and_counts_the_wait(db: Path) -> None:
    """s3-level: 0.3 s late throughout. Not behind (the rate reached the server), but the
    e2e objective is judged from the scheduled send: 11 of 21 meet it, not 21."""
    w = win(db, "s3-level")
    assert (w["behind_schedule"], w["goodput_reason"]) == (False, None)
    assert w["lag_growth"] == pytest.approx(0.0, abs=1e-9)
    assert (w["n_good"], w["n_good_from_send"]) == (11, 21)
    expect = {
        "goodput_rps": 11 / 11.3,
        "goodput_from_send_rps": 21 / 11.3,
        "e2e_from_schedule_p50_s": 1.3,
        "e2e_from_schedule_p99_s": 2.1,
        "e2e_p50_s": 1.0,
        "e2e_p99_s": 1.8,
        "ttft_from_schedule_p50_s": 0.4,
    }
    assert {k: w[k] for k in expect} == pytest.approx(expect, rel=1e-9)


def test_a_negative_lag_is_kept_raw(db: Path) -> None:
    rows = fetch(
        db,
        "SELECT lag_s, ttft_from_schedule_s FROM open_requests "
        "WHERE window_id = 's1-jitter' ORDER BY scheduled_s",
    )
    assert [r["lag_s"] for r in rows[:3]] == pytest.approx([0.0, -0.0005, 0.001], abs=1e-12)
    assert [r["ttft_from_schedule_s"] for r in rows[:3]] == pytest.approx(
        [0.1, 0.0995, 0.101], abs=1e-12
    )
    w = win(db, "s1-jitter")
    assert (w["lag_min_s"], w["lag_max_s"]) == (pytest.approx(-0.0005), pytest.approx(0.001))


def test_no_slo_is_the_reason_without_one(db: Path) -> None:
    w = win(db, "s4-1")
    assert (
        w["goodput_rps"],
        w["goodput_from_send_rps"],
        w["attainment_from_send"],
        w["goodput_reason"],
    ) == (None, None, None, "no SLO")


def test_rate_speedup_withholds_the_goodput_of_a_side_behind(db: Path) -> None:
    r = one(db, "SELECT * FROM rate_speedup WHERE campaign_id = 's1'")
    assert (r["method"], r["rate"], r["method_goodput_rps"], r["goodput_ratio"]) == (
        DF,
        2.0,
        None,
        None,
    )
    assert r["baseline_goodput_rps"] == pytest.approx(19 / 11)


def test_a_rate_behind_schedule_does_not_count_as_meeting_the_slo(db: Path) -> None:
    """s2: both rates meet a 100 s TTFT (attainment 1.0 from schedule at 2 req/s too), but
    at 2 req/s the client fell behind, so the highest rate under the SLO is 1."""
    assert win(db, "s2-2")["attainment"] == 1.0
    r = one(db, "SELECT * FROM rate_limits WHERE campaign_id = 's2'")
    assert (r["n_rates"], r["max_rate_under_slo"]) == (2, 1.0)
