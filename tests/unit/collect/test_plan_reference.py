"""docs/plan-reference.md is what the plan models say: regenerated, never edited by hand."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from specsweep.collect.plan.reference import REGENERATE, markdown

ROOT = Path(__file__).resolve().parents[3]
COMMITTED = ROOT / "docs" / "plan-reference.md"


def test_committed_reference_is_current() -> None:
    assert COMMITTED.read_text(encoding="utf-8") == markdown(), (
        f"docs/plan-reference.md is stale: the plan models changed; run `{REGENERATE}`"
    )


def test_every_model_and_field_is_listed() -> None:
    from specsweep.collect.plan.model import Plan

    text = markdown()
    schema = Plan.model_json_schema()
    for name, model in schema["$defs"].items():
        shown = name.removesuffix("_TraceText_")  # the generic trace workload, by its base name
        assert f"\n## {shown}\n" in text, name
        for field in model.get("properties", {}):
            assert f"| `{field}` |" in text, f"{name}.{field}"


def test_a_generic_model_is_shown_by_its_base_name() -> None:
    text = markdown()
    assert "[TraceWorkload](#traceworkload)" in text and "\n## TraceWorkload\n" in text
    assert "TraceText_" not in text


def test_types_defaults_and_links_read_as_written() -> None:
    text = markdown()
    assert "| `name` | str (length <= 64) | *required* |" in text
    assert "| `tp` | list of int (items >= 1) | `[1]` |" in text
    assert "| `warmup_requests` | int (>= 0, <= 10) | `1` |" in text
    assert "list of [Method](#method)" in text
    assert '`"process"` or `"systemd"`' in text


def test_cli_prints_the_same_text() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "specsweep.collect", "schema", "--markdown"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out == markdown()
