"""`specsweep run` as the tests start it: under this interpreter, with no progress
display (the tests read its stdout and stderr)."""

from __future__ import annotations

import sys
from pathlib import Path


def collect_run(plan: Path | str, db: Path | str, logs: Path | str, *extra: str) -> list[str]:
    """argv of `specsweep run PLAN --db DB --logs LOGS --no-progress EXTRA...`."""
    return [sys.executable, "-m", "specsweep.collect", "run", str(plan), "--db", str(db), "--logs",
            str(logs), "--no-progress", *extra]  # fmt: skip
