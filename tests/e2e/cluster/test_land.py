"""The driver landing tasks' rows (collect/cluster/land.py) on hand-built rows and a real
DuckDB file: colocated_with across tasks (same node, overlapping spans), and a unit landed
again (a retry or a resume after an incomplete try) replacing its rows, never doubling them."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from specsweep.collect.cluster.land import land
from specsweep.collect.cluster.task import TABLES, gpu_indices
from specsweep.schema.store import Store
from tests.support.fixtures.schema import request_row

CAMP = "camp"


def _at(minute: int) -> datetime:
    return datetime(2026, 12, 3, 10, minute)


def _service(sid: str, host: str, start: int, stop: int) -> dict[str, Any]:
    return {
        "service_id": sid,
        "campaign_id": CAMP,
        "config_id": f"cfg-{sid}",
        "engine": "llamacpp",
        "method": "autoregressive",
        "tp": 1,
        "gpus": "",
        "host": host,
        "launch_command": "llama-server",
        "requested_at": _at(start),
        "ready_at": _at(start),
        "stopped_at": _at(stop),
        "startup_s": 1.0,
        "state": "stopped",
        "error": None,
        "log_tail": None,
        "transport": "direct",
        "run": 1,
    }


def _unit(
    sid: str, config: str, workload: str, start: int, end: int, complete: bool = True, n: int = 0
) -> dict[str, Any]:
    return {
        "campaign_id": CAMP,
        "config_id": config,
        "workload": workload,
        "service_id": sid,
        "n_requests": n,
        "complete": complete,
        "colocated_with": "",
        "started_at": _at(start),
        "finished_at": _at(end),
        "run": 1,
    }


def _task(
    services: list[dict[str, Any]],
    units: list[dict[str, Any]],
    requests: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    rows: dict[str, list[dict[str, Any]]] = {t: [] for t in TABLES}
    rows.update(services=services, units=units, requests=requests or [])
    return {"node": services[0]["host"], "rows": rows, "notes": ["restarting once"]}


class _Progress:
    def __init__(self) -> None:
        self.notes: list[str] = []
        self.done = 0

    def note(self, text: str) -> None:
        self.notes.append(text)

    def request_done(self, key: str) -> None:
        self.done += 1


def _campaign(tmp_path: Path) -> Any:
    return SimpleNamespace(
        store=Store(tmp_path / "r.duckdb"), campaign_id=CAMP, progress=_Progress()
    )


def test_colocated_with_spans_tasks_on_one_node(tmp_path: Path) -> None:
    c = _campaign(tmp_path)
    land(c, "a", _task([_service("s1", "n/aaaaaaaa", 0, 10)], [_unit("s1", "cfg1", "chat", 1, 9)]))
    land(
        c,
        "b",
        _task(
            [_service("s2", "n/aaaaaaaa", 5, 20)],
            [_unit("s2", "cfg2", "chat", 6, 8), _unit("s2", "cfg2", "rewrite", 12, 19)],
        ),
    )
    land(c, "c", _task([_service("s3", "n/bbbbbbbb", 0, 30)], [_unit("s3", "cfg3", "chat", 1, 29)]))
    got = dict(
        ((r[0], r[1]), r[2])
        for r in c.store.execute("SELECT config_id, workload, colocated_with FROM units")
    )
    # s1's unit learnt of s2, which landed later; s2's rewrite ran after s1 stopped; s3 is
    # on another node though its span covers both
    assert got == {
        ("cfg1", "chat"): "s2",
        ("cfg2", "chat"): "s1",
        ("cfg2", "rewrite"): "",
        ("cfg3", "chat"): "",
    }
    assert c.progress.notes == [
        "n/aaaaaaaa: restarting once",
        "n/aaaaaaaa: restarting once",
        "n/bbbbbbbb: restarting once",
    ]


def test_a_unit_landed_again_replaces_its_rows(tmp_path: Path) -> None:
    c = _campaign(tmp_path)
    first = [request_row(0, campaign_id=CAMP, config_id="cfg1", service_id="s4")]
    land(
        c,
        "a",
        _task(
            [_service("s4", "n/aaaaaaaa", 0, 5)],
            [_unit("s4", "cfg1", "rewrite", 1, 4, complete=False, n=1)],
            first,
        ),
    )
    again = [request_row(i, campaign_id=CAMP, config_id="cfg1", service_id="s5") for i in (1, 2)]
    land(
        c,
        "a",
        _task(
            [_service("s5", "n/bbbbbbbb", 10, 15)],
            [_unit("s5", "cfg1", "rewrite", 11, 14, n=2)],
            again,
        ),
    )
    assert c.store.execute("SELECT service_id, complete, n_requests FROM units") == [
        ("s5", True, 2)
    ]
    assert c.store.execute("SELECT request_id FROM requests ORDER BY 1") == [("req-1",), ("req-2",)]
    assert c.store.execute("SELECT count(*) FROM services") == [(2,)]  # both starts recorded
    assert c.progress.done == 3  # measured requests landed, counted for the progress bar


def test_ray_gpu_ids_are_indices_or_a_clear_error() -> None:
    """Ray gives strings on a node started with CUDA_VISIBLE_DEVICES (its physical indices),
    ints otherwise; a UUID is refused with its name."""
    assert gpu_indices(["1", "3"]) == (1, 3) and gpu_indices([0]) == (0,)
    assert gpu_indices([]) == ()
    with pytest.raises(RuntimeError, match="GPU-5a1e.*not indices"):
        gpu_indices(["GPU-5a1e"])
