"""The threats note on replicas (view replica_agreement), on hand-built rows: nothing without
replicas, 'agree' when every baseline window's replicas agree, the first disagreeing window
named with each replica's median and interval otherwise; a speculative method's replicas
(different workloads) are not judged."""

from __future__ import annotations

import pandas as pd

from specsweep.report.findings import replica_notes
from specsweep.report.text import latex


def _rows(
    *replicas: tuple[int, str, float, float, float, bool],
    method_base: bool = True,
    max_tokens: int = 64,
) -> list[dict]:
    agree = max(r[3] for r in replicas) <= min(r[4] for r in replicas)
    return [
        {
            "run": 1,
            "config_id": "ar",
            "max_tokens": max_tokens,
            "concurrency": 1,
            "replica": rep,
            "gpus": gpus,
            "decode_tps_p50": p50,
            "ci_low": lo,
            "ci_high": hi,
            "agree": agree,
            "is_baseline": method_base,
        }
        for rep, gpus, p50, lo, hi, _ in replicas
    ]


def test_no_replicas_no_note() -> None:
    assert replica_notes(pd.DataFrame()) == []
    method_only = pd.DataFrame(
        _rows((1, "1", 50, 40, 60, True), (2, "2", 90, 85, 95, True), method_base=False)
    )
    assert replica_notes(method_only) == []


def test_agreeing_replicas_are_said_to_pool_soundly() -> None:
    ra = pd.DataFrame(
        _rows((1, "1", 95.0, 93.0, 97.0, True), (2, "2", 96.0, 94.0, 98.0, True))
        + _rows((1, "1", 80.0, 78.0, 82.0, True), (2, "2", 81.0, 79.0, 83.0, True), max_tokens=256)
    )
    (note,) = replica_notes(ra)
    assert note.startswith(
        "The baseline ran as several replicas (service starts on GPUs of "
        "their own) in 2 window(s); in each, the replicas\u2019 median decode "
        "speeds agree"
    )


def test_disagreeing_replicas_are_named_with_their_intervals() -> None:
    ra = pd.DataFrame(
        _rows((1, "1", 95.0, 93.0, 97.0, True), (2, "2", 96.0, 94.0, 98.0, True))
        + _rows(
            (1, "3", 95.0, 93.0, 97.0, True), (2, "a_b", 60.0, 58.0, 62.0, True), max_tokens=256
        )
    )
    (note,) = [latex(n) for n in replica_notes(ra)]  # as the PDF prints it: names escaped
    assert (
        "in 1 the replicas disagree, e.g. run 1, max\\_tokens 256, concurrency 1: replica 1 "
        "(GPU 3) 95.0 {[}93.0, 97.0{]}; replica 2 (GPU a\\_b) 60.0 {[}58.0, 62.0{]} tok/s"
    ) in note
