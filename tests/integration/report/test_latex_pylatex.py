"""report.latex.escape_latex beside pylatex.utils.escape_latex, which it builds on.

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/report/test_latex_pylatex.py."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from pylatex.utils import escape_latex as pylatex_escape

from specsweep.report.latex import escape_latex
from tests.support.fixtures.report import needs_latex
from tests.unit.report.test_report_latex import _compile


@needs_latex
@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="pdftotext not installed")
def test_pylatex_rules_would_not_print_literally(tmp_path: Path) -> None:
    cases = ["a^b", "x ,, `` '' << >> y"]
    body = "\n\n".join(
        f"OURS{i} {escape_latex(s)} END\n\nPYL{i} {pylatex_escape(s)} END"
        for i, s in enumerate(cases)
    )
    text = _compile(tmp_path, body)
    for i, s in enumerate(cases):
        assert f"OURS{i} {s} END" in text
        theirs = re.search(f"PYL{i} (.*?) END", text)
        assert theirs and theirs.group(1) != s, text  # e.g. U+02C6 for ^, ligatures
