"""tests/bench/bench_scale.py at a small size (CI runs benchmarks small; docs/benchmarks.md
gives the full runs): a generated campaign grown to two by SQL copies, analysed and reported,
one more campaign added and analysed incrementally, then a full rebuild of a copy compared
with it table by table. Only what the benchmark checks itself is asserted (it exits 1 when a
table differs); its timings are printed, not tested."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_the_scale_benchmark_runs_small(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "tests/bench/bench_scale.py", "--sizes", "1500", "--campaigns", "2",
         "--add", "400", "--check", "--no-cache", "--workdir", str(tmp_path / "work"),
         "--limit-s", "300"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "N = 3,000 measured requests" in out
    assert "rebuilt 1 changed campaign(s) (400 requests): scale-bench-000000000002" in out
    assert "incremental against --full: every analysis table equal" in out
    assert out.count(" ok") == 4  # analyze, report, the incremental analyze, --full
