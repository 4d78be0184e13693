"""The report's threats-to-validity note on failed services names why they failed, from the
`services` rows' `error` (hand-built rows: the errors of the SGLang campaign of 2026-12-04)."""

from __future__ import annotations

import pandas as pd

from specsweep.report.data import ReportData
from specsweep.report.findings import validity_notes
from specsweep.report.text import latex

TRIE = (
    "server exited during start-up: RuntimeError: param_.max_trie_depth must be greater "
    "than 1, current value: 1"
)
CUTLASS = "server exited during start-up: ModuleNotFoundError: No module named 'cutlass'"


def _notes(services: list[tuple[str, str, str | None]]) -> str:
    svc = pd.DataFrame(services, columns=["method", "state", "error"])
    empty = pd.DataFrame()
    data = ReportData(
        campaign={"status": "complete"},
        environment=empty,
        services=svc.assign(transport="direct", gpus="", host="h", tp=1, launch_command="x"),
        distribution=empty,
        config_summary=empty,
        speedup=empty,
        best_config=empty,
        agentic=empty,
    )
    return " ".join(latex(n) for n in validity_notes(data))  # as the PDF prints them


def test_failed_services_are_grouped_by_their_cause_escaped_for_latex() -> None:
    text = _notes(
        [
            ("autoregressive", "stopped", None),
            ("synth-k1-l1.5", "failed", TRIE),
            ("synth-k1-l2.0", "failed", TRIE),
            ("draft-k4-l2.5", "failed", CUTLASS),
            ("synth-k2-l2.5", "stopped", None),
        ]
    )
    assert (
        "3 service(s) failed (synth-k1-l1.5, synth-k1-l2.0: server exited during start-up: "
        "RuntimeError: param\\_.max\\_trie\\_depth must be greater than 1, current value: 1; "
        "draft-k4-l2.5: server exited during start-up: ModuleNotFoundError: No module named "
        "\\textquotesingle{}cutlass\\textquotesingle{}); their configs have no results."
    ) in text


def test_a_service_without_an_error_and_causes_beyond_three_are_said_so() -> None:
    text = _notes([(f"m{i}", "failed", f"cause {i}") for i in range(5)] + [("x", "failed", None)])
    assert (
        "6 service(s) failed (m0: cause 0; m1: cause 1; m2: cause 2; 3 more in the appendix)"
        in (text)
    )
    assert "failed" not in _notes([("m", "stopped", None)])
