"""`specsweep import`: the committed vLLM and SGLang result files (tests/data/README.md)
land in the raw tables (and nothing else: views are analyze's), and once `specsweep analyze`
has run, the latency_conventions view reproduces the numbers the tools printed, to the printed
digit (the import_check view sets them side by side); broken files fail naming file, line and
key, writing nothing.

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/collect/test_import.py."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from specsweep.analyze.__main__ import main as analyze_main
from specsweep.collect.__main__ import app
from tests.unit.collect.test_import import VLLM, compared  # noqa: F401


def test_import_writes_raw_rows_only_and_analyze_compares(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "r.duckdb"
    result = CliRunner().invoke(app, ["import", str(VLLM), "--db", str(db), "--tp", "8"])
    assert result.exit_code == 0, result.output
    assert f"next: `specsweep analyze --db {db}`" in result.output
    with duckdb.connect(str(db), read_only=True) as con:
        views = con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()
    assert views == []  # the views are analyze's to build
    assert analyze_main(["--db", str(db)]) == 0
    out = capsys.readouterr().out  # ttft, tpot, itl x mean, median, std, p99; no e2el saved
    assert (
        "analyze: import_check: 12 of 12 figures printed by 1 imported file(s) equal "
        "specsweep's to the printed digit"
    ) in out
    assert "differs" not in out
    row = compared(db, VLLM)[("ttft", "mean")]
    assert (row["file_printed"], row["specsweep_printed"]) == ("1746.93", "1746.93")
