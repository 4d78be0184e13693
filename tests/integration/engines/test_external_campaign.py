"""A campaign against an `external` SGLang-shaped server: specsweep starts and stops
nothing, still fingerprints the server, measures accept length = scripted truth and stores
SGLang's acceptance details exactly as sent."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb

from tests.support.collect_cli import external_plan, run_here
from tests.support.shaped_servers import Script, SGLangServer, serve


def _plan(url: str) -> str:
    return external_plan(
        url,
        name="external-sglang",
        engine={
            "kind": "sglang",
            "model": "/models/m",
            "chat_template": "{% for m in messages %}{{ m.content }}\n{% endfor %}",
        },
        methods=[{"name": "dflash"}],
        baseline="dflash",
        workloads=[
            {
                "name": "w",
                "prompts": {"kind": "inline", "texts": ["a", "b"]},
                "max_tokens": [28],
                "concurrency": [1, 2],
                "repetitions": 2,
            }
        ],
    )


def test_external_server_is_measured_not_managed(tmp_path: Path) -> None:
    script = Script()  # 28 tokens in 8 verify steps: accept length (28 - 1) / 8
    with serve(SGLangServer(script)) as url:
        text = _plan(url)
        db = run_here(text, tmp_path)
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT ok, accept_length, output_tokens, chunk_tokens, "
            "engine_accept_length, accept_histogram, accepted_per_pos, "
            "step_accepted FROM requests WHERE NOT is_warmup"
        ).fetchall()
        service = con.execute("SELECT state, launch_command, host FROM services").fetchone()
        env = dict(con.execute("SELECT key, value FROM environment").fetchall())
        metrics = con.execute(
            "SELECT count(*) FROM server_metrics WHERE name = 'avg_spec_accept_length'"
        ).fetchone()[0]
    assert len(rows) == 8 and all(r[0] for r in rows)
    assert {r[1] for r in rows} == {(script.tokens - 1) / script.verify_steps}
    assert {r[2] for r in rows} == {script.tokens}
    assert rows[0][3] == list(script.chunk_tokens)
    # SGLang's own figure and histogram, stored exactly as meta_info gave them
    assert {r[4] for r in rows} == {script.tokens / script.verify_steps}
    assert {tuple(r[5]) for r in rows} == {(0, 0, 5, 3, 0, 0, 0, 0)}  # 2,2,3,2,3,2,3,2 accepted
    assert {(r[6], r[7]) for r in rows} == {(None, None)}
    body = json.loads(env["service.dflash.tp1.request_body"])
    assert body == {"sampling_params": {"temperature": 0}, "stream": True}
    assert service[0] == "stopped" and service[1].startswith(f"external server at {url}")
    assert service[2] == "shaped" and env["host.url"] == url
    assert metrics == 2  # scraped before and after the workload


def test_a_refused_cache_flush_marks_the_windows_not_the_service(tmp_path: Path) -> None:
    script = Script(flush_always_busy=True)
    with serve(SGLangServer(script)) as url:
        text = _plan(url)
        db = run_here(text, tmp_path)
    with duckdb.connect(str(db), read_only=True) as con:
        services = con.execute("SELECT state FROM services").fetchall()
        windows = con.execute("SELECT cache_reset FROM windows").fetchall()
        errors = con.execute("SELECT hook, error FROM endpoint_errors").fetchall()
        requests = con.execute("SELECT count(*) FROM requests WHERE NOT is_warmup").fetchone()[0]
        status = con.execute("SELECT status FROM campaigns").fetchone()[0]
    # refused before each of the 2 windows: recorded and flagged, the windows still measured
    assert services == [("stopped",)] and windows == [("failed",), ("failed",)]
    assert [e[0] for e in errors] == ["reset_cache"] * 2
    assert all("did not flush" in e[1] for e in errors)
    assert requests == 8 and status == "complete"
