"""`collect run --only METHOD[/TP]`: only the named configurations start; the campaign
stays partial; unknown names are refused before anything starts.

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/collect/test_only.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.collect_cli import collect_argv
from tests.unit.collect.test_only import _plan  # noqa: F401


def test_unknown_method_or_tp_is_refused(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(_plan(tmp_path))
    for spec, says in (("nosuch", "no method 'nosuch'"), ("ngram/4", "tp must be one of")):
        out = subprocess.run(
            collect_argv(
                "run", str(plan), "--db", str(tmp_path / "x.db"), "--only", spec, "--no-progress"
            ),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 2 and says in out.stderr, out.stderr
        assert not (tmp_path / "x.db").exists()
