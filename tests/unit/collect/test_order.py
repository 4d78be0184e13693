"""The rounds' order (collect.scheduling.order.round_order): seeded, the same on a rerun, each even
round the round before reversed, so every configuration's mean position over a pair of rounds
is the same and a linear drift cancels."""

from __future__ import annotations

from statistics import fmean

from specsweep.collect.scheduling.order import phase_seed, round_order

NAMES = ["autoregressive", "ngram", "eagle", "dflash", "autoregressive-aa"]


def test_the_same_seed_gives_the_same_order_and_another_seed_another() -> None:
    seed = phase_seed("camp-1", "tp1")
    assert round_order(NAMES, seed, 1) == round_order(list(reversed(NAMES)), seed, 1)
    assert sorted(round_order(NAMES, seed, 1)) == sorted(NAMES)
    others = {tuple(round_order(NAMES, phase_seed(f"camp-{i}", "tp1"), 1)) for i in range(20)}
    assert len(others) > 10  # 120 orders: twenty campaigns do not share one


def test_even_rounds_reverse_the_round_before_and_each_pair_draws_anew() -> None:
    seed = phase_seed("camp", "tp1")
    orders = [round_order(NAMES, seed, run) for run in range(1, 7)]
    for odd, even in zip(orders[::2], orders[1::2], strict=True):
        assert even == odd[::-1]
    assert len({tuple(o) for o in orders[::2]}) > 1  # pairs are not all one permutation


def test_every_configuration_has_the_same_mean_position_over_a_pair() -> None:
    """(C - 1) / 2 for each: a drift linear in the start's position adds the same to every
    configuration over the pair, so it cancels from each paired comparison."""
    for campaign in ("a", "b", "c"):
        seed = phase_seed(campaign, "tp4")
        for pair in (1, 3, 5):
            rounds = [round_order(NAMES, seed, pair), round_order(NAMES, seed, pair + 1)]
            means = {n: fmean(order.index(n) for order in rounds) for n in NAMES}
            assert set(means.values()) == {(len(NAMES) - 1) / 2}
