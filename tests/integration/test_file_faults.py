"""A file that fails a command: a disk that refuses a write mid-command (full, over quota,
read-only, `ulimit -f`), or a results file DuckDB cannot read (damaged, truncated). One line
naming the file and why, the command's exit code for a file it cannot use, nothing
half-written, never a traceback (docs/reference.md, "Exit codes").

A file-size limit (RLIMIT_FSIZE, what `ulimit -f` sets) stands in for the full disk: it
needs no mount and no root, and a write past it fails as one to a full disk does, with
"File too large" in place of "No space left on device"."""

from __future__ import annotations

import resource
import shutil
import subprocess
import sys
from pathlib import Path

from tests.integration.test_front_door import PLAN, REPO, one_error_line
from tests.unit.analyze.test_analyze_export import analyzed_golden  # noqa: F401

LIMIT = 64 * 1024  # bytes: a results file is created at 12 KiB, its analysis writes MBs


def limited(*argv: str, limit: int = LIMIT) -> subprocess.CompletedProcess[str]:
    """`python -m specsweep ARGV` that may write no file past `limit` bytes."""
    return subprocess.run(
        [sys.executable, "-m", "specsweep", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)),
    )


def test_run(tmp_path: Path) -> None:
    """The results file is created past a 4 KiB limit (it takes 12 KiB), before any server
    could start (a model file of 0 bytes, /bin/true as the server). By hand, on a full
    tmpfs mid-campaign, the same line came from a unit's commit, the server stopped."""
    plan, db, model = tmp_path / "plan.yaml", tmp_path / "r.duckdb", tmp_path / "m.gguf"
    model.write_bytes(b"")
    plan.write_text(PLAN.format(binary="/bin/true", model=model))
    logs = tmp_path / "logs"
    done = limited(
        "run", str(plan), "--db", str(db), "--logs", str(logs), "--no-progress", limit=4096
    )
    assert one_error_line(done) == (
        f'error: Could not write file "{db}": File too large; completed units are saved; '
        "rerun to resume"
    )
    assert done.returncode == 2


def test_analyze(analyzed_golden: Path, tmp_path: Path) -> None:  # noqa: F811
    db = tmp_path / "golden.duckdb"
    shutil.copyfile(analyzed_golden, db)
    done = limited("analyze", "--db", str(db), "--full")
    line = one_error_line(done)
    assert line.startswith("analyze: Could not write file") and "File too large" in line
    assert line.endswith("; the analysis is as the last build left it") and done.returncode == 1


def test_export(analyzed_golden: Path, tmp_path: Path) -> None:  # noqa: F811
    out = tmp_path / "out"
    done = limited("export", "--db", str(analyzed_golden), "--format", "csv", "--out", str(out))
    line = one_error_line(done)
    assert line.startswith("analyze export: Could not write file") and done.returncode == 2
    assert line.endswith(f"File too large; each file in {out} is whole")
    assert not list(out.rglob(".*.part"))
    assert all(f.stat().st_size < LIMIT for f in out.rglob("*") if f.is_file())


def test_report(analyzed_golden: Path, tmp_path: Path) -> None:  # noqa: F811
    """The HTML page is past the limit (the report logs its progress and the figures that
    could not be embedded, also past it, before the line that ends it)."""
    out = tmp_path / "report.html"
    out.write_text("the earlier report")
    done = limited(
        "report", "--db", str(analyzed_golden), "--workers", "1", "--html", str(out), "--no-pdf"
    )
    assert "Traceback" not in done.stderr and done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines()[-1] == f"report: {out}: File too large"
    assert out.read_text() == "the earlier report" and [*tmp_path.iterdir()] == [out]


def test_a_damaged_results_file(analyzed_golden: Path, tmp_path: Path) -> None:  # noqa: F811
    """Truncated (a copy cut short, a disk that filled mid-checkpoint): each command says
    which file DuckDB could not read, in one line; `check` estimates from the plan's speeds
    and says why."""
    db = tmp_path / "cut.duckdb"
    db.write_bytes(analyzed_golden.read_bytes()[: analyzed_golden.stat().st_size // 2])
    plan, model = tmp_path / "plan.yaml", tmp_path / "m.gguf"
    model.write_bytes(b"")
    plan.write_text(PLAN.format(binary="/bin/true", model=model))
    cases = [
        (["run", str(plan), "--db", str(db), "--logs", str(tmp_path), "--no-progress"], 2),
        (["import", "tests/data/sglang_bench_serving_shaped.jsonl", "--db", str(db)], 2),
        (["analyze", "--db", str(db)], 1),
        (["export", "--db", str(db), "--out", str(tmp_path / "out")], 2),
        (["report", "--db", str(db), "--out", str(tmp_path / "r.pdf")], 1),
    ]
    for argv, code in cases:
        done = limited(*argv, limit=resource.RLIM_INFINITY)
        line = one_error_line(done)
        assert done.returncode == code and f'file "{db}"' in line, (argv, line)
    checked = limited("check", str(plan), "--db", str(db), limit=resource.RLIM_INFINITY)
    assert checked.returncode == 0 and "Traceback" not in checked.stderr, checked.stderr
    estimate = next(ln for ln in checked.stdout.splitlines() if ln.startswith("time estimate"))
    assert estimate.startswith("time estimate, speeds assumed (plan): Could not read"), estimate
