"""The physics check (report.findings.physics): no headline gain larger than speculation can
give, each failure of issue 36 as a campaign of hand-built analysis rows.

- a vLLM campaign has no per-request acceptance: it is read from the window counters
  (speedup_prediction), and a method launched exactly as the baseline (A/A/A's
  autoregressive-2) can give no gain at all;
- a target drafting for itself accepts K + 1 by construction: its step cost binds, not its
  acceptance;
- the geometric-mean speedup is held against the geometric mean of per-prompt acceptance
  (speedup_decomposition.acceptance_gain), not the token-pooled figure;
- a gain whose acceptance is not known at all is never a headline without saying so.
"""

from __future__ import annotations

import pandas as pd
import pytest

from specsweep.report import findings
from specsweep.report.data import ReportData
from specsweep.report.findings import physics
from specsweep.report.text import latex

TARGET = "/tmp/models/smollm2-135m"
KEY = {"campaign_id": "c1", "engine": "vllm", "tp": 1, "workload": "rewrite", "max_tokens": 128}


def _speedup(rows: list[tuple]) -> pd.DataFrame:
    """(method, concurrency, speedup, ci_low, ci_high, accept_length_tw) rows, all
    significant claims of one workload."""
    frame = pd.DataFrame(
        rows, columns=["method", "concurrency", "speedup", "ci_low", "ci_high", "accept_length_tw"]
    )
    frame["accept_length_tw"] = frame["accept_length_tw"].astype(float)  # NULL: NaN, as read
    return frame.assign(**KEY, significant=True, is_control=False, n_family=len(rows) + 2)


def _services(flags: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"method": m, "engine": "vllm", "tp": 1, "own_flags": f, "launch_command": f"vllm {f}"}
            for m, f in flags.items()
        ]
    )


def _data(sp: pd.DataFrame, services: pd.DataFrame, **frames: pd.DataFrame) -> ReportData:
    env = frames.pop("environment", pd.DataFrame(columns=["host", "key", "value"]))
    return ReportData(
        campaign={"n_measured": 100, "campaign_id": "c1"},
        environment=env,
        services=services,
        distribution=pd.DataFrame(),
        config_summary=pd.DataFrame({"method": [], "accept_length_tw": []}),
        speedup=sp,
        best_config=pd.DataFrame(),
        agentic=pd.DataFrame(),
        baseline="autoregressive",
        **frames,
    )


def _text(data: ReportData) -> str:
    return " ".join(latex(s) for s in findings.summary(data))  # as the PDF prints them


def test_a_method_launched_as_the_baseline_is_no_headline() -> None:
    """A/A/A on vLLM: autoregressive-2 is the baseline under another name (the same launch
    flags), with no acceptance counters at all; its slowed-baseline 1.22x is an artefact."""
    sp = _speedup([("autoregressive-2", 1, 1.22, 1.10, 1.35, None)])
    svc = _services({"autoregressive": "", "autoregressive-2": "", "ngram-k4": "--spec ngram"})
    text = _text(_data(sp, svc))
    assert "most certain gain is \\textbf{autoregressive-2}" not in text
    assert "exceed what speculation can give" in text
    assert "launched exactly as the baseline" in text


def test_vllm_acceptance_comes_from_the_window_counters() -> None:
    """ngram-k4 at 1.8x with no per-request acceptance: its window counters accept 1.3 tokens
    per step at K = 4, which allows a geometric mean of at most 5^((1 - 1/1.3) / (1 - 1/5)) =
    1.59 over prompts: 1.8x is not physics; ngram-k4 at 1.4x elsewhere is."""
    sp = _speedup([("ngram-k4", 1, 1.8, 1.5, 2.2, None), ("ngram-k4", 8, 1.4, 1.2, 1.6, None)])
    prediction = pd.DataFrame(
        {**KEY, "method": "ngram-k4", "concurrency": [1, 8], "accept_length": 1.3,
         "acceptance_source": "window counters", "draft_tokens_per_step": 4.0}
    )  # fmt: skip
    data = _data(sp, _services({"autoregressive": "", "ngram-k4": "--spec"}),
                 speedup_prediction=prediction)  # fmt: skip
    bound = physics.bounds(data, data.speedup)
    assert bound["physics_bound"].tolist() == pytest.approx([5 ** (0.3 / 1.3 / 0.8)] * 2)
    text = _text(data)
    assert "most certain gain is \\textbf{ngram-k4} at 1.40" in text
    assert "1 significant gain(s) exceed what speculation can give" in text
    assert "window counters" in text


def test_a_self_draft_is_checked_by_its_step_cost() -> None:
    """draft-k4 (the target drafting for itself) accepts 5 = K + 1 tokens a step, so a step
    costs at least K + 1 target passes and it cannot beat the baseline: 1.18x is an artefact
    although 1.18 < 5."""
    sp = _speedup([("draft-k4", 1, 1.18, 1.08, 1.29, 5.0)])
    env = pd.DataFrame(
        {"host": "gpu-host", "key": ["engine.model", "service.draft-k4.tp1.draft_model"],
         "value": [TARGET, TARGET + "/"]}
    )  # fmt: skip
    data = _data(sp, _services({"autoregressive": "", "draft-k4": "--spec"}), environment=env)
    text = _text(data)
    assert "most certain gain is \\textbf{draft-k4}" not in text
    assert "drafts for itself" in text and "step cost" in text


def test_the_geometric_mean_is_held_against_the_geometric_mean() -> None:
    """A real 1.89x [1.06, 3.39] with every prompt within its own acceptance: the token-pooled
    acceptance is 1.60, the geometric mean of per-prompt acceptance 1.99. It is the headline."""
    sp = _speedup([("ngram", 1, 1.89, 1.06, 3.39, 1.60)])
    decomposition = pd.DataFrame(
        {**KEY, "method": ["ngram"], "concurrency": [1], "acceptance_gain": [1.99]}
    )
    data = _data(sp, _services({"autoregressive": "", "ngram": "--spec"}),
                 speedup_decomposition=decomposition)  # fmt: skip
    text = _text(data)
    assert "most certain gain is \\textbf{ngram} at 1.89" in text
    assert "exceed what" not in text


def test_an_unknown_acceptance_is_said_where_it_heads() -> None:
    """No acceptance anywhere (no counters, other flags than the baseline): the gain may head
    its workload only with the words that it could not be checked."""
    sp = _speedup([("mystery", 1, 1.5, 1.2, 1.9, None)])
    text = _text(_data(sp, _services({"autoregressive": "", "mystery": "--other"})))
    assert "most certain gain is \\textbf{mystery} at 1.50" in text
    assert "not checked against acceptance" in text


def test_a_checked_gain_heads_before_an_unchecked_one() -> None:
    """The checked 1.3x heads although the unchecked 1.6x has the larger lower bound; the
    unchecked one is named as such."""
    sp = _speedup([("mystery", 1, 1.6, 1.4, 1.9, None), ("ngram", 1, 1.3, 1.1, 1.5, None)])
    decomposition = pd.DataFrame(
        {**KEY, "method": ["ngram"], "concurrency": [1], "acceptance_gain": [2.0]}
    )
    data = _data(sp, _services({"autoregressive": "", "mystery": "--x", "ngram": "--y"}),
                 speedup_decomposition=decomposition)  # fmt: skip
    text = _text(data)
    assert "most certain gain is \\textbf{ngram} at 1.30" in text
    assert "1 significant gain(s) could not be checked against acceptance" in text


def test_the_largest_geometric_mean_the_pooled_counters_allow() -> None:
    """Pooled acceptance H over prompts whose acceptance lies in [1, K + 1]: the geometric
    mean is largest when every prompt sits at an end (-ln is convex in 1/a); H = 1 or
    H = K + 1 leave no room, and without K no bound exists."""
    assert physics.pooled_bound(1.0, 4.0) == pytest.approx(1.0)
    assert physics.pooled_bound(5.0, 4.0) == pytest.approx(5.0)
    assert physics.pooled_bound(1.6, 4.0) == pytest.approx(5 ** ((1 - 1 / 1.6) / 0.8))
    assert pd.isna(physics.pooled_bound(1.6, float("nan")))
