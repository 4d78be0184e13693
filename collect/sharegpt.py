"""ShareGPT conversations as prompts: which are eligible, the seeded sample, their prompt ids
and categories (docs/sharegpt.md). collect.resources reads the conversations; the plan's
`kind: sharegpt` source (collect.plan.workloads.ShareGPTPrompts) gives the filters.
"""

from __future__ import annotations

import hashlib
import re
from typing import Protocol

from specsweep.collect.resources import Conversation, sharegpt_conversations


class Filters(Protocol):
    """The fields of a plan's ShareGPT source that pick conversations."""

    seed: int
    count: int
    min_turns: int
    max_turns: int | None
    min_input_chars: int
    max_input_chars: int | None


def eligible(c: Conversation, f: Filters, sessions: bool) -> bool:
    """The roles alternate human, gpt, human, ... from a human message (either may end it;
    no other role), no human message is blank, min_turns <= human messages <= max_turns, and
    each message sent (every human one in a session, else the first) is within the char
    bounds."""
    if not c.roles or any(r != ("human", "gpt")[k % 2] for k, r in enumerate(c.roles)):
        return False
    if any(not text.strip() for text in c.human):
        return False
    if not f.min_turns <= len(c.human) <= (f.max_turns or len(c.human)):
        return False
    sent = c.human if sessions else c.human[:1]
    return all(f.min_input_chars <= len(t) <= (f.max_input_chars or len(t)) for t in sent)


def sample(f: Filters, sessions: bool) -> list[Conversation]:
    """`count` eligible conversations: those whose sha256(f"{seed}/{id}") are smallest, in
    that order (a seeded permutation that no library version changes; a larger count keeps a
    smaller one's picks first). ValueError when fewer are eligible or two share an id."""
    picked = [c for c in sharegpt_conversations() if eligible(c, f, sessions)]
    ids = [prompt_name(c) for c in picked]
    if len(set(ids)) != len(ids):
        twice = sorted({i for i in ids if ids.count(i) > 1})
        raise ValueError(f"sharegpt: conversation ids {twice[:5]} are not unique")
    if len(picked) < f.count:
        raise ValueError(
            f"sharegpt: {len(picked)} conversations pass the filters, fewer than count ({f.count})"
        )
    rank = {c.id: hashlib.sha256(f"{f.seed}/{c.id}".encode()).digest() for c in picked}
    return sorted(picked, key=lambda c: rank[c.id])[: f.count]


def prompt_name(c: Conversation) -> str:
    """sharegpt/<id>, the id's characters other than letters, digits, _ . - made -."""
    return "sharegpt/" + re.sub(r"[^A-Za-z0-9_.-]", "-", c.id)


def category(c: Conversation) -> str:
    """`code` when the first human message or the first gpt reply holds a ``` fence,
    else `chat`."""
    first = c.human[0] if c.human else ""
    return "code" if "```" in first or "```" in c.first_reply else "chat"
