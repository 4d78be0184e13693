"""The report's speculation section (report/speculation/) on hand-built analysis tables.

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/report/test_report_speculation.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

from specsweep.report.build import render_tex, run
from specsweep.report.context import build_context
from specsweep.report.data import load
from specsweep.report.figures import make_figures
from specsweep.report.speculation import section
from specsweep.report.text import latex
from tests.support.fixtures.report import needs_latex
from tests.unit.report.test_report_speculation import _raw_family, detail_db, spec_db  # noqa: F401


def test_without_details_one_sentence_says_no_engine_reported_them(
    spec_db: Path, tmp_path: Path
) -> None:
    data = load(spec_db)
    figs = make_figures(data, tmp_path / "figs", workers=1)
    assert not [k for k in figs if k.startswith(("spec-positions", "spec-histogram"))]
    tex = " ".join(render_tex(build_context(data, figs)).split())
    assert (
        "No engine in this campaign reported acceptance per draft position or per verify "
        "step (llama.cpp reports only draft counts"
    ) in tex
    assert "\\section{Speculation's knobs}" in tex and "spec-sweep-0-0.pdf" in tex


def test_details_are_charted_when_an_engine_reported_them(detail_db: Path, tmp_path: Path) -> None:
    data = load(detail_db)
    figs = make_figures(data, tmp_path / "figs", workers=1)
    assert figs["spec-positions:0"] and figs["spec-histogram:0"]
    det = section.section(data, figs)["detail"]
    assert det == {
        "reported": True,
        "engines": "vllm",
        "sources": "acceptance histograms",
        "positions": ["spec-positions-0.pdf"],
        "histogram": ["spec-histogram-0.pdf"],
        "left_out": 0,
    }


@needs_latex
def test_the_report_renders_the_speculation_section(detail_db: Path, tmp_path: Path) -> None:
    pdf = run(detail_db, tmp_path / "r.pdf")
    text = " ".join(
        subprocess.run(
            ["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True
        ).stdout.split()
    )
    assert "Speculation’s knobs" in text and "Best setting per load" in text
    assert (
        "ddtree over budget: on chat & co_op, concurrency 1, acceptance keeps rising to "
        "budget 64 (6.10) while speedup peaks at budget 16 (1.90× [1.80, 2.00])"
    ) in text
    assert "ddtree on chat & co_op: budget=16 up to concurrency 1, off from 4." in text
    assert (
        "1 method window(s) are not decomposed, because some of the requests their "
        "speedup rests on carry no verify count: ngram-wide on chat & co_op"
    ) in text
    tex = pdf.with_suffix(".tex").read_text(encoding="utf-8")
    for name in (
        "spec-sweep-0-0.pdf",
        "spec-decomposition-0.pdf",
        "spec-positions-0.pdf",
        "spec-histogram-0.pdf",
    ):
        assert f"{{{name}}}" in tex


def test_the_section_reads_what_analyze_builds(tmp_path: Path) -> None:
    """Raw rows through the real analyze: the family's sweep, the decomposition and the
    best setting reach the section; llama.cpp rows carry no details, so one sentence says so."""
    from specsweep.analyze import build as analyze_build

    path = _raw_family(tmp_path / "raw.duckdb")
    analyze_build.run(path)
    data = load(path)
    figs = make_figures(data, tmp_path / "figs", workers=1)
    sec = section.section(data, figs)
    assert [s["family"] for s in sec["sweeps"]] == ["tree"] and sec["sweeps"][0]["figures"]
    # ddtree_b8 (budget 8) is the faster on chat at concurrency 1, dflash (budget 4) accepts more
    found = [latex(s) for s in section.summary(data)]
    assert found[0].startswith(
        "\\emph{tree} over budget: on chat, concurrency 1, acceptance peaks at budget 4 ("
    )
    assert "while speedup peaks at budget 8 (1.3" in found[0]
    assert sec["decomposition"]["figures"] == ["spec-decomposition-0.pdf"]
    assert sec["decomposition"]["unknown"] is None  # every request has its verify count
    assert any(
        str(s).startswith("\\emph{tree} on chat: budget=8 up to concurrency 1")
        for s in sec["deploy"]
    )
    assert sec["detail"] == {"reported": False}
    tex = " ".join(render_tex(build_context(data, figs)).split())
    assert "llama.cpp reports only draft counts" in tex
