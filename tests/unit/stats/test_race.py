"""stats.race on hand-built rounds: KN's constant, the continuation region's half-width from
the pooled start variance, a drop on either side of it, the prior, what the next round
starts, and decisions that depend on the values alone (a resumed race decides the same)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specsweep.stats.race import (
    Prior,
    RaceRule,
    kn_h2,
    on_grid,
    prior_from,
    race,
    race_level,
    replay,
    to_start,
)

ARMS = ["base", "b8", "b16"]
# two rounds; the interaction residuals are +-1/30 (base, b8) and -+1/15 (b16): SS = 2/150
BASE = np.array([[1.0, 1.2], [0.0, 0.2], [0.9, 1.3]])


def test_kn_constant_by_hand() -> None:
    # k = 3, alpha = 0.025, nu = 2: eta = ((0.025) ** -1 - 1) / 2 = 19.5, h2 = 2 * 19.5 * 2
    assert kn_h2(3, 0.025, 2) == pytest.approx(78.0)
    # nu -> infinity: h2 -> -2 ln(2 alpha / (k - 1)), the known-variance constant
    assert kn_h2(3, 0.025, 1e7) == pytest.approx(-2 * math.log(0.025), rel=1e-5)
    assert kn_h2(1, 0.05, 2) == 0.0


def _margin(rule: RaceRule, levels: int, r: int) -> float:
    sigma2 = (4 * (1 / 30) ** 2 + 2 * (1 / 15) ** 2) / 2  # SS / ((3 - 1)(2 - 1))
    h2 = kn_h2(3, (1 - rule.confidence) / levels, 2)
    return rule.delta / (2 * r) * (h2 * 2 * sigma2 / rule.delta**2 - r)


def test_the_pooled_variance_and_the_margin_by_hand() -> None:
    rule = RaceRule(within=0.05, confidence=0.95)
    level = race_level(BASE, ARMS, rule, levels=2)
    assert level.sigma2 == pytest.approx(1 / 150)
    assert (level.df, level.h2) == (2.0, pytest.approx(78.0))
    assert rule.delta == pytest.approx(-math.log(0.95))
    # means 1.1, 0.1, 1.1: b8 is 1.0 below, inside a margin of about 5.04 at round 2
    assert _margin(rule, 2, 2) == pytest.approx(5.04, abs=0.01)
    assert level.survivors == ARMS and level.drops == []


@pytest.mark.parametrize("beyond, dropped", [(0.01, True), (-0.01, False)])
def test_an_arm_is_dropped_exactly_beyond_the_margin(beyond: float, dropped: bool) -> None:
    """Shifting b8 by a constant leaves the interaction (so the margin) as it was."""
    rule = RaceRule(within=0.05, confidence=0.95)
    margin = _margin(rule, 2, 2)
    values = BASE.copy()
    values[1] += (1.1 - 0.1) - margin - beyond  # b8's mean: 1.1 - margin - beyond
    level = race_level(values, ARMS, rule, levels=2)
    assert ("b8" not in level.survivors) is dropped
    if dropped:
        (drop,) = level.drops
        assert (drop.arm, drop.round, drop.leader) == ("b8", 2, "base")
        assert drop.gap == pytest.approx(margin + 0.01) and drop.margin == pytest.approx(margin)


def test_the_region_closes_and_the_best_mean_wins() -> None:
    """Past h2 S2 / delta^2 rounds the margin is 0: the best mean is left alone."""
    rule = RaceRule(within=0.5, confidence=0.5, max_rounds=40, first_rounds=2)
    rng = np.random.default_rng(3)
    values = np.array([[0.3], [0.0], [0.25]]) + rng.normal(scale=0.05, size=(3, 40))
    level = race_level(values, ARMS, rule, levels=1)
    assert level.decided and level.rounds < 40
    assert all(d.margin == 0 for d in level.drops if d.round == level.rounds)
    means = values[:, : level.rounds].mean(axis=1)
    assert level.winner == ARMS[int(np.argmax(means))]


def test_a_prior_variance_drops_after_one_round() -> None:
    rule = RaceRule(within=0.05, confidence=0.95, first_rounds=1)
    values = np.array([[1.0], [0.2], [0.9]])
    with pytest.raises(ValueError, match="no prior start variance"):
        race_level(values, ARMS, rule, levels=1)
    level = race_level(values, ARMS, rule, levels=1, prior=Prior(0.05**2, 1e6))
    # known sd 0.05, one level: h2 ~ -2 ln(2 * 0.05 / 2) = 5.991;
    # margin = delta / 2 (5.991 * 2 * 0.05^2 / delta^2 - 1)
    assert kn_h2(3, 0.05, 1e6) == pytest.approx(5.991, abs=1e-3)
    margin = rule.delta / 2 * (5.991 * 0.005 / rule.delta**2 - 1)
    assert margin == pytest.approx(0.266, abs=1e-3)
    assert level.survivors == ["base", "b16"]  # b16 is 0.1 below: inside the margin
    assert [(d.arm, d.round, d.margin) for d in level.drops] == [
        ("b8", 1, pytest.approx(margin, abs=1e-3))
    ]
    # a tiny known variance closes the region at once: the best mean alone is left
    assert race_level(values, ARMS, rule, levels=1, prior=Prior(1e-6, 1e6)).survivors == ["base"]


def test_the_next_round_starts_the_survivors_of_open_levels_and_the_baseline() -> None:
    rule = RaceRule(within=0.05, confidence=0.95, max_rounds=4, first_rounds=1)
    values = np.array([[[1.0], [0.5]], [[0.2], [0.1]], [[0.9], [0.45]]])  # (arms, levels, 1)
    priors = [Prior(0.05**2, 1e6), Prior(0.05**2, 1e6)]
    levels = race(values, ARMS, ["c1", "c8"], rule, priors)
    assert [lv.survivors for lv in levels] == [["base", "b16"], ["base", "b16"]]
    assert to_start(levels, 1, rule) == ["base", "b16"]  # b8 is in contention nowhere
    assert to_start(levels, 1, rule, keep=["b8"]) == ["base", "b16", "b8"]
    assert to_start(levels, 4, rule) == []  # max_rounds done


def test_decisions_depend_on_the_values_alone() -> None:
    """Replaying the first r rounds gives the decisions the race had after round r."""
    rule = RaceRule(within=0.1, confidence=0.9, max_rounds=6)
    rng = np.random.default_rng(7)
    values = np.array([[0.0], [0.3], [0.15]]) + rng.normal(scale=0.05, size=(3, 6))
    full = race_level(values, ARMS, rule, levels=1)
    for r in range(2, 7):
        part = race_level(values[:, :r], ARMS, rule, levels=1)
        assert [d for d in full.drops if d.round <= r] == part.drops


@pytest.mark.parametrize(
    "kwargs, word",
    [({"within": 0}, "within"), ({"confidence": 1}, "confidence"),
     ({"first_rounds": 3, "max_rounds": 2}, "first_rounds")],
)  # fmt: skip
def test_a_bad_rule_is_named(kwargs: dict, word: str) -> None:
    with pytest.raises(ValueError, match=word):
        RaceRule(**kwargs)


def test_an_arm_without_a_value_is_dropped_as_missing() -> None:
    """A failed start: in a first round, the arm leaves and the variance rests on the others
    (here base and b16 alone: one interaction df); later, it leaves in that round."""
    rule = RaceRule(within=0.05, confidence=0.95)
    values = BASE.copy()
    values[1, 1] = np.nan
    level = race_level(values, ARMS, rule, levels=1)
    (drop,) = level.drops
    assert (drop.arm, drop.round, drop.reason, drop.leader) == ("b8", 2, "missing", "")
    assert level.df == 1.0 and level.survivors == ["base", "b16"]
    later = np.hstack([BASE, [[1.1], [np.nan], [1.1]]])
    level = race_level(later, ARMS, rule, levels=1)
    assert [(d.arm, d.round, d.reason) for d in level.drops] == [("b8", 3, "missing")]


def test_replay_from_rows_races_each_level_among_the_arms_that_ran_it() -> None:
    rule = RaceRule(within=0.05, confidence=0.95)
    rows = [(a, "c1", r + 1, float(BASE[i, r])) for i, a in enumerate(ARMS) for r in range(2)]
    rows += [(a, "c4", r + 1, float(BASE[i, r])) for i, a in enumerate(ARMS[:2]) for r in range(2)]
    rows += [("base", "c1", 3, 9.0)]  # a round not closed yet: ignored
    c1, c4 = replay(rows, ["b16", "base", "b8", "other"], rule, rounds=2)
    assert (c1.name, c1.survivors) == ("c1", ["b16", "base", "b8"])
    assert c1.sigma2 == pytest.approx(1 / 150)
    # c4: base and b8 alone, on one df; they moved together (no interaction), so the gap stands
    assert (c4.name, c4.survivors, c4.df) == ("c4", ["base"], 1.0)
    assert c4.sigma2 == pytest.approx(0.0, abs=1e-12)


def test_a_prior_pools_earlier_campaigns_interactions() -> None:
    """BASE's interaction: SS 2/150 on 2 df; BASE scaled by sqrt 2 has SS 4/150 on 2 df;
    pooled: 6/150 over 4 df. A row with a gap and a one-round table add nothing."""
    second = BASE * math.sqrt(2)
    gapped = np.vstack([second, [[np.nan, 1.0]]])
    prior = prior_from([BASE, gapped, np.array([[1.0], [2.0]])])
    assert prior is not None
    assert (prior.sigma2, prior.df) == (pytest.approx(6 / 150 / 4), 4.0)
    assert prior_from([np.array([[1.0, 2.0]])]) is None


def _grid_rows(values: np.ndarray) -> list[tuple[str, str, int, float]]:
    return [(a, "L", r + 1, float(values[i, r])) for i, a in enumerate(ARMS)
            for r in range(values.shape[1])]  # fmt: skip


def test_on_grid_keeps_only_the_starts_the_race_would_have_made() -> None:
    # BASE with b8 moved 3 lower (the interaction, hence the margin, is the same): b8 is 4.0
    # behind after round 2, beyond the margin at within 5% and inside it at 1%
    rule = RaceRule(0.05, 0.95, max_rounds=3)
    assert _margin(rule, 1, 2) < 4.0 < _margin(RaceRule(0.01, 0.95, 3), 1, 2)
    first = BASE - np.array([[0.0], [3.0], [0.0]])
    rows = _grid_rows(np.hstack([first, np.array([[1.1], [-2.9], [1.2]])]))
    # b8 is dropped after round 2, so round 3 starts base (kept) and b16; b8's third value
    # is not a start of the race and never reaches a replay
    assert on_grid(rows, ARMS, rule, 3, keep=["base"]) == {1: ARMS, 2: ARMS, 3: ["base", "b16"]}
    # a zone so narrow that the margin is wider than every gap: the race is the grid
    wide = on_grid(rows, ARMS, RaceRule(0.01, 0.95, max_rounds=3), 3, keep=["base"])
    assert wide == {1: ARMS, 2: ARMS, 3: ARMS}
    # max_rounds below the grid's rounds: the race stops there
    assert on_grid(rows, ARMS, RaceRule(0.05, 0.95, max_rounds=2), 3) == {1: ARMS, 2: ARMS}
