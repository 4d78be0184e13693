"""Tests for collect/plan/model.py: the shipped plan loads, ids are stable, bad plans fail early.

A bad plan must raise `PlanError` naming the field and the line of the YAML file that holds
it. Expected lines are found by searching the plan text for a marker, independently of the
YAML parser the code uses.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from specsweep.collect.plan.file import PlanError, json_schema, load_plan, parse_plan
from specsweep.collect.plan.model import AgenticWorkload, RequestsWorkload

ROOT = Path(__file__).resolve().parents[3]
LOCAL_PLAN = ROOT / "plans" / "local.yaml"

# A small valid plan; bad plans below are this text plus one edit.
BASE = """\
name: t
engine:
  kind: llamacpp
  model: m.gguf
methods:
  - name: autoregressive
  - name: ngram
    args: ["--spec-type", "ngram-simple"]
workloads:
  - name: w
    prompts:
      kind: inline
      texts: [hello]
    max_tokens: [64]
"""

AGENTIC = """\
  - name: ag
    kind: agentic
    turns:
      - role: user
        content: write a function
      - role: tool
        content: tests pass
    max_tokens: [8]
"""


def edit(old: str, new: str, text: str = BASE) -> str:
    assert old in text, f"test bug: {old!r} not in plan"
    return text.replace(old, new, 1)


def line_of(text: str, marker: str, nth: int = 1) -> int:
    """1-based line of the nth line containing marker."""
    hits = [i for i, line in enumerate(text.splitlines(), start=1) if marker in line]
    assert len(hits) >= nth, f"test bug: marker {marker!r} not found {nth} time(s)"
    return hits[nth - 1]


def problems(message: str) -> list[tuple[str, int]]:
    """(field, line) of every `  - field (line N): ...` entry of a PlanError message."""
    return [
        (f, int(n)) for f, n in re.findall(r"^\s+- (.+?) \(line (\d+)\):", message, re.MULTILINE)
    ]


# --- the shipped plan ---------------------------------------------------------------------


def test_local_plan_loads_with_six_methods_in_three_rounds_and_baseline_first() -> None:
    """No A/A control: its 3 rounds (the default `repeat`) start every configuration three
    times, which measures the start-to-start spread (docs/aa-control.md)."""
    plan = load_plan(LOCAL_PLAN)
    assert [m.name for m in plan.methods] == [
        "autoregressive",
        "ngram-map-k",
        "ngram-simple",
        "draft-simple-n1",  # the draft-simple family, one method per --spec-draft-n-max
        "draft-simple-n4",
        "draft-simple-n8",
    ]
    assert plan.baseline == "autoregressive" and not plan.aa_control and plan.repeat == 3
    configs = plan.configs()
    assert len(configs) == 6
    assert configs[0].method.name == plan.baseline
    assert {c.tp for c in configs} == {1}
    assert len({c.config_id for c in configs}) == 6


def test_local_plan_workloads_have_the_expected_kinds() -> None:
    plan = load_plan(LOCAL_PLAN)
    kinds = {w.name: type(w) for w in plan.workloads}
    assert kinds == {
        "rewrite": RequestsWorkload,
        "chat": RequestsWorkload,
        "summarize": RequestsWorkload,
        "chat-open": RequestsWorkload,
        "agentic": AgenticWorkload,
    }


def test_baseline_comes_first_even_when_listed_last() -> None:
    text = edit("name: t\n", "name: t\nbaseline: ngram\n")
    plan = parse_plan(text)
    assert [c.method.name for c in plan.configs()] == ["ngram", "autoregressive"]


# --- ids ------------------------------------------------------------------------------------


def _config_ids(plan_path: Path) -> list[str]:
    return [c.config_id for c in load_plan(plan_path).configs()]


def test_config_id_is_stable_across_loads() -> None:
    assert _config_ids(LOCAL_PLAN) == _config_ids(LOCAL_PLAN)


def test_config_id_is_stable_across_processes() -> None:
    """A fresh interpreter with another hash seed computes the same ids (resume relies on it)."""
    code = (
        "from specsweep.collect.plan.file import load_plan; import sys\n"
        "print(' '.join(c.config_id for c in load_plan(sys.argv[1]).configs()))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code, str(LOCAL_PLAN)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=ROOT,
    ).stdout.split()
    assert out == _config_ids(LOCAL_PLAN)


def test_config_id_changes_only_for_the_method_whose_args_change() -> None:
    before = {c.method.name: c.config_id for c in parse_plan(BASE).configs()}
    text = edit('args: ["--spec-type", "ngram-simple"]', 'args: ["--spec-type", "ngram-map-k"]')
    after = {c.method.name: c.config_id for c in parse_plan(text).configs()}
    assert after["ngram"] != before["ngram"]
    assert after["autoregressive"] == before["autoregressive"]


def test_config_id_changes_with_engine_args_but_not_timeouts() -> None:
    before = [c.config_id for c in parse_plan(BASE).configs()]
    with_args = edit("  model: m.gguf\n", "  model: m.gguf\n  args: [-t, '2']\n")
    assert [c.config_id for c in parse_plan(with_args).configs()] != before
    with_timeout = edit("  model: m.gguf\n", "  model: m.gguf\n  request_timeout_s: 5\n")
    assert [c.config_id for c in parse_plan(with_timeout).configs()] == before


def test_campaign_id_changes_when_the_plan_changes() -> None:
    base = parse_plan(BASE).campaign_id()
    assert base.startswith("t-")
    assert re.fullmatch(r"t-[0-9a-f]{12}", base)
    changed = parse_plan(BASE + "    repetitions: 5\n").campaign_id()
    assert changed != base
    assert parse_plan(edit("texts: [hello]", "texts: [hello, bye]")).campaign_id() != base


def test_campaign_id_ignores_comments_and_layout() -> None:
    """The hash is of the normalised plan, so a comment or flow style does not fork a campaign."""
    reformatted = "# a comment\n" + edit("texts: [hello]", "texts:\n        - hello")
    assert parse_plan(reformatted).campaign_id() == parse_plan(BASE).campaign_id()


def test_campaign_id_ignores_fields_left_at_their_default() -> None:
    """A field written with its default value hashes like an omitted one, so a field that a
    newer specsweep adds with a default keeps existing campaigns resumable."""
    explicit = edit("  model: m.gguf\n", "  model: m.gguf\n  request_timeout_s: 300\n")
    assert parse_plan(explicit).campaign_id() == parse_plan(BASE).campaign_id()
    changed = edit("  model: m.gguf\n", "  model: m.gguf\n  request_timeout_s: 301\n")
    assert parse_plan(changed).campaign_id() != parse_plan(BASE).campaign_id()
    assumed = BASE + "estimates: {decode_tps: {1: 50}}\n"
    assert parse_plan(assumed).campaign_id() == parse_plan(BASE).campaign_id()


def test_kind_may_be_omitted_from_a_requests_workload() -> None:
    assert "kind: requests" not in BASE
    workload = parse_plan(BASE).workloads[0]
    assert isinstance(workload, RequestsWorkload)
    assert workload.kind == "requests"
    assert workload.concurrency == [1]


def test_agentic_workload_is_picked_by_kind() -> None:
    plan = parse_plan(BASE + AGENTIC)
    assert isinstance(plan.workloads[1], AgenticWorkload)
    assert [t.role for t in plan.workloads[1].turns] == ["user", "tool"]


def test_load_plan_on_a_missing_file_raises_plan_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(PlanError, match="cannot read plan") as info:
        load_plan(missing)
    assert str(missing) in str(info.value)


def test_load_plan_names_the_file_in_errors(tmp_path: Path) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text(BASE + "bogus: 1\n")
    with pytest.raises(PlanError) as info:
        load_plan(path)
    assert str(info.value).startswith(f"{path}:")


# --- bad plans ------------------------------------------------------------------------------


TP4 = BASE + "tp: [4]\n"
NOBASE = edit("name: t\n", "name: t\nbaseline: reference\n")
DUPMETH = edit("- name: ngram", "- name: autoregressive")
DUPWL = BASE + "  - name: w\n    prompts: {kind: inline, texts: [x]}\n    max_tokens: [8]\n"
CONC0 = BASE + "    concurrency: [0]\n"
CONCNEG = BASE + "    concurrency: [1, -4]\n"
DUPMAX = edit("max_tokens: [64]", "max_tokens: [64, 128, 64]")
METHOD_TP4 = edit('"ngram-simple"]\n', '"ngram-simple"]\n    tp: [4]\n')
NOENGINE = edit("engine:\n  kind: llamacpp\n  model: m.gguf\n", "")

# (plan text, field path the message must name, acceptable lines). Lines are computed from
# markers; list-level problems may point at the list's key, its first item or the culprit.
BAD_FIELDS = [
    pytest.param(
        BASE + "bogus: 1\n",
        "bogus",
        {line_of(BASE + "bogus: 1\n", "bogus")},
        id="unknown-top-level-field",
    ),
    pytest.param(
        t := edit("  model: m.gguf\n", "  model: m.gguf\n  modle: x.gguf\n"),
        "engine.modle",
        {line_of(t, "modle")},
        id="unknown-engine-field",
    ),
    pytest.param(
        t := edit("max_tokens: [64]", 'max_tokens: "many"'),
        "workloads.0.max_tokens",
        {line_of(t, "max_tokens")},
        id="max-tokens-wrong-type",
    ),
    pytest.param(
        t := edit("max_tokens: [64]", "max_tokens: [64, many]"),
        "workloads.0.max_tokens.1",
        {line_of(t, "max_tokens")},
        id="max-tokens-item-wrong-type",
    ),
    pytest.param(
        t := edit("texts: [hello]", "texts: [hello]\n      count: 3"),
        "workloads.0.prompts.count",
        {line_of(t, "count")},
        id="unknown-field-in-prompts",
    ),
    pytest.param(
        t := edit("- name: ngram", "- name: 'n gram!'"),
        "methods.1.name",
        {line_of(t, "n gram!")},
        id="bad-method-name-chars",
    ),
    pytest.param(NOENGINE, "engine", {1}, id="missing-engine"),
    pytest.param(
        t := edit("kind: llamacpp", "kind: tgi"),
        "engine",
        {line_of(t, "tgi")},
        id="unknown-engine-kind",
    ),
    pytest.param(
        t := edit("kind: inline", "kind: wikipedia"),
        "workloads.0.prompts",
        {line_of(t, "wikipedia")},
        id="unknown-prompt-kind",
    ),
    pytest.param(
        t := BASE
        + edit(
            "    turns:\n      - role: user\n        content: write a function\n"
            "      - role: tool\n        content: tests pass\n",
            "    turns: [{role: user, content: hi}]\n",
            AGENTIC,
        ),
        "workloads.1.turns",
        {line_of(t, "turns:")},
        id="agentic-one-turn",
    ),
    pytest.param(
        t := BASE + edit("role: tool", "role: assistant", AGENTIC),
        "workloads.1.turns.1.role",
        {line_of(t, "assistant")},
        id="turn-role-assistant",
    ),
    pytest.param(
        t := BASE + "    repetitions: 0\n",
        "workloads.0.repetitions",
        {line_of(t, "repetitions")},
        id="zero-repetitions",
    ),
    pytest.param(
        CONC0, "workloads.0.concurrency", {line_of(CONC0, "concurrency")}, id="zero-concurrency"
    ),
    pytest.param(
        CONCNEG,
        "workloads.0.concurrency",
        {line_of(CONCNEG, "concurrency")},
        id="negative-concurrency",
    ),
    pytest.param(
        DUPMAX, "workloads.0.max_tokens", {line_of(DUPMAX, "max_tokens")}, id="duplicate-max-tokens"
    ),
    pytest.param(NOBASE, "baseline", {line_of(NOBASE, "baseline:")}, id="missing-baseline-method"),
    pytest.param(
        DUPMETH,
        "methods",
        {
            line_of(DUPMETH, "methods:"),
            line_of(DUPMETH, "- name: autoregressive"),
            line_of(DUPMETH, "- name: autoregressive", 2),
        },
        id="duplicate-method-names",
    ),
    pytest.param(
        DUPWL,
        "workloads",
        {line_of(DUPWL, "workloads:"), line_of(DUPWL, "- name: w"), line_of(DUPWL, "- name: w", 2)},
        id="duplicate-workload-names",
    ),
    pytest.param(TP4, "tp", {line_of(TP4, "tp: [4]")}, id="tp-4-with-llamacpp"),
    # a method's tp is checked against the engine at the methods list, which names the list
    pytest.param(
        METHOD_TP4, "methods", {line_of(METHOD_TP4, "methods:") + 1}, id="method-tp-4-with-llamacpp"
    ),
]


@pytest.mark.parametrize(("text", "field", "lines"), BAD_FIELDS)
def test_bad_plan_names_field_and_line(text: str, field: str, lines: set[int]) -> None:
    with pytest.raises(PlanError) as info:
        parse_plan(text, "bad.yaml")
    message = str(info.value)
    assert message.startswith("bad.yaml: invalid plan")
    found = problems(message)
    assert found, message
    assert any((f == field or f.startswith(field + ".")) and line in lines for f, line in found), (
        f"expected {field} at line {sorted(lines)}, got:\n{message}"
    )


# Errors the models raise in validators also say which rule was broken.
@pytest.mark.parametrize(
    ("text", "words"),
    [
        pytest.param(CONC0, "values must be >= 1", id="zero-concurrency"),
        pytest.param(DUPMAX, "duplicate values in [64, 128, 64]", id="duplicate-max-tokens"),
        pytest.param(NOBASE, "baseline 'reference'", id="missing-baseline"),
        pytest.param(DUPMETH, "duplicate method names ['autoregressive']", id="duplicate-methods"),
        pytest.param(DUPWL, "duplicate workload names", id="duplicate-workloads"),
        pytest.param(TP4, "tp up to 1", id="tp-4"),
    ],
)
def test_consistency_errors_say_what_is_wrong(text: str, words: str) -> None:
    with pytest.raises(PlanError, match=re.escape(words)):
        parse_plan(text, "bad.yaml")


@pytest.mark.parametrize(
    ("text", "line"),
    [
        pytest.param(edit("  model: m.gguf", "\tmodel: m.gguf"), 4, id="tab-indent"),
        pytest.param(edit("max_tokens: [64]", "max_tokens: [64"), 14, id="unclosed-bracket"),
        pytest.param(BASE + "name: again\n  oops: 1\n", 16, id="bad-indent"),
    ],
)
def test_bad_yaml_is_reported_as_such_with_its_line(text: str, line: int) -> None:
    with pytest.raises(PlanError) as info:
        parse_plan(text, "bad.yaml")
    message = str(info.value)
    assert message.startswith("bad.yaml: not valid YAML")
    assert f"line {line}" in message


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("- name: t\n- engine: x\n", id="list"),
        pytest.param("just a string\n", id="scalar"),
        pytest.param("", id="empty"),
    ],
)
def test_a_plan_that_is_not_a_mapping_is_refused(text: str) -> None:
    with pytest.raises(PlanError, match="a plan is a YAML mapping"):
        parse_plan(text, "bad.yaml")


def test_a_repeated_yaml_key_is_refused() -> None:
    text = BASE + "    max_tokens: [8]\n"
    with pytest.raises(PlanError) as info:
        parse_plan(text, "bad.yaml")
    assert "max_tokens" in str(info.value)
    assert f"line {line_of(text, 'max_tokens', 2)}" in str(info.value)


def test_every_problem_is_listed_in_one_message() -> None:
    text = edit("kind: inline", "kind: inline\n      extra: 1", BASE + "bogus: 1\n")
    with pytest.raises(PlanError) as info:
        parse_plan(text, "bad.yaml")
    fields = [f for f, _ in problems(str(info.value))]
    assert "2 problem(s)" in str(info.value)
    assert sorted(fields) == ["bogus", "workloads.0.prompts.extra"]


# --- JSON schema ------------------------------------------------------------------------------


def _models(schema: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [("Plan", schema), *schema.get("$defs", {}).items()]


def test_json_schema_lists_the_plan_fields() -> None:
    schema = json_schema()
    assert isinstance(schema, dict)
    assert {"name", "engine", "methods", "workloads"} <= set(schema["properties"])
    assert {"name", "engine", "methods", "workloads"} <= set(schema["required"])
    assert {"LlamaCppEngine", "Method", "RequestsWorkload", "AgenticWorkload", "Turn"} <= set(
        schema["$defs"]
    )


def test_every_schema_field_has_a_description() -> None:
    missing = [
        f"{model}.{field}"
        for model, body in _models(json_schema())
        for field, prop in body.get("properties", {}).items()
        if not str(prop.get("description", "")).strip()
    ]
    assert sum(len(b.get("properties", {})) for _, b in _models(json_schema())) > 30
    assert missing == []


def test_every_schema_model_forbids_unknown_fields() -> None:
    loose = [
        model
        for model, body in _models(json_schema())
        if "properties" in body and body.get("additionalProperties") is not False
    ]
    assert loose == []


# --- what an engine refuses at start, found by the plan check ----------------------------

SGLANG_NGRAM = edit(
    'args: ["--spec-type", "ngram-simple"]',
    "args: [--speculative-algorithm, NGRAM, ARGS]",
    edit("  kind: llamacpp\n  model: m.gguf", "  kind: sglang\n  model: /m"),
)


def _sglang_ngram(args: str) -> str:
    return SGLANG_NGRAM.replace("ARGS", args)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        pytest.param(
            "--speculative-ngram-max-trie-depth, '1'",
            "method 'ngram': --speculative-ngram-max-trie-depth 1: SGLang's NGRAM needs at least 2",
            id="trie-depth-1",  # what SGLang 0.5.15 refused on the H200, 2026-12-04
        ),
        pytest.param(
            "--speculative-ngram-min-bfs-breadth, '4', --speculative-ngram-max-bfs-breadth, '2'",
            "--speculative-ngram-min-bfs-breadth 4 is above --speculative-ngram-max-bfs-breadth 2",
            id="breadth-upside-down",
        ),
        pytest.param(
            "--speculative-num-draft-tokens, '0'",
            "--speculative-num-draft-tokens 0: SGLang's NGRAM needs at least 1",
            id="no-draft-tokens",
        ),
        pytest.param(
            "--speculative-ngram-max-trie-depth, two",
            "--speculative-ngram-max-trie-depth 'two' is not a whole number",
            id="not-a-number",
        ),
    ],
)
def test_sglang_ngram_flags_it_would_refuse_are_plan_errors(args: str, words: str) -> None:
    with pytest.raises(PlanError, match=re.escape(words)):
        parse_plan(_sglang_ngram(args), "bad.yaml")


def test_sglang_ngram_flags_it_accepts_pass_and_other_algorithms_are_not_read() -> None:
    ok = "--speculative-ngram-max-trie-depth, '2', --speculative-num-draft-tokens, '2'"
    assert [m.name for m in parse_plan(_sglang_ngram(ok), "ok.yaml").methods][-1] == "ngram"
    eagle = _sglang_ngram("--speculative-ngram-max-trie-depth, '1'").replace("NGRAM", "EAGLE")
    assert parse_plan(eagle, "ok.yaml").methods[-1].name == "ngram"
