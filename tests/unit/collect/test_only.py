"""`collect run --only METHOD[/TP]`: only the named configurations start; the campaign
stays partial; unknown names are refused before anything starts."""

from __future__ import annotations

import stat
from pathlib import Path

import duckdb
import yaml

from specsweep.collect.plan.file import parse_plan
from specsweep.collect.run import runner


def _plan(tmp_path: Path) -> str:
    broken = tmp_path / "broken-server"  # every start fails at once: a services row each
    broken.write_text("#!/bin/sh\necho cannot start\nexit 3\n")
    broken.chmod(broken.stat().st_mode | stat.S_IEXEC)
    return yaml.safe_dump(
        {
            "name": "only",
            "repeat": 1,  # one round: this test is not about rounds
            "engine": {
                "kind": "llamacpp",
                "binary": str(broken),
                "model": "/none.gguf",
                "startup_timeout_s": 5,
            },
            "methods": [{"name": "autoregressive"}, {"name": "ngram"}, {"name": "draft"}],
            "workloads": [
                {"name": "w", "prompts": {"kind": "inline", "texts": ["x"]}, "max_tokens": [4]}
            ],
        }
    )


def test_only_the_named_configurations_start(tmp_path: Path) -> None:
    text, db = _plan(tmp_path), tmp_path / "r.duckdb"
    runner.run(
        parse_plan(text),
        text,
        db,
        tmp_path / "logs",
        show_progress=False,
        only=["ngram/1", "draft"],
    )
    with duckdb.connect(str(db), read_only=True) as con:
        started = sorted(r[0] for r in con.execute("SELECT method FROM services").fetchall())
        status = con.execute("SELECT status FROM campaigns").fetchone()[0]
    assert started == ["draft", "ngram"] and status == "partial"


def test_a_family_name_selects_all_its_members(tmp_path: Path) -> None:
    plan = yaml.safe_load(_plan(tmp_path))
    plan["methods"][2] = {"name": "draft", "grid": {"n": [2, 4]}, "args": ["--n", "{n}"]}
    plan = parse_plan(yaml.safe_dump(plan))
    assert runner.select_configs(plan, ["draft", "ngram/1"]) == [
        ("draft-n2", None),
        ("draft-n4", None),
        ("ngram", 1),
    ]
    assert runner.select_configs(plan, ["draft-n4/1"]) == [("draft-n4", 1)]
