"""End to end: a populated DuckDB file -> report.pdf and report.tex.

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/report/test_report_build.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from specsweep.report.build import run
from specsweep.report.data import load
from specsweep.report.tables import parse_speedup_tables
from tests.support.fixtures.report import (
    CAMPAIGN,
    METHODS,
    OLD_CAMPAIGN,
    WINDOWS,
    decode_speedup,
    needs_latex,
)
from tests.unit.report.test_report_build import ROOT, _pdf_text, _raw_decode, built  # noqa: F401


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


@needs_latex
def test_no_agentic_rows_says_so(report_db_no_agentic: Path, tmp_path: Path) -> None:
    pdf = run(report_db_no_agentic, tmp_path / "r.pdf")
    assert "This campaign has no agentic sessions" in _pdf_text(pdf)


@needs_latex
def test_campaign_without_data_still_renders(report_db: Path, tmp_path: Path) -> None:
    pdf = run(report_db, tmp_path / "old.pdf", campaign=OLD_CAMPAIGN)
    assert "No speedup could be computed" in _pdf_text(pdf)


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
