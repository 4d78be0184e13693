"""request_distribution (analyze/sql/request_distribution.sql) on hand-built rows: its
quartiles and whiskers equal numpy's percentiles and matplotlib's cbook.boxplot_stats (what
the report's box plots used to compute from every request) on the same values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from matplotlib import cbook

from specsweep.analyze import build
from tests.support.analyze_rows import decode_req, fetch, req, write_db

# method -> (decode tok/s, ttft s) per request; outliers on both sides for "m", whiskers that
# fall back to the quartiles for "edge" (no value between the fence and the box)
SPEEDS = {
    "autoregressive": (
        [4.0, 5.0, 5.5, 6.0, 6.5, 7.0, 30.0],
        [0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5],
    ),
    "m": (
        [0.5, 9.0, 10.0, 10.5, 11.0, 12.0, 12.5, 13.0, 60.0],
        [0.01, 0.3, 0.31, 0.32, 0.33, 0.34, 0.35, 0.36, 4.0],
    ),
    "edge": ([1.0, 10.0, 11.0, 12.0], [0.0, 1.0, 2.0, 12.0]),
}


@pytest.fixture(scope="module")
def analysed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("dist") / "specsweep.duckdb"
    rows = [
        decode_req(tps, method=m, ttft_s=ttft, prompt_id=f"p{i}")
        for m, (speeds, ttfts) in SPEEDS.items()
        for i, (tps, ttft) in enumerate(zip(speeds, ttfts))
    ]
    # a failed request: no decode speed, but its ttft_s (a first token came) is a value
    rows.append(
        req(method="m", ok=False, ttft_s=0.37, e2e_s=None, output_tokens=0, error_kind="http")
    )
    # a warm-up request is no value at all; another campaign has rows of its own
    rows.append(decode_req(1000.0, method="m", ttft_s=9.0, is_warmup=True))
    rows.append(decode_req(8.0, campaign_id="c2", ttft_s=0.6))
    write_db(path, rows)
    build.run(path, baseline="autoregressive")
    return path


def _values(path: Path, campaign: str, method: str, metric: str) -> np.ndarray:
    rows = fetch(
        path,
        f"SELECT {metric} AS v FROM request_metrics "  # metric: a constant
        "WHERE campaign_id = ? AND method = ? AND v IS NOT NULL",
        [campaign, method],
    )
    return np.array([r["v"] for r in rows], float)


def _row(path: Path, campaign: str, method: str, metric: str) -> dict:
    rows = fetch(
        path,
        "SELECT * FROM request_distribution WHERE campaign_id = ? AND method = ? AND metric = ?",
        [campaign, method, metric],
    )
    assert len(rows) == 1, rows
    return rows[0]


@pytest.mark.parametrize("method", list(SPEEDS))
@pytest.mark.parametrize("metric", ["decode_tps", "ttft_s"])
def test_box_statistics_equal_matplotlib(analysed: Path, method: str, metric: str) -> None:
    values = _values(analysed, "c1", method, metric)
    ref = cbook.boxplot_stats(values)[0]  # whis = 1.5, linear percentiles
    row = _row(analysed, "c1", method, metric)
    assert row["n"] == len(values)
    for ours, theirs in (
        ("p25", "q1"),
        ("p50", "med"),
        ("p75", "q3"),
        ("iqr", "iqr"),
        ("whislo", "whislo"),
        ("whishi", "whishi"),
        ("mean", "mean"),
    ):
        assert row[ours] == pytest.approx(ref[theirs], rel=1e-12, abs=1e-12), ours
    assert row["p50"] == pytest.approx(np.percentile(values, 50), rel=1e-12)
    assert (row["min"], row["max"]) == (values.min(), values.max())


def test_outliers_lie_beyond_the_whiskers(analysed: Path) -> None:
    tps = _row(analysed, "c1", "m", "decode_tps")
    assert tps["min"] < tps["whislo"] and tps["whishi"] < tps["max"]
    assert tps["max"] == pytest.approx(60.0)
    # "edge" decode: box 7.75..11.25, lower fence 2.5, the lowest value above it (10) lies
    # inside the box, so whislo = p25; ttft: box 0.75..4.5, upper fence 10.125, the highest
    # value below it (2) lies inside the box, so whishi = p75
    edge = _row(analysed, "c1", "edge", "decode_tps")
    assert edge["whislo"] == edge["p25"] == pytest.approx(7.75) and edge["min"] < 1.01
    ttft = _row(analysed, "c1", "edge", "ttft_s")
    assert (ttft["p25"], ttft["p75"]) == (pytest.approx(0.75), pytest.approx(4.5))
    assert ttft["whishi"] == ttft["p75"] and ttft["max"] == 12.0


def test_nulls_warmups_and_campaigns(analysed: Path) -> None:
    # the failed request counts for ttft only; the warm-up for nothing
    assert _row(analysed, "c1", "m", "decode_tps")["n"] == 9
    assert _row(analysed, "c1", "m", "ttft_s")["n"] == 10
    assert _row(analysed, "c1", "m", "ttft_s")["max"] == pytest.approx(4.0)
    other = _row(analysed, "c2", "autoregressive", "decode_tps")
    assert other["n"] == 1 and other["p25"] == other["whislo"] == other["whishi"]
    assert other["p50"] == pytest.approx(8.0)
    keys = fetch(
        analysed,
        "SELECT count(*) AS n, count(DISTINCT (campaign_id, method, metric))"
        " AS k FROM request_distribution",
    )[0]
    assert keys["n"] == keys["k"] == 2 * 3 + 2
