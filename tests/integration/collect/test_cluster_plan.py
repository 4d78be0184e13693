"""The plan's `cluster:` block (collect/plan/components.py): validated before anything starts,
errors naming the field; left out of the plan's hash; and a single-host campaign (the
runner, a plan with or without the block) never imports ray.

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/collect/test_cluster_plan.py."""

from __future__ import annotations

import subprocess
import sys

from tests.unit.collect.test_cluster_plan import REPO  # noqa: F401


def test_the_single_host_paths_never_import_ray() -> None:
    code = (
        "import sys; import collect.run.runner, collect.__main__; "
        "from specsweep.collect.plan.file import parse_plan; "
        f"parse_plan(open({str(REPO / 'plans/local.yaml')!r}).read() + "
        "'\\ncluster: {kind: ray}\\n'); "
        "assert 'ray' not in sys.modules, 'ray imported'"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
