"""LaTeX safety layer: escaping, the jinja2 environment, literal code blocks.

Every string that comes from data (prompts, plans, server output, host facts) is
passed through :func:`escape_latex` before it reaches the ``.tex`` file, so TeX
sees only printable characters and inert commands such as ``\\textbackslash{}``.
Raw LaTeX is explicit: a pylatex ``NoEscape`` (a ``str`` subclass) passes through
the template unchanged, anything else is escaped by the environment's ``finalize``.
"""

from __future__ import annotations

import datetime as dt
import math
import numbers
import re
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
import numpy as np
from pylatex.utils import NoEscape
from pylatex.utils import escape_latex as _pylatex_escape

__all__ = [
    "NoEscape",
    "escape_latex",
    "fmt_num",
    "fmt_sig",
    "literal_block",
    "make_environment",
    "raw",
    "texttt",
]

# The templates ship as the package data of `latex` (pyproject.toml), so an installed copy
# finds them wherever it is run from; specsweep installs as plain files, never zipped.
LATEX_DIR = Path(str(resources.files("specsweep.latex")))

# The characters pylatex escapes so that they print as themselves (compiled and read back
# in tests/unit/report/test_report_latex.py): the TeX specials but `^`, the brackets (`\\[` and
# `\item[` would read one as an optional argument) and U+00A0 (a tie).
_FROM_PYLATEX = "\\{}$&#_%~[]\u00a0"
# This module's rules where pylatex's differ or are missing, compared by compiling both with
# pdflatex and reading the PDF back with pdftotext (2026-12-04): pylatex's `\^{}` is an
# accent that prints U+02C6, not `^`; its `\newline%` + LF cannot become a space in a table
# cell (the `newline` argument); its `{-}` for every hyphen prints what `-{}` before a
# second hyphen only prints, and report/tables.py reads the latter back. pylatex leaves the
# rest as they are, and then `` ` `` prints a curly quote, `,,` `<<` `>>` `''` form
# ligatures and pdflatex stops at the first emoji ("Unicode character ... not set up").
_SPECIAL: dict[str, str] = {
    **{ch: str(_pylatex_escape(ch)) for ch in _FROM_PYLATEX},
    "^": r"\textasciicircum{}",
    # Not TeX specials, but they would not print as themselves:
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
    '"': r"\textquotedbl{}",
    "'": r"\textquotesingle{}",
    "`": r"\textasciigrave{}",
    "\t": " ",
    "\r": "",
    # Typography that the fonts carry under another name.
    "\u2013": r"\textendash{}",
    "\u2014": r"\textemdash{}",
    "\u2018": r"\textquoteleft{}",
    "\u2019": r"\textquoteright{}",
    "\u201c": r"\textquotedblleft{}",
    "\u201d": r"\textquotedblright{}",
    "\u2022": r"\textbullet{}",
    "\u2026": "...",  # \textellipsis extracts as ". . ."
    "\u20ac": r"\texteuro{}",
    "\u00ad": "-",
    # Symbols the sentences write as Unicode (report/text/); T1 has none of them, math
    # mode has all.
    "\u00d7": r"$\times$",
    "\u2192": r"$\rightarrow$",
    "\u2264": r"$\le$",
    "\u2265": r"$\ge$",
}
# Characters that form ligatures when doubled (-- en dash, ,, low quotes).
_LIGATURE_FIRST = frozenset("-,")
# Latin Extended-A glyphs that T1 lacks (checked against t1enc.dfu).
_T1_MISSING = frozenset(
    chr(c) for c in (0x126, 0x127, 0x138, 0x13F, 0x140, 0x149, 0x166, 0x167, 0x17F)
)


def _printable_as_is(ch: str) -> bool:
    code = ord(ch)
    if 0x20 <= code < 0x7F:
        return True
    return 0xA0 <= code < 0x180 and ch not in _T1_MISSING


def _escape_char(ch: str, nxt: str, newline: str) -> str:
    if ch == "\n":
        return newline
    if ch in _SPECIAL:
        return _SPECIAL[ch]
    if ch in _LIGATURE_FIRST and nxt == ch:
        return ch + "{}"
    if _printable_as_is(ch):
        return ch
    # pdflatex stops on glyphs it has no mapping for; show the code point instead.
    return f"[U+{ord(ch):04X}]"


def escape_latex(s: object, newline: str = r"\newline{}") -> str:
    """Return ``s`` as LaTeX source that prints ``s`` literally.

    Handles the TeX specials (``\\ { } $ & # ^ _ % ~``), characters that T1 fonts
    would print differently (quotes, ``< > |``, ligatures such as ``--``), brackets
    that could be read as optional arguments, control characters and glyphs that
    pdflatex cannot typeset (shown as ``[U+XXXX]``). ``newline`` replaces ``\\n``;
    pass ``" "`` inside table cells.

    Built on ``pylatex.utils.escape_latex``'s rules for the TeX specials (``_FROM_PYLATEX``;
    the comment above ``_SPECIAL`` says where and why the others differ). Unlike pylatex,
    a ``NoEscape`` is escaped too: this is called on data, and raw LaTeX reaches a
    template through ``finalize`` or the ``raw`` filter, never through here.
    """
    text = "" if s is None else str(s)
    out = [_escape_char(ch, text[i + 1 : i + 2], newline) for i, ch in enumerate(text)]
    escaped = "".join(out)
    # A leading `*` right after a `\\` row end would select the starred form.
    return "{*}" + escaped[1:] if escaped.startswith("*") else escaped


def raw(s: str) -> NoEscape:
    """Mark ``s`` as trusted LaTeX that the template must not escape."""
    return NoEscape(s)


def fmt_num(x: Any, spec: str = ".2f", missing: str = "--") -> str:
    """Format a number for a table, ``missing`` for None/NaN."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return missing
    try:
        return format(x, spec)
    except (TypeError, ValueError):
        return str(x)


def fmt_sig(x: Any, digits: int = 3, missing: str = "--") -> str:
    """``x`` with ``digits`` significant digits, trailing zeros kept and never in exponent
    form (0.0746, 0.116, 8.60, 49.4, 1234), so a column reads with one precision."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return missing
    if x == 0 or not math.isfinite(x):
        return format(x, f".{digits - 1}f") if x == 0 else str(x)
    places = digits - 1 - math.floor(math.log10(abs(x)))
    rounded = round(x, places)  # 9.996 -> 10.0: one digit more before the point, one less after
    if rounded and math.floor(math.log10(abs(rounded))) > math.floor(math.log10(abs(x))):
        places -= 1
    return format(x, f".{max(0, places)}f")


_BREAK_AFTER = re.compile(r"(/|=|,|\\_)")


def texttt(s: object, breakable: bool = True) -> NoEscape:
    """Typewriter text for commands and paths, with line breaks allowed after ``/ = , _``."""
    body = escape_latex(s, newline=" ")
    if breakable:
        body = _BREAK_AFTER.sub(lambda m: m.group(1) + r"\allowbreak{}", body)
    return NoEscape(r"\texttt{" + body + "}")


def literal_block(text: str) -> NoEscape:
    """Render multi-line text (a plan file, a log tail) literally in typewriter type.

    Not ``verbatim``: a line ``\\end{verbatim}`` in the data would end that
    environment. Each line is escaped; spaces become control spaces so indentation
    survives; long lines wrap at spaces.
    """
    lines = []
    for line in str(text).expandtabs(4).splitlines() or [""]:
        body = escape_latex(line, newline=" ").replace(" ", "\\ ")
        lines.append(r"\noindent\hangindent=2em\texttt{" + body + r"\strut}\par")
    body = "\n".join(lines)
    return NoEscape("{\\small\\raggedright\\setlength{\\parskip}{0pt}\n" + body + "\n}")


def fmt_time(value: dt.datetime) -> str:
    """A timestamp as the report prints it everywhere: to the second ('2026-12-05 16:48:32';
    the stored value keeps its microseconds). NaT prints as an empty string."""
    if value != value:  # NaT, the one datetime unequal to itself
        return ""
    return value.isoformat(sep=" ", timespec="seconds")


def _finalize(value: Any) -> str:
    """Escape every template value unless it is explicitly raw LaTeX."""
    if isinstance(value, NoEscape):
        return str(value)
    if value is None:
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, dt.datetime):
        return escape_latex(fmt_time(value))
    if isinstance(value, numbers.Integral):
        return str(value)
    if isinstance(value, numbers.Real):
        return escape_latex(fmt_num(value))
    return escape_latex(value)


def make_environment(template_dir: Path | str = LATEX_DIR) -> jinja2.Environment:
    """A jinja2 environment with LaTeX-safe delimiters and escape-by-default output.

    Blocks ``((* *))``, variables ``((( )))``, comments ``((= =))``. The ``raw``
    filter marks trusted LaTeX; ``e`` escapes explicitly (idempotent with finalize
    because it returns ``NoEscape``).
    """
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_dir)),
        block_start_string="((*",
        block_end_string="*))",
        variable_start_string="(((",
        variable_end_string=")))",
        comment_start_string="((=",
        comment_end_string="=))",
        line_statement_prefix=None,
        line_comment_prefix=None,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        finalize=_finalize,
    )
    env.filters["raw"] = raw
    env.filters["e"] = lambda v: NoEscape(_finalize(v))
    env.filters["num"] = fmt_num
    env.filters["tt"] = texttt
    env.filters["literal"] = literal_block
    return env
