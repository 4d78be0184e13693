"""One analysis model, the build it runs in, and the build order derived from what each reads.

A model builds one or more objects (a table, a view, a TEMP view, table or macro) from what it
reads: raw tables (schema/ddl.sql), the raw layer's table macros (schema/measured.sql) and the
objects of other models. The order is a topological sort of "reads" (graphlib finds a cycle):
every model comes after the models that build what it reads, and otherwise in the order the
models are given (SQL files by name, then the Python registry), each one's inputs pulled in
just before it, so an independent model keeps its place. A name that no model builds and
the raw layer does not hold, an object built twice, or a cycle is a ModelError naming the
model.
"""

from __future__ import annotations

import graphlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import duckdb

TABLE, VIEW = "table", "view"
TEMP_TABLE, TEMP_VIEW, TEMP_MACRO = "temp table", "temp view", "temp macro"
PERSISTENT = (TABLE, VIEW)  # what stays in the file after the build; the rest is the build's


class ModelError(ValueError):
    """A model's declaration does not hold: an unknown input, a cycle, an object built twice,
    a header without its `-- reads:` line."""


@dataclass
class Build:
    """What every model's function gets: the open connection (inside the build's transaction),
    the baseline name, the inter-token latencies computed before the write lock was taken, and
    the closed-loop strata's start variances, which the `claims` model leaves for `category`
    (it reads start_variance, so the order puts it after claims)."""

    con: duckdb.DuckDBPyConnection
    baseline: str
    latencies: Any = None  # analyze.itl.Latencies
    variances: dict[tuple, Any] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class Model:
    """name: the model's name (a SQL file's name without `.sql`); reads: the objects it
    reads; builds: each object it creates and its kind (TABLE, VIEW, TEMP_*); run: what builds
    them; source: where it is written; docs: each built object's description (a SQL header, a
    module's docstring)."""

    name: str
    reads: tuple[str, ...]
    builds: dict[str, str]
    run: Callable[[Build], None]
    source: str
    docs: dict[str, str]

    @property
    def persistent(self) -> list[str]:
        """The objects it builds that stay in the file (tables and views)."""
        return [name for name, kind in self.builds.items() if kind in PERSISTENT]


def producers(models: Iterable[Model]) -> dict[str, Model]:
    """Each built object -> the model that builds it (an object built twice is an error)."""
    found: dict[str, Model] = {}
    for model in models:
        for name in model.builds:
            if name in found:
                raise ModelError(f"{name} is built by both {found[name].name} and {model.name}")
            found[name] = model
    return found


def ordered(models: list[Model], raw: Iterable[str]) -> list[Model]:
    """The models in build order: each after the models that build what it reads."""
    names = [m.name for m in models]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ModelError(f"two models are named {', '.join(twice)}")
    by_object, raw = producers(models), set(raw)
    needs: dict[str, list[Model]] = {}
    for model in models:
        unknown = sorted(r for r in model.reads if r not in by_object and r not in raw)
        if unknown:
            raise ModelError(
                f"model {model.name} ({model.source}) reads {', '.join(unknown)}: no model "
                "builds it and the raw layer has no such table"
            )
        deps = {by_object[r].name for r in model.reads if r in by_object} - {model.name}
        needs[model.name] = [m for m in models if m.name in deps]  # in the given order
    try:
        graphlib.TopologicalSorter({k: [m.name for m in v] for k, v in needs.items()}).prepare()
    except graphlib.CycleError as exc:
        cycle = " -> ".join(exc.args[1])
        raise ModelError(f"models read each other in a cycle: {cycle}") from None
    out: dict[str, Model] = {}

    def visit(model: Model) -> None:  # inputs first, each in the given order
        if model.name not in out:
            for dep in needs[model.name]:
                visit(dep)
            out[model.name] = model

    for model in models:
        visit(model)
    return list(out.values())
