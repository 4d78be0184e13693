"""`report` reads only the analysis layer (analyze/VIEWS.md), never the raw tables collect
writes: statically (every table its SQL names is one of analyze's objects) and on files that
hold nothing but analysis objects (the raw tables dropped, or the real views of a real
analyze run copied out as tables).

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/report/test_reads_only_views.py."""

from __future__ import annotations

import shutil
from pathlib import Path

from specsweep.report.build import render_tex
from specsweep.report.context import build_context
from specsweep.report.data import load
from specsweep.report.figures import make_figures
from tests.support.fixtures.report import (
    CAMPAIGN,
    METHODS,
    ROUNDS,
)
from tests.unit.report.test_reads_only_views import FIGURES, _drop_raw_tables, analysed_copy  # noqa: F401


def test_the_report_builds_from_analysis_objects_alone(report_db: Path, tmp_path: Path) -> None:
    path = tmp_path / "views-only.duckdb"
    shutil.copyfile(report_db, path)
    _drop_raw_tables(path)
    data = load(path)
    tex = render_tex(build_context(data, make_figures(data, tmp_path / "figures")))
    assert data.campaign["campaign_id"] == CAMPAIGN and data.n_warmup == 36  # 12 a round
    assert "36 warm-up request(s) were excluded" in tex


def test_the_report_reads_what_analyze_builds(analysed_copy: Path, tmp_path: Path) -> None:
    data = load(analysed_copy)
    tex = render_tex(build_context(data, FIGURES))
    assert data.campaign["campaign_id"] == CAMPAIGN and data.campaign["n_services"] == 9
    assert "36 warm-up request(s) were excluded" in tex
    assert "status is \\emph{interrupted}" in tex
    assert list(data.services["method"]) == [m for m in sorted(METHODS) for _ in range(ROUNDS)]
    # three rounds of starts: the start variance, the one family and the noise floor
    flat = " ".join(tex.split())
    assert not data.start_variance.empty and data.speedup["ci_low"].notna().any()
    assert "The claims on this page are one family" in flat
    tested = int(data.speedup["p_value"].notna().sum() + data.energy_ratio["p_value"].notna().sum())
    assert f"campaign\\textquoteright{{}}s m = {tested} tested claims" in flat  # ’ in the .tex
    assert "Noise floor (the grey bands of the speedup charts)" in flat
    assert "Prompt-cache settings as recorded" in " ".join(tex.split())
    # GPU telemetry at a constant 250 W through the real energy views and energy_ratio
    assert not data.window_energy.empty and not data.energy_ratio.empty
    assert (data.window_energy["mean_power_w"].round(6) == 250).all()
    assert "No GPU telemetry" not in tex and "Throttling and clocks" in tex
    assert data.campaign["description"] == "" and not data.hosts.empty
