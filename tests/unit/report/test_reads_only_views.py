"""`report` reads only the analysis layer (analyze/VIEWS.md), never the raw tables collect
writes: statically (every table its SQL names is one of analyze's objects) and on files that
hold nothing but analysis objects (the raw tables dropped, or the real views of a real
analyze run copied out as tables)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import duckdb
import pytest

from specsweep.analyze import build as analyze_build
from specsweep.analyze import compare as analyze_compare
from specsweep.report import data as report_data
from specsweep.report.data import ReportError, load
from specsweep.schema.store import DDL
from tests.support.fixtures.report import (
    _meta,
    altered_copy,
    gpu_samples,
    raw_requests,
)

ROOT = Path(__file__).resolve().parents[3]
SQL_NAME = re.compile(r"\b(?:FROM|JOIN)\s+([A-Za-z_][\w.]*)")  # the SQL here is upper case
CATALOG = {"information_schema.tables", "duckdb_functions"}  # what objects exist, not data
STORED = set(analyze_compare.OBJECTS)  # written by `specsweep compare A B`
PARAMS = {"analysis_params"}  # the baseline analyze bound, written by analyze.build.run
RAW = re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", DDL.read_text())
FIGURES = dict.fromkeys(
    ["speedup", "accept", "decode_tps", "ttft", "throughput", "concurrency", "agentic"]
)


def _report_strings() -> list[tuple[str, str]]:
    """(file, text) of every string constant in report/**/*.py, f-string parts included."""
    found = []
    for path in sorted((ROOT / "report").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.append((path.name, node.value))
    return found


def _names_passed_to_by_campaign() -> set[str]:
    """Object names report.data formats into `SELECT ... FROM {name}`."""
    tree = ast.parse((ROOT / "report" / "data.py").read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("_by_campaign", "opt"):
            names |= {
                a.value
                for a in node.args
                if isinstance(a, ast.Constant) and isinstance(a.value, str) and "," not in a.value
            }
    return names


def test_every_table_the_reports_sql_names_is_an_analysis_object() -> None:
    named = {
        (file, m.group(1)) for file, text in _report_strings() for m in SQL_NAME.finditer(text)
    }
    assert ("data.py", "campaign_summary") in named  # the pattern finds what it should
    stray = {
        (f, n)
        for f, n in named
        if n not in analyze_build.OBJECTS and n not in CATALOG | STORED | PARAMS
    }
    assert "TABLE analysis_params" in analyze_build.PARAMS_DDL
    assert not stray, f"report SQL reads objects analyze does not build: {sorted(stray)}"


def test_every_object_report_loads_is_built_by_analyze() -> None:
    formatted = _names_passed_to_by_campaign()
    assert {"environment_summary", "service_summary", "speedup"} <= formatted
    for name in (*report_data.REQUIRED, *report_data.OPTIONAL, *formatted):
        assert name in analyze_build.OBJECTS, name
    assert not set(RAW) & set(analyze_build.OBJECTS)


def _drop_raw_tables(path: Path) -> None:
    with duckdb.connect(str(path)) as con:
        for table in RAW:
            con.execute(f"DROP TABLE IF EXISTS {table}")  # names from the DDL


def test_a_file_analysed_before_the_summaries_asks_for_analyze(
    report_db: Path, tmp_path: Path
) -> None:
    path = altered_copy(report_db, tmp_path / "old.duckdb", "DROP TABLE service_summary")
    with pytest.raises(ReportError, match=r"lacks service_summary; run `specsweep analyze`"):
        load(path)


@pytest.fixture(scope="module")
def analysed_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report fixture's raw rows through the real analyze, then every analysis object
    copied as a table into a file that has nothing else."""
    folder = tmp_path_factory.mktemp("real")
    raw, only = folder / "raw.duckdb", folder / "objects.duckdb"
    with duckdb.connect(str(raw)) as con:
        con.execute(DDL.read_text())
        _meta(con)
        req = raw_requests(agentic=True)
        con.register("req_df", req)
        con.execute("INSERT INTO requests BY NAME SELECT * FROM req_df")
        con.register("gpu_df", gpu_samples(req[~req["is_warmup"]]))
        con.execute("INSERT INTO gpu_samples BY NAME SELECT * FROM gpu_df")
    analyze_build.run(raw)
    with duckdb.connect(str(raw), read_only=True) as src, duckdb.connect(str(only)) as con:
        for name in analyze_build.OBJECTS:  # names are analyze's constants
            con.register("frame", src.table(name).df())
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM frame")
            con.unregister("frame")
    return only
