"""The plan reference (docs/plan-reference.md), generated from the pydantic plan models.

The field descriptions live once, in the models; this module turns the plan's JSON Schema
into one markdown table per model (field, type, default, description), in the order a
reader meets them from the top-level plan. `python -m specsweep.collect schema --markdown`
prints it, and tests/unit/collect/test_plan_reference.py fails when the committed copy is stale.
"""

from __future__ import annotations

import json
import re
from typing import Any

from specsweep.collect.plan.model import Plan

__all__ = ["REGENERATE", "markdown"]

REGENERATE = "python -m specsweep.collect schema --markdown > docs/plan-reference.md"
_SCALARS = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "null": "null",
    "object": "mapping",
}
_HEADER = f"""# Plan reference

Generated from the pydantic models (`collect/plan/`, each engine's in `collect/engines/`);
do not edit by hand: a test fails when this file differs from what the models say.
Regenerate it with

    {REGENERATE}

A plan is YAML; every model forbids unknown fields. `python -m specsweep.collect schema` prints the
same schema as JSON Schema, for editors. A field whose default says *required* must be given.
"""


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _shown(name: str) -> str:
    """A model's name as the reference shows it: pydantic names a generic model with its
    parameters (`TraceWorkload_TraceText_`); the plan has one of each, so the base name."""
    return re.sub(r"_[A-Za-z0-9]+_$", "", name)


def _link(name: str) -> str:
    return f"[{_shown(name)}](#{_shown(name).lower()})"


def _type(node: dict[str, Any]) -> str:
    """A short human reading of a JSON Schema node: `list of int`, `str or null`, links."""
    if "$ref" in node:
        return _link(_ref_name(node["$ref"]))
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    if "enum" in node:
        return " or ".join(f"`{json.dumps(v)}`" for v in node["enum"])
    for key in ("oneOf", "anyOf"):
        if key in node:
            return " or ".join(_type(option) for option in node[key])
    kind = node.get("type")
    if kind == "array":
        if "prefixItems" in node:
            return "[" + ", ".join(_type(item) for item in node["prefixItems"]) + "]"
        return "list of " + _type(node.get("items", {}))
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        return "mapping to " + _type(node["additionalProperties"])
    return _SCALARS.get(kind, "any")


def _bounds(node: dict[str, Any]) -> str:
    """Numeric and length bounds of a field, from the node or its non-null option."""
    options = [node, *node.get("anyOf", [])]
    words = {
        "minimum": ">=",
        "maximum": "<=",
        "exclusiveMinimum": ">",
        "exclusiveMaximum": "<",
        "minItems": "items >=",
        "maxLength": "length <=",
    }
    found = [
        f"{sign} {option[key]}"
        for option in options
        for key, sign in words.items()
        if key in option
    ]
    return f" ({', '.join(found)})" if found else ""


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _default(node: dict[str, Any], required: bool) -> str:
    if required:
        return "*required*"
    if "default" not in node:
        return "*empty*"  # a default_factory: an empty list or mapping
    return f"`{json.dumps(node['default'])}`".replace("|", "\\|")


def _table(name: str, model: dict[str, Any]) -> list[str]:
    lines = [f"## {_shown(name)}", ""]
    if model.get("description"):
        lines += [_cell(model["description"]), ""]
    lines += ["| field | type | default | description |", "|---|---|---|---|"]
    required = set(model.get("required", []))
    for field, node in model.get("properties", {}).items():
        cells = [
            f"`{field}`",
            _cell(_type(node) + _bounds(node)),
            _default(node, field in required),
            _cell(node.get("description", "")),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return [*lines, ""]


def _refs(node: Any) -> list[str]:
    """Names of the models a schema node refers to, in reading order."""
    if isinstance(node, dict):
        own = [_ref_name(node["$ref"])] if "$ref" in node else []
        return own + [name for value in node.values() for name in _refs(value)]
    if isinstance(node, list):
        return [name for item in node for name in _refs(item)]
    return []


def _reading_order(schema: dict[str, Any]) -> list[str]:
    """Models breadth-first from the plan, so a table comes after the one that links it."""
    defs = schema.get("$defs", {})
    order, queue = [], _refs(schema.get("properties", {}))
    while queue:
        name = queue.pop(0)
        if name not in order:
            order.append(name)
            queue += _refs(defs[name].get("properties", {}))
    return order + sorted(set(defs) - set(order))


def markdown() -> str:
    """The plan reference as markdown, ending with one newline."""
    schema = Plan.model_json_schema()
    lines = [_HEADER] + _table("Plan", schema)
    for name in _reading_order(schema):
        lines += _table(name, schema["$defs"][name])
    return "\n".join(lines).rstrip("\n") + "\n"
