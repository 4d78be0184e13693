"""Calibration through the SQL path: simulated campaigns written as `requests` rows to a real
DuckDB file, `python -m analyze`'s build run on it, coverage read from the `speedup` table.

The same model as tests/schema/test_paired_coverage.py (log-normal decode speeds, prompts of
different base speed, a true speedup that varies by prompt with sd 0.1 in ln, noise between
repetitions, service starts per run), 1000 campaigns per cell, each its own campaign_id (its
own family), fixed seeds. What this adds to the function-level check: the speedup_pairs view,
decode_tps derived from e2e and ttft, the (run, prompt) ordinals and the crossing of runs all
sit between the simulated speeds and the interval that is checked.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest
from analyze_rows import COLUMNS, create_raw_tables, req

from analyze import build

N_SIM = 1000
TOKENS = 61  # decode_req's shape: decode_tps = (61 - 1) / (e2e - ttft)


def campaign_rows(
    rng: np.random.Generator,
    cid: str,
    true: float,
    n_prompts: int,
    n_runs: int,
    noise: float,
    start_sd: float,
    reps: int,
) -> list[dict]:
    """One simulated campaign's requests: the baseline and method m on the same prompts."""
    base = rng.normal(np.log(100), 0.3, n_prompts)
    effect = np.log(true) + rng.normal(0, 0.1, n_prompts)
    rows = []
    for run in range(1, n_runs + 1):
        start = rng.normal(0, start_sd, 2)
        for side, (method, shift) in enumerate((("autoregressive", 0.0), ("m", 1.0))):
            speed = np.exp(
                base[:, None]
                + shift * effect[:, None]
                + start[side]
                + rng.normal(0, noise, (n_prompts, reps))
            )
            for p in range(n_prompts):
                for r in range(reps):
                    rows.append(
                        {
                            "campaign_id": cid,
                            "method": method,
                            "run": run,
                            "prompt_id": f"p{p:02d}",
                            "rep": r,
                            "e2e_s": 0.5 + (TOKENS - 1) / speed[p, r],
                        }
                    )
    return rows


def analyzed_cell(
    path, true: float, n_prompts: int, n_runs: int, noise: float, start_sd: float, reps: int = 2
) -> pd.DataFrame:
    """Write N_SIM campaigns, analyze them, return their speedup rows."""
    rng = np.random.default_rng([n_prompts, n_runs, int(true * 10), 7])
    template = req(output_tokens=TOKENS, ttft_s=0.5)
    records = []
    for i in range(N_SIM):
        for row in campaign_rows(rng, f"c{i:04d}", true, n_prompts, n_runs, noise, start_sd, reps):
            records.append(
                {
                    **template,
                    **row,
                    "request_id": f"{i}-{len(records)}",
                    "config_id": f"cfg-{row['method']}",
                    "service_id": f"svc-{row['method']}-{row['run']}",
                    "window_id": f"w-{row['method']}/run{row['run']}",
                }
            )
    frame = pd.DataFrame.from_records(records)
    with duckdb.connect(str(path)) as con:
        create_raw_tables(con)
        con.register("sim", frame)
        con.execute(
            f"INSERT INTO requests ({', '.join(COLUMNS)}, run) "
            f"SELECT {', '.join(COLUMNS)}, run FROM sim"
        )
    build.run(path, baseline="autoregressive")
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute("SELECT * FROM speedup").df()


@pytest.mark.parametrize(
    ("true", "n_prompts", "n_runs", "noise", "start_sd"),
    [
        (1.3, 8, 1, 0.05, 0.0),
        (0.8, 5, 1, 0.1, 0.0),
        (1.0, 5, 3, 0.05, 0.03),
    ],
)
def test_the_speedup_table_keeps_its_coverage(
    tmp_path, true: float, n_prompts: int, n_runs: int, noise: float, start_sd: float
) -> None:
    got = analyzed_cell(tmp_path / "sim.duckdb", true, n_prompts, n_runs, noise, start_sd)
    assert len(got) == N_SIM and (got["n_prompts"] == n_prompts).all()
    assert (got["n_runs"] == n_runs).all()
    held = ((got["ci_low"] <= true) & (true <= got["ci_high"])).mean()
    assert 0.925 <= held <= 0.975, held


def test_too_few_prompts_give_no_interval_through_sql(tmp_path) -> None:
    got = analyzed_cell(tmp_path / "sim.duckdb", 1.3, 2, 1, 0.05, 0.0)
    assert got["ci_low"].isna().all() and got["significant"].isna().all()
    assert got["ci_reason"].str.startswith("2 prompts:").all()
