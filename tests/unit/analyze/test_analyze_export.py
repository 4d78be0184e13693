"""`specsweep export`: every raw table and analysis object of the golden default
campaign written to Parquet and to CSV, and read back equal to the file's own tables (CSV
through columns.json's types: lists, timestamps, booleans and NULLs come back as they were)."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from specsweep.analyze import build, export
from tests.unit.analyze.test_analyze_golden import golden_db


@pytest.fixture(scope="module")
def analyzed_golden(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = golden_db(tmp_path_factory.mktemp("export") / "golden.duckdb")
    build.run(path)
    return path


def test_the_json_summary_holds_every_window_with_its_speedup(
    analyzed_golden: Path, tmp_path: Path
) -> None:
    (path,) = export.run(analyzed_golden, tmp_path, "json")
    document = json.loads(path.read_text())  # strict JSON: NaN was written as null
    assert document["summary_version"] == 1 and document["generator"] == "specsweep"
    (campaign,) = document["campaigns"]
    with duckdb.connect(str(analyzed_golden), read_only=True) as con:
        n_windows = con.execute("SELECT count(*) FROM config_summary").fetchone()[0]
        speedups = {
            row[:6]: row[6:]
            for row in con.execute(
                "SELECT engine, tp, method, workload, max_tokens, concurrency, speedup, ci_low, "
                "ci_high, significant FROM speedup"
            ).fetchall()
        }
        baseline = con.execute("SELECT baseline FROM campaigns").fetchone()[0]
    windows = campaign["windows"]
    assert campaign["baseline"] == baseline and len(windows) == n_windows == 30
    for w in windows:
        key = tuple(
            w[k] for k in ("engine", "tp", "method", "workload", "max_tokens", "concurrency")
        )
        if w["method"] == baseline:
            assert w["speedup"] is None and w["metrics"]["accept_length_tw"] == 1.0
        else:
            s = w["speedup"]
            assert (s["value"], s["ci_low"], s["ci_high"], s["significant"]) == speedups[key]
    assert sum(w["speedup"] is not None for w in windows) == len(speedups) == 22
