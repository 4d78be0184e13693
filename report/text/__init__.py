"""The report's text model: each sentence is written once, as marked Unicode, and each output
renders it.

A sentence is a plain ``str``. Its typography is Unicode (× for a ratio, – for a range, ≤ and
≥, U+00A0 for a tie, → for an arrow) and its few semantic spans are marked by :func:`code`,
:func:`em` and :func:`strong`, which wrap their argument in a pair of private-use delimiters
(U+E000..U+E005). Data values enter a sentence through :func:`data` (or a span helper), which
drops those delimiters from them, so a value from the database can never open or close a span
(report.text.marks). Three renderers read the marks (report.text.render): :func:`latex`
(``NoEscape``: escape_latex on every piece, ``\\texttt``/``\\emph``/``\\textbf`` for the
spans), :func:`html` (``Markup``: HTML-escaped, ``<code>``/``<em>``/``<strong>``) and
:func:`plain` (the marks removed: the JSON export's text).

It sits just above report.latex, which it builds on, and below the sections, so that every
sentence builder can use it: the summary (report.findings) and the sections whose sentences
join it (report.openloop, report.speculation), which report.findings imports, never the other
way round.
"""

from specsweep.report.text.marks import code, data, em, num, pieces, plain, strong, times
from specsweep.report.text.render import html, latex

__all__ = ["code", "data", "em", "html", "latex", "num", "pieces", "plain", "strong", "times"]
