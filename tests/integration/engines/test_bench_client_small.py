"""tests/bench/bench_client.py at a small size (CI runs benchmarks small; docs/benchmarks.md
gives the full runs): both clients stream from the truth server, every chunk is matched to its
send stamp, and each row carries the client's own verdict and how it fared against the
truth. No figure is asserted: a benchmark prints them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_the_client_benchmark_runs_small() -> None:
    done = subprocess.run(
        [sys.executable, "tests/bench/bench_client.py", "--concurrency", "1,4", "--rounds", "1",
         "--requests", "4", "--gap-ms", "20", "--skip", "capacity"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if line[:7].strip() in ("1", "4")]
    ours = [r for r in rows if r[1] == "specsweep"]
    theirs = [r for r in rows if r[1] == "vllm-style"]
    # streams, client, n req, 4 error columns, loop p99, late %, doubt %, missed, behind
    assert [r[0] for r in ours] == ["1", "4"] and len(theirs) == 2
    assert all(len(r) == 12 and r[11] in ("yes", "no") for r in ours)
    assert all(float(r[9]) >= 0 and int(r[10]) >= 0 for r in ours)  # doubt %, missed
    assert all(r[9:] == ["-", "-", "-"] for r in theirs)
    assert "a chunk every 20 ms" in done.stdout
