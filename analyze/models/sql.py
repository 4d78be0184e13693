"""SQL models: one file analyze/sql/<name>.sql each, the model named by the file
(request_metrics.sql is the model request_metrics). A file's name says what it builds, not
when: the build order is derived from what each file reads (analyze.models.model.ordered).

The declaration is the file's first comment lines:

    -- reads: request_metrics, service_starts, analysis_params
    -- request_metrics: one row per measured request ...   (the description: the rest of the
    -- grain: ...                                            leading comment block)

`-- reads:` names, comma-separated, every object the file's SQL reads: raw tables
(schema/ddl.sql), the raw layer's table macros (schema/measured.sql, written without their
parentheses) and other models' objects, TEMP macros included. Several `-- reads:` lines add up;
an empty one says the file reads nothing. What the file builds is what its CREATE statements
create (the kind from the statement: TABLE, VIEW, TEMP VIEW, TEMP MACRO ...).
tests/unit/analyze/test_models.py checks every file's reads against `references` of its SQL.
"""

from __future__ import annotations

import re
from functools import partial
from importlib import resources

from specsweep.analyze.models.model import TEMP_MACRO, Build, Model, ModelError
from specsweep.schema.metrics import measured_sql
from specsweep.schema.store import DDL

READS = re.compile(r"^--\s*reads:(.*)$")
CREATE = re.compile(
    r"\bCREATE\s+(?:OR\s+REPLACE\s+)?(TEMP(?:ORARY)?\s+)?(TABLE|VIEW|MACRO)\s+"
    r"(?:IF\s+NOT\s+EXISTS\s+)?(\w+)",
    re.IGNORECASE,
)
RAW_TABLE = re.compile(r"CREATE TABLE IF NOT EXISTS (\w+)")
RAW_TABLE_MACRO = re.compile(r"CREATE OR REPLACE MACRO (\w+)\([^)]*\) AS TABLE")
# a string literal ('' escapes a quote), a line comment or a block comment
NOISE = re.compile(r"'(?:[^']|'')*'|--[^\n]*|/\*.*?\*/", re.DOTALL)
SOURCE = re.compile(r"\b(FROM|JOIN)\s+", re.IGNORECASE)
ITEM = re.compile(r"(\w+(?:\.\w+)?)\s*(\()?")
ALIAS = re.compile(r"\s+(?:AS\s+)?(\w+)", re.IGNORECASE)
CTE = re.compile(r"(?:\bWITH(?:\s+RECURSIVE)?|,)\s*(\w+)\s+AS\s+(?:NOT\s+)?(?:MATERIALIZED\s*)?\(",
                 re.IGNORECASE)  # fmt: skip
# words that end a FROM item instead of naming its alias
CLAUSE = frozenset(
    re.findall(
        r"\w+",
        "where group order join left right inner outer full cross semi anti natural positional "
        "asof lateral on using union except intersect limit having window qualify select with "
        "pivot unpivot tablesample offset returning",
    )
)


def sql_files() -> list[str]:
    """The file names of analyze/sql/*.sql, sorted (package data: works from a wheel too)."""
    folder = resources.files("specsweep.analyze").joinpath("sql")
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".sql"))


def read_sql(file: str) -> str:
    """Text of analyze/sql/<file>."""
    return resources.files("specsweep.analyze").joinpath("sql", file).read_text(encoding="utf-8")


def header(file: str, text: str) -> tuple[tuple[str, ...], str]:
    """(reads, description) from the file's leading comment block."""
    lines = text.splitlines()
    block = lines[: next((i for i, line in enumerate(lines) if not line.startswith("--")), None)]
    if not block or not READS.match(block[0]):
        raise ModelError(f"analyze/sql/{file}: its first line must be `-- reads: ...`")
    declared = [m.group(1) for line in block if (m := READS.match(line))]
    reads = tuple(n.strip() for part in declared for n in part.split(",") if n.strip())
    rest = [line.removeprefix("--").removeprefix(" ") for line in block if not READS.match(line)]
    return reads, "\n".join(rest).strip("\n")


def creates(text: str) -> dict[str, str]:
    """Each object the SQL creates -> its kind ('table', 'temp view', 'temp macro', ...)."""
    found = {}
    for temp, kind, name in CREATE.findall(blank(text)):
        found[name] = ("temp " if temp else "") + kind.lower()
    return found


def _execute(text: str, build: Build) -> None:
    build.con.execute(text)


def load(file: str) -> Model:
    """The model of analyze/sql/<file>."""
    text = read_sql(file)
    reads, doc = header(file, text)
    builds = creates(text)
    if not builds:
        raise ModelError(f"analyze/sql/{file} creates nothing")
    return Model(
        name=file.removesuffix(".sql"),
        reads=reads,
        builds=builds,
        run=partial(_execute, text),
        source=f"analyze/sql/{file}",
        docs=dict.fromkeys(builds, doc),
    )


def sql_models() -> list[Model]:
    """Every SQL model, in file-name order."""
    return [load(file) for file in sql_files()]


def raw_layer() -> set[str]:
    """What analysis models may read without a model building it: the raw tables of
    schema/ddl.sql and the table macros of schema/measured.sql."""
    tables = RAW_TABLE.findall(DDL.read_text(encoding="utf-8"))
    return set(tables) | set(RAW_TABLE_MACRO.findall(measured_sql()))


def blank(text: str) -> str:
    """The SQL with its comments and string literals blanked out."""
    return NOISE.sub(lambda m: "''" if m.group(0).startswith("'") else " ", text)


def sources(text: str) -> set[tuple[str, bool]]:
    """(name, called) of every FROM and JOIN item of the SQL: a relation, or a table function
    (called: written with parentheses); `FROM a, b` gives both, a subquery none."""
    body, found = blank(text), set()
    for keyword in SOURCE.finditer(body):
        at = keyword.end()
        while item := ITEM.match(body, at):
            found.add((item.group(1), bool(item.group(2))))
            if keyword.group(1).upper() == "JOIN":
                break
            at = item.end()
            if item.group(2):  # skip the call's arguments
                at = _closing(body, item.end() - 1)
            alias = ALIAS.match(body, at)
            if alias and alias.group(1).lower() not in CLAUSE:
                at = alias.end()
            comma = re.compile(r"\s*,\s*").match(body, at)
            if not comma:
                break
            at = comma.end()
    return found


def _closing(body: str, opening: int) -> int:
    """The index just past the parenthesis that closes the one at `opening`."""
    depth = 0
    for i in range(opening, len(body)):
        depth += {"(": 1, ")": -1}.get(body[i], 0)
        if depth == 0:
            return i + 1
    return len(body)


def references(text: str, relations: set[str], macros: set[str]) -> set[str]:
    """What the SQL reads of the known objects: the `relations` its FROM and JOIN items name
    (tables, views, table macros; a CTE of the same name shadows one) and the scalar `macros`
    it calls."""
    body = blank(text)
    ctes = {name.lower() for name in CTE.findall(body)}
    found = {name for name, _ in sources(text) if name in relations and name.lower() not in ctes}
    found |= {name for name in macros if re.search(rf"\b{name}\s*\(", body)}
    return found


__all__ = ["TEMP_MACRO", "load", "raw_layer", "read_sql", "references", "sql_models"]
