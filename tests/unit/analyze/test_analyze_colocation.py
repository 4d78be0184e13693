"""colocation (analyze/sql/colocation.sql) and request_metrics.colocated/neighbours on
hand-built rows: units say which services ran beside each unit."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from specsweep.analyze import build
from tests.support.analyze_rows import decode_req, one, write_db

T = datetime(2026, 1, 1, 12)


def _units(path: Path, rows: list[tuple[str, str, str]]) -> None:
    """(config_id, workload, colocated_with) per unit, all complete."""
    with duckdb.connect(str(path)) as con:
        con.executemany(
            "INSERT INTO units (campaign_id, config_id, workload, service_id, n_requests, "
            "complete, colocated_with, started_at, finished_at) "
            "VALUES ('c1', ?, ?, 'svc', 1, true, ?, ?, ?)",
            [[cfg, w, shared, T, T] for cfg, w, shared in rows],
        )


def test_a_window_measured_alone_and_beside_others_gets_the_ratio(tmp_path: Path) -> None:
    path = tmp_path / "r.duckdb"
    # baseline at 4.0 tok/s; method m: chat alone at 10 and 12 tok/s, code beside 2 services
    # at 6 and 9 tok/s; the same window (workload 'chat' of m) on both ways through units
    write_db(
        path,
        [
            decode_req(4.0),
            decode_req(4.0, workload="code"),
            decode_req(10.0, method="m"),
            decode_req(12.0, method="m"),
            decode_req(6.0, method="m", config_id="cfg-m2"),
            decode_req(9.0, method="m", config_id="cfg-m2"),
        ],
    )
    _units(
        path,
        [
            ("cfg-autoregressive", "chat", ""),
            ("cfg-autoregressive", "code", "a"),
            ("cfg-m", "chat", ""),
            ("cfg-m2", "chat", "svc-x,svc-y"),
        ],
    )
    build.run(path, baseline="autoregressive")
    m = one(path, "SELECT * FROM colocation WHERE method = 'm'")
    assert (m["n_alone"], m["n_colocated"], m["neighbours_max"]) == (2, 2, 2)
    assert m["decode_tps_p50_alone"] == pytest.approx(11.0)
    assert m["decode_tps_p50_colocated"] == pytest.approx(7.5)
    assert m["colocated_over_alone"] == pytest.approx(7.5 / 11.0)
    code = one(path, "SELECT * FROM colocation WHERE workload = 'code'")
    assert (code["n_alone"], code["n_colocated"], code["colocated_over_alone"]) == (0, 1, None)
    flags = one(
        path,
        "SELECT list(DISTINCT neighbours ORDER BY neighbours) AS n, "
        "count(*) FILTER (colocated) AS c FROM request_metrics",
    )
    assert flags == {"n": [0, 1, 2], "c": 3}


def test_a_request_without_a_units_row_counts_as_alone(tmp_path: Path) -> None:
    path = tmp_path / "r.duckdb"
    write_db(path, [decode_req(4.0)])
    build.run(path, baseline="autoregressive")
    row = one(path, "SELECT colocated, neighbours FROM request_metrics")
    assert row == {"colocated": False, "neighbours": 0}
