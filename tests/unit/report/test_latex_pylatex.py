"""report.latex.escape_latex beside pylatex.utils.escape_latex, which it builds on.

Where the two agree the result must be pylatex's; where they differ, the expectation is
written out by hand and a compiled PDF shows why this module's rule is kept.
"""

from __future__ import annotations

import pytest
from pylatex.utils import escape_latex as pylatex_escape

from specsweep.report.latex import NoEscape, escape_latex

# Strings of characters that both escapers handle the same way.
SHARED = [
    r"\input{/etc/passwd}",
    "100% sure # of $5 & a_b ~d",
    "}}}{{{ [optional] after row",
    "no specials at all",
    "non\u00a0breaking",
]


@pytest.mark.parametrize("s", SHARED)
def test_agrees_with_pylatex_on_tex_specials(s: str) -> None:
    assert escape_latex(s) == str(pylatex_escape(s))


def test_tex_specials_by_hand() -> None:
    assert escape_latex("\\{}$&#_%~[]\u00a0") == (
        r"\textbackslash{}\{\}\$\&\#\_\%\textasciitilde{}{[}{]}~"
    )


@pytest.mark.parametrize(
    ("s", "ours", "theirs"),
    [
        ("a^b", r"a\textasciicircum{}b", r"a\^{}b"),
        ("x\ny", r"x\newline{}y", "x\\newline%\ny"),
        ("--flag", "-{}-flag", "{-}{-}flag"),
        ("a-b", "a-b", "a{-}b"),
        (",, ``", r",{}, \textasciigrave{}\textasciigrave{}", ",, ``"),
        ("<|>", r"\textless{}\textbar{}\textgreater{}", "<|>"),
        ("*x", "{*}x", "*x"),
        ("bell\x07 \U0001f600", "bell[U+0007] [U+1F600]", "bell\x07 \U0001f600"),
    ],
)
def test_rules_kept_where_pylatex_differs(s: str, ours: str, theirs: str) -> None:
    assert escape_latex(s) == ours
    assert str(pylatex_escape(s)) == theirs  # fails if pylatex changes: revisit the rule


def test_newline_argument_and_noescape() -> None:
    assert escape_latex("a\nb", newline=" ") == "a b"
    # pylatex passes a NoEscape through; data is escaped whatever its type
    assert escape_latex(NoEscape(r"\x")) == r"\textbackslash{}x"
    assert str(pylatex_escape(NoEscape(r"\x"))) == r"\x"
