"""Escaping and the jinja2 environment: hostile strings must print literally.

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/report/test_report_latex.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from specsweep.report.build import compile_tex
from specsweep.report.data import ReportError
from specsweep.report.latex import escape_latex, literal_block, texttt
from tests.support.fixtures.report import needs_latex
from tests.unit.report.test_report_latex import CORPUS, HAS_PDFTOTEXT, UNSUPPORTED, _compile, _norm  # noqa: F401


@needs_latex
@pytest.mark.skipif(not HAS_PDFTOTEXT, reason="pdftotext not installed")
def test_corpus_prints_literally_and_touches_no_files(tmp_path: Path) -> None:
    body = "\n\n".join(f"BEGIN{i} {escape_latex(s)} END{i}" for i, s in enumerate(CORPUS))
    body += "\n\n" + "\n\n".join(f"TT{i} {texttt(s)} TTEND" for i, s in enumerate(CORPUS[:6]))
    body += "\n\nUNI " + escape_latex(UNSUPPORTED)
    before = set(tmp_path.iterdir())
    text = _compile(tmp_path, body)
    for i, s in enumerate(CORPUS):
        assert f"BEGIN{i} {_norm(s)} END{i}" in text, s
    assert "UNI emoji [U+1F600] cjk [U+4F60][U+597D] check [U+2713]" in text
    assert "SECRETMARKER" not in text
    assert not (tmp_path / "pwned.txt").exists() and not (tmp_path / "pwned18").exists()
    new = {p.name for p in set(tmp_path.iterdir()) - before}
    assert all(n.startswith("doc.") or n == "secret.tex" for n in new), new


@needs_latex
@pytest.mark.skipif(not HAS_PDFTOTEXT, reason="pdftotext not installed")
def test_control_unescaped_input_is_read(tmp_path: Path) -> None:
    # Proves the check above can fail: raw \input does read the file.
    assert "SECRETMARKER" in _compile(tmp_path, r"\input{secret}")


@needs_latex
@pytest.mark.skipif(not HAS_PDFTOTEXT, reason="pdftotext not installed")
def test_literal_block_survives_end_verbatim(tmp_path: Path) -> None:
    plan = "name: x\n\\end{verbatim}\n  indented: {a: 1} # c % d\n\\input{secret}"
    text = _compile(tmp_path, literal_block(plan))
    assert "\\end{verbatim}" in text and "indented: {a: 1} # c % d" in text
    assert "\\input{secret}" in text and "SECRETMARKER" not in text


@needs_latex
def test_latex_failure_carries_log_tail(tmp_path: Path) -> None:
    tex = tmp_path / "bad.tex"
    tex.write_text("\\documentclass{article}\\begin{document}\\nosuchmacro\\end{document}\n")
    with pytest.raises(ReportError, match="Undefined control sequence"):
        compile_tex(tex)
