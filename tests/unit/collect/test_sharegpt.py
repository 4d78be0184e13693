"""ShareGPT as a prompt source (collect/sharegpt.py, collect.plan.workloads): eligibility,
filters, the seeded sample, ids, categories, sessions and the plan's checks, on a 16-entry
fixture written by hand (tests/data/sharegpt/conversations.json, ShareGPT's own indented
layout). Expected sets are read off the fixture by hand (see FIXTURE's table below)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from specsweep.collect import sharegpt
from specsweep.collect.plan.file import PlanError, parse_plan
from specsweep.collect.plan.workloads import (
    AgenticWorkload,
    ShareGPTPrompts,
    prompts,
    request_count,
    sessions,
)
from specsweep.collect.resources import ResourceError, sharegpt_conversations

FIXTURE = Path(__file__).resolve().parents[2] / "data" / "sharegpt" / "conversations.json"
# The fixture by hand: id -> human turns, for the 10 eligible conversations in file order.
# Ineligible: b1_0 (gpt first), the empty b2_0, b3_0 (human twice), b4_0 (a system message),
# b5_0 (a blank human message), b6_0 (roles user/chatgpt).
TURNS = {
    "a1_0": 1,
    "a2_0": 2,
    "a3_0": 2,
    "a4_0": 1,
    "a5_0": 3,
    "b2_0": 1,
    "a6_0": 4,  # its first message has 590 characters
    "a7_0": 2,  # ends with a human message
    "x/y 1": 1,
    "a8_0": 2,  # its second message is "ok" (2 characters)
}
CODE = {"a3_0", "a4_0"}  # ``` in the first human message / in the first gpt reply


@pytest.fixture(autouse=True)
def fixture_data(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECSWEEP_SHAREGPT", str(FIXTURE))


def source(**fields: object) -> ShareGPTPrompts:
    return ShareGPTPrompts.model_validate({"kind": "sharegpt", "count": 1, **fields})


def picked(sessions_: bool = False, **fields: object) -> list[str]:
    """Ids of the eligible conversations, in file order."""
    f = source(**fields)
    return [c.id for c in sharegpt_conversations() if sharegpt.eligible(c, f, sessions_)]


def test_the_fixture_reads_in_file_order_with_ineligible_ones() -> None:
    ids = [c.id for c in sharegpt_conversations()]
    assert len(ids) == 16 and ids[:2] == ["a1_0", "a2_0"] and ids.count("b2_0") == 2


def test_only_human_first_alternating_conversations_are_eligible() -> None:
    assert picked() == list(TURNS)


def test_turn_bounds_count_human_messages() -> None:
    assert picked(min_turns=2) == [i for i, n in TURNS.items() if n >= 2]
    assert picked(max_turns=1) == ["a1_0", "a4_0", "b2_0", "x/y 1"]
    assert picked(min_turns=2, max_turns=2) == ["a2_0", "a3_0", "a7_0", "a8_0"]


def test_char_bounds_apply_to_the_messages_sent() -> None:
    # a single-turn prompt sends the first message only: a8_0's "ok" does not count
    assert "a8_0" in picked(min_input_chars=3)
    assert "a8_0" not in picked(sessions_=True, min_input_chars=3)
    assert "a6_0" not in picked(max_input_chars=589)
    assert "a6_0" in picked(max_input_chars=590)
    # every human message at most 30 characters: x/y 1's has 31, a3_0's first 44
    assert picked(sessions_=True, min_input_chars=1, max_input_chars=30) == [
        "a1_0",
        "a2_0",
        "a5_0",
        "a7_0",
        "a8_0",
    ]


def test_the_sample_is_the_seeded_hash_order_without_repeats() -> None:
    ranks = {
        i: hashlib.sha256(f"7/{i}".encode()).hexdigest() for i in TURNS
    }  # the documented formula, computed here apart from the code
    expected = [i for _, i in sorted((r, i) for i, r in ranks.items())][:4]
    got = [p.prompt_id for p in prompts(source(seed=7, count=4))]
    assert got == ["sharegpt/" + i.replace("/", "-").replace(" ", "-") for i in expected]
    assert got == [p.prompt_id for p in prompts(source(seed=7, count=4))]  # same again
    assert len(set(got)) == 4


def test_a_larger_count_keeps_the_smaller_ones_picks_first() -> None:
    small = [p.prompt_id for p in prompts(source(seed=3, count=3))]
    every = [p.prompt_id for p in prompts(source(seed=3, count=10))]
    assert every[:3] == small and len(set(every)) == 10
    assert sorted(every) == sorted(
        "sharegpt/" + i.replace("/", "-").replace(" ", "-") for i in TURNS
    )


def test_seeds_give_different_orders() -> None:
    orders = {tuple(p.prompt_id for p in prompts(source(seed=s, count=10))) for s in range(4)}
    assert len(orders) > 1


def test_prompt_text_is_the_first_human_message_with_its_category() -> None:
    by_id = {p.prompt_id: p for p in prompts(source(count=10, template="Q: {text}"))}
    assert by_id["sharegpt/x-y-1"].text == 'Q: Say something in JSON: {"a": 1}'
    assert by_id["sharegpt/a3_0"].text == "Q: Why does this fail?\n```python\nprint(1/0)\n```"
    assert {i for i, p in by_id.items() if p.category == "code"} == {f"sharegpt/{i}" for i in CODE}
    assert by_id["sharegpt/a5_0"].category == "chat"  # ``` only in its second reply


def test_category_of_every_conversation_in_the_file() -> None:
    counted = [sharegpt.category(c) for c in sharegpt_conversations()]
    assert (counted.count("code"), counted.count("chat")) == (2, 14)


def test_too_few_eligible_conversations_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"4 conversations pass the filters, fewer than count"):
        prompts(source(count=5, max_turns=1))


def test_ids_that_collide_once_sanitised_are_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]
    path = tmp_path / "twice.json"
    path.write_text(json.dumps([{"id": i, "conversations": chat} for i in ("p q", "p/q")]))
    monkeypatch.setenv("SPECSWEEP_SHAREGPT", str(path))
    with pytest.raises(ValueError, match=r"ids \['sharegpt/p-q'\] are not unique"):
        prompts(source())


def test_missing_data_says_to_run_provision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPECSWEEP_SHAREGPT")
    monkeypatch.setenv("SPECSWEEP_CACHE", str(tmp_path))
    with pytest.raises(
        ResourceError, match=r"missing\): run `make engine` or `specsweep provision`"
    ):
        prompts(source())
    monkeypatch.setenv("SPECSWEEP_SHAREGPT", str(tmp_path / "nowhere.json"))
    with pytest.raises(ResourceError, match="nowhere.json"):
        prompts(source())


# --- sessions ----------------------------------------------------------------------------

AGENTIC = {
    "name": "chats",
    "kind": "agentic",
    "max_tokens": [16],
    "conversations": {"kind": "sharegpt", "seed": 1, "count": 3, "min_turns": 2},
}


def test_each_session_replays_one_conversations_human_messages() -> None:
    w = AgenticWorkload.model_validate(AGENTIC)
    played = sessions(w)
    assert w.repetitions == 3 and len(played) == 3
    conversations = {c.id: c for c in sharegpt_conversations() if c.id in TURNS}
    for s in played:
        c = conversations[s.name.removeprefix("sharegpt/")]
        assert [t.content for t in s.turns] == list(c.human)
        assert {t.role for t in s.turns} == {"user"}
        assert s.category == ("code" if c.id in CODE else "chat")
        assert s.prompt_id(1) == f"{s.name}/turn1"
    # the same seed and filters give single-turn prompts on the same conversations
    first = prompts(ShareGPTPrompts.model_validate(AGENTIC["conversations"]))
    assert [p.prompt_id for p in first] == [s.name for s in played]
    assert request_count(w) == sum(TURNS[s.name.removeprefix("sharegpt/")] for s in played)


def test_plan_turns_still_make_identical_sessions() -> None:
    w = AgenticWorkload.model_validate(
        {
            "name": "ag",
            "kind": "agentic",
            "max_tokens": [8],
            "repetitions": 2,
            "turns": [{"role": "user", "content": "a"}, {"role": "tool", "content": "b"}],
        }
    )
    assert [s.prompt_id(1) for s in sessions(w)] == ["ag/turn1", "ag/turn1"]
    assert request_count(w) == 4


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"turns": [{"role": "user", "content": "x"}] * 2}, "exactly one of `turns`"),
        ({"conversations": None}, "exactly one of `turns`"),
        ({"repetitions": 2}, r"repetitions \(2\) must be conversations.count \(3\)"),
    ],
)
def test_a_session_workload_takes_turns_or_conversations(change: dict, message: str) -> None:
    data = {**AGENTIC, **change}
    if change.get("conversations", 0) is None:
        del data["conversations"]
    with pytest.raises(ValidationError, match=message):
        AgenticWorkload.model_validate(data)


def test_repetitions_equal_to_count_is_accepted() -> None:
    assert AgenticWorkload.model_validate({**AGENTIC, "repetitions": 3}).repetitions == 3


def test_inverted_bounds_fail_in_the_plan_file() -> None:
    text = """\
name: t
engine: {kind: llamacpp, model: m.gguf}
methods: [{name: autoregressive}]
workloads:
  - name: w
    prompts: {kind: sharegpt, min_turns: 3, max_turns: 2}
    max_tokens: [8]
"""
    with pytest.raises(PlanError, match=r"max_turns \(2\) is below min_turns"):
        parse_plan(text)
