"""Incremental analysis: which campaigns a build must analyse, and a build of only those.

Every analysis object is computed per campaign: each row carries one campaign_id and comes from
that campaign's raw rows alone (a speedup's baseline, a Holm family, a start variance, replica
agreement and a race are all within one campaign; comparing campaigns is `specsweep analyze
compare`, on demand). So a file that gains a campaign needs the analysis of that campaign only;
tests/unit/analyze/test_incremental.py holds incremental builds equal to a full rebuild.

analysis_campaigns records, per analysed campaign, the fingerprint of its raw rows (`raw_sha`),
of the analysis code and schema (`code_sha`) and the baseline it was compared with. `plan`
compares them with the file as it is now:

- a campaign whose raw rows changed (rows added, deleted or rewritten: a resumed unit, an
  import) or that has no row yet is analysed again; one whose raw rows are all gone loses its
  analysis rows;
- everything is rebuilt when the code, the schema or the baseline differ from any row's, or
  when an analysis table is missing (a file never analysed, or analysed before
  analysis_campaigns). A file of more than GROUP_REQUESTS requests is rebuilt a group of
  campaigns at a time, each group as an incremental build is: an interrupted full rebuild
  leaves the groups it finished, and the next `specsweep analyze` builds the rest.

An incremental build (analyze.build.build_some) scans the changed campaigns' chunk lists in
the results file (read-only), copies their other raw rows into a scratch DuckDB file, runs the
whole model list there (the same code as a full rebuild), then, in one transaction of the
results file, deletes those campaigns' rows from every analysis table and inserts the scratch
file's: an interruption leaves the previous analysis in place.

Fingerprints are sums of row hashes per campaign, so they do not depend on row order. For
`requests` they hash the columns a rewritten row always changes (request_id, sent_at, e2e_s,
ok, is_warmup), not the chunk lists: reading those is most of a file's size (0.1 s per 1M
requests against 6 s).
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np

from specsweep.schema.store import READER_MEMORY, campaign_filter, connect, literal

STATE = "analysis_campaigns"
STATE_DDL = f"""
CREATE OR REPLACE TABLE {STATE} (
    campaign_id  VARCHAR PRIMARY KEY,
    raw_sha      VARCHAR NOT NULL,   -- fingerprint of the campaign's raw rows
    code_sha     VARCHAR NOT NULL,   -- fingerprint of the analysis code and schema
    baseline     VARCHAR NOT NULL,   -- the method it was compared with
    built_at     TIMESTAMP NOT NULL  -- when its analysis rows were built
)
"""
# a full rebuild of a file with more requests than this builds groups of whole campaigns of
# about this many, one after the other, each through a scratch file (see `groups`)
GROUP_REQUESTS = 1_000_000
# the columns of a requests row that a rewrite always changes (see the module docstring)
REQUEST_HASH = "hash(request_id, sent_at, e2e_s, ok, is_warmup)"
PACKAGES = ("analyze", "stats", "schema")
# every raw table with a campaign_id column (all but quarantine and schema_version): what a
# campaign's fingerprint covers and what its scratch file copies (a test holds it to ddl.sql)
RAW = (
    "campaigns", "endpoint_errors", "environment", "gpu_samples", "method_params", "races",
    "requests", "server_metrics", "services", "units", "windows",
)  # fmt: skip  # the code whose text decides every analysis figure


@dataclass
class Plan:
    """What a build must do: full (with why), or the campaigns to analyse and to drop."""

    full: str = ""  # why everything is rebuilt ('' : incremental)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    requests: int = 0  # requests of the changed campaigns
    groups: list[list[str]] = field(default_factory=list)  # the campaigns built, in groups
    sizes: list[int] = field(default_factory=list)  # requests of each group

    @property
    def campaigns(self) -> list[str]:
        """Every campaign whose analysis rows are replaced or dropped."""
        return self.changed + self.removed


def fingerprints(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """campaign_id -> the fingerprint of its raw rows, for every campaign with a raw row."""
    parts: dict[str, list[str]] = {}
    for table in RAW:
        row_hash = REQUEST_HASH if table == "requests" else "hash(t)"
        rows = con.execute(
            f"SELECT campaign_id, count(*), sum({row_hash}) FROM {table} AS t GROUP BY ALL"
        ).fetchall()
        for cid, n, total in rows:
            parts.setdefault(cid, []).append(f"{table}:{n}:{total}")
    return {
        cid: hashlib.sha256("\n".join(sorted(p)).encode()).hexdigest()[:16]
        for cid, p in parts.items()
    }


def code_sha(schema_version: int) -> str:
    """Fingerprint of the analysis code: every .py and .sql file of PACKAGES (their text and
    path), and the schema version."""
    digest = hashlib.sha256(f"schema {schema_version}".encode())
    for package in PACKAGES:
        root = Path(importlib.import_module(f"specsweep.{package}").__file__).parent
        for path in sorted(p for p in root.rglob("*") if p.suffix in (".py", ".sql")):
            digest.update(f"{package}/{path.relative_to(root)}\n".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def schema_version(con: duckdb.DuckDBPyConnection) -> int:
    return con.execute("SELECT max(version) FROM schema_version").fetchone()[0]


def write_state(con: duckdb.DuckDBPyConnection, baseline: str) -> None:
    """analysis_campaigns: one row per campaign of the file (a model of the build)."""
    code = code_sha(schema_version(con))
    con.execute(STATE_DDL)
    rows = [(cid, sha, code, baseline) for cid, sha in fingerprints(con).items()]
    if rows:
        con.executemany(f"INSERT INTO {STATE} VALUES (?, ?, ?, ?, current_timestamp)", rows)


def plan(con: duckdb.DuckDBPyConnection, baseline: str, objects: tuple[str, ...]) -> Plan:
    """What the next build of the file on con must do (see the module docstring)."""
    present = {
        name
        for (name,) in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' "
            "UNION ALL SELECT view_name FROM duckdb_views() WHERE schema_name = 'main'"
        ).fetchall()
    }
    missing = [name for name in (*objects, STATE) if name not in present]
    if missing:
        return Plan(full=f"no {missing[0]} table yet")
    built = {
        cid: (raw, code, base)
        for cid, raw, code, base in con.execute(
            f"SELECT campaign_id, raw_sha, code_sha, baseline FROM {STATE}"
        ).fetchall()
    }
    code = code_sha(schema_version(con))
    if any(c != code for _, c, _ in built.values()):
        return Plan(full="the analysis code or the schema changed since the last build")
    if any(b != baseline for _, _, b in built.values()):
        return Plan(full=f"the baseline is now {baseline}")
    now = fingerprints(con)
    changed = sorted(cid for cid, sha in now.items() if built.get(cid, (None,))[0] != sha)
    removed = sorted(cid for cid in built if cid not in now)
    counts = _requests(con)
    return Plan(changed=changed, removed=removed, requests=sum(counts.get(c, 0) for c in changed))


def _requests(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    return dict(con.execute("SELECT campaign_id, count(*) FROM requests GROUP BY ALL").fetchall())


def group(todo: Plan, con: duckdb.DuckDBPyConnection, campaigns: list[str]) -> None:
    """todo.groups: campaigns in groups of whole campaigns of about GROUP_REQUESTS requests,
    in campaign_id order, and todo.sizes their requests. A build of many campaigns builds one
    group at a time, so its memory and its temporary files follow the largest group, not the
    file (one pass over 10M requests filled a 25 GB disk with DuckDB's temporary storage)."""
    counts = _requests(con)
    todo.groups, todo.sizes = [], []
    for cid in sorted(campaigns):
        if not todo.groups or todo.sizes[-1] + counts.get(cid, 0) > GROUP_REQUESTS:
            todo.groups.append([])
            todo.sizes.append(0)
        todo.groups[-1].append(cid)
        todo.sizes[-1] += counts.get(cid, 0)


def copy_campaigns(db: Path, scratch: Path, campaigns: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """A new results file at scratch holding the raw rows of `campaigns` from db, but for the
    requests' chunk lists: the chunk pass reads those in db (analyze.build.build_some), and
    copying them was 15 of a group's 56 s at 1M requests. Returns where each copied request
    went: its rowid in db (ascending) and in the copy, matched on request_id (the primary
    key). Not on order: a copy of 1M requests did not keep db's order (DuckDB copies in
    parallel)."""
    with connect(scratch, create=True, memory=READER_MEMORY) as con:
        con.execute(f"ATTACH {literal(db)} AS src (READ_ONLY)")
        only = campaign_filter(campaigns)
        for table in RAW:
            columns = CHUNKLESS if table == "requests" else "*"
            con.execute(
                f"INSERT INTO main.{table} BY NAME SELECT {columns} FROM src.main.{table} "
                f"WHERE {only}"
            )
        moved = con.execute(
            f"SELECT d.db, c.rowid AS copy FROM (SELECT rowid AS db, request_id "
            f"FROM src.main.requests WHERE {only}) AS d "
            "JOIN main.requests AS c USING (request_id) ORDER BY d.db"
        ).fetchnumpy()
        con.execute("DETACH src")
    return np.asarray(moved["db"], dtype=np.int64), np.asarray(moved["copy"], dtype=np.int64)


# quarantine's rows with the campaign_id of the rejected row (NULL where it had none)
QUARANTINED = "(SELECT rowid AS row, row_json->>'campaign_id' AS campaign_id FROM quarantine)"
CHUNKLESS = "* REPLACE (NULL AS chunk_times_s, NULL AS chunk_tokens)"  # requests, as copied


def merge(db: Path, scratch: Path, campaigns: list[str], tables: list[str], whole: bool) -> None:
    """One transaction of db: the analysis rows of `campaigns` are replaced by the scratch
    file's (tables: the analysis tables; one without a campaign_id column, like
    analysis_params and metric_catalog, is replaced whole). whole: every table is replaced
    by the scratch file's (the first group of a full rebuild)."""
    with connect(db, memory=READER_MEMORY) as con:
        con.execute(f"ATTACH {literal(scratch)} AS scratch (READ_ONLY)")
        per_campaign = _per_campaign(con)
        only = campaign_filter(campaigns)
        con.begin()
        try:
            for table in tables:  # names from the models (analyze.build.TABLES)
                if whole:
                    con.execute(
                        f"CREATE OR REPLACE TABLE main.{table} AS "
                        f"SELECT * FROM scratch.main.{table}"
                    )
                    continue
                if table in per_campaign:
                    con.execute(f"DELETE FROM main.{table} WHERE {only}")
                else:
                    con.execute(f"DELETE FROM main.{table}")
                con.execute(f"INSERT INTO main.{table} BY NAME SELECT * FROM scratch.main.{table}")
        except BaseException:
            con.rollback()
            raise
        con.commit()
        con.execute("DETACH scratch")


def _per_campaign(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The file's tables with a campaign_id column (views left out)."""
    return {
        name
        for (name,) in con.execute(
            "SELECT table_name FROM duckdb_columns() JOIN duckdb_tables() "
            "USING (database_name, schema_name, table_name) WHERE database_name = "
            "current_database() AND schema_name = 'main' AND column_name = 'campaign_id'"
        ).fetchall()
    }


def remove(
    con: duckdb.DuckDBPyConnection, campaigns: list[str], tables: list[str], apply: bool
) -> dict[str, int]:
    """The rows of `campaigns` per table of the file on con: every raw table (RAW), every
    table of `tables` (the analysis tables, analyze.build.TABLES) with a campaign_id column,
    analysis_campaigns included, so the next build has nothing to drop, and the rows the
    contracts rejected (`quarantine`, by the campaign_id in row_json). apply: delete them,
    in one transaction (an interruption removes nothing). The stored comparisons with a
    removed side are analyze.compare.store.refresh's to drop. Raises ValueError naming a
    campaign with no raw row (ids are exact: a plan name may cover many campaigns)."""
    per_campaign, only = _per_campaign(con), campaign_filter(campaigns)
    counts, found = {}, set()
    for table in dict.fromkeys([*RAW, *tables]):  # names of the schema's and the models'
        if table not in per_campaign:
            continue
        rows = con.execute(
            f"SELECT campaign_id, count(*) FROM main.{table} WHERE {only} GROUP BY ALL"
        ).fetchall()
        found |= {cid for cid, _ in rows} if table in RAW else set()
        counts[table] = sum(n for _, n in rows)
    counts["quarantine"] = con.execute(
        f"SELECT count(*) FROM {QUARANTINED} WHERE {only}"
    ).fetchone()[0]
    missing = [cid for cid in campaigns if cid not in found]
    if missing:
        raise ValueError(_unknown(con, missing[0]))
    if apply:
        con.begin()
        try:
            for table in counts:
                con.execute(
                    f"DELETE FROM main.quarantine WHERE rowid IN (SELECT row FROM {QUARANTINED} "
                    f"WHERE {only})"
                    if table == "quarantine"
                    else f"DELETE FROM main.{table} WHERE {only}"
                )
        except BaseException:
            con.rollback()
            raise
        con.commit()
    return counts


def _unknown(con: duckdb.DuckDBPyConnection, cid: str) -> str:
    """Why cid is refused: the file's campaigns, or of many the closest ids to cid."""
    held = [c for (c,) in con.execute("SELECT campaign_id FROM campaigns ORDER BY 1").fetchall()]
    if len(held) <= 10:
        return f"no campaign {cid!r} in the file (ids are exact); it holds: " + (
            ", ".join(held) or "none"
        )
    close = difflib.get_close_matches(cid, held, n=3, cutoff=0.5)
    return f"no campaign {cid!r} among the file's {len(held)} (ids are exact)" + (
        f"; the closest: {', '.join(close)}" if close else ""
    )
