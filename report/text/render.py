"""The three renderings of a marked sentence (report.text.marks): LaTeX for the PDF, HTML for the
HTML report, plain text (report.text.marks.plain) for the JSON export.
"""

from __future__ import annotations

from markupsafe import Markup, escape
from pylatex.utils import NoEscape

from specsweep.report.latex import escape_latex, texttt
from specsweep.report.text.marks import pieces

LATEX = {"em": r"\emph", "strong": r"\textbf"}  # code: report.latex.texttt
HTML = {"code": "code", "em": "em", "strong": "strong"}  # span kind -> element


def latex(s: str) -> NoEscape:
    """The sentence as LaTeX: every piece escaped (report.latex.escape_latex), spans as
    ``\\texttt`` (breakable after ``/ = , _``), ``\\emph`` and ``\\textbf``."""
    out = []
    for kind, t in pieces(s):
        if kind is None:
            out.append(escape_latex(t))
        elif kind == "code":
            out.append(texttt(t))
        else:
            out.append(f"{LATEX[kind]}{{{escape_latex(t)}}}")
    return NoEscape("".join(out))


def html(s: str) -> Markup:
    """The sentence as HTML: every piece escaped, spans as ``<code>``, ``<em>``, ``<strong>``,
    a newline as ``<br>``."""
    out = []
    for kind, t in pieces(s):
        body = str(escape(t)).replace("\n", "<br>")
        out.append(body if kind is None else f"<{HTML[kind]}>{body}</{HTML[kind]}>")
    return Markup("".join(out))
