"""GPU packing over SSH to the test sshd on 127.0.0.1: a host whose GPUs are declared in
the plan (no nvidia-smi here) runs two llama-server configurations side by side, each on
its own GPU set, and every unit records who shared the host; with `pack: false` the same
plan runs one configuration at a time and records none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import yaml

from specsweep.collect.plan.file import parse_plan
from specsweep.collect.run import runner
from tests.support.collect_cli import llama_engine
from tests.support.fixtures.hosts import servers_in


def _plan(ssh_cfg: dict[str, Any], llama_server: str, model: str, pack: bool) -> str:
    return yaml.safe_dump(
        {
            "name": f"packing-{pack}",
            "repeat": 1,  # one round: this is about packing, not the rounds
            "host": {**ssh_cfg, "tunnel": True, "gpus": [0, 1], "pack": pack},
            "engine": llama_engine(llama_server, model, ["-t", "1", "-c", "1024", "-np", "1"]),
            "methods": [
                {"name": "autoregressive", "args": ["--spec-type", "none"]},
                {"name": "ngram-simple", "args": ["--spec-type", "ngram-simple"]},
            ],
            "workloads": [
                {
                    "name": "echo",
                    "max_tokens": [24],
                    "repetitions": 3,
                    "prompts": {
                        "kind": "inline",
                        "texts": ["Repeat exactly: def add(a, b): return a + b"],
                    },
                }
            ],
        },
        sort_keys=False,
    )


def _run(
    ssh_cfg: dict[str, Any], llama_server: str, model: str, pack: bool, tmp_path: Path
) -> duckdb.DuckDBPyConnection:
    text = _plan(ssh_cfg, llama_server, model, pack)
    db = tmp_path / f"pack-{pack}.duckdb"
    runner.run(parse_plan(text), text, db, Path("logs"), show_progress=False)
    from specsweep.analyze import build

    build.run(db, baseline="autoregressive")
    return duckdb.connect(str(db), read_only=True)


def test_two_configs_run_side_by_side_on_disjoint_gpus(
    ssh_cfg: dict[str, Any], llama_server: str, smollm_model: str, tmp_path: Path
) -> None:
    before = servers_in(llama_server, ssh_cfg["workdir"])
    with _run(ssh_cfg, llama_server, smollm_model, True, tmp_path) as con:
        services = con.execute(
            "SELECT service_id, gpus, launch_command, requested_at, stopped_at, state "
            "FROM services ORDER BY gpus"
        ).fetchall()
        units = dict(con.execute("SELECT service_id, colocated_with FROM units").fetchall())
        ok = con.execute(
            "SELECT count(*) FILTER (ok), count(*) FROM requests WHERE NOT is_warmup"
        ).fetchone()
        colocated = con.execute("SELECT DISTINCT colocated FROM request_metrics").fetchall()
    (a, gpus_a, cmd_a, start_a, stop_a, state_a), (b, gpus_b, cmd_b, start_b, stop_b, state_b) = (
        services
    )
    assert (gpus_a, gpus_b) == ("0", "1")
    assert "CUDA_VISIBLE_DEVICES=0 " in cmd_a and "CUDA_VISIBLE_DEVICES=1 " in cmd_b
    assert state_a == state_b == "stopped"
    assert start_a < stop_b and start_b < stop_a, "the two services never ran at once"
    assert units == {a: b, b: a}
    assert ok == (6, 6) and colocated == [(True,)]
    assert servers_in(llama_server, ssh_cfg["workdir"]) == before


def test_pack_false_runs_one_config_at_a_time(
    ssh_cfg: dict[str, Any], llama_server: str, smollm_model: str, tmp_path: Path
) -> None:
    with _run(ssh_cfg, llama_server, smollm_model, False, tmp_path) as con:
        spans = con.execute(
            "SELECT requested_at, stopped_at FROM services ORDER BY requested_at"
        ).fetchall()
        shared = con.execute("SELECT DISTINCT colocated_with FROM units").fetchall()
    (_, first_stop), (second_start, _) = spans
    assert first_stop <= second_start and shared == [("",)]
