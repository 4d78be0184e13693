"""`specsweep report` stopped by a signal while its worker processes draw the figures: one
line, the shell's exit code, no worker left, the earlier report untouched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specsweep.report.__main__ import INTERRUPTED
from tests.support.fixtures.report import CAMPAIGN, needs_latex
from tests.unit.report.test_report_build import ROOT


def _descendants(pid: int) -> list[int]:
    found, queue = [], [pid]
    while queue:
        parent = queue.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            with open(task / "children") as f:
                children = [int(c) for c in f.read().split()]
            found += children
            queue += children
    return found


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@needs_latex
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_while_figures_are_drawn(
    report_db: Path, tmp_path: Path, signum: int, code: int
) -> None:
    """SIGINT as a background job gets it: inherited ignored, and honoured all the same."""
    out = tmp_path / "report.pdf"
    out.write_bytes(b"%PDF the earlier report")
    proc = subprocess.Popen(
        [sys.executable, "-m", "specsweep.report", "--db", str(report_db), "--out", str(out)]
        + ["--campaign", CAMPAIGN, "--workers", "2"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        deadline = time.monotonic() + 120
        # the forkserver is a child, the pool's workers are its children
        while not any(_descendants(c) for c in _descendants(proc.pid)):
            assert proc.poll() is None and time.monotonic() < deadline, "no worker was seen"
            time.sleep(0.01)
        workers = _descendants(proc.pid)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == code, err
    assert err.strip().splitlines()[-1] == f"report: {INTERRUPTED}" and "Traceback" not in err
    assert out.read_bytes() == b"%PDF the earlier report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.pdf"]  # nor .tex, nor .part
    deadline = time.monotonic() + 10
    while not all(_gone(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(_gone(pid) for pid in workers), workers
