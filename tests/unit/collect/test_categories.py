"""requests.category (docs/categories.md): each prompt source's own category, the workload's
`category:` over it, its validation, and the categories the open-loop schedules and imported
files carry. The expected categories are read from the sources' files or written by hand,
never from collect.plan.workloads."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pytest

from specsweep.collect.importing import importer as importers
from specsweep.collect.importing.files import ImportFileError
from specsweep.collect.plan import load
from specsweep.collect.plan.file import PlanError, parse_plan
from specsweep.collect.plan.model import AgenticWorkload, RequestsWorkload
from specsweep.collect.plan.workloads import Prompt, TraceText, category_of, prompts, sessions
from specsweep.collect.resources import mtbench_questions
from specsweep.collect.run import openloop
from specsweep.schema import contracts

DATA = Path(__file__).resolve().parents[2] / "data"
VLLM = DATA / "vllm_deepseek-v2.5_tp8_pp2_sharegpt_qps_inf.json"
# MT-Bench's 8 categories, as its paper names them
MT_BENCH = {
    "writing",
    "roleplay",
    "reasoning",
    "math",
    "coding",
    "extraction",
    "stem",
    "humanities",
}

PLAN = """\
name: t
engine: {kind: llamacpp, model: m.gguf}
methods: [{name: autoregressive}]
workloads:
  - name: w
    prompts: {kind: inline, texts: [hello]}
    max_tokens: [64]
"""


def _requests(prompts_: dict, **extra: object) -> RequestsWorkload:
    return RequestsWorkload.model_validate(
        {"name": "w", "prompts": prompts_, "max_tokens": [8], **extra}
    )


AGENTIC = {
    "name": "a",
    "kind": "agentic",
    "max_tokens": [8],
    "turns": [{"role": "user", "content": "hi"}, {"role": "tool", "content": "ok"}],
}


def test_mtbench_prompts_carry_their_questions_category() -> None:
    w = _requests({"kind": "mtbench", "categories": ["math", "stem"], "count": 12})
    by_id = {f"mtbench/{q['question_id']}": q["category"] for q in mtbench_questions()}
    got = {p.prompt_id: p.category for p in prompts(w.prompts)}
    assert got == {pid: by_id[pid] for pid in got}
    assert set(got.values()) == {"math", "stem"}  # 10 math questions, then stem ones
    assert {q["category"] for q in mtbench_questions()} == MT_BENCH


def test_humaneval_is_code_inline_is_inline_and_plan_turns_are_agentic() -> None:
    assert {p.category for p in prompts(_requests({"kind": "humaneval", "count": 2}).prompts)} == {
        "code"
    }
    assert [p.category for p in prompts(_requests({"kind": "inline", "texts": ["a"]}).prompts)] == [
        "inline"
    ]
    a = AgenticWorkload.model_validate({**AGENTIC, "repetitions": 2})
    assert [s.category for s in sessions(a)] == ["agentic", "agentic"]
    assert category_of(a, sessions(a)[0].category) == "agentic"


def test_the_workloads_category_wins_over_the_sources() -> None:
    w = _requests({"kind": "humaneval", "count": 1}, category="summarize")
    assert category_of(w, "code") == "summarize"
    a = AgenticWorkload.model_validate({**AGENTIC, "category": "tool-use"})
    assert category_of(a, "agentic") == "tool-use"
    assert category_of(_requests({"kind": "inline", "texts": ["a"]}), "inline") == "inline"


def test_a_prompt_without_any_category_fails_loudly() -> None:
    with pytest.raises(ValueError, match="workload w: a prompt has no category"):
        category_of(_requests({"kind": "inline", "texts": ["a"]}), "")


@pytest.mark.parametrize("bad", ["Summarize", "two words", "9lives", "x" * 65, ""])
def test_a_category_that_is_not_a_lowercase_name_fails_the_plan(bad: str) -> None:
    text = PLAN + f"    category: {json.dumps(bad)}\n"
    with pytest.raises(PlanError) as info:
        parse_plan(text, "bad.yaml")
    message = str(info.value)
    assert "workloads.0" in message and "category" in message, message
    assert "must be a lowercase name" in message and "line 8" in message, message


def test_every_workload_kind_takes_a_category(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp_s": 0, "prompt": "hi", "output_length": 2}\n')
    text = PLAN + (
        "    category: summarize\n"
        "  - {name: a, kind: agentic, max_tokens: [8], category: chat,\n"
        "     turns: [{role: user, content: x}, {role: user, content: y}]}\n"
        f"  - {{name: t, kind: trace, path: {json.dumps(str(trace))}, category: replay_1}}\n"
    )
    plan = parse_plan(text, "ok.yaml")
    assert [w.category for w in plan.workloads] == ["summarize", "chat", "replay_1"]


def test_the_plans_rule_is_the_contracts_rule() -> None:
    # a category the plan accepts must land: one pattern on both sides of the store
    assert load.CATEGORY_PATTERN == contracts.CATEGORY_PATTERN
    assert re.match(contracts.CATEGORY_PATTERN, "uncategorized")


def test_open_loop_arrivals_carry_the_category(tmp_path: Path) -> None:
    items = [Prompt("p/0", "a", "math"), Prompt("p/1", "b", "stem")]
    arrivals = openloop.schedule(load.OpenLoad(rate=[1.0], requests=3), 1.0, items, None, 8)
    assert [a.category for a in arrivals] == ["math", "stem", "math"]
    trace = tmp_path / "t.jsonl"
    trace.write_text(
        '{"timestamp_s": 0, "prompt": "hi", "output_length": 2}\n'
        '{"timestamp_s": 1, "input_length": 5, "output_length": 2}\n'
    )
    spec = {"kind": "trace", "name": "t", "path": str(trace)}
    own = load.TraceWorkload[TraceText].model_validate(spec)
    named = load.TraceWorkload[TraceText].model_validate({**spec, "category": "summarize"})
    assert [a.category for a in openloop.trace_schedule(own)] == ["trace", "trace"]
    assert [a.category for a in openloop.trace_schedule(named)] == ["summarize", "summarize"]


def _imported(tmp_path: Path, **change: object) -> list[tuple[str, str]]:
    data = json.loads(VLLM.read_text())
    data.update(change)
    path = tmp_path / VLLM.name
    path.write_text(json.dumps(data))
    db = tmp_path / "r.duckdb"
    cid, _ = importers.import_file(path, db, importers.ImportOptions())
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(
            "SELECT prompt_id, category FROM requests WHERE campaign_id = ? "
            "ORDER BY prompt_id::INTEGER",
            [cid],
        ).fetchall()


def test_an_imported_file_without_categories_is_uncategorized(tmp_path: Path) -> None:
    rows = _imported(tmp_path)
    assert len(rows) == 200 and {c for _, c in rows} == {"uncategorized"}


def test_an_imported_category_list_or_string_is_taken(tmp_path: Path) -> None:
    given = ["code" if i % 2 else None for i in range(200)]
    rows = _imported(tmp_path, category=given)
    assert rows[:3] == [("0", "uncategorized"), ("1", "code"), ("2", "uncategorized")]
    assert {c for _, c in _imported(tmp_path, category="chat")} == {"chat"}


@pytest.mark.parametrize(
    ("category", "words"),
    [
        (["code"] * 3, "'category' has 3 entries, ttfts 200"),
        (7, "'category' is neither a list nor a string"),
        ("Chat", "requests row(s) break the contract"),
    ],
)
def test_a_bad_imported_category_fails_naming_it(
    tmp_path: Path, category: object, words: str
) -> None:
    with pytest.raises(ImportFileError, match=re.escape(words)):
        _imported(tmp_path, category=category)
