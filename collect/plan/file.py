"""Loading plan files: YAML -> Plan, with errors that name the field and the line.

A key given twice is an error (plain YAML silently keeps the last one); pydantic's
validation errors are mapped back to the line of the offending YAML node.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from specsweep.collect import engines
from specsweep.collect.plan.model import Plan


class PlanError(ValueError):
    """A plan that cannot be used; the message names the file, field and line."""


def load_plan(path: str | Path) -> Plan:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise PlanError(f"{path}: cannot read plan: {exc.strerror}") from None
    return parse_plan(text, str(path))


def parse_plan(text: str, source: str = "<plan>") -> Plan:
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise PlanError(f"{source}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise PlanError(f"{source}: a plan is a YAML mapping with name, engine, methods, workloads")
    try:
        return Plan.model_validate(data)
    except ValidationError as exc:
        raise PlanError(_describe(exc, root, source)) from None


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice (plain YAML keeps the last silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is given twice", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _describe(exc: ValidationError, root: yaml.Node | None, source: str) -> str:
    lines = [f"{source}: invalid plan ({exc.error_count()} problem(s)):"]
    for err in exc.errors(include_url=False):
        loc = [p for p in err["loc"] if not _is_tag(p)]
        field = ".".join(str(p) for p in loc) or "(top level)"
        line = _line_of(root, loc)
        where = f" (line {line})" if line else ""
        lines.append(f"  - {field}{where}: {err['msg']}")
    return "\n".join(lines)


def _is_tag(part: object) -> bool:
    """pydantic adds the discriminator value (e.g. 'llamacpp') to union error paths."""
    return isinstance(part, str) and part in {
        "local",
        "ssh",
        "external",
        *engines.modules(),
        "humaneval",
        "mtbench",
        "inline",
        "requests",
        "agentic",
    }


def _line_of(node: yaml.Node | None, loc: list[Any]) -> int | None:
    """1-based line of the deepest YAML node found along loc."""
    line = node.start_mark.line + 1 if node is not None else None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            match = [v for k, v in node.value if getattr(k, "value", None) == part]
            if not match:
                return line
            node = match[0]
        elif (
            isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value)
        ):
            node = node.value[part]
        else:
            return line
        line = node.start_mark.line + 1
    return line


def json_schema() -> dict[str, Any]:
    """JSON Schema of the plan, for editors (yaml-language-server)."""
    return Plan.model_json_schema()
