"""The DuckDB store: open and migrate a results file, validated appends, quarantine.

Whoever opens a store migrates it. `connect(path)` is the one way a stage opens a results
file for writing: it waits out another process's lock, then brings the raw layer to
SCHEMA_VERSION (`migrate`) before handing the connection over, so no stage runs DDL of its
own. `collect` writes through `Store` (which opens with `connect(create=True)`); `analyze`
opens with `connect(path)` and adds only its views. `connect(path, read_only=True)` migrates
nothing (it cannot): it sees the file as written and refuses one newer than this specsweep.
`report` opens the file read-only with duckdb itself and reads only analysis views.

Every append validates its batch with the table's pandera contract (lazy, so one pass lists
every violation); rows that fail go to `quarantine` with the reasons, valid rows land.
Callers group the appends of one unit of work in `transaction()` so a unit lands whole or
not at all.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from specsweep.schema import metrics
from specsweep.schema.migrations import MIGRATIONS

SCHEMA_VERSION = 14
LOCK_WAIT_S = 300.0
log = logging.getLogger("specsweep.store")
DDL = Path(__file__).with_name("ddl.sql")


def utcnow() -> datetime:
    """Naive UTC timestamp, the form every TIMESTAMP column holds."""
    return datetime.now(UTC).replace(tzinfo=None)


class Store:
    """A results file opened for writing.

    The file is locked only while a transaction runs, so between units other processes
    (`make sql`, a notebook, `specsweep report`) can open it while a campaign runs.
    Threads (services packed side by side) share one Store: each thread has its own
    transaction state, and transactions run one at a time.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._lock = threading.Lock()
        with self._lock:
            connect(self.path, create=True).close()

    @property
    def _con(self) -> duckdb.DuckDBPyConnection | None:
        """This thread's open transaction, if any."""
        return getattr(self._local, "con", None)

    @_con.setter
    def _con(self, con: duckdb.DuckDBPyConnection | None) -> None:
        self._local.con = con

    def close(self) -> None:
        """Nothing stays open between transactions; kept for `with Store(...)`."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All appends inside land together, or none do; nested calls join the outer one."""
        if self._con is not None:
            yield
            return
        with self._lock:
            con = self._connect()
            try:
                con.execute("BEGIN TRANSACTION").fetchall()
                self._con = con
                yield
            except BaseException:
                con.execute("ROLLBACK").fetchall()
                raise
            else:
                con.execute("COMMIT").fetchall()
            finally:
                self._con = None
                con.close()

    def _connect(self) -> duckdb.DuckDBPyConnection:
        """Open the (already migrated) file for one transaction, waiting out other
        processes' locks."""
        return _open(self.path, read_only=False)

    def append(self, table: str, rows: list[dict[str, Any]]) -> int:
        """Validate rows against the table's contract; insert the valid ones.

        Returns the number of rows inserted; the others are in `quarantine`.
        """
        if not rows:
            return 0
        valid, rejected = validate(table, rows)
        with self.transaction():
            if rejected:
                self._insert("quarantine", pd.DataFrame(rejected))
            if len(valid):
                self._insert(table, valid)
        return len(valid)

    def _insert(self, table: str, frame: pd.DataFrame) -> None:
        from specsweep.schema.contracts import CONTRACTS  # pandera: only where rows are written

        if table not in CONTRACTS:
            raise ValueError(f"unknown table {table!r}")
        assert self._con is not None
        self._con.register("_batch", frame)
        try:
            # table is one of the fixed CONTRACTS keys, never user input
            self._con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _batch").fetchall()
        finally:
            self._con.unregister("_batch")

    def execute(self, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        """Run one statement and return all its rows (DuckDB wants results consumed)."""
        with self.transaction():
            assert self._con is not None
            return self._con.execute(sql, params or []).fetchall()

    def unit_done(self, campaign_id: str, config_id: str, workload: str, run: int = 1) -> bool:
        rows = self.execute(
            "SELECT count(*) FROM units WHERE campaign_id = ? AND config_id = ? AND workload = ? "
            "AND run = ? AND complete",
            [campaign_id, config_id, workload, run],
        )
        return bool(rows[0][0])


class NotAResultsDatabase(RuntimeError):
    """The file lacks the raw tables that `collect` writes."""


def literal(text: str | Path) -> str:
    """text as a SQL string literal, for where DuckDB takes no bound parameter (ATTACH's path)
    or plans better with a constant (an IN list it can filter a scan with)."""
    return "'" + str(text).replace("'", "''") + "'"


def campaign_filter(campaigns: list[str] | None) -> str:
    """The SQL condition on campaign_id that keeps `campaigns` (None: every one): a list of
    constants, which DuckDB filters a scan with before it reads another column (a 10k
    campaign's windows in a 2M file: 0.015 s against 0.2 s for a semi-join)."""
    if campaigns is None:
        return "true"
    return f"campaign_id IN ({', '.join(map(literal, campaigns))})" if campaigns else "false"


def scratch_folder(db: str | Path, kind: str) -> tempfile.TemporaryDirectory[str]:
    """A temporary folder beside the results file db (the disk its user chose for results),
    named .specsweep-<kind>-<pid>-*: deleted when the work ends, and, when a process was
    killed before it could delete its own, by the next one, which removes every such folder
    whose process is gone."""
    folder = Path(db).absolute().parent
    for old in folder.glob(".specsweep-*-*-*"):
        pid = old.name.split("-")[2]
        if old.is_dir() and pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    return tempfile.TemporaryDirectory(prefix=f".specsweep-{kind}-{os.getpid()}-", dir=folder)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def connect(
    path: str | Path, read_only: bool = False, create: bool = False, memory: str | None = None
) -> duckdb.DuckDBPyConnection:
    """Open the results file at path; a writable open migrates it to SCHEMA_VERSION first.

    create=False (a stage that reads results: analyze) wants an existing results file:
    a missing path raises FileNotFoundError (nothing is created) and a DuckDB file without
    a `requests` table raises NotAResultsDatabase before any DDL touches it. create=True
    (collect) makes the file and its folder when missing. read_only=True migrates nothing
    and refuses a file newer than this specsweep. Waits up to LOCK_WAIT_S for a lock.
    memory: DuckDB's memory_limit for the connection (analyze's: READER_MEMORY), past which it
    evicts cached pages and spills to its temporary folder; None keeps DuckDB's default, 80%
    of RAM, which caches a large file read once (4.6 GB resident for a scan of 10M requests).
    """
    path = Path(path)
    if not path.exists():
        if not create or read_only:
            raise FileNotFoundError(f"no results database at {path}; run `specsweep run` first")
        path.parent.mkdir(parents=True, exist_ok=True)
    con = _open(path, read_only)
    if memory:
        con.execute(f"SET memory_limit = '{memory}'")  # a constant of the caller's
    try:
        if not create:
            _require_table(con, path, "requests")
        if read_only:
            _require_known_version(con)
        else:
            migrate(con)
            metrics.install(con)  # the metric macros views and collect share
    except BaseException:
        con.close()
        raise
    return con


# analyze's connections (`connect(memory=...)`). A full rebuild of 10M requests on 2 cores
# (2026-12-06/07): at 1GB the main process peaked at 1.66-2.12 GB over four runs (8 min 8 s
# and 8 min 21 s the two last); at 768MB at 1.53 and 1.60 GB (8 min 30 s, 9 min 14 s); 512MB
# took 10 min 12 s and 10 min 24 s. docs/measurements/2026-12-06-scale-incremental.md.
READER_MEMORY = "768MB"


def _open(path: Path, read_only: bool) -> duckdb.DuckDBPyConnection:
    """duckdb.connect; while another process (a `make sql` session, a report, a campaign's
    transaction) holds the file, wait and retry with backoff for up to LOCK_WAIT_S."""
    deadline = time.monotonic() + LOCK_WAIT_S
    delay = 0.05
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower() or time.monotonic() > deadline:
                raise
            if delay >= 1.0:
                log.warning("waiting for %s: %s", path, str(exc).splitlines()[0])
            time.sleep(delay)
            delay = min(delay * 2, 5.0)


def _require_table(con: duckdb.DuckDBPyConnection, path: Path, name: str) -> None:
    """Fail early, naming the table, when the raw layer is missing."""
    found = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [name]
    ).fetchone()[0]
    if not found:
        raise NotAResultsDatabase(
            f"{path}: table {name!r} not found: is this a specsweep results database?"
        )


def _require_known_version(con: duckdb.DuckDBPyConnection) -> None:
    """A read-only reader cannot migrate, but must not misread a newer layout."""
    has = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'schema_version'"
    ).fetchone()[0]
    found = con.execute("SELECT max(version) FROM schema_version").fetchone()[0] if has else 0
    if (found or 0) > SCHEMA_VERSION:
        raise RuntimeError(_newer_message(found))


def _newer_message(found: int) -> str:
    return (
        f"results file has schema version {found}, newer than this specsweep "
        f"({SCHEMA_VERSION}); upgrade specsweep"
    )


def validate(table: str, rows: list[dict[str, Any]]) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """Split rows into a validated frame and quarantine rows (table_name, row_json, reason,
    quarantined_at). pandera is imported here, not with the module: every reader of a
    results file (analyze, report) opens it through `connect`, and validates nothing."""
    import pandera.pandas as pa

    from specsweep.schema.contracts import CONTRACTS

    contract = CONTRACTS[table]
    frame = pd.DataFrame(rows)
    try:
        return contract.validate(frame, lazy=True), []
    except pa.errors.SchemaErrors as exc:
        reasons = _reasons_by_row(exc.failure_cases, len(frame))
    bad = sorted(reasons)
    good = frame.drop(index=bad)
    now = utcnow()
    rejected = [
        {
            "table_name": table,
            "row_json": json.dumps(rows[i], default=str),
            "reason": "; ".join(sorted(reasons[i])),
            "quarantined_at": now,
        }
        for i in bad
    ]
    valid = contract.validate(good, lazy=True) if len(good) else good
    return valid, rejected


def _reasons_by_row(cases: pd.DataFrame, n_rows: int) -> dict[int, set[str]]:
    """Map row index -> failed checks; a failure with no row index applies to every row."""
    reasons: dict[int, set[str]] = defaultdict(set)
    for case in cases.itertuples(index=False):
        if case.schema_context != "DataFrameSchema":
            text = f"{case.column}: {case.check} (got {case.failure_case!r})"
        elif pd.isna(case.index):  # table-level, e.g. an unknown column
            text = f"table: {case.check} ({case.failure_case!r})"
        else:  # a row-level check: pandera lists it once per column; name it once
            text = f"row: {case.check}"
        if pd.isna(case.index):
            for i in range(n_rows):
                reasons[i].add(text)
        else:
            reasons[int(case.index)].add(text)
    return dict(reasons)


# --- migrations --------------------------------------------------------------------------


def migrate(con: duckdb.DuckDBPyConnection) -> int:
    """Bring a results file to SCHEMA_VERSION; returns the version found before.

    The DDL creates what is missing at the current version (a new file needs nothing
    else); a file written by an older specsweep then runs each `migrate_to_N` step
    (schema/migrations.py), each in a transaction of its own with its schema_version row
    (DuckDB refuses to commit two ALTERs of one table in one transaction). `con` must not
    be inside a transaction.
    """
    con.execute("BEGIN TRANSACTION").fetchall()
    con.execute(DDL.read_text()).fetchall()
    row = con.execute("SELECT max(version) FROM schema_version").fetchall()[0]
    found = row[0] if row and row[0] is not None else 0
    if found > SCHEMA_VERSION:
        con.execute("ROLLBACK").fetchall()
        raise RuntimeError(_newer_message(found))
    if not found:
        con.execute("INSERT INTO schema_version VALUES (?, ?)", [SCHEMA_VERSION, utcnow()])
    con.execute("COMMIT").fetchall()
    for version in range(found + 1, SCHEMA_VERSION + 1) if found else []:
        con.execute("BEGIN TRANSACTION").fetchall()
        try:
            MIGRATIONS[version](con)
            con.execute("INSERT INTO schema_version VALUES (?, ?)", [version, utcnow()])
        except BaseException:
            con.execute("ROLLBACK").fetchall()
            raise
        con.execute("COMMIT").fetchall()
    return found
