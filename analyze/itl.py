"""Inter-token latency of every measured request and window, from the chunk lists in one pass.

The chunk lists are most of a results file: a campaign of 1M requests holds about 240M chunk
times. SQL list lambdas cost tens of nanoseconds per element and exact pooled quantiles in SQL
hold every gap of every window at once, so this module streams (request, chunk time, chunk
tokens) out of DuckDB once, in blocks, and works on them with numpy. It fills two TEMP tables
that analyze/sql/01_request_metrics.sql and 08_latency_conventions.sql join:

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
    DuckDB's quantile_cont). Exact, not sketched: a window's gaps are held whole while its
    statistics are computed; gaps of other windows wait in a spill file once the buffers pass
    SPILL_BYTES, so memory stays near SPILL_BYTES plus the largest window's gaps (8 bytes a gap).

Per-request gap quantiles (p50/p99 over one reply's few hundred gaps) are not computed: they
need a sort of every gap and say little that the pooled window quantiles and the per-request
maximum do not.
"""

from __future__ import annotations

import queue
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

WINDOW_KEY = ("campaign_id", "engine", "tp", "method", "workload", "max_tokens", "concurrency")
SPILL_BYTES = 64 * 2**20  # pooled gaps held in memory before they go to spill files
BLOCK_CHUNKS = 2_000_000  # chunks fetched at once (20 bytes each as numpy arrays)
QUANTILES = (0.5, 0.9, 0.95, 0.99)
STATS = ("mean", "median", "std", "p90", "p95", "p99")

# measured_requests is the TEMP view of analyze/sql/00_measured_requests.sql. Windows are
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
    """Every gap (seconds) of each window, held in memory up to SPILL_BYTES, the rest in
    spill files."""

    folder: Path
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
            with (self.folder / f"{w}.f64").open("ab") as out:
                np.concatenate(parts).tofile(out)
        self.buffers, self.held = {}, 0

    def take(self, w: int) -> np.ndarray:
        """All values of window w (and forget them)."""
        path = self.folder / f"{w}.f64"
        parts = [np.fromfile(path)] if path.exists() else []
        parts += self.buffers.pop(w, [])
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
        return Block(self.rid[requests], np.cumsum(counts[requests]), self.g[per_gap],
                     self.per_token[per_gap],
                     None if self.token_ok is None else self.token_ok[per_gap])


@dataclass
class Requests:
    """Per-request figures, block by block."""

    parts: list[pd.DataFrame] = field(default_factory=list)

    def add(self, b: Block) -> None:
        starts = np.concatenate(([0], b.ends[:-1]))
        counts = b.ends - starts
        self.parts.append(pd.DataFrame({
            "rid": b.rid,
            "itl_chunk_mean_s": np.add.reduceat(b.g, starts) / counts,
            "itl_chunk_max_s": np.maximum.reduceat(b.g, starts),
            "itl_token_mean_s": np.add.reduceat(b.per_token, starts) / counts,
        }))

    def frame(self) -> pd.DataFrame:
        return pd.concat(self.parts, ignore_index=True) if self.parts else pd.DataFrame(
            columns=["rid", "itl_chunk_mean_s", "itl_chunk_max_s", "itl_token_mean_s"])


def run_starts(values: np.ndarray) -> np.ndarray:
    """Index of the first element of each run of equal values."""
    if not len(values):
        return np.empty(0, dtype=np.int64)
    return np.concatenate(([0], np.flatnonzero(values[1:] != values[:-1]) + 1))


def build(con: duckdb.DuckDBPyConnection) -> None:
    """Fill the TEMP tables request_itl and window_itl (needs the measured_requests view)."""
    window_of = _request_index(con)
    requests = Requests()
    with tempfile.TemporaryDirectory(prefix="specsweep-itl-") as folder:
        chunk_pool, token_pool = Pool(Path(folder) / "chunk"), Pool(Path(folder) / "token")
        chunk_pool.folder.mkdir()
        token_pool.folder.mkdir()
        for rid, t, k in prefetched(blocks(con)):
            b = Block.of(rid, t, k)
            window = window_of[b.rid]
            if window.min(initial=0) < 0:  # warm-up requests, incomplete units
                b = b.keep(window >= 0)
                window = window[window >= 0]
            requests.add(b)
            _pool(chunk_pool, window, b.ends, b.g)
            if b.token_ok is None:  # the common case: every chunk's tokens are known
                _pool(token_pool, window, b.ends, b.per_token)
            else:
                # every request has a gap (CHUNKS_SQL), so no reduceat slice is empty
                kept = np.add.reduceat(b.token_ok.astype(np.int64),
                                       np.concatenate(([0], b.ends[:-1])))
                _pool(token_pool, window, np.cumsum(kept), b.per_token[b.token_ok])
        windows = con.execute("SELECT * FROM itl_windows ORDER BY window_index").df()
        stats = [window_stats(chunk_pool.take(w), token_pool.take(w))
                 for w in windows["window_index"]]
    _write(con, requests.frame(), windows, stats)


def _pool(pool: Pool, window: np.ndarray, ends: np.ndarray, values: np.ndarray) -> None:
    """Add values (request i's are values[ends[i-1]:ends[i]]) to their windows' lists, one
    run of consecutive requests of a window at a time."""
    runs = run_starts(window)
    run_ends = np.append(runs[1:], len(window)) - 1
    pool.add(window[runs], ends[run_ends], values)


def _request_index(con: duckdb.DuckDBPyConnection) -> np.ndarray:
    """The window index of each measured ok request, indexed by requests.rowid (-1 for
    every other row)."""
    last = con.execute("SELECT max(rowid) FROM requests").fetchone()[0]
    con.execute(WINDOWS_SQL)
    index = con.execute(REQUESTS_SQL).fetchnumpy()
    window_of = np.full(0 if last is None else last + 1, -1, dtype=np.int64)
    window_of[index["rid"]] = index["window_index"]
    return window_of


def blocks(con: duckdb.DuckDBPyConnection) -> Iterator[tuple[np.ndarray, ...]]:
    """(rid, t, k) arrays of the chunks of whole requests, a range of rowids at a time.

    DuckDB prunes a scan to the row groups a rowid range touches, so each range costs its own
    rows only; the range holds about BLOCK_CHUNKS chunks. Each request's chunks arrive in
    order; two row groups scanned on two threads may interleave their requests, which a
    stable sort by rid undoes."""
    last, chunks = con.execute(
        "SELECT max(rowid), sum(len(chunk_times_s)) FROM requests").fetchone()
    if last is None:
        return
    step = max(1, int(BLOCK_CHUNKS * (last + 1) / max(chunks or 0, 1)))
    for start in range(0, last + 1, step):
        got = con.execute(CHUNKS_SQL, [start, start + step]).fetchnumpy()
        rid, t, k = (np.asarray(got[c]) for c in ("rid", "t", "k"))
        if np.any(rid[1:] < rid[:-1]):
            order = np.argsort(rid, kind="stable")
            rid, t, k = rid[order], t[order], k[order]
        if len(rid):
            yield rid, t, k


_END = object()


def prefetched(items: Iterator, depth: int = 2) -> Iterator:
    """The items, produced on a second thread while the caller works on the previous ones
    (DuckDB's fetch and numpy release the GIL, so the two cores share the pass). When the
    caller stops early (an error, Ctrl-C) the producer stops too before this returns, so the
    connection is never used by two threads at once."""
    box: queue.Queue = queue.Queue(depth)
    stop = threading.Event()

    def put(item: object) -> None:
        while not stop.is_set():
            try:
                box.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def produce() -> None:
        try:
            for item in items:
                if stop.is_set():
                    return
                put(item)
            put(_END)
        except BaseException as exc:  # handed to the caller, raised there
            put(exc)

    worker = threading.Thread(target=produce, name="itl-fetch", daemon=True)
    worker.start()
    try:
        while (item := box.get()) is not _END:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        worker.join()


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
        out |= {f"{name}_ms_{s}": None if v is None else float(v)
                for s, v in zip(STATS, figures)}
    return out


def _write(con: duckdb.DuckDBPyConnection, per_request: pd.DataFrame, windows: pd.DataFrame,
           stats: list[dict]) -> None:
    con.execute(REQUEST_DDL)
    if len(per_request):
        con.register("request_itl_frame", per_request)
        con.execute("INSERT INTO request_itl BY NAME SELECT * FROM request_itl_frame")
        con.unregister("request_itl_frame")
    pooled = pd.concat([windows.drop(columns="window_index").reset_index(drop=True),
                        pd.DataFrame.from_records(stats, index=range(len(windows)),
                                                  columns=_stat_columns())], axis=1)
    con.register("window_itl_frame", pooled)
    con.execute(f"CREATE OR REPLACE TEMP TABLE window_itl AS SELECT {WINDOW_COLUMNS} "
                "FROM window_itl_frame")
    con.unregister("window_itl_frame")


def _stat_columns() -> list[str]:
    return [c for name in ("itl", "itl_token")
            for c in (f"n_{name}", *(f"{name}_ms_{s}" for s in STATS))]


# typed, so that an empty campaign still gives the columns latency_conventions reads
WINDOW_COLUMNS = ", ".join(
    [f"{c}::{'INTEGER' if c in ('tp', 'max_tokens', 'concurrency') else 'VARCHAR'} AS {c}"
     for c in WINDOW_KEY]
    + [f"{c}::{'BIGINT' if c.startswith('n_') else 'DOUBLE'} AS {c}" for c in _stat_columns()])
