"""The scan of analyze.itl: the campaigns in groups, each group's chunk lists in rowid ranges
(in worker processes past PARALLEL_CHUNKS), and the TEMP tables the build joins (the
package's docstring says what is computed)."""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.pool
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from specsweep.analyze.itl.chunks import (
    BLOCK_CHUNKS,
    STATS,
    WORKER_MEMORY,
    concat,
    in_memory_stats,
    pooled_stats,
    scan_file,
    scan_on,
    spilled,
)
from specsweep.interrupt import worker_pool
from specsweep.schema.keys import WINDOW_KEY
from specsweep.schema.store import campaign_filter, scratch_folder

PARALLEL_CHUNKS = 20_000_000  # below this, worker processes cost more than they save


# measured_requests is the TEMP view of analyze/sql/measured_requests.sql. Windows are
# numbered on their distinct keys: a window function over every request would sort them all.
# {campaigns} (here, in FAILED_SQL and SPANS_SQL): the campaigns scanned, as
# schema.store.campaign_filter writes them.
WINDOWS_SQL = f"""
CREATE OR REPLACE TEMP TABLE itl_windows AS
SELECT *, row_number() OVER (ORDER BY {", ".join(WINDOW_KEY)}) - 1 AS window_index
FROM (SELECT DISTINCT {", ".join(WINDOW_KEY)} FROM measured_requests WHERE ok AND {{campaigns}})
"""
REQUESTS_SQL = f"""
SELECT m.rid, w.window_index
FROM measured_requests AS m
JOIN itl_windows AS w USING ({", ".join(WINDOW_KEY)})
WHERE m.ok AND {{campaigns}}
"""
REQUEST_DDL = """
CREATE OR REPLACE TEMP TABLE request_itl (
    rid BIGINT PRIMARY KEY, n_chunks BIGINT, itl_chunk_mean_s DOUBLE, itl_chunk_max_s DOUBLE,
    itl_token_mean_s DOUBLE
)
"""
# the chunks of measured failed requests, which the scan (ok requests only) does not see.
# Filtered on `ok` alone, DuckDB reads the lists of failed rows only; a condition on the
# list's length too would read every list (0.07-0.24 s at 100k requests against 0.002 s).
FAILED_SQL = """
SELECT rid, len(chunk_times_s) AS n_chunks FROM measured_requests WHERE NOT ok AND {campaigns}
"""


@dataclass
class Latencies:
    """What `compute` found: request_itl's rows and window_itl's rows."""

    per_request: pd.DataFrame
    windows: pd.DataFrame


def compute(
    db_path: str | Path,
    measured_sql: str,
    workers: int | None = None,
    con: duckdb.DuckDBPyConnection | None = None,
    spans: list[tuple] | None = None,
    campaigns: list[str] | None = None,
) -> Latencies:
    """Scan every chunk list of the file at db_path (opened read-only here and in the worker
    processes). measured_sql: the text of analyze/sql/measured_requests.sql (the view the
    build uses too). workers: processes to share the scan (default: one per core when the
    file holds more than PARALLEL_CHUNKS chunks, else none). con: scan in this process, on a
    cursor of this open connection (the build's: a file `in_process` accepts), instead of
    opening the file read-only (35-70 ms, a tenth of a small campaign's analysis). spans:
    `campaign_spans(con)` of the file, when the caller has them (each costs a read of every chunk
    list: 1.2-4.6 s at 1M requests). campaigns: scan these campaigns' requests only (None:
    every campaign); request_itl's rid stays the rowid of the file scanned (a build in a
    copy of the rows moves it: `renumbered`).

    A window never spans campaigns, so the campaigns are scanned in groups of about
    GROUP_CHUNKS chunks (a campaign is never split), each group's windows finished and its
    spill files deleted before the next: the spill folder, beside the results file, holds
    16 bytes per chunk of the largest group, not of the file (10M requests of 242 chunks
    each would spill 39 GB)."""
    db_path = Path(db_path)
    if con is not None:
        with con.cursor() as cursor:  # its TEMP objects go with it
            return _compute(cursor, db_path, measured_sql, 1, spans, campaigns)
    with duckdb.connect(str(db_path), read_only=True) as reader:
        reader.execute(f"SET memory_limit = '{WORKER_MEMORY}'")
        return _compute(reader, db_path, measured_sql, workers, spans, campaigns)


def campaign_spans(
    con: duckdb.DuckDBPyConnection, campaigns: list[str] | None = None
) -> list[tuple]:
    """Each campaign's (campaign_id, lowest rowid, highest rowid, chunks), in rowid order:
    what plans the scan (a read of the chunk lists' lengths: of every campaign, or of those
    in `campaigns`, whose filter DuckDB applies before it reads a list)."""
    return con.execute(SPANS_SQL.format(campaigns=campaign_filter(campaigns))).fetchall()


def in_process(found: list[tuple]) -> bool:
    """Whether the chunk pass of a file of these `campaign_spans` runs in this process (up to
    PARALLEL_CHUNKS chunks), so on an open connection: worker processes need the file free
    of this process's writes."""
    return sum(n for *_, n in found) <= PARALLEL_CHUNKS


def _compute(
    con: duckdb.DuckDBPyConnection,
    db_path: Path,
    measured_sql: str,
    workers: int | None,
    found: list[tuple] | None,
    campaigns: list[str] | None,
) -> Latencies:
    """The scan on con (a read-only connection, or a cursor of the build's)."""
    con.execute(measured_sql)
    if found is None:
        found = campaign_spans(con, campaigns)
    first, window_of, ranges, chunks = _plan(con, found, campaigns)
    windows = con.execute("SELECT * FROM itl_windows ORDER BY window_index").df()
    groups = _groups(found, windows)
    if workers is None:
        workers = (os.cpu_count() or 1) if chunks > PARALLEL_CHUNKS else 1
    failed = con.execute(FAILED_SQL.format(campaigns=campaign_filter(campaigns))).df()
    parts = [failed] if len(failed) else []
    stats: dict[int, dict] = {}
    with (
        scratch_folder(db_path, "itl") as tmp,
        _workers(workers) as pool,
    ):
        for members, lo, hi in groups:
            part = _only(window_of[lo - first : hi + 1 - first], members)
            scan = Scan(Path(tmp), lo, part, _within(ranges, lo, hi))
            if pool is None:
                frame, *pools = scan_on(
                    con, scan.first, scan.window_of, scan.ranges, scan.folder, "0"
                )
                parts.append(frame)
                figures = in_memory_stats(*pools, members)
            else:
                parts += scan.on(pool, db_path, workers)
                figures = pool.starmap(pooled_stats, spilled(scan.folder, members))
            stats |= dict(zip(members, figures))
            for path in scan.folder.iterdir():
                path.unlink()
    return Latencies(concat(parts), _window_frame(windows, [stats[w] for w in sorted(stats)]))


# each campaign's rowids and chunks: one pass over the list lengths serves both the ranges
# and the groups
SPANS_SQL = """
SELECT campaign_id, min(rowid), max(rowid), coalesce(sum(len(chunk_times_s)), 0)
FROM requests WHERE {campaigns} GROUP BY ALL ORDER BY 2
"""


def renumbered(found: Latencies, moved: tuple[np.ndarray, np.ndarray]) -> Latencies:
    """found with request_itl's rid moved from the rowids of the file scanned to those of a
    copy of its rows: moved holds each copied request's rowid in the file (ascending) and in
    the copy (analyze.models.scope.copy_campaigns)."""
    before, after = moved
    rid = found.per_request["rid"].to_numpy(dtype=np.int64)
    at = np.searchsorted(before, rid)
    if len(rid) and (at.max() >= len(before) or not np.array_equal(before[at], rid)):
        raise RuntimeError("the chunk pass saw requests that the copy does not hold")
    return Latencies(found.per_request.assign(rid=after[at]), found.windows)


def _plan(
    con: duckdb.DuckDBPyConnection, spans: list[tuple], campaigns: list[str] | None
) -> tuple[int, np.ndarray, list[tuple[int, int]], int]:
    """The lowest rowid of the campaigns scanned, the window index of each measured ok
    request of theirs by requests.rowid from that one on (-1 for every other row), the rowid
    ranges of about BLOCK_CHUNKS chunks each that cover their rows, and the chunks in all."""
    first = min((lo for _, lo, _, _ in spans), default=0)
    last = max((hi for _, _, hi, _ in spans), default=first - 1)
    chunks = sum(n for *_, n in spans)
    only = campaign_filter(campaigns)
    con.execute(WINDOWS_SQL.format(campaigns=only))
    index = con.execute(REQUESTS_SQL.format(campaigns=only)).fetchnumpy()
    window_of = np.full(last + 1 - first, -1, dtype=np.int64)
    window_of[index["rid"] - first] = index["window_index"]
    spread = _disjoint([(lo, hi) for _, lo, hi, _ in spans])
    rows = sum(hi + 1 - lo for lo, hi in spread)
    step = max(1, int(BLOCK_CHUNKS * rows / max(chunks, 1)))
    ranges = [(a, min(a + step, hi + 1)) for lo, hi in spread for a in range(lo, hi + 1, step)]
    return first, window_of, ranges, int(chunks)


def _disjoint(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Inclusive rowid spans merged where they meet or overlap (campaigns whose rows
    interleave: one resumed after another ran), so that no row is scanned twice."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


@dataclass
class Scan:
    """One group's scan: the window of each rowid from the group's lowest, `first`, to its
    highest (-1 outside the group), and the rowid ranges that hold the group's rows. Cut to
    the group's rowids, window_of is a group's size, not the file's: the last group of a 10M
    file would carry 80 MB to each worker."""

    folder: Path
    first: int
    window_of: np.ndarray
    ranges: list[tuple[int, int]]

    def on(
        self, pool: multiprocessing.pool.Pool, db_path: Path, workers: int
    ) -> list[pd.DataFrame]:
        """The ranges dealt round-robin to the worker processes."""
        jobs = [
            (str(db_path), self.first, self.window_of, self.ranges[i::workers], self.folder, str(i))
            for i in range(workers)
        ]
        return pool.starmap(scan_file, jobs)


GROUP_CHUNKS = 100_000_000  # chunks of the campaigns scanned together (1.6 GB of spill)


def _groups(spans: list[tuple], windows: pd.DataFrame) -> list[tuple[list[int], int, int]]:
    """(window indexes, lowest rowid, highest rowid) of each group of whole campaigns holding
    about GROUP_CHUNKS chunks, in rowid order (spans: SPANS_SQL's rows)."""
    by_campaign = windows.groupby("campaign_id")["window_index"].apply(list).to_dict()
    out: list[tuple[list[int], int, int]] = []
    held = 0
    for cid, lo, hi, chunks in spans:
        members = [int(w) for w in by_campaign.get(cid, [])]
        if not members:
            continue
        if not out or held + chunks > GROUP_CHUNKS:
            out.append(([], lo, hi))
            held = 0
        group, a, b = out[-1]
        out[-1] = ([*group, *members], min(a, lo), max(b, hi))
        held += chunks
    return out


def _only(window_of: np.ndarray, members: list[int]) -> np.ndarray:
    """window_of with every window outside members set to -1."""
    keep = np.zeros(int(window_of.max(initial=-1)) + 2, dtype=bool)
    keep[members] = True  # keep[-1], the index of "no window", stays False
    return np.where(keep[window_of], window_of, -1)


def _within(ranges: list[tuple[int, int]], lo: int, hi: int) -> list[tuple[int, int]]:
    """The ranges that meet rowids lo..hi, cut to them (another group's rows that share a
    range are that group's to scan)."""
    return [(max(a, lo), min(b, hi + 1)) for a, b in ranges if b > lo and a <= hi]


@contextlib.contextmanager
def _workers(workers: int) -> Iterator[multiprocessing.pool.Pool | None]:
    """Worker processes (spawned: the parent holds DuckDB's threads, which fork would copy
    half-locked), or None for a scan in this process."""
    if workers <= 1:
        yield None
        return
    with worker_pool(multiprocessing.get_context("spawn"), workers) as pool:
        yield pool


def _window_frame(windows: pd.DataFrame, stats: list[dict]) -> pd.DataFrame:
    return pd.concat(
        [
            windows.drop(columns="window_index").reset_index(drop=True),
            # not from_records: before pandas 3 it reads an empty index as field names
            pd.DataFrame(stats, index=range(len(windows)), columns=_stat_columns()),
        ],
        axis=1,
    )


def write(con: duckdb.DuckDBPyConnection, found: Latencies) -> None:
    """The TEMP tables request_itl and window_itl on the build's connection."""
    con.execute(REQUEST_DDL)
    if len(found.per_request):
        con.register("request_itl_frame", found.per_request)
        con.execute("INSERT INTO request_itl BY NAME SELECT * FROM request_itl_frame")
        con.unregister("request_itl_frame")
    con.register("window_itl_frame", found.windows)
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE window_itl AS SELECT {WINDOW_COLUMNS} FROM window_itl_frame"
    )
    con.unregister("window_itl_frame")


def _stat_columns() -> list[str]:
    return [
        c
        for name in ("itl", "itl_token")
        for c in (f"n_{name}", *(f"{name}_ms_{s}" for s in STATS))
    ]


# typed, so that an empty campaign still gives the columns latency_conventions reads
WINDOW_COLUMNS = ", ".join(
    [
        f"{c}::{'INTEGER' if c in ('tp', 'max_tokens', 'concurrency') else 'VARCHAR'} AS {c}"
        for c in WINDOW_KEY
    ]
    + [f"{c}::{'BIGINT' if c.startswith('n_') else 'DOUBLE'} AS {c}" for c in _stat_columns()]
)
