"""The gate's power through the SQL path (issue 36): two copies of a default-campaign-shaped
campaign (5 configurations, 3 rounds in collect's counterbalanced order, the default plan's 6
closed-loop windows, start sd 0.05, starts shared by every window of a start), written as raw
rows, analysed, compared: the gate catches a uniform 25% slowdown of a copy, and an A/A copy
passes. Seeded; about 50 s on 2 cores (marked slow)."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import numpy as np

from specsweep.analyze import build, compare
from tests.support.analyze_rows import AR, decode_req, insert_rows, service, write_db
from tests.support.start_campaigns import Design, positions
from tests.unit.analyze.test_analyze_compare import _gate

POWER = Design()  # 5 configurations, 3 rounds, the default campaign's windows, start sd 0.05
T0 = datetime(2026, 12, 6, 8, 0, 0)


def _truth(rng: np.random.Generator) -> dict[tuple, tuple[np.ndarray, np.ndarray]]:
    """What every copy shares: per window, the prompts' base ln speeds and each
    configuration's per-prompt effect (0 for the baseline; sd 0.1, as start_campaigns)."""
    out = {}
    for workload, n_prompts, concurrency in POWER.windows:
        effect = rng.normal(0.0, POWER.prompt_sd, (len(POWER.true), n_prompts))
        effect[0] = 0.0
        out[(workload, concurrency)] = (rng.normal(np.log(100), 0.3, n_prompts), effect)
    return out


def _services(cid: str, t: np.ndarray) -> list[dict]:
    """One services row per start, requested in the campaign's counterbalanced order."""
    return [
        {**service(cid, name, "sglang"), "service_id": f"{cid}-{name}/run{r + 1}",
         "config_id": f"{cid}-{name}", "run": r + 1,
         "requested_at": T0 + timedelta(minutes=float(t[c, r]))}
        for c, name in enumerate(POWER.names) for r in range(POWER.rounds)
    ]  # fmt: skip


def _copy(rng: np.random.Generator, truth: dict, cid: str, factor: float) -> tuple[list, list]:
    """One campaign of the shared truth (requests, services): fresh starts (one per
    configuration and round, shared by all its windows) and fresh request noise; every
    decode speed times factor."""
    t = positions(POWER, cid)
    start = rng.normal(0.0, POWER.start_sd, t.shape)
    rows = []
    for (workload, concurrency), (base, effect) in truth.items():
        for (c, name), r in itertools.product(enumerate(POWER.names), range(POWER.rounds)):
            noise = rng.normal(0.0, POWER.noise, (len(base), POWER.reps))
            speed = factor * np.exp((base + effect[c])[:, None] + start[c, r] + noise)
            rows += [
                decode_req(float(speed[p, k]), campaign_id=cid, method=name, run=r + 1,
                           workload=workload, concurrency=concurrency,
                           prompt_id=f"{workload}-p{p:02d}", rep=k, config_id=f"{cid}-{name}",
                           service_id=f"{cid}-{name}/run{r + 1}",
                           window_id=f"{cid}-{name}-{workload}-c{concurrency}/run{r + 1}")
                for p in range(len(base)) for k in range(POWER.reps)
            ]  # fmt: skip
    return rows, _services(cid, t)


def _power_db(path: Path) -> Path:
    """Campaign A, B25 (A's copy, every decode speed 25% slower) and AA (an A/A copy), each
    with fresh starts and noise, analysed; seeded."""
    rng = np.random.default_rng(36)
    truth = _truth(rng)
    copies = [_copy(rng, truth, cid, f) for cid, f in (("A", 1.0), ("B25", 0.75), ("AA", 1.0))]
    write_db(path, [row for rows, _ in copies for row in rows])
    insert_rows(path, "services", [row for _, rows in copies for row in rows])
    insert_rows(path, "campaigns", [
        {"campaign_id": cid, "plan_name": "local-smollm2", "plan_sha256": "0" * 64,
         "plan_yaml": "", "baseline": AR, "started_at": T0 + timedelta(days=i),
         "status": "complete"} for i, cid in enumerate(("A", "B25", "AA"))
    ])  # fmt: skip
    build.run(path, baseline=AR)
    return path


def test_the_gate_catches_a_uniform_slowdown_and_passes_an_aa_copy(tmp_path: Path) -> None:
    """The default campaign's shape, twice: a copy 25% slower fails the gate in every window
    (each decode interval excludes 1 and holds 0.75), an A/A copy passes with no change
    significant. Each interval carries the start variance of both campaigns' 30 starts per
    stratum (2 x 8 contrasts, less the drift slopes)."""
    db = _power_db(tmp_path / "power.duckdb")
    with duckdb.connect(str(db), read_only=True) as con:
        slow, same = compare.compare(con, "A", "B25"), compare.compare(con, "A", "AA")
    decode = [c for c in slow.changes if c.metric == "decode_tps" and c.kind == "ratio"]
    assert len(decode) == 30 and all(c.significant and c.worse for c in decode)
    assert all(c.start_source == "pooled" and c.start_df > 8 for c in decode)
    assert sum(c.ci_low <= 0.75 <= c.ci_high for c in decode) >= 28
    shift = next(c for c in slow.changes if c.kind == "shift")
    assert shift.significant and shift.worse and shift.n_windows == 30
    assert shift.ci_low <= 0.75 <= shift.ci_high
    assert _gate(db, candidate="B25").returncode == 1
    assert not [c for c in same.changes if c.significant]
    assert [c.kind for c in same.changes].count("shift") == 1
    done = _gate(db, candidate="AA")
    assert done.returncode == 0 and "gate: 0 regression(s) beyond 5.0%" in done.stdout
