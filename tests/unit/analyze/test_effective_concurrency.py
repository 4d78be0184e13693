"""effective_concurrency of config_summary (02) and open_windows (25) on hand-built rows:
the mean number of requests in flight = sum(e2e_s) / (last end - first send), ok requests."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from specsweep.analyze import build
from tests.support.analyze_rows import AR, one, open_req, req, store_rows, window, write_db


def wave(starts: list[float], e2e: float, **overrides: object) -> list[dict]:
    return [
        req(start_s=s, e2e_s=e2e, ttft_s=0.1, prompt_id=f"p{i}", **overrides)
        for i, s in enumerate(starts)
    ]


def test_nine_requests_at_concurrency_four_keep_three_in_flight(analyzed) -> None:
    """9 requests of 1 s at c=4 run in waves sent at 0, 1, 2 s (4 + 4 + 1): busy 9 s over a
    span of 3 s = 3.0, not 4. A failed request (sent at 0, e2e 5 s) and a warm-up (sent at
    -1 s, 9 s) move neither sum nor span."""
    rows = wave([0, 0, 0, 0, 1, 1, 1, 1, 2], 1.0, concurrency=4)
    rows += [
        req(start_s=0.0, e2e_s=5.0, ok=False, error_kind="http", concurrency=4),
        req(start_s=-1.0, e2e_s=9.0, is_warmup=True, concurrency=4),
    ]
    row = one(analyzed(rows), "SELECT * FROM config_summary")
    assert row["effective_concurrency"] == pytest.approx(3.0)


def test_a_long_window_nearly_holds_its_nominal_concurrency(analyzed) -> None:
    """8 requests of 2 s at c=2, staggered by 0.5 s in each slot's start: slot A at 0, 2, 4, 6;
    slot B at 0.5, 2.5, 4.5, 6.5: busy 16 s, span 0 -> 8.5 s: 16 / 8.5 = 1.882."""
    starts = [0, 2, 4, 6, 0.5, 2.5, 4.5, 6.5]
    row = one(analyzed(wave(starts, 2.0, concurrency=2)), "SELECT * FROM config_summary")
    assert row["effective_concurrency"] == pytest.approx(16 / 8.5)


def test_several_windows_of_one_group_sum_busy_time_over_summed_spans(tmp_path: Path) -> None:
    """Run 1: 4 requests of 2 s at 0, 0, 2, 2 (busy 8, span 4); run 2: 3 of 1 s at 0, 0, 1
    (busy 3, span 2): (8 + 3) / (4 + 2) = 11 / 6, as throughput pools them (not the mean of
    2.0 and 1.5)."""
    rows = wave([0, 0, 2, 2], 2.0, concurrency=2) + wave(
        [0, 0, 1], 1.0, concurrency=2, window_id="w-autoregressive/run2"
    )
    path = tmp_path / "runs.duckdb"
    write_db(path, rows)
    with duckdb.connect(str(path)) as con:
        con.execute("UPDATE requests SET run = 2 WHERE window_id LIKE '%/run2'")
    build.run(path, baseline=AR)
    row = one(path, "SELECT * FROM config_summary")
    assert row["n_windows"] == 2
    assert row["effective_concurrency"] == pytest.approx(11 / 6)


def test_open_loop_window(tmp_path: Path) -> None:
    """Sent at 0, 1, 2, 3 s, each 0.1 + 10 * 0.2 = 2.1 s: busy 8.4 s, span 0 -> 5.1 s:
    8.4 / 5.1 = 1.647; a failed request is left out."""
    path = tmp_path / "open.duckdb"
    requests = [open_req(float(s), tpot=0.2, window_id="ow", prompt_id=f"p{s}") for s in range(4)]
    requests.append(open_req(1.5, failed=True, window_id="ow", prompt_id="px"))
    store_rows(
        path, requests=requests, windows=[window("c1", "ow", rate=1.0, n=5, span=4.0, elapsed=5.1)]
    )
    build.run(path, baseline=AR)
    row = one(path, "SELECT * FROM open_windows WHERE window_id = 'ow'")
    assert row["effective_concurrency"] == pytest.approx(8.4 / 5.1)
