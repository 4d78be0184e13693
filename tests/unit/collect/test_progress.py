"""The live ETA stays off the measurement loop: request_done only counts, and the display's
refresh recomputes the ETA when something changed, at most every ETA_EVERY_S."""

from __future__ import annotations

import time

import pytest

from specsweep.collect.run import progress as progress_module
from specsweep.collect.run.progress import CampaignProgress, Eta
from specsweep.collect.scheduling.schedule import Job


class CountingEta(Eta):
    def __init__(self) -> None:
        super().__init__(gpus=[0, 1], packed=True)
        self.computed = 0

    def seconds_left(self) -> float | None:
        self.computed += 1
        return super().seconds_left()


def test_requests_do_not_compute_the_eta(monkeypatch: pytest.MonkeyPatch) -> None:
    eta = CountingEta()
    progress = CampaignProgress(0, enabled=False, eta=eta)
    for key in "abc":
        progress.job_added(Job(key, 1, 100), requests=10, fixed_s=0)
    progress.job_started("a")
    for _ in range(10):
        progress.request_done("a")
    assert eta.computed == 0
    first = progress.seconds_left()  # the display renders: computed once
    assert eta.computed == 1 and first is not None
    progress.request_done("a")
    progress.seconds_left()  # changed, but computed less than ETA_EVERY_S ago: counted down
    assert eta.computed == 1
    monkeypatch.setattr(progress_module, "ETA_EVERY_S", 0.0)
    progress.seconds_left()
    progress.seconds_left()  # nothing changed since: not computed again
    assert eta.computed == 2


def test_the_shown_eta_counts_down_between_computations() -> None:
    progress = CampaignProgress(0, enabled=False, eta=Eta())
    progress.job_added(Job("a", 0, 100), requests=10, fixed_s=0)
    first = progress.seconds_left()
    time.sleep(0.05)
    later = progress.seconds_left()
    assert first == 100 and 99.9 < later < 100


def test_the_eta_adds_every_later_round_replayed_on_its_own() -> None:
    eta = Eta(gpus=[0, 1], packed=True, clock=lambda: 0.0)
    eta.add(Job("a", 1, 100), requests=1, fixed_s=0)
    wide = Job("tp8", 8, 1000)  # never fits two GPUs: skipped, as the runner skips it
    eta.set_later([[*(Job(k, 1, 100) for k in "abc"), wide]] * 2)  # each: two GPUs, 200 s
    assert eta.seconds_left(this_round=True) == 100
    assert eta.seconds_left() == 100 + 2 * 200
    serial = Eta()
    serial.set_later([[Job("a", 0, 30), Job("b", 0, 20)]])
    assert serial.seconds_left() == 50  # this round done: the later ones are left


def test_a_new_rounds_eta_keeps_the_ratio_and_the_bar_counts_every_round() -> None:
    now = [0.0]
    progress = CampaignProgress(0, enabled=False, eta=Eta(clock=lambda: now[0]))
    progress.job_added(Job("a", 0, 100), requests=10, fixed_s=0)
    progress.add_total(10)
    progress.later_rounds([[(Job("a", 0, 100), 10)]] * 2)
    assert progress.total == 30
    progress.job_started("a")
    now[0] = 50.0
    for _ in range(10):
        progress.request_done("a")
    progress.job_finished("a")  # 100 estimated seconds took 50: ratio 0.5
    progress.eta = Eta(clock=lambda: now[0])  # round 2's queue
    progress.job_added(Job("a", 0, 100), requests=10, fixed_s=0)
    progress.add_total(10)
    progress.later_rounds([[(Job("a", 0, 100), 10)]])
    assert progress.eta.ratio() == 0.5 and progress.eta.seconds_left() == 100
    assert progress.total == 30


def test_the_bar_says_which_round_runs() -> None:
    progress = CampaignProgress(0, enabled=False)
    progress.status("ar (tp 1) / chat")
    assert progress.description == "ar (tp 1) / chat"
    progress.set_round(2, 3)
    assert progress.description == "round 2 of 3"
    progress.status("ar (tp 1) / chat")
    assert progress.description == "round 2 of 3: ar (tp 1) / chat"
