"""The speculation section's prediction table and sentence (report/speculation/prediction.py)
on hand-built speedup_prediction rows."""

from __future__ import annotations

import pandas as pd

from specsweep.report.speculation import prediction


def _row(
    method: str, error: float | None, reason: str | None = None, within: bool | None = None
) -> dict:
    return {
        "campaign_id": "c",
        "engine": "vllm",
        "tp": 1,
        "workload": "rewrite",
        "max_tokens": 128,
        "concurrency": 1,
        "method": method,
        "family": "synth-k4",
        "accept_length": 2.5,
        "acceptance_source": "window counters",
        "draft_tokens_per_step": 4.0,
        "speedup": 0.5,
        "ci_low": 0.45,
        "ci_high": 0.55,
        "step_cost": 5.0,
        "step_time_s": 0.0235,
        "baseline_token_time_s": 0.0047,
        "n_siblings": 2,
        "predicted_step_cost": 5.0,
        "predicted_speedup": None if error is None else 0.5 * (1 + error),
        "prediction_error": error,
        "sibling_log_sd": None if within is None else 0.05,
        "pred_low": None if within is None else 0.4,
        "pred_high": None if within is None else 0.6,
        "within_interval": within,
        "reason": reason,
    }


def test_summary_counts_windows_within_ten_percent_and_names_the_worst() -> None:
    """Errors +4%, -9.9%, +20%: two within 10%, the worst is +20.0%; one without a sibling.
    Two have an interval (two or more siblings), one of them inside it."""
    sp = pd.DataFrame(
        [
            _row("a_1", 0.04, within=True),
            _row("b", -0.099),
            _row("c", 0.20, within=False),
            _row("lone", None, "no other window of the same family and draft length"),
        ]
    )
    s = prediction.summary(sp)
    assert "2 of 3 predicted windows are within 10\\%" in s
    assert "\\emph{c} on rewrite (+20.0\\%)" in s
    assert "1 window(s) have no prediction (1 no other window of the same family" in s
    assert "1 of 2 with two or more siblings lie inside the 95\\% prediction interval" in s


def test_table_escapes_names_and_prints_step_milliseconds() -> None:
    t = prediction.table(pd.DataFrame([_row("a_1", 0.04, within=True)]))
    assert "a\\_1" in t and "23.5" in t and "+4.0\\%" in t and "0.52" in t
    assert "{[}0.40, 0.60{]}" in t  # the prediction interval
    assert "textbackslash" not in t


def test_nothing_to_show_gives_none() -> None:
    assert prediction.table(pd.DataFrame()) is None and prediction.summary(pd.DataFrame()) is None
