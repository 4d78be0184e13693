"""Per-request acceptance details and the one acceptance-length definition, for all three
engines: hand-built replies, the engine-shaped servers over real sockets (fields as the
engines' sources document them), a round trip through a real Store, and the service
fingerprint of what changes acceptance.

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/engines/test_acceptance_details.py."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb

from tests.support.collect_cli import EAGLE_TWICE, external_plan, run_here
from tests.support.shaped_details import vllm_spec
from tests.support.shaped_servers import Script, VLLMServer, serve


def test_vllm_details_round_trip_through_the_store(tmp_path: Path) -> None:
    script = Script(gap_s=0.005, spec_metrics="detailed")
    sent = vllm_spec(script.chunk_tokens, script.drafts_per_step, "detailed")
    with serve(VLLMServer(script)) as url:
        text = external_plan(
            url,
            name="external-vllm",
            engine={
                "kind": "vllm",
                "model": "org/m",
                "request_extra": {
                    "top_k": 1,
                    "api_key": "sk-secretsecret",
                    "return_token_ids": True,
                },
            },
            **EAGLE_TWICE,
        )
        db = run_here(text, tmp_path)
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT spec_verify_ct, accept_length, engine_accept_length, accept_histogram, "
            "accepted_per_pos, step_accepted FROM requests WHERE NOT is_warmup"
        ).fetchall()
        env = dict(con.execute("SELECT key, value FROM environment").fetchall())
    assert len(rows) == 2
    for verify, ours, own, hist, per_pos, steps in rows:
        assert (verify, ours, own) == (8, 27 / 8, sent["mean_acceptance_length"])
        assert (hist, per_pos, steps) == (
            sent["acceptance_histogram"],
            None,
            sent["per_step_accepted"],
        )
    body = json.loads(env["service.eagle.tp1.request_body"])
    assert body == {
        "api_key": "***",
        "return_token_ids": True,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0,
        "top_k": 1,
    }  # the prompt and max_tokens left out, the secret masked
    assert not any("secretsecret" in v for v in env.values())
    assert env["service.eagle.tp1.request_path"] == "/v1/chat/completions"
    assert env["service.eagle.tp1.engine.version"] == "0.0.shaped"
    assert "service.eagle.tp1.draft_model" not in env  # no --speculative-config
