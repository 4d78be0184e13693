"""End to end: a populated DuckDB file -> report.pdf and report.tex.

The speedups printed in report.tex are checked against values recomputed here
from the raw ``requests`` table, not from the analysis tables the report read.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from specsweep.report.build import render_tex, run
from specsweep.report.context import build_context
from specsweep.report.data import ReportError, load
from specsweep.report.figures import figure_jobs
from specsweep.report.tables import parse_speedup_tables
from tests.report.conftest import (
    CAMPAIGN,
    METHODS,
    OLD_CAMPAIGN,
    WINDOWS,
    decode_speedup,
    needs_latex,
)

ROOT = Path(__file__).resolve().parents[2]


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


@needs_latex
def test_pdf_and_tex_written(built: tuple[Path, str]) -> None:
    pdf, tex = built
    assert pdf.read_bytes().startswith(b"%PDF")
    assert "% specsweep-speedup-table" in tex


@needs_latex
def test_speedup_table_matches_raw_requests(built: tuple[Path, str], report_db: Path) -> None:
    rows = parse_speedup_tables(built[1])
    methods = [m for m in METHODS if m != "autoregressive"]
    assert len(rows) == len(WINDOWS) * len(methods)
    req = _raw_decode(report_db)
    for row in rows:
        win = req[
            (req["workload"] == row["workload"])
            & (req["max_tokens"] == int(row["max_tokens"]))
            & (req["concurrency"] == int(row["concurrency"]))
        ]
        expected = decode_speedup(
            win[win["method"] == row["method"]], win[win["method"] == "autoregressive"]
        )
        assert row["speedup"] == f"{expected:.2f}", row


@needs_latex
def test_report_text_is_honest_and_literal(built: tuple[Path, str]) -> None:
    text = _pdf_text(built[0])
    assert "On code_gen the most certain gain is dflash at" in text
    assert "the largest lower bound of the simultaneous 95% interval among speedups" in text
    assert "Noise floor (the grey bands of the speedup charts): two starts of one service" in text
    assert "The claims on this page are one family" in text
    assert "m = 8 tested claims together (8 decode speedup(s), 0 energy" in text
    assert "it is not checked against acceptance" in text  # the fixture has no acceptance
    assert "Each configuration was started in 3 round(s)" in text
    assert "On summ no significant speedup" in text
    assert "\\input{/etc/passwd}" in text and "\\write18{rm -rf ~}" in text
    assert "\\end{verbatim}" in text
    assert "Agentic sessions" in text and "by turn" in text
    assert "warm-up request(s) were excluded" in text
    assert "Prompt-cache settings as recorded" in text
    assert "status is interrupted" in text


@needs_latex
def test_crossover_section_charts_and_tabulates_the_sweep(built: tuple[Path, str]) -> None:
    """The fixture's chat sweep: ddtree_b8 pays at concurrency 1 and its interval holds 1 at
    4 (undetermined: not said to stop paying); dflash pays at neither and is slower at
    neither (undetermined, not "never pays": issue 36); the single-level workloads are left
    out."""
    pdf, tex = built
    text = _pdf_text(pdf)
    assert (
        "Speculation stops paying (significantly slower than the baseline after being "
        "significantly faster at lower concurrency) in 0 of 2 swept setting(s); of the "
        "others, 1 pays at the lowest concurrency and then cannot be told from the "
        "baseline (too little data to say where it stops), 1 is significantly faster at no "
        "level and significantly slower at not every level: whether it pays is undetermined."
    ) in text
    assert "\\fitfigure{concurrency.pdf}" in tex
    assert "4 setting(s) measured at a single concurrency level are left out" in text
    rows = re.findall(r"chat&64&1&(\S+?)&1, 4&([a-z ]+)&([^&]+)&([^&]*)&([^&]*)&", tex)
    assert rows == [
        ("ddtree\\_b8", "undetermined", "not measured (\\textgreater{} 1)", "", ""),
        ("dflash", "undetermined", "-{}-", "", ""),
    ]


@needs_latex
def test_no_sweep_says_so_instead_of_a_chart(report_db_no_sweep: Path, tmp_path: Path) -> None:
    pdf = run(report_db_no_sweep, tmp_path / "r.pdf")
    text = _pdf_text(pdf)
    assert "No workload was measured at two or more concurrency levels" in text
    assert "concurrency.pdf" not in pdf.with_suffix(".tex").read_text(encoding="utf-8")


def test_database_without_crossover_view_asks_for_analyze(report_db: Path, tmp_path: Path) -> None:
    old = tmp_path / "old.duckdb"
    shutil.copyfile(report_db, old)
    with duckdb.connect(str(old)) as con:
        con.execute("DROP TABLE crossover")
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
    old = tmp_path / "old.duckdb"
    shutil.copyfile(report_db, old)
    with duckdb.connect(str(old)) as con:
        con.execute("DROP TABLE speedup_sweep")
    data = load(old)
    assert data.speedup_sweep.empty
    assert not [key for key, _ in figure_jobs(data, tmp_path) if key.startswith("concurrency")]


@needs_latex
def test_no_agentic_rows_says_so(report_db_no_agentic: Path, tmp_path: Path) -> None:
    pdf = run(report_db_no_agentic, tmp_path / "r.pdf")
    assert "This campaign has no agentic sessions" in _pdf_text(pdf)


@needs_latex
def test_campaign_without_data_still_renders(report_db: Path, tmp_path: Path) -> None:
    pdf = run(report_db, tmp_path / "old.pdf", campaign=OLD_CAMPAIGN)
    assert "No speedup could be computed" in _pdf_text(pdf)


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


@needs_latex
def test_cli(report_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "cli" / "report.pdf"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "specsweep.report",
            "--db",
            str(report_db),
            "--out",
            str(out),
            "--campaign",
            CAMPAIGN,
        ],
        cwd=ROOT,
        capture_output=True,
        check=False,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(out) and out.exists()


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


def test_figures_drawn_by_worker_processes_equal_those_drawn_in_process(
    report_db: Path, tmp_path: Path
) -> None:
    from specsweep.report.figures import make_figures

    data = load(report_db)
    serial = make_figures(data, tmp_path / "serial", workers=1)
    forked = make_figures(data, tmp_path / "forked", workers=3)
    assert list(serial) == list(forked) and serial["decode_tps"] and serial["concurrency"]
    for key, path in serial.items():
        assert (path is None) == (forked[key] is None), key
        if path is not None:  # no CreationDate: the same figure, the same bytes
            assert path.read_bytes() == forked[key].read_bytes(), key
            assert forked[key].parent == tmp_path / "forked"
