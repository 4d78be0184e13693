"""The synthetic campaign of the scale benchmark (tests/bench/bench_scale.py): N measured
requests written through the real contracts and store.

The campaign's shape (fixed seed): one SGLang-shaped engine, the autoregressive baseline and
three speculative methods (eagle3, dflash, ngram) at tp 1; five workloads, one of them
agentic (sessions of 4 turns, the context growing each turn); max_tokens 256 and 1024;
concurrency 1, 4 and 16; 30 prompts per workload (agentic: 8 sessions per repetition); as
many repetitions as N needs (the last one cut at N). Output length is a property of the prompt
(temperature 0: every method writes the same text), acceptance depends on method, workload
and prompt, and so speedups differ by method, workload and load. Each request carries one
chunk per verify step (speculative) or per token (baseline): chunk_times_s and chunk_tokens
lists of about output_tokens / acceptance entries.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from specsweep.schema.store import Store

CAMPAIGN = "scale-bench-000000000000"
START = datetime(2026, 12, 3, 0, 0, 0)
BASELINE = "autoregressive"
# method -> (draft tokens per verify step, cost of a step relative to a baseline step,
#            added cost per doubling of concurrency); the baseline drafts nothing
METHODS: dict[str, tuple[int, float, float]] = {
    BASELINE: (0, 1.0, 0.0),
    "eagle3": (6, 1.25, 0.12),
    "dflash": (16, 1.45, 0.30),
    "ngram": (8, 1.05, 0.03),
}
# workload -> mean acceptance length per speculative method (tokens per verify step)
ACCEPTANCE: dict[str, dict[str, float]] = {
    "chat": {"eagle3": 2.4, "dflash": 3.2, "ngram": 1.15},
    "rewrite": {"eagle3": 3.0, "dflash": 4.5, "ngram": 3.5},
    "summarize": {"eagle3": 2.2, "dflash": 2.8, "ngram": 1.6},
    "code": {"eagle3": 2.8, "dflash": 4.0, "ngram": 1.8},
    "agentic": {"eagle3": 2.6, "dflash": 3.6, "ngram": 2.4},
}
WORKLOADS = tuple(ACCEPTANCE)
MAX_TOKENS = (256, 1024)
CONCURRENCY = (1, 4, 16)
N_PROMPTS = 30
SESSIONS_PER_REP = 8
TURNS = 4
BASE_TPS = 80.0  # the baseline's decode tok/s alone at max_tokens 256


@dataclass
class Window:
    """One measured window: config x workload x max_tokens x concurrency."""

    method: str
    workload: str
    max_tokens: int
    concurrency: int
    index: int
    lanes: np.ndarray = field(default_factory=lambda: np.zeros(1))

    @property
    def config_id(self) -> str:
        return f"cfg-{self.method}-tp1"

    @property
    def window_id(self) -> str:
        return f"{self.config_id}/{self.workload}/{self.max_tokens}/c{self.concurrency}"


@dataclass
class Prompt:
    """What a prompt fixes whatever the method: its id, length, output length and text."""

    prompt_id: str
    prompt_tokens: int
    output_tokens: int
    speed: float  # the prompt's own effect on decode speed (shared by every method)
    acceptance: float  # the prompt's effect on acceptance
    text: str


def _digest(*key: object) -> str:
    return hashlib.sha256("\x1f".join(map(str, key)).encode()).hexdigest()[:24]


def windows() -> list[Window]:
    combos = [
        (m, w, mt, c) for m in METHODS for w in WORKLOADS for mt in MAX_TOKENS for c in CONCURRENCY
    ]
    return [Window(m, w, mt, c, i, np.zeros(c)) for i, (m, w, mt, c) in enumerate(combos)]


def prompts(rng: np.random.Generator) -> dict[tuple[str, int], list[Prompt]]:
    """The prompts of each (workload, max_tokens); agentic prompts are its turns."""
    out = {}
    for workload in WORKLOADS:
        for mt in MAX_TOKENS:
            ids = (
                [f"{workload}/turn{t}" for t in range(TURNS)]
                if workload == "agentic"
                else [f"{workload}/p{i:02d}" for i in range(N_PROMPTS)]
            )
            out[workload, mt] = [_prompt(rng, workload, mt, pid, i) for i, pid in enumerate(ids)]
    return out


def _prompt(rng: np.random.Generator, workload: str, mt: int, pid: str, i: int) -> Prompt:
    lo, hi = {
        "chat": (60, 300),
        "rewrite": (200, 800),
        "summarize": (800, 2000),
        "code": (300, 1200),
        "agentic": (1500 + 900 * i, 1700 + 900 * i),
    }[workload]
    prompt_tokens = int(rng.integers(lo, hi))
    share = {
        "chat": rng.uniform(0.35, 1.2),
        "rewrite": prompt_tokens * 1.1 / mt,
        "summarize": rng.uniform(0.2, 0.6),
        "code": 1.0,
        "agentic": rng.uniform(0.3, 0.9),
    }[workload]
    output_tokens = max(2, min(mt, int(share * mt)))
    words = f"{pid} " * max(1, output_tokens // 2)
    return Prompt(
        pid,
        prompt_tokens,
        output_tokens,
        float(rng.lognormal(0, 0.08)),
        float(rng.lognormal(0, 0.12)),
        words[: 4 * output_tokens],
    )


def chunks(
    rng: np.random.Generator, tokens: int, accept: float, block: int, ttft: float, e2e: float
) -> tuple[list[float], list[int]]:
    """Chunk arrival offsets and tokens per chunk: the first token at TTFT, then one chunk
    per verify step of 1 + accepted tokens (baseline: one token per chunk), the last at E2E."""
    rest = tokens - 1
    if block == 0 or rest == 0:
        sizes = np.ones(rest, dtype=np.int64)
    else:
        draws = 1 + np.minimum(rng.poisson(accept - 1, int(rest / accept * 1.5) + 8), block)
        cum = np.cumsum(draws)
        cut = int(np.searchsorted(cum, rest))
        sizes = draws[: cut + 1].copy()
        sizes[-1] -= cum[cut] - rest
    gaps = rng.lognormal(0, 0.15, len(sizes))
    times = ttft + np.cumsum(gaps) * ((e2e - ttft) / gaps.sum()) if len(sizes) else gaps
    if len(times):
        times[-1] = e2e
    return [ttft, *times.tolist()], [1, *sizes.tolist()]


def request(
    rng: np.random.Generator,
    win: Window,
    p: Prompt,
    rep: int,
    lane: int,
    session: str | None,
    turn: int | None,
) -> dict[str, Any]:
    """One ok measured `requests` row of window `win` for prompt p."""
    block, step_cost, per_doubling = METHODS[win.method]
    c = win.concurrency
    base = BASE_TPS / (1 + 0.05 * (c - 1)) * (0.92 if win.max_tokens > 256 else 1.0)
    accept = 1.0
    if block:
        accept = max(
            1.05, ACCEPTANCE[win.workload][win.method] * p.acceptance * rng.lognormal(0, 0.05)
        )
    speed = accept / (step_cost * (1 + per_doubling * math.log2(c)))
    tps = base * speed * p.speed * rng.lognormal(0, 0.06)
    ttft = (0.02 + p.prompt_tokens / 4000 * (1 + 0.1 * (c - 1))) * rng.lognormal(0, 0.1)
    ttft *= 1.05 if block else 1.0
    e2e = ttft + (p.output_tokens - 1) / tps
    times, sizes = chunks(rng, p.output_tokens, accept, block, ttft, e2e)
    start = float(win.lanes[lane])
    win.lanes[lane] = start + e2e + 0.002
    verify = len(sizes) - 1 if block else None
    return {
        "request_id": _digest(CAMPAIGN, win.window_id, p.prompt_id, rep, session, turn),
        "campaign_id": CAMPAIGN, "config_id": win.config_id,
        "service_id": f"svc-{win.method}", "engine": "sglang", "method": win.method, "tp": 1,
        "workload": win.workload, "window_id": win.window_id, "prompt_id": p.prompt_id,
        "max_tokens": win.max_tokens, "rep": rep, "concurrency": c, "session_id": session,
        "turn": turn, "is_warmup": False,
        "sent_at": START + timedelta(hours=win.index, seconds=start), "start_s": start,
        "ttft_s": ttft, "e2e_s": e2e, "chunk_times_s": times, "chunk_tokens": sizes,
        "prompt_tokens": p.prompt_tokens,
        "cached_tokens": int(0.8 * p.prompt_tokens) if turn else 0,
        "output_tokens": p.output_tokens,
        "finish_reason": "length" if p.output_tokens == win.max_tokens else "stop",
        "spec_verify_ct": verify,
        "draft_tokens": verify * block if block else None,
        "accepted_tokens": p.output_tokens - len(sizes) if block else None,
        "accept_length": p.output_tokens / verify if block else None,
        "output_text": p.text,
        "server_stats": f'{{"meta_info": {{"completion_tokens": {p.output_tokens}}}}}',
        "ok": True, "error_kind": None, "error_message": None, "category": win.workload,
    }  # fmt: skip


def requests(rng: np.random.Generator, n: int) -> Iterator[dict[str, Any]]:
    """n measured requests, a repetition of every window at a time (the last one cut at n)."""
    wins, table, made, rep = windows(), prompts(rng), 0, 0
    while True:
        for win in wins:
            for row in _window_rep(rng, win, table[win.workload, win.max_tokens], rep):
                yield row
                made += 1
                if made == n:
                    return
        rep += 1


def _window_rep(
    rng: np.random.Generator, win: Window, items: list[Prompt], rep: int
) -> Iterator[dict[str, Any]]:
    if win.workload != "agentic":
        for p in items:
            yield request(rng, win, p, rep, int(np.argmin(win.lanes)), None, None)
        return
    for s in range(rep * SESSIONS_PER_REP, (rep + 1) * SESSIONS_PER_REP):
        lane = int(np.argmin(win.lanes))  # a session's turns follow each other on one lane
        for turn, p in enumerate(items):
            yield request(rng, win, p, s, lane, f"{win.window_id}/s{s}", turn)


def campaign_rows() -> dict[str, list[dict[str, Any]]]:
    """The campaigns, environment and services rows the views join to."""
    plan = f"name: scale-bench\ndescription: synthetic campaign of {CAMPAIGN}\n"
    campaign = {
        "campaign_id": CAMPAIGN,
        "plan_name": "scale-bench",
        "plan_sha256": hashlib.sha256(plan.encode()).hexdigest(),
        "plan_yaml": plan,
        "baseline": BASELINE,
        "started_at": START,
        "finished_at": START + timedelta(hours=len(windows())),
        "status": "complete",
    }
    facts = {
        "os": "Linux",
        "cpu.model": "synthetic",
        "cpu.count": "2",
        "python": "3.11",
        "engine.kind": "sglang",
        "engine.model": "synthetic-27b",
        "gpus": "1",
        "gpu.0.name": "NVIDIA H200",
        "gpu.0.memory_total_mib": "143771",
    }
    environment = [
        {"campaign_id": CAMPAIGN, "host": "local", "key": k, "value": v} for k, v in facts.items()
    ]
    services = [{
        "service_id": f"svc-{m}", "campaign_id": CAMPAIGN, "config_id": f"cfg-{m}-tp1",
        "engine": "sglang", "method": m, "tp": 1, "gpus": "0", "host": "local",
        "launch_command": f"python -m sglang.launch_server --model-path m --tp-size 1 "
                          f"--speculative-algorithm {m.upper()}",
        "requested_at": START, "ready_at": START, "stopped_at": START, "startup_s": 60.0,
        "state": "stopped", "error": None, "log_tail": None, "transport": "direct",
    } for m in METHODS]  # fmt: skip
    return {"campaigns": [campaign], "environment": environment, "services": services}


def generate(db: Path, n: int, seed: int, batch: int) -> int:
    """Write the campaign of n requests into db through Store.append; return rows landed."""
    store = Store(db)
    for table, rows in campaign_rows().items():
        store.append(table, rows)
    rng = np.random.default_rng(seed)
    landed, pending, units = 0, [], {}  # units: (config_id, workload, service_id) -> requests
    for row in requests(rng, n):
        pending.append(row)
        key = (row["config_id"], row["workload"], row["service_id"])
        units[key] = units.get(key, 0) + 1
        if len(pending) == batch:
            landed += store.append("requests", pending)
            pending = []
    landed += store.append("requests", pending)
    store.append(
        "units",
        [
            {
                "campaign_id": CAMPAIGN,
                "config_id": cfg,
                "workload": w,
                "service_id": svc,
                "n_requests": k,
                "complete": True,
                "colocated_with": "",
                "started_at": START,
                "finished_at": START,
            }
            for (cfg, w, svc), k in units.items()
        ],
    )
    return landed
