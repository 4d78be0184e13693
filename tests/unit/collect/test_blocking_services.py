"""Blocking services: stopped before a phase, started again after it, also when the
phase's service fails; a service that will not stop skips its phase."""

from __future__ import annotations

import stat
from pathlib import Path

import duckdb
import yaml

from tests.support.collect_cli import run_here


def _plan(tmp_path: Path, stop_cmd: list[str]) -> str:
    broken = tmp_path / "broken-server"
    broken.write_text("#!/bin/sh\necho cannot start\nexit 3\n")
    broken.chmod(broken.stat().st_mode | stat.S_IEXEC)
    events = tmp_path / "events"
    return yaml.safe_dump(
        {
            "name": "blocking",
            "repeat": 1,  # one round: this test is not about rounds
            "host": {
                "kind": "local",
                "blocking_services": [
                    {
                        "name": "gpu0-service",
                        "stop": stop_cmd,
                        "start": ["sh", "-c", f"echo start >> {events}"],
                    }
                ],
            },
            "engine": {
                "kind": "llamacpp",
                "binary": str(broken),
                "model": "/nonexistent.gguf",
                "startup_timeout_s": 5,
            },
            "methods": [{"name": "autoregressive"}],
            "workloads": [
                {"name": "w", "prompts": {"kind": "inline", "texts": ["x"]}, "max_tokens": [4]}
            ],
            "phases": [{"name": "tp1", "tp": 1, "stop_services": ["gpu0-service"]}],
        }
    )


def test_stopped_before_the_phase_and_started_after_a_failure(tmp_path: Path) -> None:
    events = tmp_path / "events"
    db = run_here(_plan(tmp_path, ["sh", "-c", f"echo stop >> {events}"]), tmp_path)
    assert events.read_text().split() == ["stop", "start"]
    with duckdb.connect(str(db), read_only=True) as con:
        state, log_tail = con.execute("SELECT state, log_tail FROM services").fetchone()
    assert state == "failed" and "cannot start" in log_tail


def test_a_service_that_will_not_stop_skips_the_phase(tmp_path: Path) -> None:
    events = tmp_path / "events"
    db = run_here(_plan(tmp_path, ["sh", "-c", "echo busy >&2; exit 1"]), tmp_path)
    assert not events.exists()  # never stopped, so never started again
    with duckdb.connect(str(db), read_only=True) as con:
        services = con.execute("SELECT count(*) FROM services").fetchone()[0]
        status = con.execute("SELECT status FROM campaigns").fetchone()[0]
    assert services == 0 and status == "partial"
