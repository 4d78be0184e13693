"""The findings' sentences as HTML: one source, read back from the LaTeX they are written in.

report/findings/ (and the sentences it takes from report/sections.py) assemble each
sentence once, as LaTeX built from escaped data values (report.latex.escape_latex) and a few
fixed markup commands. Rather than keep a second copy of that logic, the HTML report reads
those sentences back: :func:`latex_to_html` knows the escaper's every output (it inverts the
escaper's own table, :data:`report.latex._SPECIAL`, so the two cannot drift) and the markup
the sentences use (:data:`MARKUP`); anything else raises :class:`UnknownLatex`. The tests run
it over every finding of the fixture campaigns, so a sentence that adds a new command fails
there; in a real build such a sentence is shown as its LaTeX, with a warning.

What does not come back: a character escape_latex shows as ``[U+XXXX]`` (a glyph pdflatex
cannot set) stays ``[U+XXXX]``; ``\\u2026`` comes back as ``...``. The tables of the HTML
report show the database's values themselves.
"""

from __future__ import annotations

import logging
import re

from markupsafe import Markup, escape

from report import latex

log = logging.getLogger(__name__)


class UnknownLatex(ValueError):
    """A sentence holds LaTeX that :func:`latex_to_html` does not know."""


def _inverse() -> dict[str, str]:
    """escape_latex's escape sequence -> the character it prints (the invertible ones:
    sequences that start a command or a group, or a tie)."""
    # latex._SPECIAL is private to report.latex; read here so that there is one table, not two
    out = {
        seq: ch
        for ch, seq in latex._SPECIAL.items()
        if seq != ch and (seq[:1] in ("\\", "{") or seq == "~")
    }
    out[r"\newline{}"] = "\n"  # escape_latex's default newline
    out["~"] = "\u00a0"
    return out


INVERSE = _inverse()
# Commands with one argument -> the HTML element that shows it.
MARKUP = {"emph": "em", "textbf": "strong", "texttt": "code", "textit": "em"}
# Fixed pieces of the sentences (and of escape_latex's ligature breaks) -> what they print.
FIXED = {
    r"$\times$": "\u00d7",
    "---": "\u2014",
    "--": "\u2013",
    "-{}": "-",
    ",{}": ",",
    r"\allowbreak{}": "",
    "{*}": "*",
    r"\ ": " ",
    "{}": "",
}
_OPEN = re.compile(r"\\([A-Za-z]+)\{")
_TOKEN = re.compile(
    "|".join(
        [re.escape(s) for s in sorted([*INVERSE, *FIXED], key=len, reverse=True)]
        + [_OPEN.pattern, r"\\[A-Za-z]+", r"\\.", r"[{}$]", r"[^\\{}$~\-,]+", r"[\-,]"]
    )
)


def latex_to_html(text: str) -> Markup:
    """HTML for one sentence of the report's LaTeX subset; :class:`UnknownLatex` otherwise.

    Escaped characters print as themselves (HTML-escaped), ``\\emph{x}`` -> ``<em>x</em>``
    (:data:`MARKUP`), ``$\\times$`` -> ``×``, ``--`` -> ``–``, a newline -> ``<br>``."""
    out: list[str] = []
    closing: list[str] = []
    read = 0
    for m in _TOKEN.finditer(text):
        out.append(_token(m.group(0), closing))
        read += len(m.group(0))
    if closing or read != len(text):  # an open group, or a lone backslash at the end
        raise UnknownLatex(f"unbalanced or unreadable LaTeX: {text!r}")
    return Markup("".join(out))


def _token(tok: str, closing: list[str]) -> str:
    if tok in INVERSE:
        ch = INVERSE[tok]
        return "<br>" if ch == "\n" else str(escape(ch))
    if tok in FIXED:
        return FIXED[tok]
    if (m := _OPEN.fullmatch(tok)) and m.group(1) in MARKUP:
        closing.append(f"</{MARKUP[m.group(1)]}>")
        return f"<{MARKUP[m.group(1)]}>"
    if tok == "{":
        closing.append("")
        return ""
    if tok == "}" and closing:
        return closing.pop()
    if tok.startswith("\\") or tok in ("$", "}"):
        raise UnknownLatex(f"LaTeX the HTML report cannot show: {tok!r}")
    return str(escape(tok))


def sentences(items: list[str]) -> list[Markup]:
    """:func:`latex_to_html` of each sentence; one it cannot read is shown as its LaTeX
    source (escaped) with a warning, rather than no HTML report at all."""
    out = []
    for s in items:
        try:
            out.append(latex_to_html(s))
        except UnknownLatex as exc:
            log.warning("%s; the sentence is shown as LaTeX", exc)
            out.append(Markup("<code>{}</code>").format(s))
    return out
