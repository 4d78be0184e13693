"""Inter-token latency of every measured request and window, from the chunk lists in one pass.

The chunk lists are most of a results file: a campaign of 1M requests holds about 240M chunk
times. SQL list lambdas cost tens of nanoseconds per element and exact pooled quantiles in SQL
hold every gap of every window at once, so this module streams (request, chunk time, chunk
tokens) out of DuckDB once, a range of rowids at a time, and works on them with numpy. Past
PARALLEL_CHUNKS chunks the ranges are shared by one worker process per core (DuckDB's
conversion to numpy holds the GIL, so threads would not help), each with its own read-only
connection: `compute` therefore runs before analyze opens the file for writing. `write` puts
the result into two TEMP tables that analyze/sql/request_metrics.sql and
latency_conventions.sql join:

request_itl, per ok measured request with at least two chunks (key rid = requests.rowid):
    itl_chunk_mean_s  = mean gap chunk_times_s[i+1] - chunk_times_s[i]
    itl_chunk_max_s   = the longest such gap (the worst stall the client saw)
    itl_token_mean_s  = mean of gap_i / chunk_tokens[i+1] (a missing list or element, or 0,
                        counts as 1 token)

window_itl, per window (campaign_id, engine, tp, method, workload, max_tokens, concurrency),
in milliseconds over the gaps of every ok request pooled (vLLM's and SGLang's ITL):
    itl_ms_*        every gap * 1000
    itl_token_ms_*  every gap / chunk_tokens[i+1] * 1000, for requests whose chunk_tokens has
                    one entry per chunk (entries of 0 tokens are left out)
    each with n, mean, median, std (population, np.std), p90, p95, p99 (np.quantile, linear:
    DuckDB's quantile_cont). Exact, not sketched: the gaps wait in spill files (past
    SPILL_BYTES held per process) and each window's are read back whole for its statistics,
    so memory stays near SPILL_BYTES plus the largest window's gaps (8 bytes a gap).

Per-request gap quantiles (p50/p99 over one reply's few hundred gaps) are not computed: they
need a sort of every gap and say little that the pooled window quantiles and the per-request
maximum do not.
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from specsweep.schema.keys import WINDOW_KEY

SPILL_BYTES = 64 * 2**20  # pooled gaps held in memory before they go to spill files
BLOCK_CHUNKS = 2_000_000  # chunks fetched at once (20 bytes each as numpy arrays)
PARALLEL_CHUNKS = 20_000_000  # below this, worker processes cost more than they save
WORKER_MEMORY = "256MB"  # DuckDB memory_limit of each worker's read-only connection
QUANTILES = (0.5, 0.9, 0.95, 0.99)
STATS = ("mean", "median", "std", "p90", "p95", "p99")

# measured_requests is the TEMP view of analyze/sql/measured_requests.sql. Windows are
# numbered on their distinct keys: a window function over every request would sort them all.
WINDOWS_SQL = f"""
CREATE OR REPLACE TEMP TABLE itl_windows AS
SELECT *, row_number() OVER (ORDER BY {", ".join(WINDOW_KEY)}) - 1 AS window_index
FROM (SELECT DISTINCT {", ".join(WINDOW_KEY)} FROM measured_requests WHERE ok)
"""
REQUESTS_SQL = f"""
SELECT m.rid, w.window_index
FROM measured_requests AS m
JOIN itl_windows AS w USING ({", ".join(WINDOW_KEY)})
WHERE m.ok
"""
# Straight from `requests` (the view's anti-join would cost more than the rest of the scan):
# rows outside measured_requests are dropped in numpy. k = -1: chunk_tokens is missing or
# does not have one entry per chunk, so the request's chunks count 1 token each and its gaps
# stay out of the pooled per-token list.
CHUNKS_SQL = """
SELECT rowid AS rid, unnest(chunk_times_s) AS t,
       coalesce(unnest(CASE WHEN len(chunk_tokens) = len(chunk_times_s) THEN chunk_tokens END),
                -1)::INTEGER AS k
FROM requests
WHERE rowid >= ? AND rowid < ? AND ok AND len(chunk_times_s) > 1
"""
REQUEST_DDL = """
CREATE OR REPLACE TEMP TABLE request_itl (
    rid BIGINT PRIMARY KEY, itl_chunk_mean_s DOUBLE, itl_chunk_max_s DOUBLE,
    itl_token_mean_s DOUBLE
)
"""


@dataclass
class Pool:
    """Gaps (seconds) per window: buffered up to SPILL_BYTES, then appended to one file per
    window, kind and process (`tag`)."""

    folder: Path
    kind: str
    tag: str
    buffers: dict[int, list[np.ndarray]] = field(default_factory=dict)
    held: int = 0

    def add(self, windows: np.ndarray, ends: np.ndarray, values: np.ndarray) -> None:
        """values[ends[i-1]:ends[i]] belong to window windows[i]."""
        for w, part in zip(windows.tolist(), np.split(values, ends[:-1])):
            self.buffers.setdefault(w, []).append(part)
        self.held += values.nbytes
        if self.held > SPILL_BYTES:
            self.spill()

    def spill(self) -> None:
        for w, parts in self.buffers.items():
            with (self.folder / f"{self.kind}-{w}-{self.tag}.f64").open("ab") as out:
                np.concatenate(parts).tofile(out)
        self.buffers, self.held = {}, 0


def pooled(folder: Path, kind: str, w: int) -> np.ndarray:
    """Every spilled gap of window w (all processes)."""
    parts = [np.fromfile(f) for f in sorted(folder.glob(f"{kind}-{w}-*.f64"))]
    return np.concatenate(parts) if parts else np.empty(0)


@dataclass
class Block:
    """One block's chunks reduced to gaps: g holds every gap of every request in request
    order, per_token each gap divided by its later chunk's tokens (1 where unknown), and
    request i's gaps are g[ends[i-1]:ends[i]]."""

    rid: np.ndarray
    ends: np.ndarray
    g: np.ndarray
    per_token: np.ndarray
    token_ok: np.ndarray | None  # gaps that belong in the per-token pool (None: all of them)

    @classmethod
    def of(cls, rid: np.ndarray, t: np.ndarray, k: np.ndarray) -> Block:
        first = run_starts(rid)  # rid is sorted: each request is one run
        last = np.append(first[1:], len(rid)) - 1
        gaps = np.empty(len(t))
        np.subtract(t[1:], t[:-1], out=gaps[:-1])
        inside = np.ones(len(t), dtype=bool)
        inside[last] = False  # the step from a request's last chunk to the next request's first
        g = gaps[inside]
        k_next = k[1:][inside[:-1]]
        ends = np.cumsum(last - first)
        per_token = g / np.where(k_next > 0, k_next, 1)
        token_ok = None if k_next.min(initial=1) > 0 else k_next > 0
        return cls(rid[first], ends, g, per_token, token_ok)

    def keep(self, requests: np.ndarray) -> Block:
        """Only the requests where `requests` (one flag per request) is true."""
        counts = np.diff(self.ends, prepend=0)
        per_gap = np.repeat(requests, counts)
        return Block(
            self.rid[requests],
            np.cumsum(counts[requests]),
            self.g[per_gap],
            self.per_token[per_gap],
            None if self.token_ok is None else self.token_ok[per_gap],
        )


@dataclass
class Requests:
    """Per-request figures, block by block."""

    parts: list[pd.DataFrame] = field(default_factory=list)

    def add(self, b: Block) -> None:
        starts = np.concatenate(([0], b.ends[:-1]))
        counts = b.ends - starts
        self.parts.append(
            pd.DataFrame(
                {
                    "rid": b.rid,
                    "itl_chunk_mean_s": np.add.reduceat(b.g, starts) / counts,
                    "itl_chunk_max_s": np.maximum.reduceat(b.g, starts),
                    "itl_token_mean_s": np.add.reduceat(b.per_token, starts) / counts,
                }
            )
        )

    def frame(self) -> pd.DataFrame:
        return (
            pd.concat(self.parts, ignore_index=True)
            if self.parts
            else pd.DataFrame(
                columns=["rid", "itl_chunk_mean_s", "itl_chunk_max_s", "itl_token_mean_s"]
            )
        )


def run_starts(values: np.ndarray) -> np.ndarray:
    """Index of the first element of each run of equal values."""
    if not len(values):
        return np.empty(0, dtype=np.int64)
    return np.concatenate(([0], np.flatnonzero(values[1:] != values[:-1]) + 1))


@dataclass
class Latencies:
    """What `compute` found: request_itl's rows and window_itl's rows."""

    per_request: pd.DataFrame
    windows: pd.DataFrame


def compute(db_path: str | Path, measured_sql: str, workers: int | None = None) -> Latencies:
    """Scan every chunk list of the file at db_path (opened read-only here and in the worker
    processes). measured_sql: the text of analyze/sql/measured_requests.sql (the view the
    build uses too). workers: processes to share the scan (default: one per core when the
    file holds more than PARALLEL_CHUNKS chunks, else none)."""
    with duckdb.connect(str(db_path), read_only=True) as con:
        con.execute(f"SET memory_limit = '{WORKER_MEMORY}'")
        con.execute(measured_sql)
        window_of, ranges, chunks = _plan(con)
        windows = con.execute("SELECT * FROM itl_windows ORDER BY window_index").df()
        if workers is None:
            workers = (os.cpu_count() or 1) if chunks > PARALLEL_CHUNKS else 1
        with tempfile.TemporaryDirectory(prefix="specsweep-itl-") as tmp:
            folder, index = Path(tmp), windows["window_index"].tolist()
            if workers <= 1:
                parts = [_scan_on(con, window_of, ranges, folder, "0")]
                stats = [_pooled_stats(folder, w) for w in index]
            else:
                con.close()  # the workers open their own connections
                parts, stats = _in_workers(db_path, window_of, ranges, folder, index, workers)
    return Latencies(_concat(parts), _window_frame(windows, stats))


def _plan(con: duckdb.DuckDBPyConnection) -> tuple[np.ndarray, list[tuple[int, int]], int]:
    """The window index of each measured ok request by requests.rowid (-1 for every other
    row), the rowid ranges of about BLOCK_CHUNKS chunks each, and the chunks in all."""
    last, chunks = con.execute(
        "SELECT max(rowid), coalesce(sum(len(chunk_times_s)), 0) FROM requests"
    ).fetchone()
    con.execute(WINDOWS_SQL)
    index = con.execute(REQUESTS_SQL).fetchnumpy()
    window_of = np.full(0 if last is None else last + 1, -1, dtype=np.int64)
    window_of[index["rid"]] = index["window_index"]
    if last is None:
        return window_of, [], 0
    step = max(1, int(BLOCK_CHUNKS * (last + 1) / max(chunks, 1)))
    return window_of, [(a, a + step) for a in range(0, last + 1, step)], int(chunks)


def _in_workers(
    db_path: str | Path,
    window_of: np.ndarray,
    ranges: list[tuple[int, int]],
    folder: Path,
    windows: list[int],
    workers: int,
) -> tuple[list[pd.DataFrame], list[dict]]:
    """The scan's ranges dealt round-robin to worker processes, then the windows' statistics
    (spawned: the parent holds DuckDB's threads, which fork would copy half-locked)."""
    shares = [ranges[i::workers] for i in range(workers)]
    jobs = [(str(db_path), window_of, share, folder, str(i)) for i, share in enumerate(shares)]
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        parts = pool.starmap(_scan_file, jobs)
        stats = pool.starmap(_pooled_stats, [(folder, w) for w in windows])
    return parts, stats


def _pooled_stats(folder: Path, w: int) -> dict[str, float | int | None]:
    return window_stats(pooled(folder, "chunk", w), pooled(folder, "token", w))


def _scan_file(
    db_path: str, window_of: np.ndarray, ranges: list[tuple[int, int]], folder: Path, tag: str
) -> pd.DataFrame:
    with duckdb.connect(db_path, read_only=True) as con:
        con.execute(f"SET memory_limit = '{WORKER_MEMORY}'")
        con.execute("SET threads = 1")  # the other cores run the other workers
        return _scan_on(con, window_of, ranges, folder, tag)


def _scan_on(
    con: duckdb.DuckDBPyConnection,
    window_of: np.ndarray,
    ranges: list[tuple[int, int]],
    folder: Path,
    tag: str,
) -> pd.DataFrame:
    """Per-request figures of the given rowid ranges; their gaps go to the spill files."""
    requests = Requests()
    chunk_pool, token_pool = Pool(folder, "chunk", tag), Pool(folder, "token", tag)
    for rid, t, k in blocks(con, ranges):
        b = Block.of(rid, t, k)
        window = window_of[b.rid]
        if window.min(initial=0) < 0:  # warm-up requests, incomplete units
            b = b.keep(window >= 0)
            window = window[window >= 0]
            if not len(window):
                continue
        requests.add(b)
        _pool(chunk_pool, window, b.ends, b.g)
        if b.token_ok is None:  # the common case: every chunk's tokens are known
            _pool(token_pool, window, b.ends, b.per_token)
        else:
            # every request has a gap (CHUNKS_SQL), so no reduceat slice is empty
            kept = np.add.reduceat(b.token_ok.astype(np.int64), np.concatenate(([0], b.ends[:-1])))
            _pool(token_pool, window, np.cumsum(kept), b.per_token[b.token_ok])
    chunk_pool.spill()
    token_pool.spill()
    return requests.frame()


def _pool(pool: Pool, window: np.ndarray, ends: np.ndarray, values: np.ndarray) -> None:
    """Add values (request i's are values[ends[i-1]:ends[i]]) to their windows' lists, one
    run of consecutive requests of a window at a time."""
    runs = run_starts(window)
    run_ends = np.append(runs[1:], len(window)) - 1
    pool.add(window[runs], ends[run_ends], values)


def blocks(
    con: duckdb.DuckDBPyConnection, ranges: list[tuple[int, int]]
) -> Iterator[tuple[np.ndarray, ...]]:
    """(rid, t, k) arrays of the chunks of whole requests, one rowid range at a time.

    DuckDB prunes a scan to the row groups a rowid range touches, so each range costs its own
    rows only. Each request's chunks arrive in order; two row groups scanned on two threads
    may interleave their requests, which a stable sort by rid undoes."""
    for start, stop in ranges:
        got = con.execute(CHUNKS_SQL, [start, stop]).fetchnumpy()
        rid, t, k = (np.asarray(got[c]) for c in ("rid", "t", "k"))
        if np.any(rid[1:] < rid[:-1]):
            order = np.argsort(rid, kind="stable")
            rid, t, k = rid[order], t[order], k[order]
        if len(rid):
            yield rid, t, k


def _concat(parts: list[pd.DataFrame]) -> pd.DataFrame:
    return pd.concat(parts, ignore_index=True) if parts else Requests().frame()


def window_stats(itl_s: np.ndarray, itl_token_s: np.ndarray) -> dict[str, float | int | None]:
    """n, mean, median, std, p90, p95, p99 in milliseconds of both pooled lists (seconds; None
    over no values). Scaling the figures, not the values, saves a pass over every gap; it
    changes them in the 16th digit at most."""
    out: dict[str, float | int | None] = {}
    for name, values in (("itl", itl_s), ("itl_token", itl_token_s)):
        out[f"n_{name}"] = len(values)
        if len(values):
            q = np.quantile(values, QUANTILES) * 1000
            figures = (values.mean() * 1000, q[0], values.std() * 1000, q[1], q[2], q[3])
        else:
            figures = (None,) * len(STATS)
        out |= {f"{name}_ms_{s}": None if v is None else float(v) for s, v in zip(STATS, figures)}
    return out


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
