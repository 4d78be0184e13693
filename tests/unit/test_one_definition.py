"""One definition each (issue 37): the comparison key and every shared formula are written
once, and this test fails when one is written out again elsewhere in the project's code.

It greps the SQL and Python of collect/, schema/, analyze/, report/ and specsweep/ with
comments and docstrings left out (a header states a table's grain and its formula in words:
STYLE.md 6 and 7). Each pattern is specific to the written-out formula, and each must still
find its own definition, so a pattern that matches nothing fails too.

- The comparison key (schema.keys.COMPARISON_KEY, schema/keys.sql's comparison_key()): a
  list of names (SQL columns, Python strings, an ON clause of equalities) that holds engine,
  tp, workload, max_tokens and concurrency side by side, campaign_id and method perhaps among
  them. Allowed: its two definitions; report.keys.WINDOW (report imports nothing of the
  project; it checks the file's macro on load); and DuckDB's USING (...) and EXCLUDE (...),
  which take column names only (schema/keys.sql says what a query writes instead elsewhere).
- The formulas: TPOT and decode speed (schema/metrics.sql, with the Python twins and the
  catalogue's text in schema/metrics.py), acceptance length per request and pooled (also the
  frozen copy a migration step keeps, schema/migrations.py), the counter acceptance
  (accept_length_counters), the SLO rule (meets_slo), the Wilson interval (wilson.sql and
  its twin analyze.compare.stats.wilson), the default baseline and the default results file
  (schema.defaults; report's palette and `--db`, which may not import it).
"""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from collections import Counter
from pathlib import Path

import pytest

from specsweep.report import __main__ as report_main
from specsweep.report import keys as report_keys
from specsweep.schema import defaults, keys

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("collect", "schema", "analyze", "report", "specsweep")

CORE = {"engine", "tp", "workload", "max_tokens", "concurrency"}  # the key within a campaign
KEYISH = CORE | {"campaign_id", "method"}
ITEM = r"(?:[A-Za-z_]\w*\.)?[A-Za-z_]\w*(?!\w|\.|\s*[(<>=!+\-*/])"
NAME_LIST = re.compile(rf"{ITEM}(?:\s*,\s*{ITEM})+")
EQUALS = re.compile(r"\b[A-Za-z_]\w*\.([A-Za-z_]\w*)\s*=\s*[A-Za-z_]\w*\.\1\b")
SQL_LIST = re.compile(r"\[\s*'\w+'(?:\s*,\s*'\w+')*\s*\]")
NAMES_ONLY = re.compile(r"\b(?:USING|EXCLUDE)\s*\(\s*$", re.IGNORECASE)
# occurrences of the spelled-out key each file may hold: its definitions (report.keys: report
# imports nothing of the project)
KEY_DEFINITIONS = Counter({"schema/keys.py": 1, "schema/keys.sql": 1, "report/keys.py": 1})

_Q = r"(?:[A-Za-z_]\w*\.)?"  # an optional table alias
FORMULAS: dict[str, tuple[str, set[str]]] = {
    "TPOT": (
        rf"\(\s*{_Q}e2e_s\s*-\s*{_Q}ttft_s\s*\)\s*/\s*\(\s*{_Q}output_tokens\s*-\s*1\s*\)",
        {"schema/metrics.sql", "schema/metrics.py"},
    ),
    "decode speed": (
        rf"\(\s*{_Q}output_tokens\s*-\s*1\s*\)\s*/\s*\(\s*{_Q}e2e_s\s*-\s*{_Q}ttft_s\s*\)",
        {"schema/metrics.sql", "schema/metrics.py"},
    ),
    "acceptance length per request": (
        rf"\(\s*{_Q}output_tokens\s*-\s*1\s*\)\s*/\s*{_Q}spec_verify_ct\b",
        {"schema/metrics.sql", "schema/metrics.py", "schema/migrations.py"},
    ),
    "acceptance length pooled": (
        rf"sum\(\s*{_Q}output_tokens\s*-\s*1\s*\)",
        {"schema/metrics.sql", "schema/metrics.py"},
    ),
    "counter acceptance": (
        rf"1\s*\+\s*(?:sum\(\s*)?{_Q}d_accepted\b",
        {"schema/metrics.sql", "schema/metrics.py"},
    ),
    "SLO rule": (
        r"\*\s*1000\s*<=\s*(?:self\.)?(?:ttft|tpot|e2e)_ms\b",
        {"schema/metrics.sql", "schema/metrics.py"},
    ),
    "Wilson interval": (
        r"(?:\bz\s*\*\s*z|\*\*\s*2)\s*/\s*\(\s*4\s*\*\s*n\s*\*\s*n\s*\)",
        {"analyze/sql/wilson.sql", "analyze/compare/stats.py"},
    ),
    "default baseline": (
        r"""["']autoregressive["']""",
        {"schema/defaults.py", "report/charts/theme.py"},
    ),
    "default results file": (
        r"results/specsweep\.duckdb",
        {"schema/defaults.py", "report/__main__.py"},
    ),
}


def _files() -> list[Path]:
    return [
        path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*"))
        if path.suffix in (".sql", ".py")
    ]


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _sql(text: str) -> str:
    """SQL without its comments, a list literal of names (['a', 'b']) as the names."""
    text = re.sub(r"--[^\n]*", "", text)
    return SQL_LIST.sub(lambda m: m[0].replace("'", "")[1:-1], text)


@functools.cache
def _sources() -> dict[str, str]:
    """The project's SQL and Python, relative path -> text without comments and docstrings
    (line numbers kept)."""
    return {
        _rel(path): (_sql(text) if path.suffix == ".sql" else _code(text))
        for path in _files()
        for text in [path.read_text(encoding="utf-8")]
    }


def _code(text: str) -> str:
    """Python text without its comments and docstrings (string constants that are
    statements); SQL held in strings stays."""
    lines = text.splitlines(keepends=True)
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            row, col = tok.start
            lines[row - 1] = lines[row - 1][:col] + "\n"
    for node in _docstrings(ast.parse(text)):
        for i in range(node.lineno - 1, node.end_lineno or node.lineno):
            lines[i] = "\n"
    return "".join(lines)


def _docstrings(tree: ast.AST) -> list[ast.Constant]:
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    ]


def _names(path: Path) -> list[tuple[int, str]]:
    """Where a file can spell column names: an SQL file's text; in Python, each string
    (SQL, its comments left out) and each list, tuple or set of strings, joined by commas
    (Python's own names are variables, not columns). (line, text) pairs."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".sql":
        return [(1, _sql(text))]
    tree = ast.parse(text)
    docs = {id(node) for node in _docstrings(tree)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.List | ast.Tuple | ast.Set) and node.elts:
            values = [e.value for e in node.elts if isinstance(e, ast.Constant)]
            if len(values) == len(node.elts) and all(isinstance(v, str) for v in values):
                out.append((node.lineno, ", ".join(values)))
        elif (
            isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
        ):
            out.append((node.lineno, _sql(node.value)))
    return out


def spelled_keys(text: str) -> list[int]:
    """Lines of text (from 1) where it spells out the comparison key (module docstring)
    other than inside USING (...) or EXCLUDE (...)."""
    text = EQUALS.sub(r"\1", text)
    text = re.sub(r"\s+AND\s+", ", ", text, flags=re.IGNORECASE)
    found = []
    for match in NAME_LIST.finditer(text):
        names = [re.sub(r"^\w+\.", "", item.strip()) for item in match[0].split(",")]
        if _holds_key(names) and not NAMES_ONLY.search(text[: match.start()]):
            found.append(text.count("\n", 0, match.start()) + 1)
    return found


def _holds_key(names: list[str]) -> bool:
    """Some run of consecutive names, each a key column or method, holds the whole CORE and
    either campaign_id or the list's first place: a table's whole column list, where other
    columns precede engine (service_id, config_id), is not the key written out."""
    run: set[str] = set()
    first = True
    for name in names:
        if name not in KEYISH:
            run, first = set(), False
            continue
        run.add(name)
        if run >= CORE and (first or "campaign_id" in run):
            return True
    return False


def test_the_key_checker_finds_what_it_should() -> None:
    assert spelled_keys("SELECT campaign_id, engine, tp, workload, max_tokens, concurrency, n")
    assert spelled_keys("SELECT a.engine, a.tp, a.method, a.workload, a.max_tokens, a.concurrency")
    assert spelled_keys("engine, tp, workload, max_tokens, concurrency")  # a Python list's
    assert spelled_keys(
        "ON a.campaign_id = b.campaign_id AND a.engine = b.engine AND a.tp = b.tp\n"
        "AND a.workload = b.workload AND a.max_tokens = b.max_tokens\n"
        "AND a.concurrency = b.concurrency"
    )
    assert not spelled_keys("JOIN s USING (campaign_id, engine, tp, workload, max_tokens,\n"
                            "                concurrency, method)")  # fmt: skip
    assert not spelled_keys("SELECT COLUMNS(comparison_key()), method, n FROM t GROUP BY ALL")
    # a table's full column list is not the key: other columns stand between
    assert not spelled_keys("SELECT campaign_id, service_id, engine, tp, method, workload, "
                            "max_tokens, concurrency")  # fmt: skip


def test_the_comparison_key_is_spelled_out_only_where_it_is_defined() -> None:
    found = {
        _rel(path): [line + at - 1 for line, text in _names(path) for at in spelled_keys(text)]
        for path in _files()
    }
    extra = {path: lines for path, lines in found.items() if len(lines) > KEY_DEFINITIONS[path]}
    assert not extra, (
        "the comparison key written out (file: lines); call comparison_key() in SQL "
        f"(schema/keys.sql) or import schema.keys in Python: {extra}"
    )
    for path, n in KEY_DEFINITIONS.items():
        assert len(found[path]) == n, path  # each definition is still found


@pytest.mark.parametrize("name", FORMULAS)
def test_a_formula_is_written_out_only_in_its_definition(name: str) -> None:
    pattern, allowed = FORMULAS[name]
    where = {path for path, text in _sources().items() if re.search(pattern, text, re.IGNORECASE)}
    assert where - allowed == set(), f"{name} written out again in {sorted(where - allowed)}"
    assert where & allowed, f"the {name} pattern no longer finds its definition"


def test_the_copies_report_keeps_agree_with_the_definitions() -> None:
    """report imports nothing of the project: its key, its `--db` default and the Makefile's
    DB are the definitions' values."""
    assert ["campaign_id", *report_keys.WINDOW] == list(keys.COMPARISON_KEY)
    assert defaults.DEFAULT_DB.as_posix() == report_main.DEFAULT_DB
    make_db = re.search(r"^DB\s*\?=\s*(\S+)", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert make_db and make_db[1] == defaults.DEFAULT_DB.as_posix()
