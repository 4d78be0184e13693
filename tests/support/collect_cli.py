"""`specsweep run` as the tests start it: under this interpreter, with no progress
display (the tests read its stdout and stderr); or in the test's own process (`run_here`,
the runner the command calls), on a plan such as `external_plan` writes; and the parts of
plans the tests share (`llama_engine`, `EAGLE_TWICE`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml


def collect_argv(*args: str) -> list[str]:
    """argv of `specsweep ARGS...` (the collect stage's commands: run, simulate, ...)."""
    return [sys.executable, "-m", "specsweep.collect", *args]


def collect_run(plan: Path | str, db: Path | str, logs: Path | str, *extra: str) -> list[str]:
    """argv of `specsweep run PLAN --db DB --logs LOGS --no-progress EXTRA...`."""
    return collect_argv(
        "run", str(plan), "--db", str(db), "--logs", str(logs), "--no-progress", *extra
    )


def llama_engine(binary: str, model: str, args: list[str], **extra: Any) -> dict[str, Any]:
    """A plan's engine: llama-server `binary` serving `model` with `args`, given 60 s to start
    and 60 s a request; extra fields after those."""
    return {"kind": "llamacpp", "binary": binary, "model": model, "args": args,
            "startup_timeout_s": 60, "request_timeout_s": 60, **extra}  # fmt: skip


# a plan's methods and workloads: one method, eagle, its own baseline; prompt "a" sent twice
# (28 tokens, one at a time)
EAGLE_TWICE: dict[str, Any] = {
    "methods": [{"name": "eagle"}],
    "baseline": "eagle",
    "workloads": [
        {
            "name": "w",
            "prompts": {"kind": "inline", "texts": ["a"]},
            "max_tokens": [28],
            "concurrency": [1],
            "repetitions": 2,
        }
    ],
}


def start_run(plan: Path | str, db: Path | str, logs: Path | str) -> subprocess.Popen[str]:
    """`specsweep run` started (collect_run's argv), its stdout and stderr piped as text."""
    return subprocess.Popen(
        collect_run(plan, db, logs), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def run_here(text: str, folder: Path, **options: Any) -> Path:
    """Run the plan `text` in this process, its results in folder/r.duckdb and its logs in
    folder/logs, with no progress display; options go to runner.run (only=, repeat=, ...).
    Returns the results file."""
    from specsweep.collect.plan.file import parse_plan
    from specsweep.collect.run import runner

    db = folder / "r.duckdb"
    runner.run(parse_plan(text), text, db, folder / "logs", show_progress=False, **options)
    return db


def external_plan(url: str, name: str, engine: dict[str, Any], **fields: Any) -> str:
    """The YAML of a one-round plan (these tests are not about rounds) named `name`, against
    the server at `url` as an `external` host named shaped: its engine and its other fields
    (methods, workloads, ...) as given."""
    host = {"kind": "external", "url": url, "name": "shaped"}
    return yaml.safe_dump({"name": name, "repeat": 1, "host": host, "engine": engine, **fields})
