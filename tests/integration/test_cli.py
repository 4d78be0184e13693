"""The `specsweep` console command (specsweep/cli.py), run as the installed script.

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/test_cli.py."""

from __future__ import annotations

from pathlib import Path

from tests.unit.test_cli import specsweep  # noqa: F401


def test_analyze_of_a_missing_file_fails_saying_so(tmp_path: Path) -> None:
    missing = tmp_path / "none.duckdb"
    done = specsweep("analyze", "--db", str(missing))
    assert done.returncode == 1
    assert "no results" in done.stderr and str(missing) in done.stderr
