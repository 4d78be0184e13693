"""docs/adding-an-engine.md is checked by doing what it says: its example module is taken out
of the page, dropped into a folder on `collect.engines.__path__`, and a campaign runs with it
against an OpenAI-chat-shaped server on 127.0.0.1. The plan's engine union is built when the
plan models are imported, so the campaign runs in a fresh interpreter that adds the folder
first."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import duckdb

from tests.support.collect_cli import external_plan
from tests.support.shaped_servers import Script, VLLMServer, serve

DOC = Path(__file__).resolve().parents[3] / "docs" / "adding-an-engine.md"
DRIVER = """
import sys
from pathlib import Path

import specsweep.collect.engines

specsweep.collect.engines.__path__.append(sys.argv[1])
from specsweep.collect.plan.file import parse_plan
from specsweep.collect.run import runner

text = Path(sys.argv[2]).read_text()
runner.run(parse_plan(text), text, Path(sys.argv[3]), Path(sys.argv[4]), show_progress=False)
"""


def example_module() -> str:
    """The page's one python block."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) == 1, f"{DOC} should hold exactly one python block, found {len(blocks)}"
    return blocks[0]


def _plan(url: str) -> str:
    return external_plan(
        url,
        name="example-engine",
        engine={"kind": "tinychat", "model": "/models/m"},
        methods=[{"name": "plain"}],
        baseline="plain",
        workloads=[
            {
                "name": "w",
                "prompts": {"kind": "inline", "texts": ["a", "b"]},
                "max_tokens": [28],
                "concurrency": [1],
                "repetitions": 2,
            }
        ],
    )


def _run(tmp_path: Path, engines: Path, plan: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "plan.yaml").write_text(plan)
    argv = [
        sys.executable,
        "-c",
        DRIVER,
        str(engines),
        str(tmp_path / "plan.yaml"),
        str(tmp_path / "r.duckdb"),
        str(tmp_path / "logs"),
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def test_the_documented_engine_runs_a_campaign(tmp_path: Path) -> None:
    engines = tmp_path / "engines"
    engines.mkdir()
    (engines / "tinychat.py").write_text(example_module())
    script = Script()
    with serve(VLLMServer(script)) as url:
        done = _run(tmp_path, engines, _plan(url))
    assert done.returncode == 0, done.stderr
    with duckdb.connect(str(tmp_path / "r.duckdb"), read_only=True) as con:
        rows = con.execute(
            "SELECT ok, output_tokens, finish_reason, engine FROM requests WHERE NOT is_warmup"
        ).fetchall()
        env = dict(con.execute("SELECT key, value FROM environment").fetchall())
    assert len(rows) == 4 and all(r[0] for r in rows)
    assert {(r[1], r[2], r[3]) for r in rows} == {(script.tokens, "length", "tinychat")}
    assert "shaped/model" in env.values()  # the example's fingerprint was stored


def test_without_the_module_the_kind_is_refused(tmp_path: Path) -> None:
    done = _run(tmp_path, tmp_path, _plan("http://127.0.0.1:9"))
    assert done.returncode != 0 and "tinychat" in done.stderr
