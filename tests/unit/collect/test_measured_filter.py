"""One measured-request rule: the time estimates (collect/scheduling/estimate.py), the best-of
ranking and the analysis read the same rows, schema/measured.sql's macros. A warm-up, a run
whose unit was interrupted (units.complete = false) and an open-loop request are left out of
the estimate's figures exactly as the analysis leaves them out of request_metrics."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from specsweep.analyze import build
from specsweep.collect.scheduling.estimate import Estimator, load_measured
from specsweep.schema.store import Store
from tests.unit.collect.test_estimate import _row, _service_row, config, plan


def _unit(config_id: str, run: int, complete: bool) -> dict:
    t = datetime(2024, 5, 1, 12)
    return {
        "campaign_id": "camp",
        "config_id": config_id,
        "workload": "w",
        "service_id": f"svc-{config_id}",
        "n_requests": 1,
        "complete": complete,
        "colocated_with": "",
        "started_at": t,
        "finished_at": t,
        "run": run,
    }


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The baseline on w at c=1: run 1 (complete) 10 tok/s with 101 tokens; run 2, whose
    unit was interrupted, 40 tok/s with 51 tokens; a warm-up at 100 tok/s; an open-loop
    request at 70 tok/s (scheduled_s set)."""
    p = plan()
    cid = config(p).config_id
    rows = [
        _row(0, cid, "autoregressive", 1, "w", 1, 10) | {"run": 1},
        _row(1, cid, "autoregressive", 1, "w", 1, 40, output_tokens=51) | {"run": 2},
        _row(2, cid, "autoregressive", 1, "w", 1, 100) | {"is_warmup": True},
        _row(3, cid, "autoregressive", 1, "w", 1, 70) | {"scheduled_s": 0.0},
    ]
    path = tmp_path_factory.mktemp("measured") / "r.duckdb"
    store = Store(path)
    assert store.append("requests", rows) == 4
    assert store.append("units", [_unit(cid, 1, True), _unit(cid, 2, False)]) == 2
    assert store.append("services", [_service_row(cid)]) == 1  # on the plan's host
    return path


def test_the_estimate_leaves_out_an_incomplete_unit(results: Path) -> None:
    """Only run 1 counts: decode 10 tok/s (not the median 25 of 10 and 40) and 101 output
    tokens (not (101 + 51) / 2 = 76; the open-loop row's 101 does not move the mean)."""
    p = plan()
    est = Estimator(p, load_measured(Store(results), p))
    fig = est.decode_tps("autoregressive", 1, "w", 1)
    assert (fig.value, fig.source) == (pytest.approx(10), "measured")
    assert est.output_tokens("w", 101) == pytest.approx(101)


def test_the_estimate_and_the_analysis_read_the_same_requests(results: Path) -> None:
    build.run(results)
    with duckdb.connect(str(results), read_only=True) as con:

        def ids(source: str) -> set[str]:
            return {r[0] for r in con.execute(f"SELECT request_id FROM {source}").fetchall()}

        analysed, estimated = ids("request_metrics"), ids("measured_request_rows()")
        kept = ids("kept_request_rows()")
    assert analysed == estimated == {"req-0"}
    assert kept == {"req-0", "req-3"}  # the open-loop request is kept, for open_requests
