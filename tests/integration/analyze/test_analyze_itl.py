"""analyze/itl/ (the one pass over every chunk list) against a plain per-request numpy
reference on random hand-built rows, with blocks, spills and window interleaving forced small
so that every path runs: a request cut by a block boundary, gaps spilled to files and read
back, windows sorted apart.

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/analyze/test_analyze_itl.py."""

from __future__ import annotations

import numpy as np
import pytest

from specsweep.analyze import itl
from tests.support.analyze_rows import fetch
from tests.unit.analyze.test_analyze_itl import WINDOWS, random_rows, reference  # noqa: F401


@pytest.mark.parametrize("small", [False, True])
def test_itl_equals_a_per_request_reference(analyzed, monkeypatch, small: bool) -> None:
    if small:  # blocks of ~25 requests, a spill after every block, a group per campaign
        monkeypatch.setattr(itl.scan, "BLOCK_CHUNKS", 500)
        monkeypatch.setattr(itl.chunks, "SPILL_BYTES", 2000)
        monkeypatch.setattr(itl.scan, "GROUP_CHUNKS", 1)
    rows = random_rows()
    path = analyzed(rows)
    per_request, pooled = reference(rows)
    got = {r["request_id"]: r for r in fetch(path, "SELECT * FROM request_metrics")}
    for rid, (mean, peak, token_mean) in per_request.items():
        assert got[rid]["itl_chunk_mean_s"] == pytest.approx(mean, rel=1e-12)
        assert got[rid]["itl_chunk_max_s"] == pytest.approx(peak, rel=1e-12)
        assert got[rid]["itl_token_mean_s"] == pytest.approx(token_mean, rel=1e-12)
    measured = [r for r in rows if not r["is_warmup"]]
    assert {r["request_id"]: len(r["chunk_times_s"]) for r in measured} == {
        rid: r["n_chunks"] for rid, r in got.items()
    }  # every measured reply's chunks: ok or failed, of one chunk or more
    without = [rid for rid, r in got.items() if rid not in per_request]
    assert without and all(got[rid]["itl_chunk_mean_s"] is None for rid in without)
    windows = fetch(path, "SELECT * FROM latency_conventions")
    assert len(windows) == len(WINDOWS)
    for w in windows:
        chunk_ms, token_ms = (np.asarray(v) for v in pooled[w["method"], w["workload"]])
        for name, values in (("itl", chunk_ms), ("itl_token", token_ms)):
            assert w[f"n_{name}"] == len(values)
            q50, q90, q95, q99 = np.quantile(values, [0.5, 0.9, 0.95, 0.99])
            expected = (values.mean(), q50, values.std(), q90, q95, q99)
            for stat, value in zip(itl.STATS, expected):
                assert w[f"{name}_ms_{stat}"] == pytest.approx(value, rel=1e-12)
