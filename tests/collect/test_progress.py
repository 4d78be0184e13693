"""The live ETA stays off the measurement loop: request_done only counts, and the display's
refresh recomputes the ETA when something changed, at most every ETA_EVERY_S."""

from __future__ import annotations

import time

import pytest

from collect.planning.schedule import Job
from collect.run import progress as progress_module
from collect.run.progress import CampaignProgress, Eta


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
