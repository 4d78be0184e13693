"""Failed starts say why, and a family that keeps failing at start-up stops starting.

`failure_cause` reads the line that says why out of real engines' logs: the recorded failed
starts of vLLM 0.24 and SGLang 0.5.15 (tests/data/), three SGLang starts that failed on the
H200 on 2026-12-04 (a trie depth of 1, `cutlass` behind a .pth file, `deep_gemm` missing) and
the real llama-server of the cached build. The campaigns below run a stand-in `python` that
prints such a log and exits 1, as the real SGLang did, through the real runner into DuckDB.
"""

from __future__ import annotations

import stat
from pathlib import Path

import duckdb
import pytest
import yaml

from specsweep.collect.run.service import CAUSE_CHARS, failure_cause
from tests.support.collect_cli import run_here

DATA = Path(__file__).resolve().parents[2] / "data"
SGLANG = DATA / "sglang-0.5.15"
TRIE = "RuntimeError: param_.max_trie_depth must be greater than 1, current value: 1"
PLAIN = "{% for m in messages %}{{ m['content'] }}{% endfor %}"


def _tail(path: Path, lines: int = 40) -> str:
    """What a host's log_tail gives: the last 40 lines."""
    return "\n".join(path.read_text().splitlines()[-lines:])


@pytest.mark.parametrize(
    ("log", "cause"),
    [
        (SGLANG / "startup-failure-trie-depth.log", TRIE),
        (SGLANG / "startup-failure-cutlass.log", "ModuleNotFoundError: No module named 'cutlass'"),
        (
            SGLANG / "startup-failure-deep-gemm.log",
            "ModuleNotFoundError: No module named 'deep_gemm'",
        ),
        # the same traceback under vLLM's "(APIServer pid=N) " prefix and under none
        (DATA / "vllm-0.24" / "startup-failure.log", "OSError: Repo id must be in the form"),
        (SGLANG / "startup-failure.log", "OSError: Repo id must be in the form"),
    ],
)
def test_the_cause_of_a_real_failed_start_is_its_last_exception_line(log: Path, cause: str) -> None:
    assert failure_cause(_tail(log)).startswith(cause)


# Hand-built in the shape of vLLM 0.24's log when its engine core fails to start (the recorded
# startup-failure.log has the same prefixes): the API server's last exception only points at
# the engine core's.
API, CORE = "(APIServer pid=5538) ", "(EngineCore_DP0 pid=5600) "
ENGINE_CORE = "\n".join(
    [
        API + "WARNING 12-04 07:47:25 [system_utils.py:299] Found ulimit of 20000 and failed to "
        "automatically increase with error current limit exceeds maximum limit.",
        CORE + "ERROR 12-04 07:47:40 [core.py:708] EngineCore failed to start.",
        CORE + "Traceback (most recent call last):",
        CORE + '  File ".../vllm/v1/engine/core.py", line 699, in run_engine_core',
        CORE + "ValueError: No available memory for the cache blocks. Try increasing "
        "`gpu_memory_utilization` when initializing the engine.",
        API + "Traceback (most recent call last):",
        API + '  File "/opt/torch/.venv/bin/vllm", line 10, in <module>',
        API + "RuntimeError: Engine core initialization failed. See root cause above. Failed "
        "core proc(s): {'EngineCore_DP0': 1}",
    ]
)


def test_an_exception_that_points_at_the_root_cause_gives_way_to_it() -> None:
    assert failure_cause(ENGINE_CORE) == (
        "ValueError: No available memory for the cache blocks. Try increasing "
        "`gpu_memory_utilization` when initializing the engine."
    )


def test_a_warning_that_mentions_an_error_is_no_cause() -> None:
    """Without an exception the first line that starts with "error" counts, not vLLM's
    ulimit warning (every vLLM start logs it): two servers killed alike must not share it."""
    assert failure_cause(ENGINE_CORE.splitlines()[0] + "\nKilled") is None


@pytest.mark.parametrize(
    "line",
    [
        "env: ‘/opt/x/llama-server’: No such file or directory",  # a UTF-8 locale
        "env: '/opt/x/llama-server': No such file or directory",  # C
        "env: ‘/opt/x/llama-server’: Permission denied",
    ],
)
def test_the_process_managers_env_that_cannot_execute_the_server_is_the_cause(line: str) -> None:
    assert failure_cause(f"{line}\n") == line
    assert failure_cause("env: LANG is set\n") is None


def test_a_tail_without_an_error_has_no_cause_and_a_long_one_is_cut() -> None:
    assert failure_cause("loading model\nlistening on 127.0.0.1:8080") is None
    assert failure_cause("") is None
    long = "ValueError: " + "x" * 1000
    assert failure_cause(long) == long[:CAUSE_CHARS]


# --- campaigns -----------------------------------------------------------------------------


def _campaign(tmp: Path, stand_in: str, grid: list[float]) -> list[tuple[str, str, str]]:
    """A campaign of the baseline and one family (`synth`, a grid over L) whose `python` is
    the shell text stand_in; the services rows' (method, state, error) in start order."""
    fake = tmp / "python3"
    fake.write_text("#!/bin/sh\n" + stand_in)
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    text = yaml.safe_dump(
        {
            "name": "start-failures",
            "repeat": 1,  # one round: this test is not about rounds
            "host": {"kind": "local"},
            "engine": {
                "kind": "sglang",
                "python": str(fake),
                "model": "/tmp/models/m",
                "chat_template": PLAIN,
                "startup_timeout_s": 20,
            },
            "methods": [
                {"name": "autoregressive"},
                {
                    "name": "synth",
                    "grid": {"L": grid},
                    "env": {"SGLANG_SIMULATE_ACC_LEN": "{L}"},
                    "args": ["--speculative-algorithm", "NGRAM"],
                },
            ],
            "workloads": [
                {"name": "w", "prompts": {"kind": "inline", "texts": ["x"]}, "max_tokens": [4]}
            ],
        }
    )
    db = run_here(text, tmp)
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(
            "SELECT method, state, error FROM services ORDER BY requested_at"
        ).fetchall()
