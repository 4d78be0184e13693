"""Layout of the report: the headline rule, number formats, columns left out, short flags,
speedup-against-concurrency figures that fit a page, and a compiled report whose every line
fits its page.

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/report/test_report_layout.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb

from tests.support.fixtures.report import needs_latex
from tests.unit.report.test_report_layout import LONG_PATH, _compile, _overfull  # noqa: F401


@needs_latex
def test_long_commands_and_flags_fit_the_page(report_db: Path, tmp_path: Path) -> None:
    db = tmp_path / "long.duckdb"
    shutil.copyfile(report_db, db)
    cmd = (
        f"CUDA_VISIBLE_DEVICES=0 /root/.cache/specsweep/llama-server-0.3.36-cuda90/bin/"
        f"llama-server -m {LONG_PATH} --host 127.0.0.1 --port 42637 -ngl 99 -t 4 -c 65536 "
        f"-np 16 --metrics --spec-type draft-simple -md {LONG_PATH} -ngld 99"
    )
    with duckdb.connect(str(db)) as con:
        con.execute(
            "UPDATE service_summary SET launch_command = ?, own_flags = ?",
            [cmd, f"--spec-type draft-simple -md {LONG_PATH} -ngld 99"],
        )
    tex, log = _compile(db, tmp_path / "work")
    assert _overfull(log) == []
    assert "-md .../SmolLM2-135M-Instruct.gguf -ngld 99" in tex  # services table: basename


@needs_latex
def test_energy_table_fits_the_page(report_db_energy: Path, tmp_path: Path) -> None:
    tex, log = _compile(report_db_energy, tmp_path / "work")
    assert "USD/Mtok" in tex and "\\begin{longtable}" in tex
    assert _overfull(log) == []
