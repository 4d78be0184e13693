"""analyze.build.run and the `specsweep analyze` command line.

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/analyze/test_analyze_build.py."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.analyze_rows import write_db
from tests.unit.analyze.test_analyze_build import REPO  # noqa: F401


def test_module_entry_point(tmp_path):
    path = tmp_path / "module.duckdb"
    write_db(path, [])
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "specsweep.analyze", "--db", str(path),
         "--baseline", "autoregressive"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = done.stdout.splitlines()
    assert said[0] == "analyze: rebuilt every campaign (no request_metrics table yet)"
    assert said[1].startswith("analyze: built request_metrics (0 rows)")
