"""Method families: a method with a `grid` of parameter values stands for one concrete method
per value (per combination, the cross product, with two or more parameters).

    - name: ddtree
      name_template: "ddtree-b{budget}"
      grid: {budget: [8, 16, 32]}
      args: [--speculative-ddtree-budget, "{budget}"]

expands to ddtree-b8, ddtree-b16 and ddtree-b32, each with family `ddtree`, params
{budget: ...} and `{budget}` replaced in its args and env values. `{model}` and `{api_key}` are
the engine's and stay as written. The derived name is the template with each `{param}` (and
`{name}` / `{family}`: the family's name) replaced; the default is `{name}-{p1}{v1}-{p2}{v2}`
(params in grid order), e.g. ddtree-budget8. A family's name may stand for all its members in
phases' `methods`, `estimates.speedup` and `baseline` (a one-member family there). A method
without a grid may carry `params` written by hand: stored the same way (table method_params),
and they fill their own `{param}` placeholders too.

This module works on plain values so that the plan models (collect.plan.fields,
collect.plan.model) can call it without an import cycle; it raises ValueError with a message
that names the field, which pydantic reports with the method's YAML line.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from specsweep.schema.controls import aa_control_name

PARAM_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
ENGINE_PLACEHOLDERS = frozenset({"model", "api_key"})  # expanded by the engine, never here
FAMILY_PLACEHOLDERS = frozenset({"name", "family"})  # in name_template: the family's name

Scalar = bool | int | float | str


def substitute(text: str, values: Mapping[str, Scalar]) -> str:
    """`text` with every `{param}` of `values` replaced by str(value); other braces (JSON,
    {model}, {api_key}) stay as written."""
    return PLACEHOLDER.sub(lambda m: str(values[m[1]]) if m[1] in values else m[0], text)


def placeholders(texts: Iterable[str]) -> set[str]:
    return {name for text in texts for name in PLACEHOLDER.findall(text)}


def check_param_name(field: str, param: str) -> None:
    if not re.match(PARAM_PATTERN, param):
        raise ValueError(f"{field}: parameter name {param!r} must match {PARAM_PATTERN}")
    if param in ENGINE_PLACEHOLDERS | FAMILY_PLACEHOLDERS:
        raise ValueError(
            f"{field}: {param!r} is reserved ({{model}} and {{api_key}} are the "
            "engine's, {name} and {family} the family's name)"
        )


def check_values(param: str, values: Sequence[Scalar]) -> None:
    """A grid parameter's value list: non-empty, no value twice (compared as written in a
    name or a flag, so 8 and "8" are the same value)."""
    check_param_name("grid", param)
    if not values:
        raise ValueError(f"grid.{param}: the list of values is empty")
    texts = [str(v) for v in values]
    dupes = sorted({t for t in texts if texts.count(t) > 1})
    if dupes:
        raise ValueError(f"grid.{param}: duplicate values {dupes}")


def combinations(grid: Mapping[str, Sequence[Scalar]]) -> list[dict[str, Scalar]]:
    """Every combination of the grid's values (the cross product, in grid order)."""
    params = list(grid)
    return [
        dict(zip(params, combo, strict=True))
        for combo in itertools.product(*(grid[p] for p in params))
    ]


def derived_name(family: str, template: str | None, values: Mapping[str, Scalar]) -> str:
    if template is None:
        return family + "".join(f"-{p}{v}" for p, v in values.items())
    return substitute(template, {"name": family, "family": family, **values})


def check_family(
    name: str,
    grid: Mapping[str, Sequence[Scalar]],
    params: Mapping[str, Scalar],
    args: Sequence[str],
    env: Mapping[str, str],
    template: str | None,
    family: str | None,
) -> list[str]:
    """Check one method's family fields; return the names it expands to (its own name
    when it has no grid)."""
    for param in params:
        check_param_name("params", param)
    overlap = sorted(set(grid) & set(params))
    if overlap:
        raise ValueError(
            f"params: {overlap} are also in grid: a parameter is either fixed "
            "(params) or swept (grid)"
        )
    _check_placeholders(grid, params, args, env)
    if not grid:
        if template is not None:
            raise ValueError("name_template: only a method with a grid derives names")
        return [name]
    if family is not None:
        raise ValueError(
            f"family: a method with a grid is the family {name!r} itself; "
            "family is set on each expanded method"
        )
    for param, values in grid.items():
        check_values(param, values)
    texts = [*args, *env.values()]
    unused = [p for p in grid if p not in placeholders(texts)]
    if unused:
        raise ValueError(
            f"grid.{unused[0]}: {{{unused[0]}}} appears in no arg or env value, "
            "so every value would run the same configuration"
        )
    return _member_names(name, grid, template)


def _check_placeholders(
    grid: Mapping[str, Any],
    params: Mapping[str, Scalar],
    args: Sequence[str],
    env: Mapping[str, str],
) -> None:
    known = set(grid) | set(params) | ENGINE_PLACEHOLDERS
    for field, texts in (("args", args), ("env", list(env.values()))):
        unknown = sorted(placeholders(texts) - known)
        if unknown:
            raise ValueError(
                f"{field}: {', '.join('{' + u + '}' for u in unknown)} names no parameter of "
                f"this method (grid: {sorted(grid) or 'none'}, params: {sorted(params) or 'none'}"
                "; {model} and {api_key} are the engine's)"
            )


def _member_names(
    name: str, grid: Mapping[str, Sequence[Scalar]], template: str | None
) -> list[str]:
    if template is not None:
        unknown = sorted(placeholders([template]) - set(grid) - FAMILY_PLACEHOLDERS)
        if unknown:
            raise ValueError(
                f"name_template: {{{unknown[0]}}} is not a grid parameter "
                f"(grid: {list(grid)}; {{name}} is the family's name)"
            )
    names: dict[str, dict[str, Scalar]] = {}
    for values in combinations(grid):
        derived = derived_name(name, template, values)
        if derived in names:
            raise ValueError(
                f"name_template: {derived!r} is derived for both {names[derived]} "
                f"and {values}; name every swept parameter in the template"
            )
        names[derived] = values
    return list(names)


def expand(method: Any) -> list[Any]:
    """The concrete methods of one (validated) Method: itself when it has no grid."""
    if not method.grid:
        if not placeholders([*method.args, *method.env.values()]) & set(method.params):
            return [method]
        return [
            method.model_copy(
                update={  # hand-written params fill their placeholders
                    "args": [substitute(a, method.params) for a in method.args],
                    "env": {k: substitute(v, method.params) for k, v in method.env.items()},
                }
            )
        ]
    members = []
    for values in combinations(method.grid):
        members.append(
            method.model_copy(
                update={
                    "name": derived_name(method.name, method.name_template, values),
                    "args": [substitute(a, {**method.params, **values}) for a in method.args],
                    "env": {
                        k: substitute(v, {**method.params, **values}) for k, v in method.env.items()
                    },
                    "grid": {},
                    "name_template": None,
                    "family": method.name,
                    "params": {**method.params, **values},
                }
            )
        )
    return members


def expand_all(methods: Sequence[Any]) -> list[Any]:
    """Every method expanded, with the concrete names checked: unique, and no family named
    like a concrete method (a phase or estimate naming it would be ambiguous)."""
    out = [c for m in methods for c in expand(m)]
    names = [m.name for m in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        derived = sorted(
            {m.name for m in methods if m.grid and {c.name for c in expand(m)} & set(dupes)}
        )
        source = f" (derived by families {derived})" if derived else ""
        raise ValueError(f"duplicate method names {dupes}{source}")
    clash = sorted(set(family_members(out)) & set(names))
    if clash:
        raise ValueError(
            f"family names {clash} are also method names: a phase or estimate "
            "naming them would be ambiguous"
        )
    return out


def with_aa_control(methods: Sequence[Any], baseline: str, on: bool) -> list[Any]:
    """`methods`, and when `on` the baseline's A/A control last: the baseline method under
    the name schema.controls.aa_control_name gives, with the same args, env, tp, workloads and
    draft (the same launch command; config_id hashes the name, so it is a configuration of its
    own) and no family or params (no family member, no method_params rows). Last in `methods`
    makes it the last service of each phase: starts drift, so it should not start right after
    the baseline. ValueError naming aa_control when a method already has the name: reserved
    either way, since analysis reads a method of that name as the control."""
    control = aa_control_name(baseline)
    if any(m.name == control for m in methods):
        raise ValueError(
            f"aa_control: method name {control!r} is reserved for the A/A control "
            f"of baseline {baseline!r} (the baseline started again, which analysis "
            "recognises by this name); rename the method"
        )
    if not on:
        return list(methods)
    base = next(m for m in methods if m.name == baseline)
    return [
        *methods,
        base.model_copy(
            update={
                "name": control,
                "family": None,
                "params": {},
                "grid": {},
                "name_template": None,
            }
        ),
    ]


def one_member(name: str, methods: Iterable[Any]) -> str:
    """A name that must stand for one method (the baseline): a one-member family's member."""
    members = family_members(methods).get(name)
    if members is None:
        return name
    if len(members) != 1:
        raise ValueError(
            f"{name!r} is a family of {len(members)} methods {members}; name one of them"
        )
    return members[0]


def per_member(figures: Mapping[str, float], grouped: Mapping[str, list[str]]) -> dict[str, float]:
    """Figures keyed by method or family -> by method: a family's figure holds for each
    member; a member named on its own keeps its own."""
    out = {member: value for name, value in figures.items() for member in grouped.get(name, [])}
    out.update({k: v for k, v in figures.items() if k not in grouped})
    return out


def family_members(methods: Iterable[Any]) -> dict[str, list[str]]:
    """Family name -> its members' names, for every family with a member that is not named
    like the family (a method on its own is its own family and needs no entry)."""
    out: dict[str, list[str]] = {}
    for m in methods:
        if m.family is not None and m.family != m.name:
            out.setdefault(m.family, []).append(m.name)
    return out


def resolve(names: Iterable[str], families: Mapping[str, list[str]]) -> list[str]:
    """Names with every family name replaced by its members (order kept, no repeats)."""
    out: list[str] = []
    for n in names:
        for member in families.get(n, [n]):
            if member not in out:
                out.append(member)
    return out


def resolve_phases(phases: list[Any] | None, methods: Iterable[Any]) -> list[Any] | None:
    """Phases whose method lists name families, with the families' members instead."""
    grouped = family_members(methods)
    if phases is None or not grouped:
        return phases
    return [
        p.model_copy(update={"methods": resolve(p.methods, grouped)})
        if isinstance(p.methods, list)
        else p
        for p in phases
    ]


def numeric(value: Scalar) -> float | None:
    """value_num of a method_params row: the value as a number, None when it is not one
    (a bool is not a number here; a string that reads as a finite number is)."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None
