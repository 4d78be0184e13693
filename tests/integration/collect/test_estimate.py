"""Duration estimates on hand-built plans and store rows, the ETA's correction, and the
`check` / `simulate` commands.

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/collect/test_estimate.py."""

from __future__ import annotations

from pathlib import Path

from tests.unit.collect.test_estimate import (  # noqa: F401
    PLAN,
    REPO,
    _cli,
    _row,
    _service_row,
    _store,
    config,
    plan,
)


def test_simulate_ct200_plan_packs_to_its_dependency_bound(tmp_path: Path) -> None:
    one = tmp_path / "ct200-one-round.yaml"  # one round: the bounds below are a round's
    one.write_text((REPO / "plans/ct200-qwen36.yaml").read_text() + "\nrepeat: 1\n")
    done = _cli("simulate", str(one), "--seed", "1")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "serial order (one service at a time):" in out and "packed order on GPUs 0-7" in out
    area = float(out.split("packed / lower bound = ")[1].split()[0])
    dep = float(out.split("packed / it = ")[1].split()[0])
    assert dep <= 1.1
    # the area bound ignores that the TP4 picks wait for all of TP1 and that TP8 runs
    # alone: no order can come within 1.1x of it (the dependency bound is above 1.1x)
    assert area > 1.1 and area / dep > 1.1
    assert ["tp8", "autoregressive", "8", "0-7"] in [line.split()[:4] for line in out.splitlines()]


def test_check_prints_the_time_estimate_with_measured_figures(tmp_path: Path) -> None:
    text = PLAN
    plan_file = tmp_path / "p.yaml"
    plan_file.write_text(text)
    p = plan()
    cid = config(p).config_id  # a start on the plan's host (localhost) and its request
    with _store(tmp_path, [_row(0, cid, "autoregressive", 1, "w", 1, 10)], [_service_row(cid)]):
        pass
    done = _cli("check", str(plan_file), "--db", str(tmp_path / "r.duckdb"))
    assert "time estimate, speeds measured in" in done.stdout, done.stdout + done.stderr
    assert "1 measured" in done.stdout and "serial order" in done.stdout
    missing = _cli("check", str(plan_file), "--db", str(tmp_path / "nope.duckdb"))
    assert missing.returncode == 2 and "does not exist" in missing.stderr
