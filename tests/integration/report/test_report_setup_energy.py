"""The report's setup section (plan description on page 1, host table, one row per service,
launch commands in the appendix, the tunnel sentence) and its energy section, on the
fixture files of conftest.py; real latexmk where the PDF is read.

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/report/test_report_setup_energy.py."""

from __future__ import annotations

from pathlib import Path

from tests.support.fixtures.report import needs_latex
from tests.unit.report.test_report_setup_energy import _pdf_text, energy_pdf, plain_pdf  # noqa: F401


@needs_latex
def test_the_plan_description_is_on_the_first_page(plain_pdf: Path) -> None:
    first = _pdf_text(plain_pdf, last_page=1)
    assert "A hostile description: 100% # $x$ \\input{/etc/passwd} {unbalanced" in first


@needs_latex
def test_setup_shows_a_host_table_and_one_row_per_service(plain_pdf: Path) -> None:
    """The host's CPU and engine build in the table; the services' own flags (escaped) and
    transport; launch commands and the key/value facts only after the appendix headings."""
    text = _pdf_text(plain_pdf)
    tex = plain_pdf.with_suffix(".tex").read_text(encoding="utf-8")
    setup_tex = tex[tex.index("\\section{Setup}") : tex.index("\\section{Results}")]
    host_row = "AMD EPYC \\# 64-core (2 cores)&7.8&none&-{}-&-{}-&llamacpp b4500 (commit 1a2b\\_3c)"
    assert host_row in setup_tex
    setup = text[text.index("Setup") : text.index("Results")]
    assert "--spec dflash 100% # $x$ & y_z ^ ~" in setup and "paramiko-tunnel" in setup
    assert "llama-server --model" not in setup and "server.prompt_cache" not in setup
    appendix = text[text.index("Launch commands") :]
    assert "llama-server --model" in appendix and "server.prompt_cache" in appendix


@needs_latex
def test_threats_name_the_service_measured_through_a_tunnel(plain_pdf: Path) -> None:
    text = _pdf_text(plain_pdf)
    assert (
        "The receive stamps of dflash TP1 (paramiko-tunnel) were taken after an SSH tunnel"
    ) in text
    assert "The services ran without GPUs (CPU only)" in text


@needs_latex
def test_a_campaign_without_telemetry_says_so_in_one_line(plain_pdf: Path) -> None:
    text = _pdf_text(plain_pdf)
    assert "No GPU telemetry was recorded for this campaign" in text
    assert "Throttling and clocks" not in text


@needs_latex
def test_energy_section_tabulates_charts_and_flags(energy_pdf: Path) -> None:
    """conftest.energy_objects: J/token 2.0 baseline, 1.5 dflash (ratio 0.75 [0.70, 0.80]),
    2.5 ddtree_b8 (1.25); dflash code_gen sparse (left out: 3 dflash comparisons, 4 of
    ddtree_b8); dflash chat at concurrency 4 throttled; priced at 3 USD per GPU-hour."""
    text = _pdf_text(energy_pdf)
    tex = energy_pdf.with_suffix(".tex").read_text(encoding="utf-8")
    assert "energy.pdf" in tex
    assert (
        "Energy per output token (GPU board power): 3 of 7 comparisons use significantly "
        "less than the baseline and 4 significantly more; the lowest significant ratio is "
        "dflash on "
        "chat at 0.75"
    ) in text
    assert "1 of 12 window(s) were sampled too sparsely" in text
    assert "1 of 12 window(s) were throttled and 0 showed a clock drop" in text
    assert "throttled: sw_power_cap" in text and "sparse (1 samples/GPU, gap 5.00 s)" in text
    assert "Cost per million output tokens (USD/Mtok)" in text and "USD/Mtok" in tex
    assert "chat&64&1&dflash&1.50&0.667&0.75&{[}0.70, 0.80{]}&yes&" in tex  # 3 s.f.
