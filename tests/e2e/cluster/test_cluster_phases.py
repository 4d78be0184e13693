"""Phases keep their meaning across nodes and rounds: a best_of phase runs the fastest method
of its source phase, ranked from the rows the driver landed, and in round 1 only once every
configuration of the source phase has landed (its baseline may start at once: it does not
depend on the ranking); round 2 runs every configuration again, the same pick included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from specsweep.collect.cluster.launch import run as run_on_cluster
from specsweep.collect.plan.file import parse_plan
from tests.e2e.cluster.conftest import PLAN

pytestmark = [pytest.mark.llama, pytest.mark.timeout(180)]

PHASES = """
phases:
  - {name: first, tp: 1, methods: [ngram-simple, ngram-map-k], workloads: [chat]}
  - {name: pick, tp: 1, methods: {best_of: first, top: 1}, workloads: [rewrite]}
"""


def test_a_best_of_phase_waits_for_its_source_across_nodes(cluster: Any, tmp_path: Path) -> None:
    db = tmp_path / "results.duckdb"
    plan = PLAN.replace("repeat: 1", "repeat: 2")
    text = plan + PHASES + f"cluster: {{kind: ray, address: '{cluster.address}'}}\n"
    run_on_cluster(parse_plan(text), text, db, tmp_path / "logs", show_progress=False)
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT status FROM campaigns").fetchall() == [("complete",)]
        units = con.execute(
            "SELECT workload, count(*), bool_and(complete) FROM units GROUP BY 1 ORDER BY 1"
        ).fetchall()
        # per round: 3 configurations of `first`; the baseline and the best one of `pick`
        assert units == [("chat", 6, True), ("rewrite", 4, True)]
        first_end = con.execute(
            "SELECT max(s.stopped_at) FROM services s JOIN units u "
            "USING (service_id) WHERE u.workload = 'chat' AND s.run = 1"
        ).fetchone()[0]
        picked = con.execute(
            "SELECT s.method, s.requested_at FROM services s JOIN units u "
            "USING (service_id) WHERE u.workload = 'rewrite' "
            "AND s.method <> 'autoregressive' ORDER BY s.run"
        ).fetchall()
        hosts = con.execute("SELECT count(DISTINCT host) FROM services").fetchone()[0]
    finally:
        con.close()
    assert len(picked) == 2 and picked[0][0] in {"ngram-simple", "ngram-map-k"}
    assert picked[1][0] == picked[0][0] and picked[0][1] >= first_end
    assert hosts == 2
