"""The findings' text model: each sentence is written once, as marked Unicode, and each output
renders it.

A sentence is a plain ``str``. Its typography is Unicode (× for a ratio, – for a range,
U+00A0 for a tie, → for an arrow) and its few semantic spans are marked by :func:`code`,
:func:`em` and :func:`strong`, which wrap their argument in a pair of private-use delimiters
(U+E000..U+E005). Data values enter a sentence through :func:`data` (or a span helper), which
drops those delimiters from them, so a value from the database can never open or close a span.
Three renderers read the marks: :func:`latex` (``NoEscape``: escape_latex on every piece,
``\\texttt``/``\\emph``/``\\textbf`` for the spans), :func:`html` (``Markup``: HTML-escaped,
``<code>``/``<em>``/``<strong>``) and :func:`plain` (the marks removed: the JSON export's text).
"""

from __future__ import annotations

import re

from markupsafe import Markup, escape
from pylatex.utils import NoEscape

from specsweep.report.latex import escape_latex, fmt_num, texttt

# span kind -> (opening, closing) delimiter; private-use code points no data holds
SPANS = {"code": ("\ue000", "\ue001"), "em": ("\ue002", "\ue003"), "strong": ("\ue004", "\ue005")}
MARKS = re.compile("[\ue000-\ue005]")
_SPAN = re.compile("|".join(f"{o}([^{o}{c}]*){c}" for o, c in SPANS.values()))
_KIND = {o: kind for kind, (o, _) in SPANS.items()}
LATEX = {"em": r"\emph", "strong": r"\textbf"}  # code: report.latex.texttt
HTML = {"code": "code", "em": "em", "strong": "strong"}  # span kind -> element
TIMES, DASH = "\u00d7", "\u2013"


def data(value: object) -> str:
    """A data value as sentence text: ``str(value)`` without the span delimiters."""
    return MARKS.sub("", "" if value is None else str(value))


def _span(kind: str, value: object) -> str:
    opening, closing = SPANS[kind]
    return opening + data(value) + closing


def code(value: object) -> str:
    """``value`` as code (a command, a key, a flag)."""
    return _span("code", value)


def em(value: object) -> str:
    """``value`` emphasised (a workload's name, a word the sentence stresses)."""
    return _span("em", value)


def strong(value: object) -> str:
    """``value`` in bold (a headline's method)."""
    return _span("strong", value)


def num(x: object, spec: str = ".2f") -> str:
    """A number as the sentences print it (report.latex.fmt_num), an en dash when missing."""
    return fmt_num(x, spec, missing=DASH)


def times(x: object) -> str:
    """A ratio: ``1.31×``."""
    return num(x) + TIMES


def pieces(s: str) -> list[tuple[str | None, str]]:
    """``s`` as (span kind or None for plain text, text) pairs, in order."""
    out: list[tuple[str | None, str]] = []
    at = 0
    for m in _SPAN.finditer(s):
        out += [(None, s[at : m.start()])] if m.start() > at else []
        out.append((_KIND[m.group(0)[0]], m.group(0)[1:-1]))
        at = m.end()
    out += [(None, s[at:])] if at < len(s) else []
    return [(kind, MARKS.sub("", t)) for kind, t in out]  # a stray mark prints as nothing


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


def plain(s: str) -> str:
    """The sentence's text without its marks."""
    return MARKS.sub("", s)
