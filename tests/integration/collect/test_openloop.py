"""Open-loop load: arrival schedules (their statistics, seeds, ramps), the sender's clock, bad
load/SLO fields named with their line, and a campaign whose windows are sent on schedule to an
engine-shaped server on loopback.

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/collect/test_openloop.py."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
import yaml

from specsweep.collect.plan.file import parse_plan
from specsweep.collect.plan.load import OpenLoad
from specsweep.collect.plan.traces.read import read_trace
from specsweep.collect.run import openloop
from tests.support.collect_cli import run_here
from tests.support.shaped_servers import Script, VLLMServer, serve
from tests.unit.collect.test_openloop import TRACE, _plan  # noqa: F401


def test_an_open_loop_window_sends_on_schedule_and_records_it(tmp_path: Path) -> None:
    script = Script(ttft_s=0.02, gap_s=0.005, chunk_tokens=(1,) * 4)
    with serve(VLLMServer(script)) as url:
        text = _plan(url)
        db = run_here(text, tmp_path)
    with duckdb.connect(str(db), read_only=True) as con:
        windows = con.execute(
            "SELECT workload, load, rate, max_concurrency, n_scheduled, schedule_span_s, "
            "seed, cache_reset, elapsed_s FROM windows ORDER BY workload, rate"
        ).fetchall()
        rows = con.execute(
            "SELECT w.rate, r.scheduled_s, r.start_s, r.concurrency, r.ok, r.prompt_id, r.rep "
            "FROM requests r JOIN windows w USING (campaign_id, window_id) "
            "WHERE w.load = 'poisson' ORDER BY w.rate, r.scheduled_s"
        ).fetchall()
        replay = con.execute(
            "SELECT prompt_id, max_tokens, scheduled_s, start_s FROM requests "
            "WHERE workload = 'replay' ORDER BY scheduled_s"
        ).fetchall()
        closed = con.execute(
            "SELECT count(*) FROM requests WHERE workload = 'closed' AND scheduled_s IS NULL"
        ).fetchone()[0]
        slo = dict(
            con.execute(  # the campaign's SLO keys (workload.* keys: the prompt set-up)
                "SELECT key, value FROM environment WHERE host = 'campaign' AND key LIKE 'slo.%'"
            ).fetchall()
        )
    items = read_trace(TRACE, "specsweep", name="replay", time_scale=0.25)
    assert [w[:5] for w in windows] == [
        ("closed", "closed", None, 2, 2),
        ("open", "poisson", 20.0, 8, 12),
        ("open", "poisson", 40.0, 8, 12),
        ("replay", "trace", None, None, len(items)),
    ]
    assert windows[3][5] == pytest.approx(items[-1].t_s)
    assert windows[0][5] is None and windows[1][6] == 4
    assert {w[7] for w in windows} == {"reset_prefix_cache"}
    for rate in (20.0, 40.0):
        mine = [r for r in rows if r[0] == rate]
        expected = openloop.offsets(OpenLoad(rate=[rate], requests=12, seed=4), rate, 12)
        assert [r[1] for r in mine] == pytest.approx(expected.tolist())
        assert all(r[4] and r[3] == 8 for r in mine)
        lags = [r[2] - r[1] for r in mine]
        assert min(lags) >= 0 and max(lags) < 0.05  # sent on time, never early
        assert [(r[5], r[6]) for r in mine][:4] == [
            ("inline/0", 0),
            ("inline/1", 0),
            ("inline/2", 0),
            ("inline/0", 1),
        ]
    assert windows[1][5] == pytest.approx(max(r[1] for r in rows if r[0] == 20.0))
    assert closed == 2
    assert [(r[0], r[1]) for r in replay] == [(i.prompt_id, i.max_tokens) for i in items]
    assert [r[2] for r in replay] == pytest.approx([i.t_s for i in items])
    assert all(0 <= r[3] - r[2] < 0.05 for r in replay)
    assert slo == {"slo.ttft_ms": "500.0", "slo.target": "0.99", "slo.trim": "0.1"}


def test_the_max_rate_search_bisects_by_measured_attainment(tmp_path: Path) -> None:
    """A server that serves one request at a time (about 0.1 s each): at 2 requests/s
    nothing waits long, at 40 the tenth request waits most of a second. With a TTFT
    objective, the search runs two more windows between the swept rates, each half-way
    between the last passing and the first failing rate, as the measured attainment says."""
    plan = {
        "name": "search",
        "repeat": 1,  # one round: this test is not about rounds
        "host": {"kind": "external", "url": "", "name": "shaped"},
        "engine": {"kind": "vllm", "model": "m"},
        "methods": [{"name": "autoregressive"}],
        "warmup_requests": 0,
        "slo": {"ttft_ms": 250, "target": 0.9},
        "workloads": [
            {
                "name": "open",
                "prompts": {"kind": "inline", "texts": ["a"]},
                "max_tokens": [8],
                "load": {
                    "arrival": "constant",
                    "rate": [2, 40],
                    "requests": 10,
                    "search": "max_rate_under_slo",
                    "search_steps": 2,
                },
            }
        ],
    }
    script = Script(ttft_s=0.02, gap_s=0.02, chunk_tokens=(1,) * 4, serial=True)
    with serve(VLLMServer(script)) as url:
        plan["host"]["url"] = url
        text = yaml.safe_dump(plan)
        db = run_here(text, tmp_path)
    slo = parse_plan(text).slo
    assert slo is not None
    with duckdb.connect(str(db), read_only=True) as con:
        rates = [
            r[0] for r in con.execute("SELECT rate FROM windows ORDER BY started_at").fetchall()
        ]
        rows = con.execute(
            "SELECT w.rate, r.ok, r.ttft_s, r.e2e_s, r.output_tokens "
            "FROM requests r JOIN windows w USING (campaign_id, window_id)"
        ).fetchall()
    passed = {
        rate: slo.attainment(
            [
                {"ok": r[1], "ttft_s": r[2], "e2e_s": r[3], "output_tokens": r[4]}
                for r in rows
                if r[0] == rate
            ]
        )
        >= slo.target
        for rate in rates
    }
    assert rates[:3] == [2.0, 40.0, 21.0] and len(rates) == 4
    assert passed[2.0] and not passed[40.0]
    assert rates[3] == (11.5 if not passed[21.0] else 30.5)
