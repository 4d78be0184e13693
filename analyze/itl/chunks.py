"""The chunk scan of analyze.itl: chunk lists fetched a rowid range at a time, reduced to
gaps per request with numpy, and the gaps pooled per window in spill files for the windows'
exact statistics (the package's docstring says what is computed)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

SPILL_BYTES = 64 * 2**20  # pooled gaps held in memory before they go to spill files
BLOCK_CHUNKS = 2_000_000  # chunks fetched at once (20 bytes each as numpy arrays)
# DuckDB memory_limit of the scan's read-only connections. The scan reads each block of the
# file once, so what DuckDB keeps of them is no use: at 256MB a worker held 560-590 MB, at 64MB
# 380 MB, in the same time (5 s for 122M chunks on one thread; 2026-12-06). A fetched block
# is not held to the limit (8M chunks came back under 16MB).
WORKER_MEMORY = "64MB"
QUANTILES = (0.5, 0.9, 0.95, 0.99)
STATS = ("mean", "median", "std", "p90", "p95", "p99")

# Straight from `requests` (the view's anti-join would cost more than the rest of the scan):
# rows outside measured_requests are dropped in numpy. k = -1: chunk_tokens is missing or
# does not have one entry per chunk, so the request's chunks count 1 token each and its gaps
# stay out of the pooled per-token list. Replies of one chunk come too: their n_chunks is
# counted here, so that nothing else reads a chunk list (a list's length costs DuckDB a read
# of the whole list: 4 s of 7 in request_metrics at 1M requests).
CHUNKS_SQL = """
SELECT rowid AS rid, unnest(chunk_times_s) AS t,
       coalesce(unnest(CASE WHEN len(chunk_tokens) = len(chunk_times_s) THEN chunk_tokens END),
                -1)::INTEGER AS k
FROM requests
WHERE rowid >= ? AND rowid < ? AND ok
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
    on_disk: bool = False  # spilled at least once

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
        self.buffers, self.held, self.on_disk = {}, 0, True

    def held_values(self, w: int) -> np.ndarray:
        """Window w's gaps still in memory, in the order they came (what `pooled` would read
        back from this pool's file had it spilled)."""
        parts = self.buffers.get(w, [])
        return np.concatenate(parts) if parts else np.empty(0)


def spilled(folder: Path, windows: list[int]) -> list[tuple[list[Path], list[Path]]]:
    """Each window's spill files (all processes), chunk and token, each in name order, from
    one listing of the folder. A glob per window lists the whole folder each time: with
    2,520 windows (21 campaigns) that was 27 s of a 40 s rebuild (2026-12-07)."""
    found: dict[str, list[Path]] = {}
    for path in sorted(folder.iterdir()):
        found.setdefault(path.stem.rsplit("-", 1)[0], []).append(path)  # kind-window-tag
    return [(found.get(f"chunk-{w}", []), found.get(f"token-{w}", [])) for w in windows]


def pooled(files: list[Path]) -> np.ndarray:
    """Every gap of one window and kind, from its spill files."""
    parts = [np.fromfile(f) for f in files]
    return np.concatenate(parts) if parts else np.empty(0)


@dataclass
class Block:
    """One block's chunks reduced to gaps: g holds every gap of every request in request
    order, per_token each gap divided by its later chunk's tokens (1 where unknown), and
    request i's gaps are g[ends[i-1]:ends[i]] (none for a reply of one chunk)."""

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
        """b's requests: n_chunks of each, and the gap figures of those with a gap (NaN for a
        reply of one chunk, which DuckDB reads from a pandas frame as NULL)."""
        counts = np.diff(b.ends, prepend=0)
        gapped = counts > 0
        starts = (b.ends - counts)[gapped]  # strictly increasing: reduceat's slices
        figures = {name: np.full(len(counts), np.nan) for name in FIGURES}
        if len(starts):
            figures["itl_chunk_mean_s"][gapped] = np.add.reduceat(b.g, starts) / counts[gapped]
            figures["itl_chunk_max_s"][gapped] = np.maximum.reduceat(b.g, starts)
            figures["itl_token_mean_s"][gapped] = (
                np.add.reduceat(b.per_token, starts) / counts[gapped]
            )
        self.parts.append(pd.DataFrame({"rid": b.rid, "n_chunks": counts + 1, **figures}))

    def frame(self) -> pd.DataFrame:
        return (
            pd.concat(self.parts, ignore_index=True)
            if self.parts
            else pd.DataFrame(columns=["rid", "n_chunks", *FIGURES])
        )


FIGURES = ("itl_chunk_mean_s", "itl_chunk_max_s", "itl_token_mean_s")  # per request


def run_starts(values: np.ndarray) -> np.ndarray:
    """Index of the first element of each run of equal values."""
    if not len(values):
        return np.empty(0, dtype=np.int64)
    return np.concatenate(([0], np.flatnonzero(values[1:] != values[:-1]) + 1))


def pooled_stats(chunk: list[Path], token: list[Path]) -> dict[str, float | int | None]:
    """window_stats of one window's spill files (`spilled`)."""
    return window_stats(pooled(chunk), pooled(token))


def scan_file(
    db_path: str,
    first: int,
    window_of: np.ndarray,
    ranges: list[tuple[int, int]],
    folder: Path,
    tag: str,
) -> pd.DataFrame:
    """A worker process's share of the scan; every gap goes to the spill files, which the
    parent pools per window."""
    with duckdb.connect(db_path, read_only=True) as con:
        con.execute(f"SET memory_limit = '{WORKER_MEMORY}'")
        con.execute("SET threads = 1")  # the other cores run the other workers
        frame, chunk_pool, token_pool = scan_on(con, first, window_of, ranges, folder, tag)
    chunk_pool.spill()
    token_pool.spill()
    return frame


def in_memory_stats(
    chunk_pool: Pool, token_pool: Pool, windows: list[int]
) -> list[dict[str, float | int | None]]:
    """The windows' figures of a scan in this process: from memory when neither pool
    spilled (a small campaign: no file written and read back), else from the spill files."""
    if chunk_pool.on_disk or token_pool.on_disk:
        chunk_pool.spill()
        token_pool.spill()
        return [pooled_stats(*files) for files in spilled(chunk_pool.folder, windows)]
    return [window_stats(chunk_pool.held_values(w), token_pool.held_values(w)) for w in windows]


def scan_on(
    con: duckdb.DuckDBPyConnection,
    first: int,
    window_of: np.ndarray,
    ranges: list[tuple[int, int]],
    folder: Path,
    tag: str,
) -> tuple[pd.DataFrame, Pool, Pool]:
    """Per-request figures of the given rowid ranges (within first .. first +
    len(window_of) - 1, window_of[rowid - first] the window of each), and the pools of their
    gaps (spilled to files past SPILL_BYTES; the caller spills or reads what is left)."""
    requests = Requests()
    chunk_pool, token_pool = Pool(folder, "chunk", tag), Pool(folder, "token", tag)
    for rid, t, k in blocks(con, ranges):
        b = Block.of(rid, t, k)
        window = window_of[b.rid - first]
        if window.min(initial=0) < 0:  # warm-up requests, incomplete units
            b = b.keep(window >= 0)
            window = window[window >= 0]
            if not len(window):
                continue
        requests.add(b)
        add_runs(chunk_pool, window, b.ends, b.g)
        if b.token_ok is None:  # the common case: every chunk's tokens are known
            add_runs(token_pool, window, b.ends, b.per_token)
        else:  # request i's kept gaps end where its gaps end, counted in kept gaps
            kept = np.concatenate(([0], np.cumsum(b.token_ok)))
            add_runs(token_pool, window, kept[b.ends], b.per_token[b.token_ok])
    return requests.frame(), chunk_pool, token_pool


def add_runs(pool: Pool, window: np.ndarray, ends: np.ndarray, values: np.ndarray) -> None:
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


def concat(parts: list[pd.DataFrame]) -> pd.DataFrame:
    return pd.concat(parts, ignore_index=True) if parts else Requests().frame()


def window_stats(itl_s: np.ndarray, itl_token_s: np.ndarray) -> dict[str, float | int | None]:
    """n, mean, median, std, p90, p95, p99 in milliseconds of both pooled lists (seconds; None
    over no values). Scaling the figures, not the values, saves a pass over every gap; it
    changes them in the 16th digit at most."""
    out: dict[str, float | int | None] = {}
    for name, values in (("itl", itl_s), ("itl_token", itl_token_s)):
        out[f"n_{name}"] = len(values)
        if len(values):
            q = quantiles(values) * 1000
            figures = (values.mean() * 1000, q[0], values.std() * 1000, q[1], q[2], q[3])
        else:
            figures = (None,) * len(STATS)
        out |= {f"{name}_ms_{s}": None if v is None else float(v) for s, v in zip(STATS, figures)}
    return out


def quantiles(values: np.ndarray) -> np.ndarray:
    """np.quantile(values, QUANTILES) (its default, linear method), bit for bit, in a sixth of
    the time. NumPy selects several ranks at once far more slowly than one (20 ns a value for
    the eight ranks of QUANTILES against 1.7 ns for one, on 2M gaps; x86-64, NumPy 2), and the
    windows' quantiles were a third of the chunk pass. So each rank is selected alone, in the
    part above the rank before. values (not empty) are left as they are."""
    n = len(values)
    if np.isnan(values).any():  # NumPy's own rule for a NaN
        return np.quantile(values, QUANTILES)
    virtual = (n - 1) * np.asarray(QUANTILES)
    top = virtual >= n - 1
    below = np.where(top, -1, np.floor(virtual))  # NumPy's index -1: the largest value
    ranks = below.astype(np.intp) % n, np.where(top, -1, below + 1).astype(np.intp) % n
    at = ranked(values, sorted({int(r) for part in ranks for r in part}))
    a, b = (np.array([at[int(r)] for r in part]) for part in ranks)
    gamma = virtual - below
    diff = b - a  # NumPy's _lerp, from each end as it does
    return np.where(gamma >= 0.5, b - diff * (1 - gamma), a + diff * gamma)


def ranked(values: np.ndarray, ranks: list[int]) -> dict[int, float]:
    """The value of each rank (0: the smallest) of values; ranks ascending. One selection a
    rank, each in what lies above the rank before (work[k:] holds exactly ranks k and up)."""
    work, low, out = values.copy(), 0, {}
    for k in ranks:
        if out and k == low + 1:  # the next rank: the smallest of what lies above
            j = k + int(np.argmin(work[k:]))
            work[k], work[j] = work[j], work[k]
        else:
            work[low:].partition(k - low)
        out[k], low = float(work[k]), k
    return out
