"""Failed starts say why, and a family that keeps failing at start-up stops starting.

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/engines/test_start_failures.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from specsweep.collect.run.service import failure_cause
from tests.unit.engines.test_start_failures import SGLANG, TRIE, _campaign  # noqa: F401


def test_the_cause_of_a_real_llama_server_is_its_first_error_line(
    llama_server: str, tmp_path: Path
) -> None:
    """llama.cpp logs "E" lines with a time stamp, the first of which says why; the last
    ones only that it exits."""
    bogus = subprocess.run([llama_server, "--bogus"], capture_output=True, text=True, timeout=60)
    assert failure_cause(bogus.stdout + bogus.stderr) == "error: invalid argument: --bogus"
    missing = tmp_path / "missing.gguf"
    run = subprocess.run(
        [llama_server, "-m", str(missing), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    cause = failure_cause(run.stdout + run.stderr)
    assert run.returncode != 0
    assert cause is not None and "error loading model" in cause and str(missing) in cause


def test_two_members_failing_alike_leave_the_rest_of_the_family_unstarted(tmp_path: Path) -> None:
    """The round's order (collect.scheduling.order) decides which members start first: the
    first two fail alike, the others are not started, naming them."""
    rows = _campaign(
        tmp_path, f"cat '{SGLANG / 'startup-failure-trie-depth.log'}'\nexit 1\n", [1.5, 2, 2.5, 3]
    )
    assert sorted(r[:2] for r in rows) == [
        ("autoregressive", "failed"),
        ("synth-L1.5", "failed"),
        ("synth-L2", "failed"),
        ("synth-L2.5", "failed"),
        ("synth-L3", "failed"),
    ]
    error = {method: error for method, _, error in rows}
    members = [method for method, _, _ in rows if method.startswith("synth")]
    started = f"server exited during start-up: {TRIE}"
    # the baseline is no member: it counts not
    assert [error[m] for m in ["autoregressive", *members[:2]]] == [started] * 3
    first = " and ".join(sorted(members[:2]))
    for method in members[2:]:
        assert error[method] == (
            f"not started: {first} of its family failed at start-up with: {TRIE}"
        )
    # a rerun starts them again (nothing was measured, every configuration is pending)
    again = _campaign(
        tmp_path, 'echo "ValueError: L = $SGLANG_SIMULATE_ACC_LEN"\nexit 1\n', [1.5, 2, 2.5, 3]
    )
    assert len(again) == 10
    rerun = {method: error for method, _, error in again[5:]}
    for method in members[2:]:
        assert rerun[method] == f"server exited during start-up: ValueError: L = {method[7:]}"


@pytest.mark.parametrize(
    "stand_in",
    [
        # each member its own cause: nothing shared is wrong
        'echo "ValueError: L = $SGLANG_SIMULATE_ACC_LEN refused"\nexit 1\n',
        # memory depends on the member (a larger draft tree, a neighbour): never counted
        "echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB'\nexit 1\n",
        # no line says why
        "echo 'Killed'\nexit 137\n",
    ],
    ids=["causes-differ", "out-of-memory", "no-cause"],
)
def test_every_member_starts_when_the_failures_do_not_share_a_lasting_cause(
    tmp_path: Path, stand_in: str
) -> None:
    rows = _campaign(tmp_path, stand_in, [1.5, 2, 2.5])
    assert len(rows) == 4
    assert all(state == "failed" and error.startswith("server exited") for _, state, error in rows)
