"""An installed specsweep builds the report: the LaTeX templates ship as package data.

specsweep is installed with pip into a scratch folder (from a copy of the sources, so the
build leaves nothing in the repository) and ``python -m report`` runs from another folder
with only that install on the path: the repository is not importable there, so a template
found through a path relative to the repository would fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.report.conftest import needs_latex

ROOT = Path(__file__).resolve().parents[2]
# What setuptools needs to build specsweep (pyproject.toml names README.md as the readme).
SOURCES = ["collect", "schema", "analyze", "report", "latex", "pyproject.toml", "README.md"]
pytestmark = pytest.mark.latex


def _install(into: Path, scratch: Path) -> None:
    src = scratch / "src"
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, src / name)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(into),
            str(src),
        ],
        check=True,
        capture_output=True,
        text=True,
    )


def _run_report(installed: Path, db: Path, out: Path, cwd: Path) -> subprocess.CompletedProcess:
    # -I would also drop PYTHONPATH; -P (3.11) keeps it but leaves the cwd off sys.path.
    env = {**os.environ, "PYTHONPATH": str(installed)}
    code = (
        "import runpy, sys, report; print('REPORT_FILE', report.__file__, flush=True); "
        "sys.argv = ['report', '--db', sys.argv[1], '--out', sys.argv[2]]; "
        "runpy.run_module('report', run_name='__main__')"
    )
    return subprocess.run(
        [sys.executable, "-P", "-c", code, str(db), str(out)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@needs_latex
def test_installed_copy_builds_the_pdf(report_db: Path, tmp_path: Path) -> None:
    installed = tmp_path / "site"
    _install(installed, tmp_path)
    assert (installed / "latex" / "report.tex.j2").is_file(), "templates not installed"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = elsewhere / "reports" / "report.pdf"
    proc = _run_report(installed, report_db, out, elsewhere)
    assert proc.returncode == 0, proc.stderr[-3000:]
    imported = next(
        line.split(" ", 1)[1]
        for line in proc.stdout.splitlines()
        if line.startswith("REPORT_FILE ")
    )
    assert Path(imported).is_relative_to(installed), f"imported {imported}, not the install"
    assert out.read_bytes().startswith(b"%PDF")
