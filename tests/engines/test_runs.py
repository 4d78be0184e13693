"""Repeated runs of one campaign (`repeat`, `collect run --repeat N`): every unit measured
once per run, each run on its own service start, run r > 1's windows named /run<r>; raising
`repeat` later adds runs to the same campaign and a resume measures nothing twice; the
analysis layer counts the runs."""

from __future__ import annotations

from pathlib import Path

import duckdb
import yaml
from shaped_servers import Script, SGLangServer, serve

from analyze import build
from collect.plan.file import parse_plan
from collect.run import runner


def _plan(url: str, repeat: int | None = None) -> str:
    plan = {
        "name": "runs",
        "host": {"kind": "external", "url": url, "name": "shaped"},
        "engine": {
            "kind": "sglang",
            "model": "/models/m",
            "chat_template": "{% for m in messages %}{{ m.content }}\n{% endfor %}",
        },
        "methods": [{"name": "autoregressive"}, {"name": "dflash"}],
        "workloads": [
            {
                "name": "w",
                "prompts": {"kind": "inline", "texts": ["a", "b"]},
                "max_tokens": [28],
                "concurrency": [1],
                "repetitions": 1,
            }
        ],
    }
    if repeat:
        plan["repeat"] = repeat
    return yaml.safe_dump(plan)


def _run(
    url: str, db: Path, logs: Path, repeat: int | None = None, cli_repeat: int | None = None
) -> str:
    text = _plan(url, repeat)
    return runner.run(parse_plan(text), text, db, logs, show_progress=False, repeat=cli_repeat)


def test_runs_measure_every_unit_again_and_more_runs_add_to_the_campaign(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    with serve(SGLangServer(Script())) as url:
        first = _run(url, db, tmp_path / "logs", repeat=2)
        again = _run(url, db, tmp_path / "logs", repeat=2)  # resume: nothing left to do
        with duckdb.connect(str(db), read_only=True) as con:
            n_services = con.execute("SELECT count(*) FROM services").fetchone()[0]
        more = _run(url, db, tmp_path / "logs", cli_repeat=3)  # --repeat 3 adds run 3 only
    assert first == again == more  # `repeat` is not part of the plan's hash
    assert n_services == 4  # 2 methods x 2 runs, the resume started none
    with duckdb.connect(str(db), read_only=True) as con:
        units = con.execute(
            "SELECT run, count(*) FROM units WHERE complete GROUP BY run ORDER BY run"
        ).fetchall()
        services = con.execute(
            "SELECT run, count(*) FROM services GROUP BY run ORDER BY run"
        ).fetchall()
        windows = con.execute(
            "SELECT run, window_id FROM windows ORDER BY run, window_id"
        ).fetchall()
        requests = con.execute(
            "SELECT run, count(*), count(DISTINCT window_id) FROM requests "
            "WHERE NOT is_warmup GROUP BY run ORDER BY run"
        ).fetchall()
        status = con.execute("SELECT status FROM campaigns").fetchone()[0]
    assert units == [(1, 2), (2, 2), (3, 2)] and services == [(1, 2), (2, 2), (3, 2)]
    assert requests == [(1, 4, 2), (2, 4, 2), (3, 4, 2)] and status == "complete"
    assert [w for r, w in windows if r == 1] == sorted(w for r, w in windows if r == 1)
    assert all(w.endswith(f"/run{r}") == (r > 1) for r, w in windows)
    build.run(db)
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT n_runs FROM campaign_summary").fetchone()[0] == 3
        assert con.execute(
            "SELECT run, count(*) FROM request_metrics GROUP BY run ORDER BY run"
        ).fetchall() == [(1, 4), (2, 4), (3, 4)]
        assert (
            con.execute("SELECT n FROM config_summary WHERE method = 'dflash'").fetchone()[0] == 6
        )  # runs pooled: 2 prompts x 3 runs


def test_an_incomplete_unit_of_run_2_leaves_run_1_in_the_analysis(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    with serve(SGLangServer(Script())) as url:
        _run(url, db, tmp_path / "logs", repeat=2)
    with duckdb.connect(str(db)) as con:  # as an interrupted run 2 would leave it
        con.execute(
            "UPDATE units SET complete = false WHERE run = 2 AND config_id IN "
            "(SELECT config_id FROM services WHERE method = 'dflash')"
        )
    build.run(db)
    with duckdb.connect(str(db), read_only=True) as con:
        kept = con.execute(
            "SELECT method, run, count(*) FROM request_metrics GROUP BY ALL ORDER BY ALL"
        ).fetchall()
    assert kept == [("autoregressive", 1, 2), ("autoregressive", 2, 2), ("dflash", 1, 2)]
