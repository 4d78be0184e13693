"""tests/bench/slowed_copy.py: a campaign copied with its decode uniformly slower, on rows whose
figures are worked out here (decode_req: 61 tokens at the given tok/s after a 0.5 s TTFT)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from tests.bench.slowed_copy import copy
from tests.support.analyze_rows import decode_req, service, store_rows


def test_the_copy_decodes_at_factor_times_the_speed_and_keeps_everything_else(
    tmp_path: Path,
) -> None:
    """20 tok/s becomes 15 at factor 0.75: e2e 0.5 + 60 / 15 = 4.5 s; chunks after the first
    token stretch by 1 / 0.75, the first (at TTFT) stays; every id is the copy's own."""
    db = tmp_path / "r.duckdb"
    ids = {"campaign_id": "A", "service_id": "svc-A-autoregressive", "config_id": "cfg"}
    row = decode_req(20.0, **ids, chunk_times_s=[0.5, 1.0, 3.5], category="chat")
    campaign = {"campaign_id": "A", "plan_name": "p", "plan_sha256": "0" * 64,
                "plan_yaml": "", "baseline": "autoregressive",
                "started_at": datetime(2026, 12, 5), "finished_at": None,
                "status": "complete"}  # fmt: skip
    store_rows(db, campaigns=[campaign], services=[service("A", "autoregressive", "llamacpp")],
               requests=[row])  # fmt: skip
    with duckdb.connect(str(db)) as con:
        counts = copy(con, "A", "B", 0.75)
        got = con.execute(
            "SELECT request_id, service_id, ttft_s, e2e_s, chunk_times_s, output_tokens "
            "FROM requests WHERE campaign_id = 'B'"
        ).fetchone()
    assert counts["requests"] == counts["services"] == counts["campaigns"] == 1
    request_id, service_id, ttft, e2e, chunks, tokens = got
    assert request_id == f"{row['request_id']}/B" and service_id == "svc-A-autoregressive/B"
    assert (ttft, tokens) == (0.5, 61) and e2e == pytest.approx(4.5)
    assert chunks == pytest.approx([0.5, 0.5 + 0.5 / 0.75, 0.5 + 3.0 / 0.75])


def test_runs_copies_only_the_services_of_those_rounds(tmp_path: Path) -> None:
    """Two starts of one configuration, rounds 1 and 2, one request each: `runs=[2]` copies
    round 2's service and its request, and leaves round 1's behind."""
    db = tmp_path / "r.duckdb"
    starts = [{**service("A", "autoregressive", "llamacpp"), "service_id": f"s{r}", "run": r}
              for r in (1, 2)]  # fmt: skip
    rows = [decode_req(20.0, campaign_id="A", service_id=f"s{r}", config_id="cfg", run=r)
            for r in (1, 2)]  # fmt: skip
    campaign = {"campaign_id": "A", "plan_name": "p", "plan_sha256": "0" * 64,
                "plan_yaml": "", "baseline": "autoregressive",
                "started_at": datetime(2026, 12, 5), "finished_at": None,
                "status": "complete"}  # fmt: skip
    store_rows(db, campaigns=[campaign], services=starts, requests=rows)
    with duckdb.connect(str(db)) as con:
        counts = copy(con, "A", "B", 1.0, runs=[2])
        got = con.execute("SELECT service_id FROM requests WHERE campaign_id = 'B'").fetchall()
    assert (counts["services"], counts["requests"]) == (1, 1)
    assert got == [("s2/B",)]
