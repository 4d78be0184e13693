"""The bad-plan corpus through the command line: every malformed plan exits with status 2
and a short message naming the field (or YAML) and the line; never a traceback."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specsweep.collect.__main__ import app
from tests.unit.collect.test_plan import BAD_FIELDS, BASE, edit

MORE = [
    edit("max_tokens: [64]", "max_tokens: [64"),  # unclosed bracket
    edit("  model: m.gguf", "\tmodel: m.gguf"),  # tab indent
    BASE + "name: again\n",  # key given twice
    "- name: t\n- engine: x\n",  # a list, not a mapping
    "",  # empty file
    BASE + "warmup_requests: -1\n",  # negative count
    BASE + "warmup_requests: 99\n",  # above the limit
    BASE + "tp: [0]\n",  # impossible tp
    BASE + "host: {kind: ssh}\n",  # ssh without address
    BASE + "host: {kind: cloud}\n",  # unknown host kind
    BASE + "host: {kind: external, url: 'not a url'}\n",  # bad external url
    BASE + "host: {kind: ssh, address: h, port: 70000}\n",  # port out of range
    BASE + "phases: [{name: p, tp: 1}, {name: p, tp: 1}]\n",  # duplicate phase
    BASE + "phases: [{name: a, tp: 1, methods: {best_of: b}}, {name: b, tp: 1}]\n",  # order
    BASE + "phases: [{name: p, tp: 1, stop_services: [gpu0]}]\n",  # unknown service
]


@pytest.mark.parametrize(
    "text",
    [p.values[0] for p in BAD_FIELDS] + MORE,
    ids=lambda t: hashlib.sha1(t.encode()).hexdigest()[:6],
)
def test_bad_plan_exits_2_with_a_short_message(text: str, tmp_path: Path) -> None:
    plan = tmp_path / "bad.yaml"
    plan.write_text(text)
    result = CliRunner().invoke(app, ["check", str(plan)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert f"{plan}:" in result.output and len(result.output.splitlines()) <= 12
    assert "line" in result.output or "YAML mapping" in result.output


def test_the_corpus_has_at_least_30_plans() -> None:
    assert len(BAD_FIELDS) + len(MORE) >= 30
