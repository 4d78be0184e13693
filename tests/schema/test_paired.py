"""schema.paired.paired_speedup: pairing by prompt, and the significance rule."""

from __future__ import annotations

import pytest

from schema.paired import Speedup, paired_speedup


def test_only_shared_prompts_count() -> None:
    """p9 (method only) and p8 (baseline only) are left out: on p0, p1 the method's median
    is 30, the baseline's 15: 2.0x; every resample of a constant 2x pairing gives 2.0."""
    method = {"p0": [20.0], "p1": [40.0], "p9": [1000.0]}
    base = {"p0": [10.0], "p1": [20.0], "p8": [1.0]}
    got = paired_speedup(method, base)
    assert got is not None and got.n_prompts == 2
    assert got.speedup == pytest.approx(2.0)
    assert got.ci_low == pytest.approx(2.0) and got.ci_high == pytest.approx(2.0)
    assert got.significant


def test_no_shared_prompt_is_none() -> None:
    assert paired_speedup({"p0": [1.0]}, {"p1": [1.0]}) is None


def test_significant_when_the_interval_excludes_one() -> None:
    assert Speedup(1.2, 1.01, 1.4, 5).significant
    assert Speedup(0.8, 0.7, 0.99, 5).significant
    assert not Speedup(1.2, 0.95, 1.4, 5).significant
