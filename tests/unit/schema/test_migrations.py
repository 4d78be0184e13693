"""Schema migrations v3->v10: a v3 file gains endpoint_errors on open, a v4 file gains
gpu_samples and services.transport, a v5 file windows and requests.scheduled_s, a v6 file
method_params and the requests' acceptance details, a v7 file runs (units keyed by run), a
v8 file services.replica, a v9 file requests.history (v11's requests.category:
test_migration_category.py); the endpoint_errors contract quarantines rows that name no known
hook or phase."""

from __future__ import annotations

from pathlib import Path

import duckdb

from specsweep.schema.store import SCHEMA_VERSION, Store, utcnow
from tests.support.analyze_rows import service
from tests.support.old_schemas import ddl_as_of


def _row(**changes: object) -> dict[str, object]:
    row = {
        "campaign_id": "c",
        "service_id": "s",
        "config_id": "k",
        "workload": "w",
        "hook": "scrape",
        "phase": "before",
        "endpoint": "GET /metrics",
        "status": 200,
        "error": "ValueError: invalid metric name",
        "failed_at": utcnow(),
    }
    return {**row, **changes}


def test_a_v4_file_gains_gpu_samples_and_says_its_services_transport_is_unknown(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v4.duckdb"
    v4_ddl = ddl_as_of(4)
    with duckdb.connect(str(path)) as con:
        con.execute(v4_ddl)
        con.execute("INSERT INTO schema_version VALUES (4, now()::TIMESTAMP)")
        con.execute(
            "INSERT INTO services (service_id, campaign_id, config_id, engine, method, "
            "tp, gpus, host, launch_command, requested_at, state) VALUES ('s', 'c', "
            "'k', 'llamacpp', 'autoregressive', 1, '', 'local', 'x', now(), 'stopped')"
        )
    Store(path)
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute("SELECT transport FROM services").fetchall() == [("unknown",)]
        assert con.execute("SELECT count(*) FROM gpu_samples").fetchone() == (0,)
        version = con.execute("SELECT max(version) FROM schema_version").fetchone()
        assert version == (SCHEMA_VERSION,)


def test_a_v5_file_gains_windows_and_its_requests_were_sent_closed_loop(tmp_path: Path) -> None:
    path = tmp_path / "v5.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(ddl_as_of(5))
        con.execute("INSERT INTO schema_version VALUES (5, now()::TIMESTAMP)")
        assert "scheduled_s" not in [c[0] for c in con.execute("DESCRIBE requests").fetchall()]
        assert con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'windows'"
        ).fetchone() == (0,)
    Store(path)
    with duckdb.connect(str(path), read_only=True) as con:
        columns = [c[0] for c in con.execute("DESCRIBE requests").fetchall()]
        assert "scheduled_s" in columns
        assert con.execute("SELECT count(*) FROM windows").fetchone() == (0,)


def test_a_v6_file_gains_method_params_and_acceptance_details(tmp_path: Path) -> None:
    path = tmp_path / "v6.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(ddl_as_of(6))
        con.execute("INSERT INTO schema_version VALUES (6, now()::TIMESTAMP)")
        assert "accept_histogram" not in [c[0] for c in con.execute("DESCRIBE requests").fetchall()]
        assert con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'method_params'"
        ).fetchone() == (0,)
        con.execute(
            "INSERT INTO requests (request_id, campaign_id, config_id, service_id, "
            "engine, method, tp, workload, window_id, prompt_id, max_tokens, rep, "
            "concurrency, is_warmup, sent_at, start_s, output_tokens, spec_verify_ct, "
            "accepted_tokens, accept_length, ok) VALUES "
            "('r1', 'c', 'k', 's', 'llamacpp', 'ngram', 1, 'w', 'x', 'p', 64, 0, 1, "
            "false, now(), 0, 64, 34, 30, 64 / 34, true), "
            "('r2', 'c', 'k', 's', 'llamacpp', 'ar', 1, 'w', 'y', 'p', 64, 0, 1, "
            "false, now(), 0, 64, 64, 0, 1, true), "
            "('r3', 'c', 'k', 's', 'sglang', 'dflash', 1, 'w', 'z', 'p', 64, 0, 1, "
            "false, now(), 0, 64, 16, NULL, 4, true)"
        )
    store = Store(path)
    row = {
        "campaign_id": "c",
        "method": "ngram-k4",
        "family": "ngram",
        "param": "k",
        "value": "4",
        "value_num": 4.0,
    }
    assert (
        store.append(
            "method_params", [row, {**row, "method": "ngram-kx", "value": "x", "value_num": None}]
        )
        == 2
    )
    with duckdb.connect(str(path), read_only=True) as con:
        columns = [c[0] for c in con.execute("DESCRIBE requests").fetchall()]
        assert columns[-7:] == [
            "engine_accept_length",
            "accept_histogram",
            "accepted_per_pos",
            "step_accepted",
            "run",
            "history",
            "category",
        ]
        version = con.execute("SELECT max(version) FROM schema_version").fetchone()
        assert version == (SCHEMA_VERSION,)
        steps = con.execute(
            "SELECT request_id, spec_verify_ct, accept_length FROM requests ORDER BY 1"
        ).fetchall()
    # llama.cpp's verify steps no longer count the prefill's; SGLang's were the engine's own
    assert steps == [("r1", 33, 63 / 33), ("r2", 63, 1.0), ("r3", 16, 4.0)]


def test_a_v3_file_gains_endpoint_errors(tmp_path: Path) -> None:
    path = tmp_path / "v3.duckdb"
    v3_ddl = ddl_as_of(3)
    with duckdb.connect(str(path)) as con:
        con.execute(v3_ddl)
        con.execute("INSERT INTO schema_version VALUES (3, now()::TIMESTAMP)")
    assert SCHEMA_VERSION == 14
    store = Store(path)
    assert store.append("endpoint_errors", [_row(), _row(status=None, endpoint="")]) == 2
    with duckdb.connect(str(path), read_only=True) as con:
        versions = con.execute("SELECT version FROM schema_version ORDER BY 1").fetchall()
        statuses = con.execute("SELECT status FROM endpoint_errors ORDER BY 1").fetchall()
    assert versions == [(3,), (4,), (5,), (6,), (7,), (8,), (9,), (10,), (11,), (12,), (13,), (14,)]
    assert statuses == [(200,), (None,)]


def test_unknown_hooks_and_phases_are_quarantined(tmp_path: Path) -> None:
    store = Store(tmp_path / "r.duckdb")
    assert (
        store.append("endpoint_errors", [_row(hook="props"), _row(phase="during"), _row(status=42)])
        == 0
    )
    with duckdb.connect(str(tmp_path / "r.duckdb"), read_only=True) as con:
        reasons = [r[0] for r in con.execute("SELECT reason FROM quarantine").fetchall()]
    assert len(reasons) == 3 and "hook" in reasons[0] and "phase" in reasons[1]
    assert "status" in reasons[2]


def test_a_v7_file_gains_runs_and_its_rows_belong_to_run_1(tmp_path: Path) -> None:
    path = tmp_path / "v7.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(ddl_as_of(7))
        con.execute("INSERT INTO schema_version VALUES (7, now()::TIMESTAMP)")
        assert "run" not in [c[0] for c in con.execute("DESCRIBE units").fetchall()]
        con.execute("INSERT INTO units VALUES ('c', 'k', 'w', 's', 3, true, '', now(), now())")
        con.execute(
            "INSERT INTO requests (request_id, campaign_id, config_id, service_id, "
            "engine, method, tp, workload, window_id, prompt_id, max_tokens, rep, "
            "concurrency, is_warmup, sent_at, start_s, ok) VALUES ('r1', 'c', 'k', 's', "
            "'llamacpp', 'ar', 1, 'w', 'x', 'p', 64, 0, 1, false, now(), 0, true)"
        )
    store = Store(path)
    unit = {
        "campaign_id": "c",
        "config_id": "k",
        "workload": "w",
        "service_id": "s2",
        "n_requests": 3,
        "complete": True,
        "started_at": utcnow(),
        "finished_at": utcnow(),
    }
    assert store.append("units", [{**unit, "run": 2}]) == 1  # run 2 of the same unit: a new key
    assert store.unit_done("c", "k", "w") and store.unit_done("c", "k", "w", 2)
    assert not store.unit_done("c", "k", "w", 3)
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute("SELECT run FROM requests").fetchall() == [(1,)]
        assert con.execute("SELECT service_id, run FROM units ORDER BY run").fetchall() == [
            ("s", 1),
            ("s2", 2),
        ]
        version = con.execute("SELECT max(version) FROM schema_version").fetchone()
        assert version == (SCHEMA_VERSION,)


def test_a_v8_file_gains_services_replica_and_its_services_are_replica_1(tmp_path: Path) -> None:
    path = tmp_path / "v8.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(ddl_as_of(8))
        con.execute("INSERT INTO schema_version VALUES (8, now()::TIMESTAMP)")
        assert "replica" not in [c[0] for c in con.execute("DESCRIBE services").fetchall()]
        con.execute(
            "INSERT INTO services (service_id, campaign_id, config_id, engine, method, "
            "tp, gpus, host, launch_command, requested_at, state) VALUES ('s', 'c', "
            "'k', 'sglang', 'autoregressive', 1, '3', 'h', 'x', now(), 'stopped')"
        )
    store = Store(path)
    row = {
        **service("c", "autoregressive", "sglang"),
        "service_id": "s2",
        "config_id": "k",
        "gpus": "4",
        "requested_at": utcnow(),
        "replica": 2,
    }
    assert store.append("services", [row]) == 1
    assert store.append("services", [{**row, "service_id": "s3", "replica": 0}]) == 0
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute("SELECT service_id, replica FROM services ORDER BY 1").fetchall() == [
            ("s", 1),
            ("s2", 2),
        ]
        assert con.execute("SELECT max(version) FROM schema_version").fetchone() == (
            SCHEMA_VERSION,
        )


def test_a_v9_file_gains_requests_history_and_its_sessions_played_their_own(tmp_path: Path) -> None:
    """Before v10 every agentic session sent its own replies back: its turns say 'own';
    a single-turn request has no history (NULL)."""
    path = tmp_path / "v9.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(ddl_as_of(9))
        con.execute("INSERT INTO schema_version VALUES (9, now()::TIMESTAMP)")
        assert "history" not in [c[0] for c in con.execute("DESCRIBE requests").fetchall()]
        for rid, session, turn in (("r1", "w/s0", 1), ("r2", None, None)):
            con.execute(
                "INSERT INTO requests (request_id, campaign_id, config_id, service_id, "
                "engine, method, tp, workload, window_id, prompt_id, max_tokens, rep, "
                "concurrency, session_id, turn, is_warmup, sent_at, start_s, ok) VALUES "
                "(?, 'c', 'k', 's', 'llamacpp', 'ar', 1, 'w', 'x', 'p', 64, 0, 1, ?, ?, "
                "false, now(), 0, true)",
                [rid, session, turn],
            )
    Store(path)
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute("SELECT request_id, history FROM requests ORDER BY 1").fetchall() == [
            ("r1", "own"),
            ("r2", None),
        ]
        assert con.execute("SELECT max(version) FROM schema_version").fetchone() == (
            SCHEMA_VERSION,
        )


def _migrated(tmp_path: Path, version: int, insert: str, query: str) -> list[tuple]:
    """A file of schema `version` holding the row `insert` adds, opened (and so migrated) by
    today's Store: what `query` reads from it then."""
    path = tmp_path / f"v{version}.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(ddl_as_of(version))
        con.execute(f"INSERT INTO schema_version VALUES ({version}, now()::TIMESTAMP)")
        con.execute(insert)
    Store(path).close()
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute(query).fetchall()


def test_a_v12_race_gains_empty_priors(tmp_path: Path) -> None:
    """A race recorded before v13 began with no prior: its priors read '{}'."""
    race = "INSERT INTO races VALUES ('c', 'p', 1, 'a,b', '', 'decode_tps', 0.05, 0.95, 2, 6)"
    got = _migrated(tmp_path, 12, race, "SELECT phase, priors FROM races")
    assert got == [("p", "{}")]


def test_v13_windows_gain_empty_loop_lag(tmp_path: Path) -> None:
    """A window measured before v14 was not watched: its loop lag reads NULL."""
    window = (
        "INSERT INTO windows (campaign_id, service_id, config_id, workload, window_id, "
        "max_tokens, load, n_scheduled, cache_reset, started_at, elapsed_s) VALUES "
        "('c', 's', 'k', 'w', 'win', 64, 'closed', 4, 'kept', now()::TIMESTAMP, 1.5)"
    )
    got = _migrated(
        tmp_path, 13, window, "SELECT window_id, loop_lag_p99_s, loop_lag_max_s FROM windows"
    )
    assert got == [("win", None, None)]
