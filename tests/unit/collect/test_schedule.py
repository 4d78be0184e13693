"""The GPU-packing scheduler on simulated services: makespans of hand-built job sets with
known optima, disjoint GPU sets, dependencies, alone and reserved GPUs, the bounds."""

from __future__ import annotations

import random

import pytest

from specsweep.collect.scheduling.schedule import (
    Job,
    Scheduler,
    Slot,
    dependency_bound,
    lower_bound,
    makespan,
    simulate,
)

HOST = list(range(8))


def run(
    jobs: list[Job], gpus: list[int] = HOST, reserved: tuple[int, ...] = (), packed: bool = True
) -> list[Slot]:
    return simulate(Scheduler(gpus, reserved, packed=packed), jobs)


def test_tp4_beside_tp1_jobs_reaches_the_optimum() -> None:
    # 7 free GPUs: the TP4 job leaves 3 GPUs for 450 s of TP1 work, so 150 s is optimal
    jobs = [
        Job("tp4", 4, 100),
        *(Job(f"a{i}", 1, 100) for i in range(3)),
        *(Job(f"b{i}", 1, 50) for i in range(3)),
    ]
    timeline = run(jobs, reserved=(0,))
    assert makespan(timeline) == 150
    # the area bound (4*100 + 3*100 + 3*50) / 7 does not see that the TP1 work has 3 GPUs
    assert lower_bound(timeline, HOST, (0,)) == pytest.approx(850 / 7)


def test_lpt_packs_to_the_area_bound_when_it_can() -> None:
    jobs = [Job("w30", 1, 30), Job("w60", 1, 60), Job("tp2", 2, 60), Job("x30", 1, 30)]
    timeline = run(jobs, gpus=[0, 1, 2, 3])
    assert makespan(timeline) == 60 == lower_bound(timeline, [0, 1, 2, 3], ())
    # longest first: the two 60 s jobs start at 0
    assert {s.job.key for s in timeline if s.start == 0} >= {"w60", "tp2"}


def test_the_baseline_starts_first_so_a_campaign_cut_short_can_compare() -> None:
    # one GPU: LPT alone would run the baseline (the shortest) last; a lease that ends after
    # 300 s would then leave windows with nothing to compare them with
    jobs = [Job("k8", 1, 200), Job("ar", 1, 50, baseline=True), Job("k2", 1, 120)]
    timeline = run(jobs, gpus=[0])
    assert [s.job.key for s in timeline] == ["ar", "k8", "k2"]
    # jobs others wait for still go first (their dependants cannot start before them)
    jobs = [
        Job("src", 1, 10),
        Job("ar", 1, 50, baseline=True),
        Job("dep", 1, 5, frozenset({"src"})),
    ]
    assert [s.job.key for s in run(jobs, gpus=[0])] == ["src", "ar", "dep"]


def test_serial_order_is_the_sum_in_the_order_added() -> None:
    jobs = [Job("a", 1, 10), Job("b", 4, 20), Job("c", 8, 5, alone=True), Job("d", 2, 7)]
    timeline = run(jobs, packed=False)
    assert [s.job.key for s in timeline] == ["a", "b", "c", "d"]
    assert makespan(timeline) == 42


def test_cpu_host_runs_jobs_without_gpus_one_at_a_time() -> None:
    timeline = run([Job("a", 0, 3), Job("b", 0, 4)], gpus=[], packed=False)
    assert [(s.gpus, s.start, s.end) for s in timeline] == [((), 0, 3), ((), 3, 7)]
    assert lower_bound(timeline, [], ()) == 7  # one service at a time on a CPU


def test_a_job_that_can_never_fit_is_refused_by_name() -> None:
    s = Scheduler(HOST, reserved=[0])
    with pytest.raises(ValueError, match="job tp8:x needs 8 GPUs; the host has 7"):
        s.add(Job("tp8:x", 8, 1))
    s.add(Job("tp8:y", 8, 1, alone=True))  # alone jobs may use the reserved GPU
    with pytest.raises(ValueError, match="job big needs 9 GPUs"):
        s.add(Job("big", 9, 1, alone=True))
    with pytest.raises(ValueError, match="waits for unknown jobs"):
        s.add(Job("z", 1, 1, after=frozenset({"nope"})))
    with pytest.raises(ValueError, match="added twice"):
        s.add(Job("tp8:y", 8, 1, alone=True))
    with pytest.raises(ValueError, match="reserved GPUs"):
        Scheduler([1, 2], reserved=[0])


def test_dependants_wait_and_jobs_added_while_others_run_start() -> None:
    s = Scheduler(HOST, reserved=(0,))

    def later(job: Job, now: float) -> list[Job]:
        return (
            [Job("tp4:pick", 4, 10, after=frozenset({"tp1:a", "tp1:b"}))]
            if (job.key == "tp1:b")
            else []
        )

    jobs = [Job("tp1:a", 1, 30), Job("tp1:b", 1, 50)]
    timeline = simulate(s, jobs, on_finish=later)
    pick = next(x for x in timeline if x.job.key == "tp4:pick")
    assert pick.start == 50 and s.done()


def test_alone_job_waited_for_drains_the_host_first() -> None:
    def later(job: Job, now: float) -> list[Job]:
        if job.key != "x":
            return []
        return [
            Job("solo", 8, 10, alone=True),
            Job("c", 1, 5),
            Job("b", 1, 5, after=frozenset({"solo"})),
        ]

    timeline = simulate(Scheduler(HOST, (0,)), [Job("a", 1, 100), Job("x", 1, 20)], on_finish=later)
    at = {s.job.key: s for s in timeline}
    # nothing new starts once solo is waiting; it runs when a ends, on every GPU
    assert (at["solo"].start, at["solo"].gpus) == (100, tuple(HOST))
    assert at["b"].start == at["c"].start == 110


def test_alone_jobs_go_last_when_nothing_waits_for_them() -> None:
    jobs = [Job("solo", 8, 10, alone=True), Job("a", 1, 100), Job("b", 4, 50)]
    timeline = {x.job.key: x for x in run(jobs, reserved=(0,))}
    assert timeline["a"].start == timeline["b"].start == 0
    assert timeline["solo"].start == 100


def test_seed_plan_shape_meets_its_dependency_bound() -> None:
    """TP1 configs on GPUs 1-7 with a TP4 baseline beside them, two TP4 picks after all of
    TP1, a TP8 phase alone: the optimum is the TP1 baseline + both picks + the TP8 jobs."""
    tp1 = [Job("tp1:ar", 1, 6600), *(Job(f"tp1:m{i}", 1, 2500 + 100 * i) for i in range(7))]
    done = frozenset(j.key for j in tp1)
    jobs = [
        *tp1,
        Job("tp4:ar", 4, 3300),
        Job("tp8:ar", 8, 2500, alone=True),
        Job("tp4:p1", 4, 1200, after=done),
        Job("tp4:p2", 4, 1100, after=done),
        Job("tp8:p1", 8, 900, alone=True, after=done),
        Job("tp8:p2", 8, 800, alone=True, after=done),
    ]
    timeline = run(jobs, reserved=(0,))
    optimum = 6600 + 1200 + 1100 + 2500 + 900 + 800
    assert makespan(timeline) == optimum == dependency_bound(timeline, HOST, (0,))
    assert makespan(run(jobs, reserved=(0,), packed=False)) == sum(j.seconds for j in jobs)


def _random_jobs(rng: random.Random, n: int) -> list[Job]:
    jobs: list[Job] = []
    for i in range(n):
        alone = rng.random() < 0.15
        gpus = 8 if alone and rng.random() < 0.7 else rng.choice([1, 1, 1, 2, 4])
        earlier = [j.key for j in jobs]
        after = frozenset(rng.sample(earlier, k=min(len(earlier), rng.choice([0, 0, 1, 2]))))
        jobs.append(Job(f"j{i}", gpus, rng.uniform(10, 500), after, alone))
    return jobs


@pytest.mark.parametrize("packed", [True, False])
def test_random_job_sets_keep_every_rule(packed: bool) -> None:
    rng = random.Random(20240501)
    for _ in range(60):
        jobs = _random_jobs(rng, rng.randint(1, 25))
        timeline = run(jobs, reserved=(0,), packed=packed)
        assert sorted(s.job.key for s in timeline) == sorted(j.key for j in jobs)
        ends = {s.job.key: s.end for s in timeline}
        for s in timeline:
            assert len(s.gpus) == s.job.gpus
            assert all(s.start >= ends[a] for a in s.job.after), "dependency broken"
            if 0 in s.gpus:
                assert s.job.alone, "reserved GPU given to a job that is not alone"
            for o in timeline:
                if o is s or o.end <= s.start or s.end <= o.start:
                    continue
                assert not set(s.gpus) & set(o.gpus), f"{s.job.key} and {o.job.key} share"
                assert not (s.job.alone or o.job.alone), "alone job ran beside another"
        # both bounds must hold for every feasible order
        assert makespan(timeline) >= dependency_bound(timeline, HOST, (0,)) - 1e-6
        assert dependency_bound(timeline, HOST, (0,)) >= lower_bound(timeline, HOST, (0,)) - 1e-6
        if not packed:
            assert makespan(timeline) == pytest.approx(sum(j.seconds for j in jobs))


def test_a_rounds_order_holds_before_lpt_and_the_baseline() -> None:
    """rank (the job's place in its round's order of its phase) comes before the baseline and
    LPT: every phase's first job before any phase's second, longest first among equals; jobs
    others wait for still go first."""
    jobs = [
        Job("p1-2nd", 1, 300, rank=1),
        Job("p1-1st", 1, 10, rank=0),
        Job("p2-2nd", 1, 50, baseline=True, rank=1),
        Job("p2-1st", 1, 100, rank=0),
    ]
    order = [s.job.key for s in run(jobs, gpus=[0])]
    assert order == ["p2-1st", "p1-1st", "p2-2nd", "p1-2nd"]
    jobs.append(Job("dep", 1, 5, frozenset({"p1-2nd"})))
    assert run(jobs, gpus=[0])[0].job.key == "p1-2nd"
    # side by side: the two first jobs start at 0 on two GPUs, whatever their lengths
    assert {s.job.key for s in run(jobs[:4], gpus=[0, 1]) if s.start == 0} == {"p1-1st", "p2-1st"}
