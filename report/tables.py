"""Tables for the report, built with pylatex and returned as raw LaTeX.

Cells are escaped here (``escape_latex``) and handed to pylatex as ``NoEscape``, so
there is exactly one escaping rule in the whole report. The full speedup table is
machine-readable: it follows a ``% specsweep-speedup-table`` comment line, has one
row per line, and :func:`parse_speedup_tables` reads it back.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from pylatex import LongTable, MultiColumn, Tabular
from pylatex.utils import NoEscape

from specsweep.report.latex import escape_latex, fmt_num, fmt_sig, fmt_time

SPEEDUP_MARKER = "% specsweep-speedup-table"
SPEEDUP_HEADERS = (
    "workload",
    "max_tokens",
    "concurrency",
    "method",
    "speedup",
    "95% CI",
    "n",
    "significant",
)


@dataclass(frozen=True)
class Col:
    """One table column: header, how to turn a row into cell text, alignment."""

    header: str
    cell: Callable[[pd.Series], str]
    align: str = "l"
    optional: bool = False  # left out when every cell is empty, '--' or zero


def _blank(cell: str) -> bool:
    """An empty, '--' or zero cell (0, 0.00, 0%): what an optional column may be all of."""
    text = cell.strip().rstrip("%")
    if text in ("", "--"):
        return True
    try:
        return float(text) == 0
    except ValueError:
        return False


def text(name: str) -> Callable[[pd.Series], str]:
    """Cell: the column's value as text (integral floats, e.g. from pandas, as ints)."""
    return lambda r: _as_text(r[name])


def _as_text(v: Any) -> str:
    if v is None or (not isinstance(v, str) and pd.isna(v)):
        return ""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, dt.datetime):
        return fmt_time(v)
    return str(v)


def num(name: str, spec: str = ".2f") -> Callable[[pd.Series], str]:
    """Cell: the column's value formatted with ``spec``."""
    return lambda r: fmt_num(None if pd.isna(r[name]) else r[name], spec)


def sig(name: str, digits: int = 3) -> Callable[[pd.Series], str]:
    """Cell: the column's value with ``digits`` significant digits (:func:`fmt_sig`)."""
    return lambda r: fmt_sig(None if pd.isna(r[name]) else r[name], digits)


def ci(low: str = "ci_low", high: str = "ci_high") -> Callable[[pd.Series], str]:
    """Cell: a confidence interval ``[low, high]``."""
    return lambda r: f"[{fmt_num(_na(r[low]))}, {fmt_num(_na(r[high]))}]"


def yes_no(name: str) -> Callable[[pd.Series], str]:
    """Cell: a boolean as yes/no."""
    return lambda r: "--" if pd.isna(r[name]) else ("yes" if bool(r[name]) else "no")


def _na(x: Any) -> Any:
    return None if pd.isna(x) else x


def _cells(values: Sequence[str]) -> list[NoEscape]:
    return [NoEscape(escape_latex(v, newline=" ")) for v in values]


def build_table(frame: pd.DataFrame, cols: Sequence[Col], long: bool = False) -> NoEscape:
    """A booktabs table of ``frame`` with the given columns (longtable when ``long``);
    an ``optional`` column whose every cell is empty, '--' or zero is left out."""
    rows = [[c.cell(row) for c in cols] for _, row in frame.iterrows()]
    keep = [
        i
        for i, c in enumerate(cols)
        if not (c.optional and rows and all(_blank(r[i]) for r in rows))
    ]
    cols = [cols[i] for i in keep]
    spec = "".join(c.align for c in cols)
    table = LongTable(spec, booktabs=True) if long else Tabular(spec, booktabs=True)
    table.add_row(_cells([c.header for c in cols]))
    table.add_hline()
    if long:
        table.end_table_header()
    for row in rows:
        table.add_row(_cells([row[i] for i in keep]))
    if frame.empty:
        table.add_row([MultiColumn(len(cols), align="l", data=NoEscape(r"\emph{no rows}"))])
    return NoEscape(table.dumps())


LONG_ROWS = 40  # more rows than fit on a page beside a heading: a longtable instead


def fit_table(frame: pd.DataFrame, cols: Sequence[Col]) -> NoEscape:
    """A table placed as it fits: up to :data:`LONG_ROWS` rows a centred tabular shrunk to
    the line width if wider (``\\fitwidth``, preamble); longer, a longtable in small type
    (``widetable``) that breaks across pages. A longtable cannot be shrunk, and floats
    queued while it runs wait until it ends, so short tables stay plain tabulars."""
    if len(frame) > LONG_ROWS:
        body = build_table(frame, cols, long=True)
        return NoEscape(f"\\begin{{widetable}}\n{body}\n\\end{{widetable}}")
    body = build_table(frame, cols)
    return NoEscape(f"\\begin{{center}}\n\\fitwidth{{{body}}}\n\\end{{center}}")


def speedup_columns() -> list[Col]:
    """The columns of the machine-readable speedup table, in ``SPEEDUP_HEADERS`` order."""
    return [
        Col("workload", text("workload")),
        Col("max_tokens", text("max_tokens"), "r"),
        Col("concurrency", text("concurrency"), "r"),
        Col("method", text("method")),
        Col("speedup", num("speedup"), "r"),
        Col("95% CI", ci(), "c"),
        Col("n", text("n"), "r"),
        Col("significant", yes_no("significant"), "c"),
    ]


def speedup_table(frame: pd.DataFrame, group: str = "") -> NoEscape:
    """The full speedup table, preceded by the ``SPEEDUP_MARKER`` comment line.

    ``group`` (e.g. ``engine=sglang tp=1``) is appended to the marker line, with
    newlines removed so the comment cannot spill into the document.
    """
    keys = ["workload", "max_tokens", "concurrency", "method"]
    body = build_table(frame.sort_values(keys), speedup_columns(), long=True)
    label = " ".join(group.split())
    marker = f"{SPEEDUP_MARKER} {label}".rstrip()
    return NoEscape(f"{marker}\n{body}\n% end-specsweep-speedup-table")


_UNESCAPE = [
    (r"\textbackslash{}", "\\"),
    (r"\textasciicircum{}", "^"),
    (r"\textasciitilde{}", "~"),
    (r"\textless{}", "<"),
    (r"\textgreater{}", ">"),
    (r"\textbar{}", "|"),
    (r"\textquotedbl{}", '"'),
    (r"\textquotesingle{}", "'"),
    (r"\textasciigrave{}", "`"),
    ("{[}", "["),
    ("{]}", "]"),
    ("{*}", "*"),
    ("-{}", "-"),
    (",{}", ","),
]


def unescape_simple(cell: str) -> str:
    """Invert :func:`escape_latex` for the ASCII names used in table keys."""
    for src, dst in _UNESCAPE:
        cell = cell.replace(src, dst)
    return re.sub(r"\\([{}$&#_%])", r"\1", cell)


def parse_speedup_tables(tex: str) -> list[dict[str, str]]:
    """Read every row of the machine-readable speedup table(s) back from ``report.tex``."""
    rows: list[dict[str, str]] = []
    for block in tex.split(SPEEDUP_MARKER)[1:]:
        block = block.split("% end-specsweep-speedup-table")[0]
        for line in block.splitlines():
            line = line.split(r"\\")[0]
            cells = [c.strip() for c in re.split(r"(?<!\\)&", line)]
            if len(cells) != len(SPEEDUP_HEADERS) or cells[0] == "workload":
                continue
            rows.append(dict(zip(SPEEDUP_HEADERS, map(unescape_simple, cells))))
    return rows
