"""An installed specsweep builds the report (the LaTeX templates ship as package data) and
lives beside a user's own top-level ``schema`` package.

specsweep is installed with pip into a scratch folder (from a copy of the sources, so the
build leaves nothing in the repository; the copy follows specsweep/'s symlinks to the stages'
folders, as the wheel build does) together with a stand-in for PyPI's ``schema`` (a
one-module package of that name, built here: the tests reach no index). ``specsweep report``
then runs from another folder with only that install on the path: the repository is not
importable there, so a template found through a path relative to the repository would fail,
and ``import schema`` must still give the user's package.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.fixtures.report import needs_latex

ROOT = Path(__file__).resolve().parents[3]
# What setuptools needs to build specsweep (pyproject.toml names README.md as the readme).
SOURCES = ["specsweep", "pyproject.toml", "README.md"]
THEIRS = "PyPI's schema stand-in"  # what the user's `schema` package says it is
pytestmark = pytest.mark.latex


def _theirs(scratch: Path) -> Path:
    """A distribution `schema` 0.7.7 with one top-level module `schema`, as PyPI's has."""
    src = scratch / "theirs"
    src.mkdir()
    (src / "schema.py").write_text(f"WHO = {THEIRS!r}\n")
    (src / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "schema"\nversion = "0.7.7"\n'
        '[tool.setuptools]\npy-modules = ["schema"]\n'
    )
    return src


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
            str(_theirs(scratch)),
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
        "import runpy, sys, schema, specsweep.schema.contracts, specsweep.report as report; "
        "print('THEIRS', schema.WHO, flush=True); "
        "print('REPORT_FILE', report.__file__, flush=True); "
        "sys.argv = ['specsweep report', '--db', sys.argv[1], '--out', sys.argv[2]]; "
        "runpy.run_module('specsweep.report', run_name='__main__')"
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
    assert (installed / "specsweep" / "latex" / "report.tex.j2").is_file(), "no templates"
    # the importable names the install put on the path: theirs and ours, nothing else
    top = {p.name.removesuffix(".py") for p in installed.iterdir() if p.suffix in ("", ".py")}
    assert top - {"bin", "__pycache__"} == {"schema", "specsweep"}, top
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = elsewhere / "reports" / "report.pdf"
    proc = _run_report(installed, report_db, out, elsewhere)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"THEIRS {THEIRS}" in proc.stdout  # both importable: theirs as `schema`, ours below
    imported = next(
        line.split(" ", 1)[1]
        for line in proc.stdout.splitlines()
        if line.startswith("REPORT_FILE ")
    )
    assert Path(imported).is_relative_to(installed), f"imported {imported}, not the install"
    assert out.read_bytes().startswith(b"%PDF")
