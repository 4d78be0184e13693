"""Escaping and the jinja2 environment: hostile strings must print literally.

The compile tests run the real latexmk (with -no-shell-escape, as the report does)
and read the PDF back with pdftotext.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from specsweep.report.build import compile_tex
from specsweep.report.data import ReportError
from specsweep.report.latex import NoEscape, escape_latex, make_environment

CORPUS = [
    r"\input{/etc/passwd}",
    r"\input{secret}",
    r"\write18{rm -rf ~}",
    r"\immediate\write18{touch pwned18}",
    r"\newwrite\f\immediate\openout\f=pwned.txt\immediate\write\f{x}\immediate\closeout\f",
    r"\def\x{}",
    r"\catcode`\%=12 \relax",
    "unbalanced { brace",
    "unbalanced } brace",
    "}}}{{{",
    "100% sure # of $5 & a_b ^c ~d",
    "^^5c^^5cinput",
    "\\end{verbatim}",
    "--long-flag --- and ,, `` '' << >>",
    "[optional] after row",
    "*starred",
    'pipes | and <angle> and "quotes"',
    "naïve café Łódź — “curly” ‘single’ …",
    "tab\there",
    "ratio 1.31\u00d7 \u2192 2\u00d7 tied\u00a0here \u2013 and \u2014",
    "TTFT \u2264 500 ms, rate \u2265 2 req/s; target 99%",
]
UNSUPPORTED = "emoji 😀 cjk 你好 check ✓"
PREAMBLE = (Path(__file__).resolve().parents[3] / "latex" / "preamble.tex").read_text()
HAS_PDFTOTEXT = shutil.which("pdftotext") is not None


def _document(body: str) -> str:
    return (
        "\\documentclass{article}\n" + PREAMBLE + "\\begin{document}\n\\raggedright"
        "\\hyphenpenalty=10000\\exhyphenpenalty=10000\n" + body + "\n\\end{document}\n"
    )


def _pdf_text(pdf: Path) -> str:
    out = subprocess.run(
        ["pdftotext", "-enc", "UTF-8", str(pdf), "-"], capture_output=True, text=True, check=True
    ).stdout
    return " ".join(out.split())


def _norm(s: str) -> str:
    # The one deliberate substitution: an ellipsis is typeset as three full stops.
    return " ".join(s.replace("\t", " ").replace("\u2026", "...").split())


def _compile(tmp_path: Path, body: str) -> str:
    (tmp_path / "secret.tex").write_text("SECRETMARKER\n")
    tex = tmp_path / "doc.tex"
    tex.write_text(_document(body), encoding="utf-8")
    return _pdf_text(compile_tex(tex))


@pytest.mark.parametrize("s", CORPUS)
def test_escaped_has_no_live_specials(s: str) -> None:
    out = escape_latex(s, newline=" ")
    inert = r"\\(text[a-z]+|newline)\{\}|\\[{}$&#_%]|\{[\[\]*]\}|[-,]\{\}"
    symbols = r"\$\\(times|rightarrow|le|ge)\$|(?<=[a-z])~(?=[a-z])"  # x, ->, <=, >=, a tie
    stripped = re.sub(inert + "|" + symbols, "", out)
    assert not re.search(r"[\\{}$&#^_%~]", stripped), stripped


def test_newlines_and_control_characters() -> None:
    assert escape_latex("a\nb") == r"a\newline{}b"
    assert escape_latex("a\nb", newline=" ") == "a b"
    assert escape_latex("bell\x07") == "bell[U+0007]"
    assert escape_latex(None) == ""


def test_unsupported_glyphs_become_code_points() -> None:
    assert escape_latex("😀✓") == "[U+1F600][U+2713]"


def test_missing_latexmk_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ReportError, match="latexmk not found"):
        compile_tex(tmp_path / "x.tex")


def test_environment_escapes_by_default_and_keeps_raw() -> None:
    env = make_environment()
    tpl = env.from_string(
        r"((( a ))) | ((( b ))) | ((( c|raw ))) | ((( n ))) ((= gone =))"
        r"((* if flag *))Y((* endif *)) {{ x }} {% y %}"
    )
    out = tpl.render(a=r"\input{x}", b=NoEscape(r"\textbf{b}"), c=r"\emph{c}", n=1.23456, flag=True)
    assert out == (
        r"\textbackslash{}input\{x\} | \textbf{b} | \emph{c} | 1.23 Y"
        r" {{ x }} {% y %}"
    )


def test_escape_filter_is_idempotent_with_finalize() -> None:
    out = make_environment().from_string("((( s|e )))").render(s="a_b")
    assert out == r"a\_b"
