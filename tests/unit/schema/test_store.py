"""Tests for schema/store.py on real DuckDB files: validated appends, quarantine,
transactions, resume bookkeeping, re-opening and migrations."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest

from specsweep.schema.contracts import CONTRACTS
from specsweep.schema.store import (
    SCHEMA_VERSION,
    NotAResultsDatabase,
    Store,
    campaign_filter,
    connect,
    migrate,
)
from tests.support.old_schemas import ddl_as_of

Row = Callable[..., dict[str, Any]]


def read(path: Path, sql: str) -> list[tuple[Any, ...]]:
    """Query the file through a connection of its own, as a reader process would."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def count(path: Path, table: str) -> int:
    return read(path, f"SELECT count(*) FROM {table}")[0][0]


# --- the DDL and the contracts ------------------------------------------------------------


@pytest.mark.parametrize("table", sorted(CONTRACTS))
def test_contract_columns_match_the_ddl_in_order(store: Store, db_path: Path, table: str) -> None:
    ddl = [r[0] for r in read(db_path, f"DESCRIBE {table}")]
    assert list(CONTRACTS[table].to_schema().columns) == ddl


# --- appends ------------------------------------------------------------------------------


def test_a_valid_batch_lands_whole(store: Store, db_path: Path, make_row: Row) -> None:
    rows = [make_row(i) for i in range(5)]
    rows[4] = make_row(
        4,
        session_id="s1",
        turn=2,
        chunk_times_s=None,
        chunk_tokens=None,
        draft_tokens=None,
        accepted_tokens=None,
        accept_length=None,
    )
    assert store.append("requests", rows) == 5
    assert count(db_path, "quarantine") == 0
    landed = read(
        db_path,
        "SELECT request_id, chunk_times_s, chunk_tokens, turn, ok "
        "FROM requests ORDER BY request_id",
    )
    assert landed == [
        ("req-0", [0.05, 0.2, 0.4], [1, 3, 2], None, True),
        ("req-1", [0.05, 0.2, 0.4], [1, 3, 2], None, True),
        ("req-2", [0.05, 0.2, 0.4], [1, 3, 2], None, True),
        ("req-3", [0.05, 0.2, 0.4], [1, 3, 2], None, True),
        ("req-4", None, None, 2, True),
    ]


def test_an_empty_batch_is_a_no_op(store: Store, db_path: Path) -> None:
    assert store.append("requests", []) == 0
    assert count(db_path, "requests") == 0


FAILED = {
    "ok": False,
    "ttft_s": None,
    "e2e_s": 1.0,
    "output_tokens": None,
    "chunk_times_s": None,
    "chunk_tokens": None,
}

# request_id -> (changes that break one rule, words the quarantine reason must contain)
BAD_ROWS: dict[str, tuple[dict[str, Any], list[str]]] = {
    "negative-ttft": ({"ttft_s": -0.1}, ["ttft_s", "greater_than_or_equal_to(0)"]),
    "ttft-after-e2e": ({"ttft_s": 0.9, "e2e_s": 0.4}, ["ok rows have ttft <= e2e"]),
    "failed-no-kind": ({**FAILED, "error_kind": None}, ["failed rows carry an error_kind"]),
    "accepted-gt-drafted": (
        {"draft_tokens": 3, "accepted_tokens": 5},
        ["accepted_tokens <= draft_tokens"],
    ),
    "chunks-decreasing": (
        {"chunk_times_s": [0.05, 0.3, 0.2]},
        ["chunk_times_s", "chunk times are non-decreasing offsets"],
    ),
    "unknown-error-kind": ({**FAILED, "error_kind": "oops"}, ["error_kind", "isin", "'oops'"]),
}
CHECK_NAMES = [
    "greater_than_or_equal_to(0)",
    "ok rows have ttft <= e2e",
    "failed rows carry an error_kind",
    "accepted_tokens <= draft_tokens",
    "chunk times are non-decreasing offsets",
    "isin(",
]


def _mixed_batch(make_row: Row) -> list[dict[str, Any]]:
    good = [make_row(i) for i in range(3)]
    good.append(make_row(3, **FAILED, error_kind="timeout", error_message="read timed out"))
    bad = [
        make_row(10 + i, request_id=rid, **changes)
        for i, (rid, (changes, _)) in enumerate(BAD_ROWS.items())
    ]
    return good[:2] + bad[:3] + good[2:] + bad[3:]


def test_bad_rows_go_to_quarantine_and_good_rows_land(
    store: Store, db_path: Path, make_row: Row
) -> None:
    rows = _mixed_batch(make_row)
    landed = store.append("requests", rows)

    assert landed == 4
    assert sorted(r[0] for r in read(db_path, "SELECT request_id FROM requests")) == [
        "req-0",
        "req-1",
        "req-2",
        "req-3",
    ]
    quarantined = read(
        db_path, "SELECT table_name, row_json, reason, quarantined_at FROM quarantine"
    )
    assert count(db_path, "requests") + len(quarantined) == len(rows)
    reasons = {json.loads(r[1])["request_id"]: r[2] for r in quarantined}
    assert set(reasons) == set(BAD_ROWS)
    assert {r[0] for r in quarantined} == {"requests"}
    assert all(r[3] is not None for r in quarantined)
    for rid, (_, words) in BAD_ROWS.items():
        for word in words:
            assert word in reasons[rid], f"{rid}: {word!r} not in {reasons[rid]!r}"
        # each bad row breaks exactly one rule, and only that one is blamed
        blamed = [c for c in CHECK_NAMES if c in reasons[rid]]
        assert len(blamed) == 1, f"{rid}: {reasons[rid]!r}"


def test_quarantined_row_json_keeps_the_row(store: Store, db_path: Path, make_row: Row) -> None:
    bad = make_row(7, ttft_s=-1.0, output_text="naïve ✓")
    store.append("requests", [bad, make_row(8)])
    (row_json,) = read(db_path, "SELECT row_json FROM quarantine")[0]
    kept = json.loads(row_json)
    assert kept["request_id"] == "req-7"
    assert kept["ttft_s"] == -1.0
    assert kept["output_text"] == "naïve ✓"
    assert kept["chunk_times_s"] == [0.05, 0.2, 0.4]


def test_a_dataframe_check_reason_does_not_blame_unrelated_columns(
    store: Store, db_path: Path, make_row: Row
) -> None:
    store.append("requests", [make_row(0, ttft_s=0.9, e2e_s=0.4)])
    (reason,) = read(db_path, "SELECT reason FROM quarantine")[0]
    assert "ok rows have ttft <= e2e" in reason
    assert "campaign_id:" not in reason
    assert reason.count("ok rows have ttft <= e2e") == 1


def test_a_batch_with_an_unknown_column_is_quarantined_whole(
    store: Store, db_path: Path, make_row: Row
) -> None:
    rows = [{**make_row(i), "tokens_per_s": 12.0} for i in range(3)]
    assert store.append("requests", rows) == 0
    assert count(db_path, "requests") == 0
    reasons = [r[0] for r in read(db_path, "SELECT reason FROM quarantine")]
    assert len(reasons) == 3
    assert all("tokens_per_s" in r for r in reasons)


def test_units_rows_validate_too(store: Store, db_path: Path, make_unit: Row) -> None:
    assert store.append("units", [make_unit(), make_unit(workload="chat", n_requests=-1)]) == 1
    (reason,) = read(db_path, "SELECT reason FROM quarantine WHERE table_name = 'units'")[0]
    assert "n_requests" in reason


# --- transactions and resume ------------------------------------------------------------------


class Boom(Exception):
    pass


def test_transaction_rolls_back_everything_on_an_exception(
    store: Store, db_path: Path, make_row: Row, make_unit: Row
) -> None:
    with pytest.raises(Boom), store.transaction():
        assert store.append("requests", _mixed_batch(make_row)) == 4
        store.append("units", [make_unit()])
        raise Boom
    for table in ("requests", "quarantine", "units"):
        assert count(db_path, table) == 0, table
    # the store is usable afterwards
    assert store.append("requests", [make_row(0)]) == 1
    assert count(db_path, "requests") == 1


def test_transaction_commits_every_append_together(
    store: Store, db_path: Path, make_row: Row, make_unit: Row
) -> None:
    with store.transaction():
        store.append("requests", [make_row(0), make_row(1, ttft_s=-1.0)])
        store.append("units", [make_unit(n_requests=1)])
        assert store.unit_done("camp", "cfg0", "rewrite")
    assert (count(db_path, "requests"), count(db_path, "quarantine"), count(db_path, "units")) == (
        1,
        1,
        1,
    )


def test_unit_done_turns_true_once_its_units_row_lands(store: Store, make_unit: Row) -> None:
    assert store.unit_done("camp", "cfg0", "rewrite") is False
    store.append("units", [make_unit()])
    assert store.unit_done("camp", "cfg0", "rewrite") is True
    assert store.unit_done("camp", "cfg0", "chat") is False
    assert store.unit_done("camp", "cfg1", "rewrite") is False
    assert store.unit_done("other", "cfg0", "rewrite") is False


# --- opening, concurrent readers, migrations -------------------------------------------------


def test_reopening_a_file_keeps_data_and_one_schema_version(
    store: Store, db_path: Path, make_row: Row
) -> None:
    store.append("requests", [make_row(0)])
    again = Store(db_path)
    with Store(db_path) as third:
        third.append("requests", [make_row(1)])
    assert again.unit_done("camp", "cfg0", "rewrite") is False
    assert read(db_path, "SELECT version FROM schema_version") == [(SCHEMA_VERSION,)]
    assert count(db_path, "requests") == 2


def test_a_reader_can_open_the_file_between_transactions(
    store: Store, db_path: Path, make_row: Row
) -> None:
    store.append("requests", [make_row(0), make_row(1)])
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM requests").fetchall() == [(2,)]
    finally:
        con.close()
    assert store.append("requests", [make_row(2)]) == 1
    assert count(db_path, "requests") == 3


def test_another_process_can_read_while_the_store_exists(
    store: Store, db_path: Path, make_row: Row
) -> None:
    store.append("requests", [make_row(0)])
    code = (
        "import duckdb, sys\n"
        "con = duckdb.connect(sys.argv[1], read_only=True)\n"
        "print(con.execute('SELECT count(*) FROM requests').fetchall()[0][0])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(db_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"
    assert store.append("requests", [make_row(1)]) == 1


def test_migrate_creates_the_schema_once() -> None:
    con = duckdb.connect(":memory:")
    assert migrate(con) == 0
    assert migrate(con) == SCHEMA_VERSION
    assert con.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
    tables = {
        r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()
    }
    assert set(CONTRACTS) | {"schema_version"} <= tables


def _stamp_newer(path: Path) -> None:
    con = duckdb.connect(str(path))
    con.execute("INSERT INTO schema_version VALUES (?, now()::TIMESTAMP)", [SCHEMA_VERSION + 1])
    con.close()


def test_migrate_refuses_a_newer_file(db_path: Path) -> None:
    Store(db_path)
    _stamp_newer(db_path)
    con = duckdb.connect(str(db_path))
    try:
        with pytest.raises(RuntimeError, match=rf"schema version {SCHEMA_VERSION + 1}.*newer"):
            migrate(con)
    finally:
        con.close()


def test_store_refuses_a_newer_file_and_leaves_it_alone(db_path: Path) -> None:
    Store(db_path)
    _stamp_newer(db_path)
    with pytest.raises(RuntimeError, match="upgrade specsweep"):
        Store(db_path)
    versions = sorted(r[0] for r in read(db_path, "SELECT version FROM schema_version"))
    assert versions == [SCHEMA_VERSION, SCHEMA_VERSION + 1]


def test_a_file_written_by_schema_1_opens_migrates_and_analyzes(
    tmp_path: Path, make_row: Row
) -> None:
    """Schema 1 had no units.complete (v2) nor units.colocated_with (v3). Such a file
    opens, gains both (true: v1 units landed whole; '': they ran alone), records versions 2
    and 3, and the analysis builds on it."""
    from specsweep.analyze import build

    path = tmp_path / "v1.duckdb"
    v1_ddl = ddl_as_of(1)
    units_v1 = v1_ddl.split("CREATE TABLE IF NOT EXISTS units")[1].split(");")[0]
    assert "complete" not in units_v1 and "colocated" not in units_v1
    with duckdb.connect(str(path)) as con:
        con.execute(v1_ddl)
        con.execute("INSERT INTO schema_version VALUES (1, now()::TIMESTAMP)")
        con.execute(
            "INSERT INTO units VALUES ('camp', 'cfg0', 'rewrite', 'svc0', 1, "
            "now()::TIMESTAMP, now()::TIMESTAMP)"
        )
    store = Store(path)
    store.append("requests", [make_row(0, config_id="cfg0", workload="rewrite")])
    assert read(path, "SELECT complete, colocated_with FROM units") == [(True, "")]
    versions = read(path, "SELECT version FROM schema_version ORDER BY version")
    assert versions == [(v,) for v in range(1, SCHEMA_VERSION + 1)]
    assert store.unit_done("camp", "cfg0", "rewrite")
    build.run(path, baseline="autoregressive")
    assert read(path, "SELECT count(*) FROM request_metrics") == [(1,)]


# --- connect: whoever opens a store migrates it -------------------------------------------


def _v3_file(path: Path) -> None:
    """A file as schema 3 wrote it: no endpoint_errors table, versions 1..3 recorded."""
    with duckdb.connect(str(path)) as con:
        con.execute(ddl_as_of(3))
        con.execute("INSERT INTO schema_version VALUES (3, now()::TIMESTAMP)")


def _tables(path: Path) -> set[str]:
    return {r[0] for r in read(path, "SELECT table_name FROM duckdb_tables()")}


def test_a_writable_connect_migrates_an_older_file(tmp_path: Path) -> None:
    path = tmp_path / "v3.duckdb"
    _v3_file(path)
    with connect(path) as con:
        versions = con.execute("SELECT version FROM schema_version ORDER BY 1").fetchall()
    assert versions == [(v,) for v in range(3, SCHEMA_VERSION + 1)]
    assert "endpoint_errors" in _tables(path)


def test_a_read_only_connect_sees_the_file_as_written(tmp_path: Path) -> None:
    path = tmp_path / "v3.duckdb"
    _v3_file(path)
    with connect(path, read_only=True) as con:
        assert con.execute("SELECT max(version) FROM schema_version").fetchone() == (3,)
    assert "endpoint_errors" not in _tables(path)


def test_a_read_only_connect_refuses_a_newer_file(db_path: Path) -> None:
    Store(db_path)
    _stamp_newer(db_path)
    with pytest.raises(RuntimeError, match="upgrade specsweep"):
        connect(db_path, read_only=True)


def test_connect_creates_nothing_unless_asked(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "r.duckdb"
    for read_only in (False, True):
        with pytest.raises(FileNotFoundError, match="run `specsweep run` first"):
            connect(path, read_only=read_only)
    assert not path.parent.exists()
    connect(path, create=True).close()
    assert {"requests", "schema_version"} <= _tables(path)


def test_connect_leaves_a_foreign_duckdb_file_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE notes (x INTEGER)")
    with pytest.raises(NotAResultsDatabase, match="table 'requests' not found"):
        connect(path)
    assert _tables(path) == {"notes"}


def test_campaign_filter_keeps_exactly_its_campaigns_quotes_and_all() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT unnest(['a', 'o''b', 'c', 'o']) AS campaign_id")

    def kept(campaigns: list[str] | None) -> list[str]:
        where = campaign_filter(campaigns)
        rows = con.execute(f"SELECT campaign_id FROM t WHERE {where} ORDER BY 1").fetchall()
        return [c for (c,) in rows]

    assert kept(["o'b", "c"]) == ["c", "o'b"]
    assert kept(["x' OR 'a' = 'a"]) == []  # a quote cannot close the literal
    assert kept([]) == []
    assert kept(None) == ["a", "c", "o", "o'b"]
