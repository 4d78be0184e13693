"""campaign_summary, environment_summary and service_summary (analyze/sql/11-13), the views
the report reads instead of the raw tables, on hand-built rows."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest

from specsweep.analyze import build
from specsweep.schema.store import connect
from tests.support.analyze_rows import fetch, one, req, write_db

T = datetime(2026, 1, 1, 12)


def insert(path: Path, table: str, rows: list[dict[str, Any]]) -> None:
    """Insert rows (dicts) into a raw table of a migrated file."""
    with connect(path) as con:
        for row in rows:
            names = ", ".join(row)
            marks = ", ".join("?" for _ in row)
            con.execute(f"INSERT INTO {table} ({names}) VALUES ({marks})", list(row.values()))


def campaign(cid: str, finished: datetime | None = None) -> dict[str, Any]:
    return {
        "campaign_id": cid,
        "plan_name": f"plan-{cid}",
        "plan_sha256": "ab" * 32,
        "plan_yaml": "name: x\n",
        "baseline": "autoregressive",
        "started_at": T,
        "finished_at": finished,
        "status": "complete" if finished else "running",
    }


def service(sid: str, method: str, state: str = "stopped") -> dict[str, Any]:
    return {
        "service_id": sid,
        "campaign_id": "c1",
        "config_id": f"cfg-{method}",
        "engine": "sglang",
        "method": method,
        "tp": 1,
        "gpus": "0",
        "host": "h",
        "launch_command": f"serve --{method}",
        "requested_at": T,
        "startup_s": 3.5,
        "state": state,
        "error": "OOM" if state == "failed" else None,
        "log_tail": "last lines",
    }


def unit(config_id: str, workload: str, service_id: str, complete: bool) -> dict[str, Any]:
    return {
        "campaign_id": "c1",
        "config_id": config_id,
        "workload": workload,
        "service_id": service_id,
        "n_requests": 2,
        "complete": complete,
        "colocated_with": "",
        "started_at": T,
        "finished_at": T,
    }


@pytest.fixture
def campaign_db(tmp_path: Path) -> Path:
    """Campaign c1: service svc-autoregressive ran 'chat' (complete: 1 warm-up, 2 ok, 1
    failed) and 'code' (interrupted: 2 rows kept); svc-m failed to start. Campaign c2 has
    only its campaigns row."""
    path = tmp_path / "r.duckdb"
    write_db(path, [
        req(is_warmup=True),
        req(prompt_id="p1"), req(prompt_id="p2"),
        req(prompt_id="p3", ok=False, ttft_s=None, e2e_s=None, error_kind="http"),
        req(workload="code", window_id="w-code"), req(workload="code", window_id="w-code"),
    ])  # fmt: skip
    insert(path, "campaigns", [campaign("c1", T + timedelta(seconds=90)), campaign("c2")])
    insert(
        path,
        "services",
        [service("svc-autoregressive", "autoregressive"), service("svc-m", "m", state="failed")],
    )
    insert(
        path,
        "units",
        [
            unit("cfg-autoregressive", "chat", "svc-autoregressive", True),
            unit("cfg-autoregressive", "code", "svc-autoregressive", False),
        ],
    )
    build.run(path, baseline="autoregressive")
    return path


def test_campaign_summary_counts_services_units_and_requests(campaign_db: Path) -> None:
    c1 = one(campaign_db, "SELECT * FROM campaign_summary WHERE campaign_id = 'c1'")
    assert (c1["plan_name"], c1["status"], c1["duration_s"]) == ("plan-c1", "complete", 90.0)
    assert (c1["n_services"], c1["n_services_failed"]) == (2, 1)
    assert (c1["n_units"], c1["n_units_incomplete"], c1["n_runs"]) == (2, 1, 1)
    assert (c1["n_requests"], c1["n_warmup"], c1["n_measured"]) == (6, 1, 3)
    assert (c1["n_in_incomplete"], c1["n_ok"], c1["n_failed"]) == (2, 2, 1)


def test_a_campaign_with_nothing_measured_has_a_row_of_zeros(campaign_db: Path) -> None:
    c2 = one(campaign_db, "SELECT * FROM campaign_summary WHERE campaign_id = 'c2'")
    counts = {k: v for k, v in c2.items() if k.startswith("n_")}
    assert set(counts.values()) == {0} and len(counts) == 12  # n_runs too
    assert c2["duration_s"] is None and c2["status"] == "running"


def test_service_summary_counts_per_service_and_drops_the_log_tail(campaign_db: Path) -> None:
    rows = {r["service_id"]: r for r in fetch(campaign_db, "SELECT * FROM service_summary")}
    ran, failed = rows["svc-autoregressive"], rows["svc-m"]
    assert "log_tail" not in ran
    assert (ran["n_units"], ran["n_units_incomplete"], ran["n_warmup"]) == (2, 1, 1)
    assert (ran["n_measured"], ran["n_ok"], ran["n_failed"]) == (3, 2, 1)
    assert (ran["launch_command"], ran["startup_s"], ran["gpus"]) == (
        "serve --autoregressive",
        3.5,
        "0",
    )
    assert (failed["state"], failed["error"], failed["n_units"], failed["n_measured"]) == (
        "failed",
        "OOM",
        0,
        0,
    )


def test_environment_summary_adds_topic_and_host_count(tmp_path: Path) -> None:
    path = tmp_path / "r.duckdb"
    write_db(path, [])
    facts = [
        ("c1", "a", "gpu.0.name", "H200"),
        ("c1", "b", "cpu.model", "Xeon"),
        ("c1", "b", "engine", "sglang"),
        ("c2", "a", "cpu.model", "EPYC"),
    ]
    insert(
        path, "environment", [dict(zip(("campaign_id", "host", "key", "value"), f)) for f in facts]
    )
    build.run(path, baseline="autoregressive")
    rows = fetch(
        path,
        "SELECT campaign_id, host, key, value, topic, n_hosts "
        "FROM environment_summary ORDER BY ALL",
    )
    assert [(r["topic"], r["n_hosts"]) for r in rows] == [
        ("gpu", 2),
        ("cpu", 2),
        ("engine", 2),
        ("cpu", 1),
    ]
    assert [tuple(r.values())[:4] for r in rows] == sorted(facts)


def test_the_summaries_are_analysis_objects(campaign_db: Path) -> None:
    # analysis objects are tables (snapshots built by analyze), not views over the raw tables
    for name in ("campaign_summary", "environment_summary", "service_summary"):
        assert name in build.OBJECTS
    with duckdb.connect(str(campaign_db), read_only=True) as con:
        tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert {"campaign_summary", "environment_summary", "service_summary"} <= tables
