"""Calibration through the SQL path (issue 36): simulated campaigns written as `requests` and
`services` rows to a real DuckDB file, `specsweep analyze`'s build run on it, coverage and the
family-wise error read from the `speedup` table.

The model is the function-level check's (tests/support/start_campaigns.py: rounds in collect's
counterbalanced order, one service start per configuration and round shared by every window
of the start, drift per start along that order), N_SIM campaigns per cell, each its own
campaign_id (its own family), fixed seeds. What this adds to tests/coverage/test_start_coverage.py:
the speedup_pairs view, decode_tps derived from e2e and ttft, the start positions read from
`services.requested_at` (service_starts), the window tables, the strata and Holm over each
campaign's claims all sit between the simulated speeds and the interval that is checked.
"""

from __future__ import annotations

from datetime import timedelta

import duckdb
import numpy as np
import pandas as pd
import pytest

from specsweep.analyze import build
from tests.support.analyze_rows import COLUMNS, SERVICE_T, create_raw_tables, req, service
from tests.support.start_campaigns import Design, campaign

N_SIM = 200
TOKENS = 61  # decode_req's shape: decode_tps = (61 - 1) / (e2e - ttft)


def raw_rows(rows: list[dict], cid: str) -> tuple[list[dict], list[dict]]:
    """One simulated campaign as requests and services rows: one service per (method, run),
    requested in the order of its start position."""
    template = req(output_tokens=TOKENS, ttft_s=0.5, campaign_id=cid)
    starts: dict[tuple[str, int], float] = {}
    requests = []
    for i, row in enumerate(rows):
        sid = f"{cid}-{row['method']}-{row['run']}"
        starts[(row["method"], row["run"])] = row["start"]
        requests.append({
            **template, "request_id": f"{cid}-{i}", "method": row["method"], "run": row["run"],
            "config_id": f"cfg-{row['method']}", "service_id": sid,
            "window_id": f"{sid}-{row['workload']}-{row['concurrency']}",
            "workload": row["workload"], "concurrency": row["concurrency"],
            "prompt_id": row["prompt_id"], "rep": row["rep"],
            "e2e_s": 0.5 + (TOKENS - 1) / row["speed"],
        })  # fmt: skip
    services = [
        {**service(cid, method, "llamacpp"), "service_id": f"{cid}-{method}-{run}", "run": run,
         "config_id": f"cfg-{method}", "requested_at": SERVICE_T + timedelta(minutes=start)}
        for (method, run), start in starts.items()
    ]  # fmt: skip
    return requests, services


def analyzed_cell(path, design: Design, seed: int, n: int = N_SIM) -> pd.DataFrame:
    """Write n campaigns of the design, analyze them, return their speedup rows with the
    true speedup of each."""
    rng = np.random.default_rng(seed)
    requests, services = [], []
    for i in range(n):
        got = raw_rows(campaign(rng, design, f"sql{seed}-{i}/tp1"), f"c{i:04d}")
        requests += got[0]
        services += got[1]
    with duckdb.connect(str(path)) as con:
        create_raw_tables(con)
        for table, rows, columns in (("requests", requests, [*COLUMNS]),
                                     ("services", services, list(services[0]))):  # fmt: skip
            con.register("sim", pd.DataFrame.from_records(rows)[columns])
            con.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT * FROM sim")
            con.unregister("sim")
    build.run(path, baseline="autoregressive")
    with duckdb.connect(str(path), read_only=True) as con:
        frame = con.execute("SELECT * FROM speedup").df()
    truth = {name: t / design.true[0] for name, t in zip(design.names, design.true)}
    return frame.assign(true=frame["method"].map(truth))


CELLS = {
    "starts sd 0.05, 3 rounds": (Design(start_sd=0.05), 1),
    "drift 3% per start, starts sd 0.1": (Design(start_sd=0.1, drift=0.03), 2),
    "real effects, skewed prompts": (Design(true=(1.0, 0.8, 1.3, 1.0, 2.0), skew=True), 3),
}


@pytest.mark.parametrize("name", list(CELLS))
def test_the_speedup_table_keeps_its_coverage(tmp_path, name: str) -> None:
    design, seed = CELLS[name]
    got = analyzed_cell(tmp_path / "sim.duckdb", design, seed)
    assert len(got) == N_SIM * 4 * len(design.windows) and (got["n_runs"] == 3).all()
    held = ((got["ci_low"] <= got["true"]) & (got["true"] <= got["ci_high"])).mean()
    assert 0.925 <= held <= 0.975, held
    null = got[got["true"] == 1.0]
    fwer = null.groupby("campaign_id")["significant"].any().mean()
    assert fwer <= 0.07, fwer
    assert got["start_sd"].notna().all() and (got["start_spread"] >= 1).all()


def test_the_fixed_order_fails_the_same_test(tmp_path) -> None:
    """The design before issue 36 (the plan's order in every round) with 3% drift per start:
    the same analysis misses far more than 5% and calls identical services different."""
    design = Design(start_sd=0.05, drift=0.03, order="fixed")
    got = analyzed_cell(tmp_path / "sim.duckdb", design, 4)
    held = ((got["ci_low"] <= got["true"]) & (got["true"] <= got["ci_high"])).mean()
    fwer = got.groupby("campaign_id")["significant"].any().mean()
    assert held < 0.85 and fwer > 0.15, (held, fwer)


def test_one_round_gives_no_interval_through_sql(tmp_path) -> None:
    got = analyzed_cell(tmp_path / "sim.duckdb", Design(rounds=1), 5, n=10)
    assert got["ci_low"].isna().all() and got["significant"].isna().all()
    assert got["ci_reason"].str.startswith("one service start per side").all()
