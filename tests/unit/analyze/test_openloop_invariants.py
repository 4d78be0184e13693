"""Inconsistent open-loop rows (issue 26): a window whose requests outnumber its schedule (a
merged or hand-edited file) must not crash the build with DuckDB's "cannot take square root of
a negative number" from the Wilson macros; the window is named, with its reason, in
open_windows.invalid_reason, and nothing is computed against its schedule.

Campaign v (SLO ttft 500 ms, target 0.99 by default), every request ok with ttft 0.1 s, so
every request meets the SLO:
  v-ar-1: autoregressive at 1 req/s, 11 requests at 0..10 s, n_scheduled 11: consistent,
          attainment 11/11 = 1, Wilson lower bound 11 / (11 + z^2) = 0.7406.
  v-ar-2: autoregressive at 2 req/s, 5 requests at 0, 0.5, .., 2 s but n_scheduled 3: 5 good
          of 3 scheduled. Invalid: 'requests outnumber the schedule: 5 sent, 3 scheduled'.
  v-df-1, v-df-2: dflash at 1 and 2 req/s, 11 requests each, consistent (goodput 11 / 12).
rate_limits (autoregressive): 1 req/s passes, 2 req/s is invalid and so misses -> max rate 1.
rate_speedup at 2 req/s: the baseline's goodput is withheld (NULL), so is the ratio.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from specsweep.analyze import build
from tests.support.analyze_rows import AR, one, open_req, store_rows, window

DF = "dflash"
Z = 1.959963984540054
REASON = "requests outnumber the schedule: 5 sent, 3 scheduled"


def rows_of(wid: str, method: str, times: list[float]) -> list[dict]:
    return [
        open_req(t, campaign_id="v", window_id=wid, method=method, prompt_id=f"p{i}")
        for i, t in enumerate(times)
    ]


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("invariants") / "v.duckdb"
    eleven = [float(i) for i in range(11)]
    requests = (
        rows_of("v-ar-1", AR, eleven)
        + rows_of("v-ar-2", AR, [0.0, 0.5, 1.0, 1.5, 2.0])
        + rows_of("v-df-1", DF, eleven)
        + rows_of("v-df-2", DF, eleven)
    )
    windows = [
        window("v", "v-ar-1", AR, rate=1.0, n=11, span=10.0, elapsed=12.0),
        window("v", "v-ar-2", AR, rate=2.0, n=3, span=1.0, elapsed=3.0),
        window("v", "v-df-1", DF, rate=1.0, n=11, span=10.0, elapsed=12.0),
        window("v", "v-df-2", DF, rate=2.0, n=11, span=10.0, elapsed=12.0),
    ]
    environment = [{"campaign_id": "v", "host": "campaign", "key": "slo.ttft_ms", "value": "500.0"}]
    store_rows(path, requests=requests, windows=windows, environment=environment)
    build.run(path, baseline=AR)  # before the fix: duckdb.OutOfRangeException
    return path


def test_window_with_more_requests_than_scheduled_is_named_not_computed(db: Path) -> None:
    row = one(db, "SELECT * FROM open_windows WHERE window_id = 'v-ar-2'")
    assert row["invalid_reason"] == REASON
    assert (row["n_sent"], row["n_scheduled"], row["n_good"]) == (5, 3, 5)
    against_schedule = (
        "scheduled_rps",
        "attainment",
        "attainment_lo",
        "attainment_hi",
        "attainment_steady",
        "attainment_steady_lo",
        "attainment_steady_hi",
        "attainment_from_send",
        "attainment_from_send_lo",
        "attainment_from_send_hi",
        "goodput_rps",
        "goodput_lo",
        "goodput_hi",
        "goodput_from_send_rps",
    )
    assert {c: row[c] for c in against_schedule} == dict.fromkeys(against_schedule)
    assert row["goodput_reason"] == REASON


def test_consistent_windows_keep_their_figures(db: Path) -> None:
    row = one(db, "SELECT * FROM open_windows WHERE window_id = 'v-ar-1'")
    assert row["invalid_reason"] is None
    assert row["attainment"] == 1.0
    assert row["attainment_lo"] == pytest.approx(11 / (11 + Z * Z), rel=1e-12)
    assert row["goodput_rps"] == pytest.approx(11 / 12, rel=1e-12)


def test_an_invalid_window_misses_its_rate_and_withholds_goodput(db: Path) -> None:
    limits = one(db, "SELECT * FROM rate_limits WHERE method = ?", [AR])
    assert (limits["n_rates"], limits["max_rate_under_slo"]) == (2, 1.0)
    at2 = one(db, "SELECT * FROM rate_speedup WHERE rate = 2.0")
    assert at2["baseline_goodput_rps"] is None and at2["goodput_ratio"] is None
    assert at2["method_goodput_rps"] == pytest.approx(11 / 12, rel=1e-12)
    at1 = one(db, "SELECT * FROM rate_speedup WHERE rate = 1.0")
    assert at1["goodput_ratio"] == pytest.approx(1.0, rel=1e-12)


def test_wilson_macros_are_null_outside_0_le_k_le_n() -> None:
    con = duckdb.connect()
    con.execute(build.read_sql("wilson.sql"))
    got = con.execute(
        "SELECT wilson_lo(5, 3), wilson_hi(5, 3), wilson_lo(-1, 3), "
        "wilson_hi(-1, 3), wilson_lo(1, -2), wilson_hi(3, 3)"
    ).fetchone()
    assert got[:5] == (None,) * 5
    assert got[5] == pytest.approx(1.0, rel=1e-12)  # k = n is inside: the bound is 1
