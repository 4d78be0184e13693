"""analyze/itl/ (the one pass over every chunk list) against a plain per-request numpy
reference on random hand-built rows, with blocks, spills and window interleaving forced small
so that every path runs: a request cut by a block boundary, gaps spilled to files and read
back, windows sorted apart."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest

from specsweep.analyze import build, itl
from specsweep.schema import metrics
from tests.support.analyze_rows import fetch, req

WINDOWS = [("autoregressive", "chat", 1), ("autoregressive", "code", 4), ("ngram", "chat", 1)]


def random_rows(seed: int = 3, n: int = 300) -> list[dict]:
    """Requests of three windows, interleaved one by one, with uneven chunk lists: some
    without chunk_tokens or with one entry too few, some with a 0-token chunk, some of one
    chunk, some failed, some warm-up requests (never measured)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        method, workload, concurrency = WINDOWS[i % len(WINDOWS)]
        chunks = int(rng.integers(1, 40))
        times = np.cumsum(rng.lognormal(-3, 0.7, chunks)).round(6).tolist()
        tokens = rng.integers(1, 5, chunks).tolist()
        if i % 7 == 0:
            tokens[-1] = 0
        if i % 17 == 2:  # one entry short: counts as unknown (1 token a chunk, not pooled)
            tokens = tokens[:-1]
        rows.append(req(
            request_id=f"q{i:03d}", method=method, workload=workload, concurrency=concurrency,
            window_id=f"{method}/{workload}/{concurrency}", config_id=f"cfg-{method}",
            service_id=f"svc-{method}", prompt_id=f"p{i % 5}", chunk_times_s=times,
            chunk_tokens=None if i % 5 == 0 else tokens, ttft_s=times[0],
            e2e_s=times[-1] + 0.01, ok=i % 11 != 0, is_warmup=i % 13 == 1,
        ))  # fmt: skip
    return rows


def reference(rows: list[dict]) -> tuple[dict, dict]:
    """Per request (mean, max, token mean) and per window pooled (itl_ms, itl_token_ms)."""
    per_request, pooled = {}, {}
    for r in rows:
        times = np.asarray(r["chunk_times_s"])
        if not r["ok"] or r["is_warmup"] or len(times) < 2:
            continue
        gaps = np.diff(times)
        known = r["chunk_tokens"] is not None and len(r["chunk_tokens"]) == len(times)
        tokens = np.asarray(r["chunk_tokens"] if known else [1] * len(times))[1:]
        per_request[r["request_id"]] = (
            gaps.mean(),
            gaps.max(),
            (gaps / np.where(tokens > 0, tokens, 1)).mean(),
        )
        chunk_ms, token_ms = pooled.setdefault((r["method"], r["workload"]), ([], []))
        chunk_ms.extend(gaps * 1000)
        if known:
            token_ms.extend(gaps[tokens > 0] / tokens[tokens > 0] * 1000)
    return per_request, pooled


def test_a_window_without_gaps_has_null_itl(analyzed) -> None:
    # one-chunk replies have no gap: n_itl 0 and NULL statistics, as before
    path = analyzed([req(chunk_times_s=[0.5], chunk_tokens=[9])])
    (w,) = fetch(path, "SELECT * FROM latency_conventions")
    assert (w["n_itl"], w["itl_ms_median"], w["n_itl_token"], w["itl_token_ms_p99"]) == (
        0,
        None,
        0,
        None,
    )


def test_worker_processes_find_what_one_process_finds(tmp_path, monkeypatch) -> None:
    # the ranges are cut in the parent (small here, so both workers get several); spawned
    # workers spill to the same folder, the parent pools their files per window
    from tests.support.analyze_rows import write_db

    monkeypatch.setattr(itl.scan, "BLOCK_CHUNKS", 500)
    path = tmp_path / "w.duckdb"
    write_db(path, random_rows(seed=5))
    with duckdb.connect(str(path)) as con:  # the build installs the macros before it scans
        metrics.install(con)
    measured = build.read_sql(build.MEASURED)
    alone = itl.compute(path, measured, workers=1)
    shared = itl.compute(path, measured, workers=2)
    by_rid = [
        f.sort_values("rid").reset_index(drop=True) for f in (alone.per_request, shared.per_request)
    ]
    assert len(by_rid[0]) > 200
    assert by_rid[0].equals(by_rid[1])
    assert alone.windows.drop(columns=[c for c in alone.windows if "_ms_" in c]).equals(
        shared.windows.drop(columns=[c for c in shared.windows if "_ms_" in c])
    )
    for c in (c for c in alone.windows if "_ms_" in c):  # pooled in another order: ulps
        assert list(shared.windows[c]) == pytest.approx(list(alone.windows[c]), rel=1e-12)


def test_workers_scan_a_later_campaign_from_its_own_rows(tmp_path, monkeypatch) -> None:
    # the window of each rowid is held from the group's first rowid on, not from 0: a
    # campaign whose rows start at rowid 300 of 600, in groups of one campaign each
    from tests.support.analyze_rows import write_db

    monkeypatch.setattr(itl.scan, "BLOCK_CHUNKS", 500)
    monkeypatch.setattr(itl.scan, "GROUP_CHUNKS", 1)
    rows = random_rows(seed=5) + random_rows(seed=6)
    for r in rows[300:]:
        r["campaign_id"], r["request_id"] = "c2", "c2-" + r["request_id"]
    path = tmp_path / "w.duckdb"
    write_db(path, rows)
    with duckdb.connect(str(path)) as con:
        metrics.install(con)
    measured = build.read_sql(build.MEASURED)
    every = itl.compute(path, measured, workers=1).per_request.set_index("rid").sort_index()
    later = itl.compute(path, measured, workers=2, campaigns=["c2"]).per_request
    assert len(later) > 200 and later["rid"].min() >= 300
    assert later.set_index("rid").sort_index().equals(every.loc[every.index >= 300])


@pytest.mark.parametrize("n", [1, 2, 3, 5, 100, 101, 1001, 20000])
def test_quantiles_equal_numpys_bit_for_bit(n: int) -> None:
    # each rank selected alone must give np.quantile's linear figures exactly: lognormal
    # gaps, ties (whole numbers), and an infinite value (NumPy's lerp from each end)
    rng = np.random.default_rng(n)
    tied = rng.integers(0, 4, n).astype(float)
    endless = rng.lognormal(-3, 0.7, n)
    endless[rng.integers(0, n)] = np.inf
    for values in (rng.lognormal(-3, 0.7, n), tied, endless):
        kept = values.copy()
        with np.errstate(invalid="ignore"):
            want, got = np.quantile(values, itl.chunks.QUANTILES), itl.chunks.quantiles(values)
        assert np.array_equal(got, want, equal_nan=True), (got, want)
        assert np.array_equal(values, kept)  # left as they are


def test_spilled_finds_each_windows_files_and_only_its_own(tmp_path) -> None:
    # windows 1 and 11 share a prefix; each list keeps the files' name order (the order the
    # gaps are pooled in), and a window with no file gets empty lists
    for name in ("chunk-1-1", "chunk-1-0", "token-1-0", "chunk-11-0", "token-11-10", "token-2-0"):
        (tmp_path / f"{name}.f64").touch()
    windows = [1, 11, 2, 3]
    found = itl.chunks.spilled(tmp_path, windows)
    got = {w: [[f.stem for f in files] for files in pair] for w, pair in zip(windows, found)}
    assert got == {
        1: [["chunk-1-0", "chunk-1-1"], ["token-1-0"]],
        11: [["chunk-11-0"], ["token-11-10"]],
        2: [[], ["token-2-0"]],
        3: [[], []],
    }


def test_renumbered_follows_each_request_to_its_row_in_the_copy() -> None:
    # a copy need not keep the file's order (1M requests copied through DuckDB's parallel
    # join did not): rows 10, 12, 15 of the file became rows 2, 0, 1 of the copy
    import pandas as pd

    frame = pd.DataFrame({"rid": [15, 10], "n_chunks": [3, 4]})
    found = itl.Latencies(frame, pd.DataFrame())
    moved = (np.array([10, 12, 15]), np.array([2, 0, 1]))
    assert itl.renumbered(found, moved).per_request.to_dict("list") == {
        "rid": [1, 2],
        "n_chunks": [3, 4],
    }
    for stray in (11, 16):  # a request the copy does not hold
        with pytest.raises(RuntimeError, match="does not hold"):
            itl.renumbered(itl.Latencies(pd.DataFrame({"rid": [stray]}), pd.DataFrame()), moved)
