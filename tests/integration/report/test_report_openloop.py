"""The report's open-loop part (report/openloop/) on
hand-built analysis tables.

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/report/test_report_openloop.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

from specsweep.report.build import render_tex, run
from specsweep.report.context import build_context
from specsweep.report.data import load
from specsweep.report.figures import make_figures
from specsweep.report.openloop import section as openloop
from tests.support.fixtures.report import needs_latex
from tests.unit.report.test_report_openloop import (  # noqa: F401
    NO_FIGS,
    RAG,
    RAG_TEX,
    _flat,
    _raw_open_loop,
    open_db,
    open_tables,
    with_tables,
)


def test_no_slo_leaves_out_goodput(report_db: Path, tmp_path: Path) -> None:
    db = with_tables(report_db, tmp_path / "noslo.duckdb", open_tables(slo=False))
    data = load(db)
    figs = make_figures(data, tmp_path / "figs", workers=1)
    assert not [k for k in figs if k.startswith("openloop-goodput")]
    section = openloop.section(data, figs)
    assert section["slo"] is None and "max rate under SLO" not in section["table"]
    assert all("SLO" not in line for line in section["findings"])
    assert "The plan gave no SLO" in render_tex(build_context(data, figs))


def test_figures_are_drawn_per_setting_with_type3_fonts(open_db: Path, tmp_path: Path) -> None:
    figs = make_figures(load(open_db), tmp_path / "figs", workers=2)
    keys = sorted(k for k in figs if k.startswith("openloop"))
    assert keys == [
        "openloop-goodput:0",
        "openloop-goodput:1",
        "openloop-lag:0",
        "openloop-latency:0",
        "openloop-latency:1",
        "openloop-speedup:0",
        "openloop-speedup:1",
    ]
    for key in keys:
        body = figs[key].read_bytes()
        assert body.startswith(b"%PDF") and b"/Type3" in body, key


def test_a_file_with_empty_open_loop_tables_renders_as_without(
    report_db: Path, tmp_path: Path
) -> None:
    empty = with_tables(report_db, tmp_path / "empty.duckdb", open_tables(), empty=True)
    before = render_tex(build_context(load(report_db), NO_FIGS))
    after = render_tex(build_context(load(empty), NO_FIGS))
    assert after == before and "Open-loop" not in after and "open loop" not in after.lower()
    assert not [k for k in make_figures(load(empty), tmp_path / "f", 1) if "openloop" in k]


@needs_latex
def test_the_report_renders_the_open_loop_section(open_db: Path, tmp_path: Path) -> None:
    pdf = run(open_db, tmp_path / "r.pdf")
    tex = pdf.with_suffix(".tex").read_text(encoding="utf-8")
    text = _flat(
        subprocess.run(
            ["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True
        ).stdout
    )
    assert "Open-loop load" in text and "Rate limits" in text
    assert (
        "Open loop on rag_2k #1 & 50%: dflash stops paying (significantly slower) at 8 "
        "req/s; autoregressive meets the SLO up to 2 req/s"
    ) in text
    assert RAG not in tex and f"\\caption{{{RAG_TEX}: TTFT and TPOT" in tex
    for name in (
        "openloop-latency-1.pdf",
        "openloop-goodput-1.pdf",
        "openloop-speedup-1.pdf",
        "openloop-lag-0.pdf",
    ):
        assert f"{{{name}}}" in tex
    assert "TTFT ≤ 500 ms, TPOT ≤ 50 ms; attainment target 99%" in text
    assert "fell behind their schedule" in text and "reset failed before" in text


def test_the_section_reads_what_analyze_builds(tmp_path: Path) -> None:
    """Raw open-loop rows through the real analyze: the section's sentence and figures."""
    from specsweep.analyze import build as analyze_build

    path = _raw_open_loop(tmp_path / "raw.duckdb")
    analyze_build.run(path)
    data = load(path)
    figs = make_figures(data, tmp_path / "figs", workers=1)
    section = openloop.section(data, figs)
    assert section["findings"] == [
        "Open loop on chat \\& co\\_op: dflash is faster from 1 req/s and significantly slower "
        "at no rate up to 4 req/s; autoregressive meets the SLO up to 2 req/s; dflash meets "
        "the SLO up to 4 req/s (every rate measured); autoregressive saturates at 4 req/s."
    ]
    assert figs["openloop-goodput:0"] and figs["openloop-speedup:0"] and figs["openloop-lag:0"]
    assert "No window fell behind its schedule" in _flat(render_tex(build_context(data, figs)))
