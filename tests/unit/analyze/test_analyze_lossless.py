"""lossless on hand-built texts."""

from __future__ import annotations

from tests.support.analyze_rows import one, req


def test_share_identical_and_the_baseline_noise_floor(analyzed) -> None:  # noqa: ANN001
    """Baseline: prompt p1 reps 0,1,2 = A, A, B (self-identical 1 of 2 later reps = 0.5).
    Method m: p1 reps 0,1,2 = A, B, B -> pairs (A,A) (B,A) (B,B): 2 of 3 identical; a
    failed request and an agentic turn 1 are not paired; turn 0 is."""
    rows = [
        req(method="autoregressive", rep=0, output_text="A"),
        req(method="autoregressive", rep=1, output_text="A"),
        req(method="autoregressive", rep=2, output_text="B"),
        req(method="m", rep=0, output_text="A"),
        req(method="m", rep=1, output_text="B"),
        req(method="m", rep=2, output_text="B"),
        req(
            method="m",
            rep=3,
            ok=False,
            error_kind="http",
            ttft_s=None,
            e2e_s=None,
            output_tokens=None,
            output_text=None,
        ),
        req(
            method="autoregressive",
            workload="agent",
            prompt_id="t1",
            session_id="s",
            turn=1,
            output_text="X",
        ),
        req(method="m", workload="agent", prompt_id="t1", session_id="s", turn=1, output_text="Y"),
        req(
            method="autoregressive",
            workload="agent",
            prompt_id="t0",
            session_id="s",
            turn=0,
            output_text="Z",
        ),
        req(method="m", workload="agent", prompt_id="t0", session_id="s", turn=0, output_text="Z"),
    ]
    path = analyzed(rows)
    chat = one(path, "SELECT * FROM lossless WHERE workload = 'chat'")
    assert (chat["n_pairs"], chat["n_identical"]) == (3, 2)
    assert abs(chat["share_identical"] - 2 / 3) < 1e-12
    assert chat["baseline_self_identical"] == 0.5
    agent = one(path, "SELECT * FROM lossless WHERE workload = 'agent'")
    assert (agent["n_pairs"], agent["n_identical"]) == (1, 1)
