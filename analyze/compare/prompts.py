"""Are the prompts `analyze compare` pairs by prompt_id the same in both campaigns? A
request row carries only prompt_id; its text is the plan's (campaigns.plan_yaml): the
workload's prompt source, template and system message, or its turns (a dataset item,
humaneval or mtbench, is named by its id; a trace file by its path: its content is not
recorded). The chat template is the plan engine's chat_template and api, and the
chat_template_kwargs of the body each service sent (environment
service.<method>.tp<N>.request_body); the template a model ships with is not recorded (a
different model shows as engine.model in the environment diff). A prompt whose text or
template differs is not paired; a workload either plan does not define is not checked.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import duckdb
import yaml

PLANS_SQL = "SELECT campaign_id, plan_yaml FROM campaigns WHERE campaign_id IN (?, ?)"
BODIES_SQL = (
    "SELECT campaign_id, key, any_value(value) FROM environment WHERE campaign_id "
    "IN (?, ?) AND key LIKE 'service.%.request_body' GROUP BY ALL"
)
TURN = re.compile(r"/turn(\d+)$")


def _plan(text: str | None) -> dict:
    """The plan as a dict; {} when it is not a YAML mapping (an import, an empty plan)."""
    try:
        plan = yaml.safe_load(text or "")
    except yaml.YAMLError:
        return {}
    return plan if isinstance(plan, dict) else {}


def prompt_facts(workload: dict, prompt_id: str) -> dict[str, Any]:
    """What makes the text of a workload's prompt_id, from the plan's workload entry: the
    system message and the template, with the inline text, the turns up to this one (and
    the history mode), or the trace file; a dataset item (humaneval, mtbench) is named by
    its id, so its source kind stands for it."""
    facts: dict[str, Any] = {"system": workload.get("system")}
    kind = workload.get("kind", "requests")
    if kind == "agentic":
        turn = TURN.search(prompt_id)
        facts["turns"] = workload.get("turns", [])[: int(turn.group(1)) + 1 if turn else None]
        facts["history"] = workload.get("history", "own")
    elif kind == "trace":
        facts.update({k: workload.get(k) for k in ("path", "format", "max_input_tokens", "text")})
    else:
        source = workload.get("prompts") or {}
        facts["template"] = source.get("template", "{text}")
        facts["source"] = source.get("kind")
        if source.get("kind") == "inline":
            index = prompt_id.rsplit("/", 1)[-1]
            texts = source.get("texts") or []
            facts["text"] = (
                texts[int(index)] if index.isdigit() and int(index) < len(texts) else None
            )
    return facts


def _kwargs(body: str | None) -> Any:
    """chat_template_kwargs of a recorded request body (JSON), at any depth; None if none."""
    try:
        stack = [json.loads(body)] if body else []
    except json.JSONDecodeError:
        return None
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if "chat_template_kwargs" in item:
                return item["chat_template_kwargs"]
            stack += item.values()
        elif isinstance(item, list):
            stack += item
    return None


@dataclass
class PromptCheck:
    """Each campaign's plan (a dict) and recorded request bodies (environment key -> JSON)."""

    plans: tuple[dict, dict]
    bodies: tuple[dict[str, str], dict[str, str]]

    def workload(self, side: int, name: str) -> dict | None:
        for w in self.plans[side].get("workloads") or []:
            if isinstance(w, dict) and w.get("name") == name:
                return w
        return None

    def checked(self, workload: str) -> bool:
        """Both plans define the workload (else its prompts cannot be checked)."""
        return all(self.workload(side, workload) is not None for side in (0, 1))

    def text(self, workload: str, prompt_id: str) -> str | None:
        """Why the prompt's text differs between A and B ('template, system'); None when it
        is the same or cannot be checked."""
        if not self.checked(workload):
            return None
        a, b = (prompt_facts(self.workload(s, workload) or {}, prompt_id) for s in (0, 1))
        differ = [k for k in a if a[k] != b.get(k)]
        return ", ".join(differ) or None

    def template(self, method: str, tp: int) -> str | None:
        """Why the chat template differs for (method, tp): the plan engine's chat_template
        or api, or the recorded chat_template_kwargs; None when the same or unknown."""
        engines = [p.get("engine") if isinstance(p.get("engine"), dict) else {} for p in self.plans]
        differ = [
            f"engine.{k}"
            for k in ("chat_template", "api")
            if all(self.plans) and engines[0].get(k) != engines[1].get(k)
        ]
        key = f"service.{method}.tp{tp}.request_body"
        if all(key in side for side in self.bodies) and _kwargs(self.bodies[0][key]) != _kwargs(
            self.bodies[1][key]
        ):
            differ.append("chat_template_kwargs")
        return ", ".join(differ) or None


def prompt_check(con: duckdb.DuckDBPyConnection, a: str, b: str) -> PromptCheck:
    plans = dict(con.execute(PLANS_SQL, [a, b]).fetchall())
    bodies: dict[str, dict[str, str]] = {a: {}, b: {}}
    for campaign, key, value in con.execute(BODIES_SQL, [a, b]).fetchall():
        bodies[campaign][key] = value
    return PromptCheck((_plan(plans.get(a)), _plan(plans.get(b))), (bodies[a], bodies[b]))
