"""The report's text model (report/text/): marked Unicode sentences and their three
renderings, on hand-built sentences whose data holds every LaTeX and HTML special.

Expected LaTeX is written out by hand (and each escape checked against report.latex's own
table only where the table is what is tested); expected HTML is Python's ``html.escape``."""

from __future__ import annotations

import html as pyhtml

import pytest
from markupsafe import Markup
from pylatex.utils import NoEscape

from specsweep.report.latex import escape_latex
from specsweep.report.text import code, data, em, html, latex, plain, strong, times
from tests.support.fixtures.report import HOSTILE

SPECIALS = "a_b 100% & #1 <x> $5 \\cmd {g} ~t ^c"
# each special as escape_latex prints it, by hand
SPECIALS_TEX = (
    r"a\_b 100\% \& \#1 \textless{}x\textgreater{} \$5 \textbackslash{}cmd \{g\} "
    r"\textasciitilde{}t \textasciicircum{}c"
)


def sentence(value: str) -> str:
    return f"On {em(value)} {strong(value)} at {times(1.31)} (run {code(value)}); {data(value)}."


def test_plain_drops_the_marks_and_keeps_the_data() -> None:
    s = sentence(SPECIALS)
    assert plain(s) == f"On {SPECIALS} {SPECIALS} at 1.31\u00d7 (run {SPECIALS}); {SPECIALS}."
    assert not any("\ue000" <= ch <= "\ue005" for ch in plain(s))


def test_latex_escapes_every_special_and_marks_the_spans() -> None:
    got = latex(sentence(SPECIALS))
    assert isinstance(got, NoEscape)
    assert str(got) == (
        f"On \\emph{{{SPECIALS_TEX}}} \\textbf{{{SPECIALS_TEX}}} at 1.31$\\times$ (run "
        f"\\texttt{{{SPECIALS_TEX.replace('_', '_' + chr(92) + 'allowbreak{}')}}}); "
        f"{SPECIALS_TEX}."
    )


def test_html_escapes_every_special_and_marks_the_spans() -> None:
    got = html(sentence(SPECIALS))
    assert isinstance(got, Markup)
    v = pyhtml.escape(SPECIALS)
    assert str(got) == (
        f"On <em>{v}</em> <strong>{v}</strong> at 1.31\u00d7 (run <code>{v}</code>); {v}."
    )
    assert "<x>" not in got and "&lt;x&gt;" in got


@pytest.mark.parametrize("value", [*HOSTILE, "<script>alert(1)</script>", "a\u00a0b", "x---y"])
def test_hostile_data_prints_as_itself(value: str) -> None:
    s = f"x {em(value)} {data(value)}"
    assert pyhtml.unescape(str(html(s)).replace("<br>", "\n")) == f"x <em>{value}</em> {value}"
    assert str(latex(s)) == f"x \\emph{{{escape_latex(value)}}} {escape_latex(value)}"


def test_data_cannot_open_or_close_a_span() -> None:
    forged = "\ue003</em>\ue002evil\ue005"  # the delimiters, in a value from the database
    s = f"{em(forged)} and {data(forged)}"
    assert plain(s) == "</em>evil and </em>evil"
    assert str(html(s)) == "<em>&lt;/em&gt;evil</em> and &lt;/em&gt;evil"
    assert str(latex(s)) == r"\emph{\textless{}/em\textgreater{}evil} and " + (
        r"\textless{}/em\textgreater{}evil"
    )


def test_unicode_typography_prints_in_latex() -> None:
    s = f"1.00\u20131.77 \u2014 max\u00a0tokens \u2192 {times(2)}"
    assert plain(s) == s
    assert str(latex(s)) == (
        r"1.00\textendash{}1.77 \textemdash{} max~tokens $\rightarrow$ 2.00$\times$"
    )
    assert str(html(s)) == s  # Unicode as it is
    assert times(float("nan")) == "\u2013\u00d7"  # a missing number: an en dash, not "--"


def test_bounds_and_percentages_print_in_latex() -> None:
    """The open-loop sentences' SLO limits (report.openloop.section): ≤ and ≥ as math, % as
    a percent sign, never a comment."""
    s = "TTFT \u2264 500 ms, rate \u2265 2 req/s; attainment target 99%"
    assert str(latex(s)) == r"TTFT $\le$ 500 ms, rate $\ge$ 2 req/s; attainment target 99\%"
    assert str(html(s)) == s
