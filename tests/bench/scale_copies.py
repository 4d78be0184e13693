"""Grow a results file by copies of the scale benchmark's campaign (tests/bench/scale_campaign.py),
for tests/bench/bench_scale.py --campaigns/--add and tests/unit/analyze/test_incremental.py. Kept
apart from scale_campaign.py, whose text keys the benchmark's cache of generated files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scale_campaign import CAMPAIGN

from specsweep.analyze.models.scope import RAW


def copies(db: Path, k: int) -> list[str]:
    """Add k - 1 copies of the file's campaign to db, each under a campaign id of its own and
    a day later than the one before: a file that grew by k nightly campaigns of the same plan.
    The copies are SQL copies of rows the contracts already validated (Store.append of 10M
    rows takes about 50 minutes on 2 cores; a copy of 1M rows under a minute). Returns every
    campaign id."""
    import duckdb

    ids = [CAMPAIGN] + [campaign_id(i) for i in range(1, k)]
    with duckdb.connect(str(db)) as con:
        for i, cid in enumerate(ids[1:], start=1):
            copy_campaign(con, "main", cid, i)
            con.execute("CHECKPOINT")
    return ids


def campaign_id(i: int) -> str:
    return f"scale-bench-{i:012d}"


def add_campaign(db: Path, source: Path, i: int) -> str:
    """Copy the campaign of the file at source (a generated one) into db as campaign i."""
    import duckdb

    with duckdb.connect(str(db)) as con:
        con.execute(f"ATTACH '{source}' AS source (READ_ONLY)")  # a path of the benchmark's own
        copy_campaign(con, "source.main", campaign_id(i), i)
        con.execute("DETACH source")
    return campaign_id(i)


def copy_campaign(con: Any, source: str, cid: str, i: int) -> None:
    """Insert the rows of CAMPAIGN in schema `source` as campaign cid, i days later.
    Primary keys that are not per campaign (request_id, service_id) get the suffix -i."""
    tables = con.execute(
        "SELECT table_name, list(column_name) FROM duckdb_columns() "
        "WHERE database_name = current_database() AND schema_name = 'main' "
        "AND list_contains(?, table_name) GROUP BY ALL",
        [list(RAW)],
    ).fetchall()
    for table, cols in tables:  # the raw tables with a campaign_id (analyze.models.scope)
        replace = [f"'{cid}' AS campaign_id"]
        replace += [f"{c} || '-{i}' AS {c}" for c in ("request_id", "service_id") if c in cols]
        replace += [
            f"{c} + INTERVAL {i} DAY AS {c}"
            for c in ("sent_at", "started_at", "finished_at", "requested_at", "ready_at",
                      "stopped_at")
            if c in cols
        ]  # fmt: skip
        con.execute(
            f"INSERT INTO main.{table} BY NAME SELECT * REPLACE ({', '.join(replace)}) "
            f"FROM {source}.{table} WHERE campaign_id = ?",
            [CAMPAIGN],
        )
