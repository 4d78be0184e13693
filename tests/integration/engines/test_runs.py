"""Rounds of one campaign (`repeat`, `collect run --repeat N`): every unit measured once per
round (a run), each round on its own service starts, in its counterbalanced order
(collect.scheduling.order), kept by a resume after Ctrl-C; run r > 1's windows named /run<r>;
raising `repeat` later adds rounds to the same campaign and a resume measures nothing twice;
the analysis layer counts the runs."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import duckdb
import pytest
import yaml

from specsweep.analyze import build
from specsweep.collect.plan.file import parse_plan
from specsweep.collect.run import runner
from specsweep.collect.scheduling.order import phase_seed, round_order
from tests.support.shaped_servers import Reply, Request, Script, SGLangServer, serve

FAST = Script(ttft_s=0.01, gap_s=0.005)
THREE = ["autoregressive", "dflash", "ngram"]


def _plan(url: str, repeat: int | None = None, methods: tuple[str, ...] = THREE[:2]) -> str:
    plan = {
        "name": "runs",
        "host": {"kind": "external", "url": url, "name": "shaped"},
        "engine": {
            "kind": "sglang",
            "model": "/models/m",
            "chat_template": "{% for m in messages %}{{ m.content }}\n{% endfor %}",
        },
        "methods": [{"name": m} for m in methods],
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
    url: str,
    db: Path,
    logs: Path,
    repeat: int | None = None,
    cli_repeat: int | None = None,
    methods: tuple[str, ...] = THREE[:2],
) -> str:
    text = _plan(url, repeat, methods)
    return runner.run(parse_plan(text), text, db, logs, show_progress=False, repeat=cli_repeat)


def _starts(db: Path) -> dict[int, list[str]]:
    """run -> the methods of its service starts, in the order they were requested."""
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT run, method FROM services ORDER BY requested_at").fetchall()
    out: dict[int, list[str]] = {}
    for run, method in rows:
        out.setdefault(run, []).append(method)
    return out


def _order(url: str, run: int) -> list[str]:
    """round_order of the campaign's one phase for that run."""
    plan = parse_plan(_plan(url, 2, tuple(THREE)))
    phase = plan.all_phases()[0].name
    return round_order(THREE, phase_seed(plan.campaign_id(), phase), run)


def test_each_round_starts_every_configuration_in_its_counterbalanced_order(
    tmp_path: Path,
) -> None:
    db = tmp_path / "r.duckdb"
    with serve(SGLangServer(FAST)) as url:
        _run(url, db, tmp_path / "logs", repeat=2, methods=tuple(THREE))
    starts = _starts(db)
    assert starts[1] == _order(url, 1) and starts[2] == _order(url, 2)
    assert starts[2] == starts[1][::-1]


class Interrupting(SGLangServer):
    """Ctrl-C (SIGINT to this process) when its `at`-th generate request comes, once."""

    def __init__(self, script: Script, at: int):
        super().__init__(script)
        self.at, self.seen = at, 0

    async def generate(self, req: Request, reply: Reply) -> None:
        self.seen += 1
        if self.seen == self.at:
            os.kill(os.getpid(), signal.SIGINT)
        await super().generate(req, reply)


def test_a_resume_after_ctrl_c_mid_round_keeps_the_round_order(tmp_path: Path) -> None:
    """3 requests a start (1 warm-up + 2 prompts): request 14 is round 2's second start's
    first measured one. The resume starts what is left of round 2 in round 2's order."""
    db = tmp_path / "r.duckdb"
    with serve(Interrupting(FAST, at=9 + 3 + 2)) as url:
        with pytest.raises(KeyboardInterrupt):
            _run(url, db, tmp_path / "logs", repeat=2, methods=tuple(THREE))
        before = _starts(db)
        _run(url, db, tmp_path / "logs", repeat=2, methods=tuple(THREE))
    order = _order(url, 2)
    assert before[2] == order[:2]  # interrupted in the second start of round 2
    assert _starts(db)[2] == order[:2] + order[1:]  # the rest, in round 2's order
    with duckdb.connect(str(db), read_only=True) as con:
        status = con.execute("SELECT status FROM campaigns").fetchone()[0]
        done = con.execute("SELECT run, count(*) FROM units WHERE complete GROUP BY run").fetchall()
    assert status == "complete" and sorted(done) == [(1, 3), (2, 3)]


def test_runs_measure_every_unit_again_and_more_runs_add_to_the_campaign(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    with serve(SGLangServer(FAST)) as url:
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
    with serve(SGLangServer(FAST)) as url:
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


def test_a_replayed_workload_waits_for_the_baseline_in_round_1_only(tmp_path: Path) -> None:
    """Every round replays round 1's baseline replies (collect.run.replay), the baseline's own
    included from round 2: in round 1 the methods wait for the baseline (it moves to the
    front, the others keep the round's order); round 2 follows its counterbalanced order
    whole. No unit misses its script, and a session's turn-1 prompt is the same in both
    rounds for every method."""
    db = tmp_path / "r.duckdb"
    with serve(SGLangServer(FAST)) as url:
        plan = yaml.safe_load(_plan(url, 2, tuple(THREE)))
        plan["workloads"] = [
            {
                "name": "ag",
                "kind": "agentic",
                "history": "replay",
                "turns": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
                "max_tokens": [28],
                "repetitions": 1,
            }
        ]
        text = yaml.safe_dump(plan)
        runner.run(parse_plan(text), text, db, tmp_path / "logs", show_progress=False)
    seed = phase_seed(parse_plan(text).campaign_id(), "tp1")
    starts = _starts(db)
    rest = [m for m in round_order(THREE, seed, 1) if m != "autoregressive"]
    assert starts[1] == ["autoregressive", *rest]
    assert starts[2] == round_order(THREE, seed, 2)
    with duckdb.connect(str(db), read_only=True) as con:
        units = con.execute("SELECT count(*) FILTER (complete), count(*) FROM units").fetchone()
        prompts = con.execute(
            "SELECT count(DISTINCT prompt_tokens), count(*) FROM requests "
            "WHERE turn = 1 AND NOT is_warmup"
        ).fetchone()
        history = con.execute(
            "SELECT run, method, any_value(history) FROM requests WHERE turn = 1 "
            "AND NOT is_warmup GROUP BY ALL ORDER BY ALL"
        ).fetchall()
    assert units == (6, 6) and prompts == (1, 6)
    assert "autoregressive" in (m for r, m, h in history if r == 2 and h == "replay")
