"""A whole campaign over SSH to the test sshd on 127.0.0.1: llama-server started through
the `process` manager, requests through each SSH tunnel kind (services.transport says
which), rows in DuckDB, server stopped; then the same with the link dropped mid-campaign
(through the default forward, OpenSSH's ssh -L, which comes back on its port)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from specsweep.collect.plan.file import parse_plan
from specsweep.collect.run import runner
from tests.support.collect_cli import llama_engine, start_run
from tests.support.fixtures.hosts import servers_in


def _plan(
    ssh_cfg: dict[str, Any], llama_server: str, model: str, reps: int, forward: str = "auto"
) -> str:
    plan = {
        "name": "ssh-loopback",
        "repeat": 1,  # one round: this is about the SSH host, not the rounds
        "host": {**ssh_cfg, "tunnel": True, "forward": forward},
        "engine": llama_engine(llama_server, model, ["-t", "2", "-c", "2048", "-np", "2"]),
        "methods": [
            {"name": "autoregressive", "args": ["--spec-type", "none"]},
            {"name": "ngram-simple", "args": ["--spec-type", "ngram-simple"]},
        ],
        "workloads": [
            {
                "name": "echo",
                "prompts": {
                    "kind": "inline",
                    "texts": [
                        "Repeat exactly: def add(a, b): return a + b",
                        "Repeat exactly: for i in range(3): print(i)",
                    ],
                },
                "max_tokens": [16],
                "repetitions": reps,
            },
            {
                "name": "follow-up",
                "prompts": {"kind": "inline", "texts": ["Say hello."]},
                "max_tokens": [8],
                "repetitions": reps,
            },
        ],
    }
    return yaml.safe_dump(plan, sort_keys=False)


def _run(text: str, tmp_path: Path) -> Path:
    db = tmp_path / "results.duckdb"
    runner.run(parse_plan(text), text, db, Path("logs"), show_progress=False)
    return db


@pytest.mark.parametrize(
    ("forward", "transport"), [("auto", "ssh-tunnel"), ("paramiko", "paramiko-tunnel")]
)
def test_campaign_over_ssh_process_manager(
    forward: str,
    transport: str,
    ssh_cfg: dict[str, Any],
    llama_server: str,
    smollm_model: str,
    tmp_path: Path,
) -> None:
    """Through each forward (auto: OpenSSH's ssh -L, the ssh client exists here)."""
    before = servers_in(llama_server, ssh_cfg["workdir"])
    db = _run(_plan(ssh_cfg, llama_server, smollm_model, reps=2, forward=forward), tmp_path)
    with duckdb.connect(str(db), read_only=True) as con:
        ok, failed = con.execute(
            "SELECT count(*) FILTER (ok), count(*) FILTER (NOT ok) "
            "FROM requests WHERE NOT is_warmup"
        ).fetchone()
        states = con.execute("SELECT DISTINCT state, host, transport FROM services").fetchall()
        status = con.execute("SELECT status FROM campaigns").fetchone()[0]
        commands = [r[0] for r in con.execute("SELECT launch_command FROM services").fetchall()]
    # 2 methods x (2 prompts x 2 reps + 1 prompt x 2 reps)
    assert (ok, failed) == (12, 0) and status == "complete"
    assert states == [("stopped", "test-sshd", transport)]
    assert all("llama-server" in c for c in commands)
    logs = list((Path(ssh_cfg["workdir"]) / "logs").rglob("*.log"))
    assert len(logs) == 2 and all("listening on" in p.read_text() for p in logs)
    assert servers_in(llama_server, ssh_cfg["workdir"]) == before


def test_campaign_survives_a_dropped_link(
    ssh_cfg: dict[str, Any], sshd: Any, llama_server: str, smollm_model: str, tmp_path: Path
) -> None:
    """The campaign runs as the CLI in its own process; the link is cut (every sshd session
    killed) once the first unit has landed; the host reconnects, the campaign completes,
    and no server is left running."""
    before = servers_in(llama_server, ssh_cfg["workdir"])
    db, plan = tmp_path / "results.duckdb", tmp_path / "plan.yaml"
    plan.write_text(_plan(ssh_cfg, llama_server, smollm_model, reps=3))
    proc = start_run(plan, db, "logs")
    try:
        cut = _cut_after_first_unit(db, sshd, proc, timeout_s=120)
        out, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert cut, "the link was never cut"
    assert proc.returncode == 0, err
    with duckdb.connect(str(db), read_only=True) as con:
        units = con.execute("SELECT count(*) FROM units").fetchone()[0]
        status = con.execute("SELECT status FROM campaigns").fetchone()[0]
        states = con.execute("SELECT DISTINCT state FROM services").fetchall()
    assert units == 4 and status == "complete" and states == [("stopped",)]
    assert servers_in(llama_server, ssh_cfg["workdir"]) == before


def _cut_after_first_unit(
    db: Path, sshd: Any, proc: subprocess.Popen[str], timeout_s: float
) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with duckdb.connect(str(db), read_only=True) as con:
                landed = con.execute("SELECT count(*) FROM units").fetchone()[0]
        except duckdb.Error:
            landed = 0  # not created yet, or the writer holds the file for a moment
        if landed:
            killed = sshd.kill_sessions()
            assert killed, "no sshd session to kill"
            return True
        time.sleep(0.05)
    return False
