"""Replicas: which configurations are split and how (hand-built estimates), the scheduler on
several hosts, the CT200 plan simulated with replicas, and the runner starting replica jobs
(services.replica) with a broken server binary."""

from __future__ import annotations

import stat
from pathlib import Path
from types import SimpleNamespace

import yaml

from specsweep.collect.scheduling.replicas import Candidate, replica_key, replica_of, split
from specsweep.collect.scheduling.schedule import Job, Scheduler, makespan, simulate

REPO = Path(__file__).resolve().parents[3]


class Est:
    """Hand-built estimates: seconds per workload name, one start-up + warm-up per start."""

    def __init__(self, seconds: dict[str, float], fixed: float):
        self.seconds, self.fixed = seconds, fixed

    def workload_s(self, config: object, w: SimpleNamespace) -> float:
        return self.seconds[w.name]

    def fixed_s(self, config: object, workloads: list[SimpleNamespace]) -> float:
        return self.fixed


def job(key: str, names: list[str], gpus: int = 1, alone: bool = False) -> Candidate:
    return Candidate(
        key, SimpleNamespace(), tuple(SimpleNamespace(name=n) for n in names), gpus, alone
    )  # type: ignore[arg-type]


def names(replicas: list) -> list[list[str]]:  # noqa: ANN001
    return [[w.name for w in r.workloads] for r in replicas]


def test_a_long_job_is_split_into_whole_workloads_and_short_ones_are_not() -> None:
    seconds = {f"a{i}": 600.0 for i in range(6)} | {
        "b": 600,
        "c": 600,
        "d": 600,
        "e1": 300,
        "e2": 300,
    }
    batch = [
        job("A", [f"a{i}" for i in range(6)]),
        job("B", ["b"]),
        job("C", ["c"]),
        job("D", ["d"]),
        job("E", ["e1", "e2"]),
    ]
    out = split(Est(seconds, 60), batch, usable=4)  # type: ignore[arg-type]
    # unsplit A (3660 s) sets the makespan; cut to one workload a replica (660 s, as long as
    # B, C, D and E) the batch packs in area + (1 - 1/4) x 660 s
    assert names(out["A"]) == [[f"a{i}"] for i in range(6)]
    assert [r.key for r in out["A"]] == ["A", "A#2", "A#3", "A#4", "A#5", "A#6"]
    assert [r.seconds for r in out["A"]] == [660] * 6
    assert all(len(out[k]) == 1 for k in "BCDE")  # cutting E (660 s) would gain nothing
    assert names(out["E"]) == [["e1", "e2"]]


def test_workloads_are_balanced_by_seconds_and_keep_plan_order() -> None:
    seconds = {"w1": 900, "w2": 100, "w3": 500, "w4": 400}
    out = split(Est(seconds, 60), [job("A", list(seconds))], usable=2)  # type: ignore[arg-type]
    assert names(out["A"]) == [["w1", "w2"], ["w3", "w4"]]  # LPT: 900+100 and 500+400
    assert sorted(w for r in names(out["A"]) for w in r) == sorted(seconds)


def test_the_start_up_cost_stops_a_split_that_gains_too_little() -> None:
    seconds = {"w1": 100, "w2": 100}
    costly = split(Est(seconds, 50), [job("A", ["w1", "w2"])], usable=2)  # type: ignore[arg-type]
    cheap = split(Est(seconds, 20), [job("A", ["w1", "w2"])], usable=2)  # type: ignore[arg-type]
    # score = max(area + (1 - 1/2) x longest, longest): 250 s -> 150 + 75 s gains 25 s < 50 s
    assert len(costly["A"]) == 1
    # 220 s -> 120 + 60 s gains 40 s > 20 s of start-up
    assert len(cheap["A"]) == 2


def test_no_split_when_replicas_cannot_run_side_by_side_or_hold_the_host() -> None:
    seconds = {"w1": 1000, "w2": 1000}
    wide = split(Est(seconds, 10), [job("T4", ["w1", "w2"], gpus=4)], usable=7)  # type: ignore[arg-type]
    alone = split(Est(seconds, 10), [job("T8", ["w1", "w2"], 8, alone=True)], usable=7)  # type: ignore[arg-type]
    off = split(Est(seconds, 10), [job("A", ["w1", "w2"])], usable=7, enabled=False)  # type: ignore[arg-type]
    assert len(wide["T4"]) == len(alone["T8"]) == len(off["A"]) == 1
    assert (
        len(
            split(
                Est(seconds, 10),
                [job("T4", ["w1", "w2"], gpus=4)],
                usable=7,  # type: ignore[arg-type]
                hosts=2,
            )["T4"]
        )
        == 2
    )  # two hosts: one replica on each


def test_replica_keys() -> None:
    assert replica_key("tp1:abc", 1) == "tp1:abc" and replica_key("tp1:abc", 3) == "tp1:abc#3"
    assert replica_of("tp1:abc") == 1 and replica_of("tp1:abc#3") == 3


def test_several_hosts_a_job_never_spans_them_and_alone_holds_only_its_own() -> None:
    s = Scheduler([0, 1, 2, 3], reserved=[0], hosts=2)
    jobs = [
        Job("big", 3, 100),
        Job("big2", 3, 100),
        Job("one", 1, 50),
        Job("solo", 4, 40, alone=True),
    ]
    timeline = simulate(s, jobs)
    for slot in timeline:
        assert len({g // 4 for g in slot.gpus}) == 1  # one host's GPUs
    starts = {slot.job.key: slot for slot in timeline}
    assert starts["big"].start == starts["big2"].start == 0  # one on each host
    assert {starts["big"].gpus, starts["big2"].gpus} == {(1, 2, 3), (5, 6, 7)}
    assert starts["solo"].start == 100 and makespan(timeline) == 150


def _plan(tmp_path: Path, replicas: bool = True) -> str:
    broken = tmp_path / "broken-server"  # every start fails at once: a services row each
    broken.write_text("#!/bin/sh\necho cannot start\nexit 3\n")
    broken.chmod(broken.stat().st_mode | stat.S_IEXEC)
    return yaml.safe_dump(
        {
            "name": "replicas",
            "repeat": 1,  # one round: this test is not about rounds
            "host": {"kind": "local", "gpus": [0, 1, 2, 3], "replicas": replicas},
            "engine": {
                "kind": "llamacpp",
                "binary": str(broken),
                "model": "/none.gguf",
                "startup_timeout_s": 5,
            },
            "methods": [{"name": "autoregressive"}, {"name": "ngram"}],
            # assumed: the baseline is 100x slower, so its four workloads are long
            "estimates": {"startup_s": [1, 1], "decode_tps": {1: 1}, "speedup": {"ngram": 100}},
            "workloads": [
                {
                    "name": f"w{i}",
                    "prompts": {"kind": "inline", "texts": ["x"]},
                    "max_tokens": [4000],
                }
                for i in range(4)
            ],
        }
    )
