"""The report's setup section (plan description on page 1, host table, one row per service,
launch commands in the appendix, the tunnel sentence) and its energy section, on the
fixture files of conftest.py; real latexmk where the PDF is read."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd
import pytest

from specsweep.report.build import render_tex, run
from specsweep.report.context import build_context
from specsweep.report.data import load
from specsweep.report.findings.energy import energy_finding
from specsweep.report.findings.validity import transport_notes
from specsweep.report.sections import energy_rows, energy_sources, telemetry_sources
from specsweep.report.text import latex
from tests.support.fixtures.report import altered_copy


def _pdf_text(pdf: Path, last_page: int | None = None) -> str:
    pages = ["-l", str(last_page)] if last_page else []
    out = subprocess.run(
        ["pdftotext", *pages, str(pdf), "-"], capture_output=True, text=True, check=True
    ).stdout
    return " ".join(out.split())


@pytest.fixture(scope="module")
def plain_pdf(report_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run(report_db, tmp_path_factory.mktemp("setup") / "report.pdf")


@pytest.fixture(scope="module")
def energy_pdf(report_db_energy: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run(report_db_energy, tmp_path_factory.mktemp("energy") / "report.pdf")


def test_energy_rows_join_the_ratio_and_leave_the_baselines_ratio_empty() -> None:
    """energy_summary rows of a baseline and a method, energy_ratio only for the method;
    a setting without usable windows (j_per_token NULL) is not a row."""
    key = {"engine": "e", "tp": 1, "workload": "w", "max_tokens": 8, "concurrency": 1}
    es = pd.DataFrame(
        [
            {**key, "method": m, "j_per_token": j}
            for m, j in (("autoregressive", 2.0), ("m", 1.0), ("x", None))
        ]
    )
    er = pd.DataFrame(
        [
            {
                **key,
                "method": "m",
                "energy_ratio": 0.5,
                "ci_low": 0.4,
                "ci_high": 0.6,
                "significant": True,
            }
        ]
    )
    rows = energy_rows(es, er)
    assert list(rows["method"]) == ["autoregressive", "m"]
    assert rows["energy_ratio"].isna().tolist() == [True, False]
    assert energy_rows(es, pd.DataFrame())["energy_ratio"].isna().all()


def test_transport_notes() -> None:
    """direct says nothing; a tunnel is named; unknown (older rows) says it was not recorded."""
    svc = pd.DataFrame(
        {
            "method": ["a", "b", "c"],
            "tp": [1, 2, 1],
            "transport": ["direct", "ssh-tunnel", "unknown"],
        }
    )
    notes = transport_notes(svc)
    assert notes[0].startswith("The receive stamps of b TP2 (ssh-tunnel) were taken after")
    assert notes[1].startswith("How c was reached was not recorded")
    assert transport_notes(svc.head(1)) == []


def test_telemetry_sources_are_the_distinct_recorded_ones() -> None:
    env = pd.DataFrame(
        {
            "key": [
                "service.a.tp1.telemetry",
                "service.b.tp1.telemetry",
                "service.c.tp2.telemetry",
                "cpu.model",
            ],
            "value": ["nvml every 0.1 s", "nvml every 0.1 s", "nvidia-smi every 0.1 s", "x"],
        }
    )
    assert telemetry_sources(env) == "nvidia-smi every 0.1 s; nvml every 0.1 s"
    assert telemetry_sources(env.tail(1)) == "" and telemetry_sources(pd.DataFrame()) == ""


def test_a_file_analysed_before_the_setup_views_still_renders(
    report_db: Path, tmp_path: Path
) -> None:
    """Without host_summary, campaign_summary.description and service_summary's own_flags
    and transport (an older analyze), the setup section says to run analyze again."""
    old = altered_copy(
        report_db,
        tmp_path / "old.duckdb",
        "DROP TABLE host_summary",
        "ALTER TABLE campaign_summary DROP COLUMN description",
        "ALTER TABLE service_summary DROP COLUMN own_flags",
        "ALTER TABLE service_summary DROP COLUMN transport",
    )
    figures = dict.fromkeys(
        ["speedup", "accept", "decode_tps", "ttft", "throughput", "concurrency", "agentic"]
    )
    tex = " ".join(render_tex(build_context(load(old), figures)).split())
    assert "analysed before the host summary existed" in tex
    assert "A hostile description" not in tex and "paramiko" not in tex


def test_the_energy_sentence_names_a_lowest_ratio_only_when_it_is_significant() -> None:
    """a: 0.60 [0.30, 1.20] (lowest point, not significant); b: 0.90 [0.85, 0.95]. The
    sentence names b; without b it says a is not significantly below 1."""
    er = pd.DataFrame(
        [
            {
                "method": "a",
                "workload": "chat",
                "energy_ratio": 0.6,
                "ci_low": 0.3,
                "ci_high": 1.2,
                "significant": False,
            },
            {
                "method": "b",
                "workload": "chat",
                "energy_ratio": 0.9,
                "ci_low": 0.85,
                "ci_high": 0.95,
                "significant": True,
            },
        ]
    )
    [both] = energy_finding(er)
    assert "1 of 2 comparisons use significantly less" in both
    assert "the lowest significant ratio is b on chat at 0.90" in both
    [alone] = energy_finding(er.iloc[:1])
    assert "0 of 1 comparisons" in alone
    assert latex(alone).endswith(  # as the PDF prints it
        "the lowest point estimate, a on chat at 0.60$\\times$ (95\\% CI "
        "0.30\\textendash{}1.20), is not significantly below 1."
    )


def test_energy_sources_count_the_windows_of_each_source() -> None:
    """Three windows by the counter, one by the trapezoid, none mixed; a file analysed before
    window_energy.energy_source existed says nothing."""
    we = pd.DataFrame({"energy_source": ["counter", "power_trapezoid", "counter", "counter"]})
    assert energy_sources(we) == (
        "3 by the NVML energy counter, 1 by the trapezoid of power samples"
    )
    assert energy_sources(we.drop(columns="energy_source")) == ""


def test_the_energy_section_names_its_sources(report_db_energy: Path, tmp_path: Path) -> None:
    """conftest's 12 windows, given energy_source 'counter' but dflash's code_gen window
    'power_trapezoid': the section says so in one sentence."""
    db = altered_copy(
        report_db_energy,
        tmp_path / "sources.duckdb",
        "ALTER TABLE window_energy ADD COLUMN energy_source VARCHAR",
        (
            "UPDATE window_energy SET energy_source = CASE WHEN method = 'dflash' "
            "AND workload = 'code_gen' THEN 'power_trapezoid' ELSE 'counter' END"
        ),
    )
    figures = dict.fromkeys(
        [
            "speedup",
            "accept",
            "decode_tps",
            "ttft",
            "throughput",
            "concurrency",
            "agentic",
            "energy",
        ]
    )
    tex = " ".join(render_tex(build_context(load(db), figures)).split())
    assert (
        "Windows measured: 11 by the NVML energy counter, 1 by the trapezoid of power samples."
    ) in tex
