"""replica_agreement (analyze/sql/replica_agreement.sql) on hand-built rows: the replicas
of a configuration (services.replica), each replica's median decode speed with its
order-statistic interval, and whether the intervals meet."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from specsweep.analyze import build
from tests.support.analyze_rows import decode_req, fetch, insert_rows, write_db

T = datetime(2026, 1, 1, 12)


def _service(
    service_id: str, replica: int, gpus: str, method: str = "autoregressive"
) -> dict[str, object]:
    return {
        "service_id": service_id,
        "campaign_id": "c1",
        "config_id": f"cfg-{method}",
        "engine": "sglang",
        "method": method,
        "tp": 1,
        "gpus": gpus,
        "host": "h",
        "launch_command": "x",
        "requested_at": T,
        "state": "stopped",
        "replica": replica,
    }


def _requests(speeds: list[float], service_id: str, workload: str, **kw: object) -> list:
    return [
        decode_req(v, service_id=service_id, workload=workload, prompt_id=f"p{i}", **kw)
        for i, v in enumerate(speeds)
    ]


def test_replicas_that_agree_and_one_that_does_not(tmp_path: Path) -> None:
    path = tmp_path / "r.duckdb"
    # replica 1 (GPU 1): coding at 20..29 tok/s; replica 2 (GPU 2): math at 21..30 tok/s;
    # replica 3 (GPU 3): writing at 40..49 tok/s, a slow-down elsewhere: no overlap
    write_db(
        path,
        [
            *_requests([20.0 + i for i in range(10)], "s1", "coding"),
            *_requests([21.0 + i for i in range(10)], "s2", "math"),
            *_requests([40.0 + i for i in range(10)], "s3", "writing"),
            *_requests([5.0, 6.0], "solo", "coding", method="m"),
        ],
    )
    insert_rows(
        path,
        "services",
        [
            _service("s1", 1, "1"),
            _service("s2", 2, "2"),
            _service("s3", 3, "3"),
            _service("solo", 1, "4", "m"),
        ],
    )
    build.run(path, baseline="autoregressive")
    rows = fetch(path, "SELECT * FROM replica_agreement ORDER BY replica")
    assert [r["replica"] for r in rows] == [1, 2, 3]  # m ran as one replica: not listed
    one, two, three = rows
    assert (one["workloads"], one["gpus"], one["n"], one["n_replicas"]) == ("coding", "1", 10, 3)
    assert one["decode_tps_p50"] == pytest.approx(24.5)
    # n = 10: ranks floor((10 - 1.96 sqrt 10) / 2) = 1 and ceil(1 + (10 + 1.96 sqrt 10) / 2) = 10
    assert (one["ci_low"], one["ci_high"]) == pytest.approx((20.0, 29.0))
    assert (two["ci_low"], two["ci_high"]) == pytest.approx((21.0, 30.0))
    assert one["overlaps_all"] is False and three["overlaps_all"] is False
    assert two["overlaps_all"] is False  # meets replica 1, not replica 3
    assert {r["agree"] for r in rows} == {False} and all(r["is_baseline"] for r in rows)


def test_two_replicas_that_agree(tmp_path: Path) -> None:
    path = tmp_path / "r.duckdb"
    write_db(
        path,
        [
            *_requests([20.0 + i for i in range(30)], "s1", "coding"),
            *_requests([22.0 + i for i in range(30)], "s2", "math"),
        ],
    )
    insert_rows(path, "services", [_service("s1", 1, "1"), _service("s2", 2, "2")])
    build.run(path, baseline="autoregressive")
    rows = fetch(path, "SELECT * FROM replica_agreement ORDER BY replica")
    # n = 30: ranks floor((30 - 10.74) / 2) = 9 and ceil(1 + 40.74 / 2) = 22
    assert [(r["ci_low"], r["ci_high"]) for r in rows] == [(28.0, 41.0), (30.0, 43.0)]
    assert all(r["overlaps_all"] and r["agree"] for r in rows)
