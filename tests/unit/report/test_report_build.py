"""End to end: a populated DuckDB file -> report.pdf and report.tex.

The speedups printed in report.tex are checked against values recomputed here
from the raw ``requests`` table, not from the analysis tables the report read.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from specsweep.report.build import render_tex, run
from specsweep.report.context import build_context
from specsweep.report.data import ReportError, load
from specsweep.report.figures import figure_jobs
from tests.support.fixtures.report import (
    CAMPAIGN,
    altered_copy,
)

ROOT = Path(__file__).resolve().parents[3]


def _pdf_text(pdf: Path) -> str:
    out = subprocess.run(
        ["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True
    ).stdout
    return " ".join(out.split())


def _raw_decode(db: Path) -> pd.DataFrame:
    with duckdb.connect(str(db), read_only=True) as con:
        req = con.execute(
            "SELECT * FROM requests WHERE campaign_id = ? AND NOT is_warmup "
            "AND ok AND session_id IS NULL",
            [CAMPAIGN],
        ).df()
    req["decode_tps"] = (req["output_tokens"] - 1) / (req["e2e_s"] - req["ttft_s"])
    return req


@pytest.fixture(scope="module")
def built(report_db: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    digest = hashlib.sha256(report_db.read_bytes()).hexdigest()
    pdf = run(report_db, tmp_path_factory.mktemp("out") / "reports" / "report.pdf")
    assert hashlib.sha256(report_db.read_bytes()).hexdigest() == digest, "report wrote to db"
    return pdf, pdf.with_suffix(".tex").read_text(encoding="utf-8")


def test_database_without_crossover_view_asks_for_analyze(report_db: Path, tmp_path: Path) -> None:
    old = altered_copy(report_db, tmp_path / "old.duckdb", "DROP TABLE crossover")
    data = load(old)
    assert data.crossover is None
    figures = dict.fromkeys(
        ["speedup", "accept", "decode_tps", "ttft", "throughput", "concurrency", "agentic"]
    )
    tex = render_tex(build_context(data, figures))
    assert "analysed before the crossover view existed" in tex


def test_the_concurrency_figure_draws_analyzes_sweep(report_db: Path, tmp_path: Path) -> None:
    """The figure draws speedup_sweep as analyze built it (the fixture's chat sweep at 1 and 4
    for both methods); a file analysed before speedup_sweep existed has no such figure."""
    data = load(report_db)
    assert sorted(set(zip(data.speedup_sweep["method"], data.speedup_sweep["concurrency"]))) == [
        ("ddtree_b8", 1), ("ddtree_b8", 4), ("dflash", 1), ("dflash", 4)
    ]  # fmt: skip
    assert "concurrency" in dict(figure_jobs(data, tmp_path))
    old = altered_copy(report_db, tmp_path / "old.duckdb", "DROP TABLE speedup_sweep")
    data = load(old)
    assert data.speedup_sweep.empty
    assert not [key for key, _ in figure_jobs(data, tmp_path) if key.startswith("concurrency")]


def test_latest_campaign_is_default(report_db: Path) -> None:
    assert load(report_db).campaign["campaign_id"] == CAMPAIGN


def test_unknown_campaign_and_missing_views(report_db: Path, tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="no campaign 'nope'"):
        load(report_db, "nope")
    empty = tmp_path / "raw.duckdb"
    with duckdb.connect(str(empty)) as con:
        con.execute((ROOT / "schema" / "ddl.sql").read_text())
    with pytest.raises(ReportError, match="specsweep analyze"):
        load(empty)


def test_colocated_measurements_are_counted_and_tabulated(report_db: Path, tmp_path: Path) -> None:
    """A packed campaign: the threats section counts the requests that ran beside other
    services and tabulates their windows; without any, it says none did."""
    figures = dict.fromkeys(
        ["speedup", "accept", "decode_tps", "ttft", "throughput", "concurrency", "agentic"]
    )
    alone = render_tex(build_context(load(report_db), figures))
    assert "No measured request ran beside another service" in alone
    packed = tmp_path / "packed.duckdb"
    shutil.copyfile(report_db, packed)
    with duckdb.connect(str(packed)) as con:
        con.execute(
            """CREATE TABLE colocation AS SELECT * FROM (VALUES
            (?, 'sglang', 1, 'chat', 256, 1, 'dflash', 10, 30, 2, 40.0, 36.0, 0.1, 0.1, 0.9),
            (?, 'sglang', 1, 'code', 256, 1, 'dflash', 12, 0, 0, 40.0, NULL, 0.1, NULL, NULL))
            AS t(campaign_id, engine, tp, workload, max_tokens, concurrency, method, n_alone,
                 n_colocated, neighbours_max, decode_tps_p50_alone, decode_tps_p50_colocated,
                 ttft_p50_alone, ttft_p50_colocated, colocated_over_alone)""",
            [CAMPAIGN, CAMPAIGN],
        )
    tex = render_tex(build_context(load(packed), figures))
    assert "30 of 52 measured requests ran" in " ".join(tex.split())
    assert "0.90" in tex and "beside / alone" in tex


def test_figure_workers_are_not_forked_from_the_report_process(
    report_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker's parent is the fork server, not this process (which, in this suite, holds a
    Ray client's gRPC threads: a fork of it once hung in CI)."""
    from functools import partial

    from specsweep.report import figures

    monkeypatch.setattr(
        figures,
        "figure_jobs",
        lambda data, outdir: [("speedup", partial(os.getppid)), ("accept", partial(os.getppid))],
    )
    parents = figures.make_figures(load(report_db), tmp_path, workers=2)
    assert parents["speedup"] == parents["accept"] != os.getpid()
