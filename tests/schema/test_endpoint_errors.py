"""Schema v4's endpoint_errors: a v3 file gains the table on open, and its contract
quarantines rows that name no known hook or phase."""

from __future__ import annotations

from pathlib import Path

import duckdb

from schema.store import DDL, SCHEMA_VERSION, Store, utcnow


def _row(**changes: object) -> dict[str, object]:
    row = {"campaign_id": "c", "service_id": "s", "config_id": "k", "workload": "w",
           "hook": "scrape", "phase": "before", "endpoint": "GET /metrics", "status": 200,
           "error": "ValueError: invalid metric name", "failed_at": utcnow()}
    return {**row, **changes}


def test_a_v3_file_gains_endpoint_errors(tmp_path: Path) -> None:
    path = tmp_path / "v3.duckdb"
    v3_ddl = DDL.read_text().split("-- One row per failed call")[0]
    with duckdb.connect(str(path)) as con:
        con.execute(v3_ddl)
        con.execute("INSERT INTO schema_version VALUES (3, now()::TIMESTAMP)")
    assert SCHEMA_VERSION == 4
    store = Store(path)
    assert store.append("endpoint_errors", [_row(), _row(status=None, endpoint="")]) == 2
    with duckdb.connect(str(path), read_only=True) as con:
        versions = con.execute("SELECT version FROM schema_version ORDER BY 1").fetchall()
        statuses = con.execute("SELECT status FROM endpoint_errors ORDER BY 1").fetchall()
    assert versions == [(3,), (4,)]
    assert statuses == [(200,), (None,)]


def test_unknown_hooks_and_phases_are_quarantined(tmp_path: Path) -> None:
    store = Store(tmp_path / "r.duckdb")
    assert store.append("endpoint_errors", [_row(hook="props"), _row(phase="during"),
                                            _row(status=42)]) == 0
    with duckdb.connect(str(tmp_path / "r.duckdb"), read_only=True) as con:
        reasons = [r[0] for r in con.execute("SELECT reason FROM quarantine").fetchall()]
    assert len(reasons) == 3 and "hook" in reasons[0] and "phase" in reasons[1]
    assert "status" in reasons[2]
