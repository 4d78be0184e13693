"""The schema migration steps: `migrate_to_N` brings a results file written at version N-1 to
version N, and MIGRATIONS maps each version to its step. `schema.store.migrate` runs them, each
in a transaction of its own with its schema_version row; a new version is one step here plus
SCHEMA_VERSION in schema/store.py (docs/data-dictionary.md)."""

from __future__ import annotations

from typing import Any

import duckdb


def migrate_to_2(con: duckdb.DuckDBPyConnection) -> None:
    """v2: units.complete (an interrupted unit keeps its rows, marked incomplete). Every
    unit of a v1 file landed whole."""
    con.execute("ALTER TABLE units ADD COLUMN complete BOOLEAN DEFAULT true").fetchall()


def migrate_to_3(con: duckdb.DuckDBPyConnection) -> None:
    """v3: units.colocated_with (configurations packed side by side on one host). Every
    unit of an older file ran alone."""
    con.execute("ALTER TABLE units ADD COLUMN colocated_with VARCHAR DEFAULT ''").fetchall()


def migrate_to_4(con: duckdb.DuckDBPyConnection) -> None:
    """v4: endpoint_errors (failed optional endpoint calls). The DDL, run on every open,
    has already created it; an older file recorded no such failures, so nothing moves."""


def migrate_to_5(con: duckdb.DuckDBPyConnection) -> None:
    """v5: gpu_samples (GPU telemetry; the DDL created it) and services.transport. Every
    service of an older file was recorded without saying; no tunnel existed before v3's SSH
    hosts and those were not recorded either, so older rows say 'unknown'."""
    con.execute("ALTER TABLE services ADD COLUMN transport VARCHAR DEFAULT 'unknown'").fetchall()


def migrate_to_6(con: duckdb.DuckDBPyConnection) -> None:
    """v6: windows (the DDL created it) and requests.scheduled_s (open-loop load). Every
    request of an older file was sent closed-loop: NULL is right."""
    con.execute("ALTER TABLE requests ADD COLUMN scheduled_s DOUBLE").fetchall()


# v6 counted llama.cpp's prefill step in spec_verify_ct (predicted_n - draft_n_accepted), v7 not,
# so older rows are re-derived exactly (a v7 row's count is one lower: it never matches). Its
# accept_length is a frozen copy of schema/metrics.sql's accept_length_of on purpose: a step
# computes what its version meant, whatever a later macro says (macros install after migrate).
LLAMACPP_VERIFY_STEPS_V7 = """
UPDATE requests SET spec_verify_ct = spec_verify_ct - 1,
    accept_length = (output_tokens - 1) / (spec_verify_ct - 1)
WHERE engine = 'llamacpp' AND output_tokens > 1
  AND spec_verify_ct = output_tokens - coalesce(accepted_tokens, 0)
"""


def migrate_to_7(con: duckdb.DuckDBPyConnection) -> None:
    """v7: method_params (the DDL created it; older plans had no parameters, so it stays
    empty for their campaigns), the requests' acceptance details (NULL: no older collect
    read them), and one acceptance-length definition: older llama.cpp rows' spec_verify_ct
    and accept_length are re-derived without the prefill step (LLAMACPP_VERIFY_STEPS_V7)."""
    for column, kind in (
        ("engine_accept_length", "DOUBLE"),
        ("accept_histogram", "BIGINT[]"),
        ("accepted_per_pos", "BIGINT[]"),
        ("step_accepted", "INTEGER[]"),
    ):
        con.execute(f"ALTER TABLE requests ADD COLUMN {column} {kind}").fetchall()
    con.execute(LLAMACPP_VERIFY_STEPS_V7).fetchall()


UNITS_V8 = """
CREATE TABLE units_v8 (
    campaign_id VARCHAR NOT NULL, config_id VARCHAR NOT NULL, workload VARCHAR NOT NULL,
    service_id VARCHAR NOT NULL, n_requests INTEGER NOT NULL, complete BOOLEAN NOT NULL,
    colocated_with VARCHAR NOT NULL DEFAULT '', started_at TIMESTAMP NOT NULL,
    finished_at TIMESTAMP NOT NULL, run INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (campaign_id, config_id, workload, run));
INSERT INTO units_v8 BY NAME SELECT *, 1 AS run FROM units;
DROP TABLE units;
ALTER TABLE units_v8 RENAME TO units;
"""


def migrate_to_8(con: duckdb.DuckDBPyConnection) -> None:
    """v8: repeated runs of one campaign. requests, windows and services gain `run`; units'
    key gains it (DuckDB cannot alter a primary key, so units is copied into a new table).
    Every row of an older file belongs to the campaign's only run, 1. (A table the DDL has
    just created for a file older than it, e.g. windows for a v5 file, has `run` already.)"""
    for table in ("requests", "windows", "services"):
        con.execute(
            f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS run INTEGER DEFAULT 1"
        ).fetchall()
    columns = [r[0] for r in con.execute("DESCRIBE units").fetchall()]
    if "run" not in columns:
        con.execute(UNITS_V8).fetchall()


def migrate_to_9(con: duckdb.DuckDBPyConnection) -> None:
    """v9: services.replica (a long configuration may run as several replicas, each its own
    service start with a share of the workloads). Every service of an older file was the
    configuration's only one, replica 1."""
    con.execute(
        "ALTER TABLE services ADD COLUMN IF NOT EXISTS replica INTEGER DEFAULT 1"
    ).fetchall()


def migrate_to_10(con: duckdb.DuckDBPyConnection) -> None:
    """v10: requests.history (docs/agentic-pairing.md). Every agentic session of an older file
    played its own history: its turns (session_id set) are 'own'; other requests stay NULL."""
    con.execute("ALTER TABLE requests ADD COLUMN IF NOT EXISTS history VARCHAR").fetchall()
    con.execute("UPDATE requests SET history = 'own' WHERE session_id IS NOT NULL").fetchall()


def migrate_to_11(con: duckdb.DuckDBPyConnection) -> None:
    """v11: requests.category, the prompt's category (docs/categories.md). An older file
    recorded none and its prompt_id cannot recover one in SQL (an `mtbench/<id>` prompt's
    category lives in the MT-Bench file, not the database), so every older row says
    'uncategorized' rather than a guess; the column is NOT NULL as in a fresh file."""
    con.execute(
        "ALTER TABLE requests ADD COLUMN IF NOT EXISTS category VARCHAR DEFAULT 'uncategorized'"
    ).fetchall()
    con.execute("UPDATE requests SET category = 'uncategorized' WHERE category IS NULL").fetchall()
    con.execute("ALTER TABLE requests ALTER COLUMN category SET NOT NULL").fetchall()


def migrate_to_12(con: duckdb.DuckDBPyConnection) -> None:
    """v12: races (the DDL created it; no older campaign was raced, so it stays empty)."""


def migrate_to_13(con: duckdb.DuckDBPyConnection) -> None:
    """v13: races.priors. A v12 race began with no prior (there was none to take): '{}'."""
    con.execute("ALTER TABLE races ADD COLUMN IF NOT EXISTS priors VARCHAR DEFAULT '{}'").fetchall()
    con.execute("UPDATE races SET priors = '{}' WHERE priors IS NULL").fetchall()
    con.execute("ALTER TABLE races ALTER COLUMN priors SET NOT NULL").fetchall()


def migrate_to_14(con: duckdb.DuckDBPyConnection) -> None:
    """v14: windows.loop_lag_p99_s and loop_lag_max_s (collect/http/loop_lag.py). Windows
    measured before were not watched: NULL."""
    for column in ("loop_lag_p99_s", "loop_lag_max_s"):
        con.execute(f"ALTER TABLE windows ADD COLUMN IF NOT EXISTS {column} DOUBLE").fetchall()


# version -> the step that brings the previous version to it; version 1 is the first DDL.
MIGRATIONS: dict[int, Any] = {
    2: migrate_to_2,
    3: migrate_to_3,
    4: migrate_to_4,
    5: migrate_to_5,
    6: migrate_to_6,
    7: migrate_to_7,
    8: migrate_to_8,
    9: migrate_to_9,
    10: migrate_to_10,
    11: migrate_to_11,
    12: migrate_to_12,
    13: migrate_to_13,
    14: migrate_to_14,
}
