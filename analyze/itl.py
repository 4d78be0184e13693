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

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

WINDOW_KEY = ("campaign_id", "engine", "tp", "method", "workload", "max_tokens", "concurrency")
SPILL_BYTES = 256 * 2**20
MAX_RUNS = 4096  # runs of one window per block above which a block is sorted by window
VECTORS_PER_BLOCK = 1000  # 2048 chunk rows per DuckDB vector: ~2M chunks a block
QUANTILES = (0.5, 0.9, 0.95, 0.99)
STATS = ("mean", "median", "std", "p90", "p95", "p99")

# measured_requests is the TEMP view of analyze/sql/00_measured_requests.sql
REQUESTS_SQL = f"""
SELECT rid,
       dense_rank() OVER (ORDER BY {", ".join(WINDOW_KEY)}) - 1 AS window_index,
       chunk_tokens IS NOT NULL AND len(chunk_tokens) = len(chunk_times_s) AS tokens_known
FROM measured_requests
WHERE ok AND len(chunk_times_s) > 1
"""
WINDOWS_SQL = f"""
SELECT DISTINCT {", ".join(WINDOW_KEY)},
       dense_rank() OVER (ORDER BY {", ".join(WINDOW_KEY)}) - 1 AS window_index
FROM measured_requests
WHERE ok AND len(chunk_times_s) > 1
"""
# a chunk_tokens list longer than its chunk_times_s would unnest into rows without a time
CHUNKS_SQL = """
SELECT rid, t, coalesce(k, 0)::INTEGER AS k
FROM (
    SELECT rid, unnest(chunk_times_s) AS t, unnest(chunk_tokens) AS k
    FROM measured_requests
    WHERE ok AND len(chunk_times_s) > 1
)
WHERE t IS NOT NULL
"""
REQUEST_DDL = """
CREATE OR REPLACE TEMP TABLE request_itl (
    rid BIGINT PRIMARY KEY, itl_chunk_mean_s DOUBLE, itl_chunk_max_s DOUBLE,
    itl_token_mean_s DOUBLE
)
"""


@dataclass
class Pool:
    """Every gap of each window, held in memory up to SPILL_BYTES, the rest in spill files."""

    folder: Path
    buffers: dict[int, list[np.ndarray]] = field(default_factory=dict)
    held: int = 0

    def add(self, window: np.ndarray, values: np.ndarray) -> None:
        """Append values, window[i] being the window index of values[i]."""
        starts = run_starts(window)
        if len(starts) > MAX_RUNS:  # windows interleaved request by request: sort them apart
            order = np.argsort(window, kind="stable")
            window, values = window[order], values[order]
            starts = run_starts(window)
        for w, part in zip(window[starts], np.split(values, starts[1:])):
            self.buffers.setdefault(int(w), []).append(part)
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
class Requests:
    """Per-request sums, filled block by block (rids are unique per request)."""

    rid: list[np.ndarray] = field(default_factory=list)
    mean: list[np.ndarray] = field(default_factory=list)
    peak: list[np.ndarray] = field(default_factory=list)
    token_mean: list[np.ndarray] = field(default_factory=list)

    def add(self, rid: np.ndarray, gaps: np.ndarray, per_token: np.ndarray) -> None:
        """Sums of one block's gaps; rid is sorted, so each request is one run."""
        starts = run_starts(rid)
        counts = np.diff(np.append(starts, len(rid)))
        self.rid.append(rid[starts])
        self.mean.append(np.add.reduceat(gaps, starts) / counts)
        self.peak.append(np.maximum.reduceat(gaps, starts))
        self.token_mean.append(np.add.reduceat(per_token, starts) / counts)

    def frame(self) -> pd.DataFrame:
        cols = {"rid": self.rid, "itl_chunk_mean_s": self.mean, "itl_chunk_max_s": self.peak,
                "itl_token_mean_s": self.token_mean}
        return pd.DataFrame({k: np.concatenate(v) if v else np.empty(0) for k, v in cols.items()})


def run_starts(values: np.ndarray) -> np.ndarray:
    """Index of the first element of each run of equal values."""
    if not len(values):
        return np.empty(0, dtype=np.int64)
    return np.concatenate(([0], np.flatnonzero(values[1:] != values[:-1]) + 1))


def build(con: duckdb.DuckDBPyConnection) -> None:
    """Fill the TEMP tables request_itl and window_itl (needs the measured_requests view)."""
    index = con.execute(REQUESTS_SQL).fetchnumpy()
    size = int(index["rid"].max()) + 1 if len(index["rid"]) else 0
    window_of = np.zeros(size, dtype=np.int64)
    window_of[index["rid"]] = index["window_index"]
    tokens_known = np.zeros(size, dtype=bool)
    tokens_known[index["rid"]] = index["tokens_known"]
    requests = Requests()
    with tempfile.TemporaryDirectory(prefix="specsweep-itl-") as folder:
        chunk_pool, token_pool = Pool(Path(folder) / "chunk"), Pool(Path(folder) / "token")
        chunk_pool.folder.mkdir()
        token_pool.folder.mkdir()
        for rid, t, k in blocks(con):
            gaps, gap_rid, k_next = _gaps(rid, t, k)
            requests.add(gap_rid, gaps, gaps / np.where(k_next > 0, k_next, 1))
            chunk_pool.add(window_of[gap_rid], gaps * 1000)
            usable = tokens_known[gap_rid] & (k_next > 0)
            token_pool.add(window_of[gap_rid[usable]], gaps[usable] / k_next[usable] * 1000)
        windows = con.execute(WINDOWS_SQL).df()
        stats = [window_stats(chunk_pool.take(w), token_pool.take(w))
                 for w in windows["window_index"]]
    _write(con, requests.frame(), windows, stats)


def blocks(con: duckdb.DuckDBPyConnection):
    """(rid, t, k) arrays of whole requests: a request cut by a block boundary is held back
    and joined to the next block (the scan keeps rowid order, so a request's chunks are
    consecutive)."""
    result = con.sql(CHUNKS_SQL)  # a relation streams; execute() would hold every chunk
    carry: tuple[np.ndarray, ...] | None = None
    while True:
        frame = result.fetch_df_chunk(VECTORS_PER_BLOCK)
        if frame.empty:
            break
        arrays = tuple(frame[c].to_numpy() for c in ("rid", "t", "k"))
        if carry is not None:
            arrays = tuple(np.concatenate(pair) for pair in zip(carry, arrays))
        cut = int(np.searchsorted(arrays[0], arrays[0][-1]))  # first chunk of the last request
        carry = tuple(a[cut:] for a in arrays)
        if cut:
            yield tuple(a[:cut] for a in arrays)
    if carry is not None and len(carry[0]):
        yield carry


def _gaps(rid: np.ndarray, t: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, ...]:
    """Gaps between consecutive chunks of the same request, that request, and the tokens of
    the later chunk."""
    if np.any(rid[1:] < rid[:-1]):
        raise RuntimeError("chunk rows did not arrive in rowid order")
    same = rid[1:] == rid[:-1]
    return (t[1:] - t[:-1])[same], rid[1:][same], k[1:][same]


def window_stats(itl_ms: np.ndarray, itl_token_ms: np.ndarray) -> dict[str, float | int | None]:
    """n, mean, median, std, p90, p95, p99 of both pooled lists (None over no values)."""
    out: dict[str, float | int | None] = {}
    for name, values in (("itl", itl_ms), ("itl_token", itl_token_ms)):
        out[f"n_{name}"] = len(values)
        if len(values):
            q = np.quantile(values, QUANTILES)
            figures = (values.mean(), q[0], values.std(), q[1], q[2], q[3])
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
