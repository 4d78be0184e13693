"""Real text for trace replay (collect/plan/tracetext, the trace workload's `text:`): the
tolerance band, seeds, Mooncake prefix sharing over blocks of real text, the join-and-cut
path, the recorded ids and estimate errors, and clear errors. Traces are hand-built files;
expected values are computed by hand or from the pool's own words, never by the matcher."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pydantic import TypeAdapter, ValidationError

from specsweep.collect.plan.traces.read import TraceError, read_trace
from specsweep.collect.plan.traces.text import PoolText, TextMatch
from specsweep.collect.plan.workloads import Workload

ROOT = Path(__file__).resolve().parents[3]


def write(tmp_path: Path, lines: list[dict], name: str = "t.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def line(t: float, n: int) -> dict:
    return {"timestamp_s": t, "input_length": n, "output_length": 4}


def moon(ts: int, n: int, ids: list[int]) -> dict:
    return {"timestamp": ts, "input_length": n, "output_length": 4, "hash_ids": ids}


def text_of(item) -> str:
    return item.messages[-1]["content"]


def sized(n_chars: int, tag: str) -> str:
    """A text of exactly n_chars characters, words of 'tag' and padding."""
    words = (f"{tag} " * n_chars)[:n_chars]
    return words[:-1] + "x" if words.endswith(" ") else words


# texts of 40, 96, 100, 104, 200 characters: at 4 characters a token 10, 24, 25, 26, 50
POOL = tuple(
    PoolText(f"inline/{i}", sized(n, f"w{i}"), "writing" if i == 2 else "")
    for i, n in enumerate((40, 96, 100, 104, 200))
)


def test_a_line_draws_only_texts_inside_the_tolerance_band(tmp_path):
    """N = 25, tolerance 0.1: 22.5 .. 27.5 tokens = 90 .. 110 characters, so texts 1, 2 and
    3 (96, 100, 104 characters); over 60 lines each of them is drawn, no other."""
    path = write(tmp_path, [line(i, 25) for i in range(60)])
    items = read_trace(path, "specsweep", name="w", text=TextMatch(POOL, seed=3))
    assert {i.text_ids for i in items} == {"inline/1", "inline/2", "inline/3"}
    assert all(text_of(i) == POOL[int(i.text_ids[-1])].text for i in items)
    assert {i.input_tokens for i in items} == {25}
    # a narrower band (0.02: 24.5 .. 25.5 tokens, 98 .. 102 characters) keeps text 2 alone
    narrow = read_trace(path, "specsweep", name="w", text=TextMatch(POOL, tolerance=0.02))
    assert {i.text_ids for i in narrow} == {"inline/2"}
    assert {i.category for i in narrow} == {"writing"} and items[0].prompt_id == "trace/w/1"


def test_the_seed_fixes_the_draw_line_by_line(tmp_path):
    path = write(tmp_path, [line(i, 25) for i in range(30)])
    draw = [i.text_ids for i in read_trace(path, "specsweep", name="w", text=TextMatch(POOL, 7))]
    again = [i.text_ids for i in read_trace(path, "specsweep", name="w", text=TextMatch(POOL, 7))]
    other = [i.text_ids for i in read_trace(path, "specsweep", name="w", text=TextMatch(POOL, 8))]
    assert draw == again and draw != other
    # a line's draw depends on its line number, not on the lines kept before it
    kept = read_trace(path, "specsweep", name="w", limit=5, text=TextMatch(POOL, 7))
    assert [i.text_ids for i in kept] == draw[:5]


def test_no_fitting_text_joins_whole_texts_and_cuts_on_a_word(tmp_path):
    """N = 100 tokens (400 characters, band 360 .. 400) fits no text: whole texts are joined
    by a blank line in the order text_ids lists, and cut back to a whitespace."""
    path = write(tmp_path, [line(0, 100), line(1, 100), line(2, 60)])
    items = read_trace(path, "specsweep", name="w", text=TextMatch(POOL, seed=1))
    by_id = {t.prompt_id: t.text for t in POOL}
    for item in items:
        ids = item.text_ids.split("+")
        full = "\n\n".join(by_id[i] for i in ids)
        got, n = text_of(item), item.input_tokens
        assert len(ids) == len(set(ids)) > 1 and full.startswith(got)
        assert 0.9 * n * 4 <= len(got) <= n * 4  # inside the band, at most N x 4
        assert len(got) == len(full) or full[len(got)].isspace()  # a word boundary
        assert len("\n\n".join(by_id[i] for i in ids[:-1])) < len(got)  # the last one is needed
    assert items[0].text_ids != items[1].text_ids  # each line its own seeded order
    assert {i.category for i in items} == {"trace"}  # mixed categories: none claimed


def stream_words(n: int) -> PoolText:
    """One text of words t0 .. t(n-1): a text's position is readable from its words."""
    return PoolText("inline/0", " ".join(f"t{k}" for k in range(n)))


def numbers(text: str) -> list[int]:
    return [int(w[1:]) for w in text.split()]


def jumps(xs: list[int], size: int) -> list[int]:
    """Indices where the next word is not the following one of the pool (wrapping at size)."""
    return [k for k in range(1, len(xs)) if xs[k] != (xs[k - 1] + 1) % size]


def test_hash_ids_keep_prefix_sharing_over_real_text(tmp_path):
    """Words t0..t5999 (34889 characters, 5.8 a word with its space, so a block of 512
    tokens x 4 = 2048 characters holds some 350 words). Lines [1, 2, 3] and [1, 2, 4] share their
    first two blocks: the same words up to where the second jumps; consecutive ids read on
    in the pool's order; [7] alone is a cut of the block that [7, 8] starts with."""
    size = 6000
    path = write(
        tmp_path,
        [
            moon(0, 1400, [1, 2, 3]),
            moon(10, 1400, [1, 2, 4]),
            moon(20, 200, [7]),
            moon(30, 900, [7, 8]),
            moon(40, 1400, [1]),
        ],
    )
    items = read_trace(path, "mooncake", name="m", text=TextMatch((stream_words(size),), seed=2))
    a, b, seven, seven_eight, one = (numbers(text_of(i)) for i in items)
    assert len(jumps(a, size)) <= 1  # ids 1, 2, 3: continuous (one jump if it wraps around)
    shared = len(os.path.commonprefix([a, b]))
    assert 600 < shared < len(a)  # two blocks of about 350 words, then they differ
    assert jumps(b, size)[-1] == shared  # b jumps exactly where it leaves a
    assert text_of(items[3]).startswith(text_of(items[2]))  # equal ids, equal text
    assert one[: shared // 2] == a[: shared // 2]  # block 1 again, then its own run
    assert one != a
    for item in items:
        assert 0.9 * item.input_tokens * 4 <= len(text_of(item)) <= item.input_tokens * 4


def test_the_shipped_mooncake_sample_replays_with_humaneval_text(tmp_path):
    """30 Mooncake lines (921 .. 8745 tokens) over the 164 HumanEval texts: every prompt in
    the band, and lines whose hash ids start alike share a text prefix."""
    pool = tuple(PoolText(f"he/{i}", t) for i, t in enumerate(_humaneval()))
    sample = ROOT / "tests/data/mooncake-sample.jsonl"
    raw = [json.loads(x) for x in sample.read_text().splitlines()]
    items = read_trace(sample, "mooncake", name="mc", text=TextMatch(pool))
    by_line = {int(i.prompt_id.rsplit("/", 1)[1]): i for i in items}
    for no, r in enumerate(raw, 1):
        got = len(text_of(by_line[no]))
        assert 0.9 * r["input_length"] * 4 <= got <= r["input_length"] * 4
    first, second = text_of(by_line[1]), text_of(by_line[2])  # both start with ids 0, 1, 2
    assert len(os.path.commonprefix([first, second])) > 2 * 0.8 * 2048


def _humaneval() -> list[str]:
    from specsweep.collect.plan.workloads import HumanEvalPrompts, prompts

    return [p.text for p in prompts(HumanEvalPrompts(kind="humaneval", count=164))]


def test_max_input_tokens_clips_the_requested_length(tmp_path):
    path = write(tmp_path, [line(0, 400)])
    (item,) = read_trace(path, "specsweep", name="w", max_input_tokens=25, text=TextMatch(POOL))
    assert item.input_tokens == 25 and item.text_ids in {"inline/1", "inline/2", "inline/3"}


def test_prompt_and_messages_lines_keep_their_own_text(tmp_path):
    path = write(tmp_path, [{"timestamp_s": 0, "prompt": "hi", "output_length": 2}, line(1, 25)])
    given, drawn = read_trace(path, "specsweep", name="w", text=TextMatch(POOL))
    assert (given.messages, given.text_ids, given.input_tokens) == (
        [{"role": "user", "content": "hi"}],
        "",
        None,
    )
    assert drawn.text_ids and drawn.input_tokens == 25


def test_a_pool_too_short_to_join_is_an_error_naming_the_line(tmp_path):
    """The pool's texts hold 40+96+100+104+200 = 540 characters, 135 tokens (the message
    says so): 200 tokens fit no text and cannot be joined."""
    path = write(tmp_path, [line(0, 25), line(1, 200)])
    with pytest.raises(TraceError, match=r"t\.jsonl:2: text: no text fits 200 tokens .* 135"):
        read_trace(path, "specsweep", name="w", text=TextMatch(POOL))


def test_a_mooncake_line_needing_more_blocks_than_the_pool_has_is_an_error(tmp_path):
    path = write(tmp_path, [moon(0, 5000, [1, 2])])
    # t0..t999: 10 x 2 + 90 x 3 + 900 x 4 characters and 999 spaces = 4889 characters, in
    # blocks of at most 2048: 3 blocks
    pool = (stream_words(1000),)
    with pytest.raises(TraceError, match=r":1: text: 5000 tokens need more than the pool's 3"):
        read_trace(path, "mooncake", name="m", text=TextMatch(pool))


def test_text_on_a_trace_without_input_length_lines_is_an_error(tmp_path):
    path = write(tmp_path, [{"timestamp_s": 0, "prompt": "hi", "output_length": 2}])
    with pytest.raises(TraceError, match="input_length lines; there are none"):
        read_trace(path, "specsweep", name="w", text=TextMatch(POOL))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"pool": ()}, "pool is empty"),
        ({"pool": (PoolText("a", "  "),)}, "pool is empty"),
        ({"tolerance": 0.0}, "tolerance"),
        ({"tolerance": 1.0}, "tolerance"),
        ({"chars_per_token": 0.0}, "chars_per_token"),
    ],
)
def test_bad_match_arguments_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TextMatch(**{"pool": POOL, **kwargs})


def workload(path: Path, **text: object) -> object:
    return TypeAdapter(Workload).validate_python(
        {"kind": "trace", "name": "tt", "path": str(path), "text": text}
    )


INLINE = {"kind": "inline", "texts": [t.text for t in POOL]}


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ({}, "source"),
        ({"source": INLINE, "tolerance": 0}, "tolerance"),
        ({"source": INLINE, "tolerance": 1.5}, "tolerance"),
        ({"source": INLINE, "chars_per_token": 0}, "chars_per_token"),
        ({"source": INLINE, "seed": -1}, "seed"),
        ({"source": INLINE, "sed": 1}, "sed"),
        ({"source": {"kind": "nope"}}, "source"),
    ],
)
def test_bad_text_fields_fail_the_workload_naming_the_field(tmp_path, text, field):
    path = write(tmp_path, [line(0, 25)])
    with pytest.raises(ValidationError, match=field):
        workload(path, **text)


def test_the_workload_draws_from_its_source_and_records_the_estimate_error(tmp_path):
    """Inline texts of 96 and 208 characters (24 and 52 tokens). N = 25 and 26 fit only the
    first, N = 50 only the second: errors (24-25)/25 = -0.04, (24-26)/26 = -1/13 and
    (52-50)/50 = +0.04: mean -1/39, median -0.04, max |error| 1/13."""
    texts = [sized(96, "a"), sized(208, "b")]
    path = write(tmp_path, [line(0, 25), line(1, 26), line(2, 50)])
    w = workload(path, source={"kind": "inline", "texts": texts}, seed=5)
    assert [i.text_ids for i in w.items()] == ["inline/0", "inline/0", "inline/1"]
    facts = w.text_facts()
    assert float(facts["estimate_error.mean"]) == pytest.approx(-1 / 39)
    assert float(facts["estimate_error.median"]) == pytest.approx(-0.04)
    assert float(facts["estimate_error.max"]) == pytest.approx(1 / 13)
    assert facts["items"] == "3"
    assert json.loads(facts["drawn"]) == {
        "trace/tt/1": "inline/0",
        "trace/tt/2": "inline/0",
        "trace/tt/3": "inline/1",
    }


def test_a_trace_workload_without_text_records_nothing_and_keeps_random_words(tmp_path):
    path = write(tmp_path, [line(0, 5)])
    w = TypeAdapter(Workload).validate_python({"kind": "trace", "name": "tt", "path": str(path)})
    assert w.text_facts() == {} and len(text_of(w.items()[0]).split()) == 5
