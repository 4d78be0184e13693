"""The marks of a sentence: a sentence is a plain ``str`` of Unicode text whose code, emphasis
and bold spans are wrapped in pairs of private-use delimiters (U+E000..U+E005), and data
enters it only through :func:`data` or a span helper, which drop those delimiters from the
value. :func:`pieces` reads the spans back (report.text.render); :func:`plain` drops them.
"""

from __future__ import annotations

import re

from specsweep.report.latex import fmt_num

# span kind -> (opening, closing) delimiter; private-use code points no data holds
SPANS = {"code": ("\ue000", "\ue001"), "em": ("\ue002", "\ue003"), "strong": ("\ue004", "\ue005")}
MARKS = re.compile("[\ue000-\ue005]")
_SPAN = re.compile("|".join(f"{o}([^{o}{c}]*){c}" for o, c in SPANS.values()))
_KIND = {o: kind for kind, (o, _) in SPANS.items()}
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


def plain(s: str) -> str:
    """The sentence's text without its marks."""
    return MARKS.sub("", s)
