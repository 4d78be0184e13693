"""`specsweep export`: every raw table and analysis object of the golden default
campaign written to Parquet and to CSV, and read back equal to the file's own tables (CSV
through columns.json's types: lists, timestamps, booleans and NULLs come back as they were).

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/analyze/test_analyze_export.py."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from specsweep.analyze import build, export
from specsweep.schema.contracts import CONTRACTS
from tests.unit.analyze.test_analyze_export import analyzed_golden  # noqa: F401


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_every_table_round_trips(analyzed_golden: Path, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / "out"
    files = export.run(analyzed_golden, out, fmt)
    names = {f"{p.parent.name}/{p.stem}" for p in files}
    assert {f"raw/{t}" for t in CONTRACTS} <= names
    assert {f"analysis/{o}" for o in (*build.OBJECTS, "analysis_params")} <= names
    columns = json.loads((out / "columns.json").read_text())
    with duckdb.connect(str(analyzed_golden), read_only=True) as con:
        for path in files:
            file = f"{path.parent.name}/{path.name}"
            original = con.table(path.stem)
            back = export.read_back(con, out, file)
            assert back.columns == original.columns == list(columns[file]), file
            assert back.types == original.types, file
            for a, b in ((original, back), (back, original)):  # equal as multisets of rows
                assert a.except_(b).aggregate("count(*)").fetchone() == (0,), file
            assert (
                back.aggregate("count(*)").fetchone() == original.aggregate("count(*)").fetchone()
            )
        rows = con.table("requests").aggregate("count(*)").fetchone()[0]
    assert rows > 100  # the golden campaign, lists and all


def test_the_command_line_writes_files_and_refuses_bad_input(
    analyzed_golden: Path, tmp_path: Path
) -> None:
    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "specsweep.analyze", "export", *argv],
            capture_output=True,
            text=True,
            timeout=120,
        )

    done = cli("--db", str(analyzed_golden), "--format", "csv", "--out", str(tmp_path / "o"))
    assert done.returncode == 0 and "files (csv)" in done.stdout, done.stderr
    assert (tmp_path / "o" / "raw" / "requests.csv").stat().st_size > 0
    missing = cli("--db", str(tmp_path / "none.duckdb"), "--out", str(tmp_path / "p"))
    assert missing.returncode == 2 and "no results file" in missing.stderr
    bad = cli("--db", str(analyzed_golden), "--format", "xlsx", "--out", str(tmp_path / "q"))
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_sigterm_mid_file_leaves_no_part_of_it(tmp_path: Path) -> None:
    """SIGTERM while DuckDB writes a large table: exit 143, one line, and every file in the
    folder is whole (the one being written is not there at all)."""
    db, out = tmp_path / "big.duckdb", tmp_path / "out"
    with duckdb.connect(str(db)) as con:  # export writes the contracts' tables it finds
        con.execute("CREATE TABLE services AS SELECT 's' AS service_id")
        con.execute(
            "CREATE TABLE requests AS SELECT i, random() AS a, random() AS b "
            "FROM range(8000000) t(i)"
        )
    proc = subprocess.Popen(
        [sys.executable, "-m", "specsweep.analyze", "export", "--db", str(db)]
        + ["--format", "csv", "--out", str(out)],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (out / "raw" / ".requests.csv.part").exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.005)
        proc.send_signal(signal.SIGTERM)
        err = proc.communicate(timeout=60)[1]
    finally:
        proc.kill()
    assert proc.returncode == 143, err
    assert err.strip() == f"analyze export: interrupted: each file in {out} is whole; rerun"
    assert sorted(p.name for p in (out / "raw").iterdir()) == ["services.csv"]
