"""Workloads: turn a plan's prompt sources into prompts, and agentic turns into messages.

A prompt is (prompt_id, text); prompt ids name their source (`humaneval/HumanEval-0`,
`mtbench/81`, `inline/0`) so that the same prompt has the same id in every method's rows
and speedups pair requests on the same prompts.
"""

from __future__ import annotations

from dataclasses import dataclass

from collect.plan.load import TraceWorkload
from collect.plan.model import (
    AgenticWorkload,
    HumanEvalPrompts,
    InlinePrompts,
    MTBenchPrompts,
    PromptSource,
    RequestsWorkload,
    Turn,
)
from collect.resources import humaneval_problems, mtbench_questions

TOOL_PREFIX = "Tool result:\n"


@dataclass(frozen=True)
class Prompt:
    prompt_id: str
    text: str


def prompts(source: PromptSource) -> list[Prompt]:
    """The prompts of a source, in a fixed order."""
    if isinstance(source, HumanEvalPrompts):
        problems = humaneval_problems()[source.offset : source.offset + source.count]
        return [
            Prompt(
                f"humaneval/{p['task_id'].replace('/', '-')}",
                _fill(source.template, p["prompt"] + p["canonical_solution"]),
            )
            for p in problems
        ]
    if isinstance(source, MTBenchPrompts):
        wanted = set(source.categories)
        picked = [q for q in mtbench_questions() if not wanted or q["category"] in wanted]
        if not picked:
            raise ValueError(f"mtbench: no questions in categories {sorted(wanted)}")
        return [
            Prompt(f"mtbench/{q['question_id']}", _fill(source.template, q["turns"][0]))
            for q in picked[: source.count]
        ]
    if isinstance(source, InlinePrompts):
        return [
            Prompt(f"inline/{i}", _fill(source.template, t)) for i, t in enumerate(source.texts)
        ]
    raise TypeError(f"unknown prompt source {source!r}")


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
        return len(workload.max_tokens) * sum(workload.load.window_requests(r)
                                              for r in workload.load.windows())
    windows = len(workload.max_tokens) * len(workload.concurrency)
    if isinstance(workload, AgenticWorkload):
        return windows * workload.repetitions * len(workload.turns)
    n = len(prompts(workload.prompts))
    per_window = [min(n, workload.prompt_limit(mt) or n) for mt in workload.max_tokens]
    return sum(per_window) * len(workload.concurrency) * workload.repetitions
