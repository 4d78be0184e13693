"""`specsweep compact`: give a results file back the space its deleted rows still hold.

DuckDB frees a block of the file only when every row in it is deleted, and reuses free blocks
without shrinking the file. `specsweep remove` deletes a campaign's rows, and every analysis
build replaces the rows of the campaigns it rebuilt, so a file that grows for a year keeps the
size of all it ever held: six campaigns of 10,000 requests, analysed, four of them removed,
stayed at 453 MB, and their live rows fit in 101 MB (2026-12-07, docs/decisions.md).

`compact` writes the file's whole content (DuckDB's COPY FROM DATABASE: every table, view and
macro, with its constraints) to a hidden file beside it, checks that the copy holds the same
objects and every table the same number of rows, then renames the copy over the file:

- The file is held open for writing from the copy to the rename, so no other process writes
  into it meanwhile. Another specsweep command waits for it (schema.store.LOCK_WAIT_S), then
  opens the compacted file. A `specsweep run` opens the file for each unit it writes, so it
  waits too, for up to those 300 s: a file of 1M requests compacts in 31 s; compact a file
  of many millions between campaigns.
- An interruption, a full disk or a failed check leaves the file as it was and removes the
  copy (SIGTERM 8 s into the copy of a 4.3 GB file: exit 143, every row there, no copy). A
  compact killed outright (SIGKILL, a power cut) leaves its copy, `.NAME.compact`, which the
  next `compact` removes first; the file is as it was.
- Nothing is checked for space first: the file's used blocks overstate its live rows (1,026
  blocks of 256 KiB for the 386 the copy above needed), so a refusal from them would refuse
  the files that need compacting most.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb

from specsweep.schema.store import READER_MEMORY, connect, literal

COPY = "compacted"  # the copy's name while it is attached to the file's connection


class CopyMismatch(RuntimeError):
    """The compacted copy does not hold what the file holds (the file is left as it was)."""


@dataclass(frozen=True)
class Compacted:
    """What `compact` did: the bytes of the file and its WAL before and after, and how long
    it took."""

    before: int
    after: int
    seconds: float

    def line(self, path: str | Path) -> str:
        back = self.before - self.after
        return (
            f"{path}: {_mb(self.before)} -> {_mb(self.after)} ({_mb(back)} given back) "
            f"in {self.seconds:.1f} s"
        )


def compact(path: str | Path) -> Compacted:
    """Rewrite the results file at path (a symbolic link: the file it points to) without the
    space of its deleted rows; see the module's docstring."""
    started = time.monotonic()
    target = Path(path).resolve()
    copy = target.with_name(f".{target.name}.compact")
    _remove(copy)  # an earlier compact killed outright (SIGKILL) leaves its copy
    with connect(target, memory=READER_MEMORY) as con:  # migrated; the write lock is held
        before = _size(target)
        con.execute("CHECKPOINT")  # everything in the file itself, none of it in its WAL
        name = con.execute("SELECT current_database()").fetchone()[0]
        try:
            con.execute(f"ATTACH {literal(str(copy))} AS {COPY}")
            con.execute(f'COPY FROM DATABASE "{name}" TO {COPY}')
            _require_same(con, name, target)
            con.execute(f"DETACH {COPY}")  # written whole: no WAL of its own is left
            if Path(f"{copy}.wal").exists():
                raise CopyMismatch(f"{copy}: DuckDB left a WAL beside the compacted copy")
            os.chmod(copy, stat.S_IMODE(target.stat().st_mode))
            _sync(copy)
            os.replace(copy, target)  # under the lock: nobody wrote into the file meanwhile
            _sync(target.parent)
        except BaseException:
            with contextlib.suppress(duckdb.Error):
                con.execute(f"DETACH DATABASE IF EXISTS {COPY}")
            _remove(copy)
            raise
    return Compacted(before, _size(target), time.monotonic() - started)


def _require_same(con: duckdb.DuckDBPyConnection, name: str, target: Path) -> None:
    """The copy holds every object of the file, defined alike, and each table as many rows."""
    ours, copied = _catalog(con, name), _catalog(con, COPY)
    if ours != copied:
        differ = sorted(set(ours.items()) ^ set(copied.items()))
        raise CopyMismatch(
            f"{target}: the compacted copy differs from the file in {differ[0][0]} "
            f"({len(differ)} difference(s)); the file is left as it was"
        )


def _catalog(con: duckdb.DuckDBPyConnection, database: str) -> dict[str, str]:
    """Each table, view and macro of the database -> its definition (a table's with its
    rows)."""
    found: dict[str, str] = {}
    for schema, table, sql in con.execute(
        "SELECT schema_name, table_name, sql FROM duckdb_tables() WHERE database_name = ?",
        [database],
    ).fetchall():
        rows = con.execute(f'SELECT count(*) FROM "{database}"."{schema}"."{table}"').fetchone()
        found[f"table {schema}.{table}"] = f"{sql}\n{rows[0]} rows"
    for schema, view, sql in con.execute(
        "SELECT schema_name, view_name, sql FROM duckdb_views() "
        "WHERE database_name = ? AND NOT internal",
        [database],
    ).fetchall():
        found[f"view {schema}.{view}"] = sql
    for schema, macro, parameters, body in con.execute(
        "SELECT schema_name, function_name, parameters::VARCHAR, macro_definition "
        "FROM duckdb_functions() WHERE database_name = ? AND NOT internal",
        [database],
    ).fetchall():
        found[f"macro {schema}.{macro}({parameters})"] = body
    return found


def _sync(path: Path) -> None:
    """fsync a file, or a folder (its entries): the rename survives a power cut."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _size(path: Path) -> int:
    """Bytes of the file and of its WAL."""
    wal = Path(f"{path}.wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def _remove(copy: Path) -> None:
    for leftover in (copy, Path(f"{copy}.wal")):
        leftover.unlink(missing_ok=True)


def _mb(size: int) -> str:
    return f"{size / 1e6:,.1f} MB"
