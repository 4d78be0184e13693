"""GPU telemetry: nvidia-smi lines parsed by hand, the sampler's window cut, the nvidia-smi
stream as a local subprocess (a scripted nvidia-smi on PATH, tests/support/fake_gpus.py),
the NVML source where a GPU exists, and a local campaign whose services hold (scripted)
GPUs: their gpu_samples land with each unit and cover each window.

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/collect/test_telemetry.py."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import duckdb

from specsweep.collect.telemetry import Sampler, smi
from tests.support.collect_cli import run_here
from tests.support.fake_gpus import sample_for
from tests.unit.collect.test_telemetry import LAUNCHER, QUERY, REPO, _gpu_plan, _running, fake_smi  # noqa: F401


def test_the_local_stream_samples_each_gpu_every_period(fake_smi: Path) -> None:
    sampler = Sampler(smi.LocalSmi([0, 1, 2], 0.1), [0, 1, 2], 0.1).start()
    taken, t0, t1 = sample_for(sampler, 1.0)
    by_gpu = {g: [s for s in taken if s.gpu == g] for g in (0, 1, 2)}
    for samples in by_gpu.values():
        inside = [s.t for s in samples if t0 <= s.t <= t1]
        assert 6 <= len(inside) <= 12, inside  # 10 rounds at 100 ms, the script's own jitter
        gaps = [b - a for a, b in zip(inside, inside[1:])]
        assert 0.05 < sum(gaps) / len(gaps) < 0.2
    first = by_gpu[0][0].values
    assert first["power_w"] in (100.0, 110.0, 120.0, 130.0) and first["throttle_reasons"] == ""
    assert {s.values["power_w"] for s in by_gpu[1]} == {None}
    assert {s.values["throttle_reasons"] for s in by_gpu[1]} == {"sw_power_cap"}
    assert {s.values["temperature_c"] for s in by_gpu[2]} == {None}
    assert {s.values["throttle_reasons"] for s in by_gpu[2]} == {"hw_slowdown,hw_thermal_slowdown"}
    assert (
        f"{QUERY} --format=csv,noheader,nounits -lms 100 -i 0,1,2"
        in (fake_smi.parent / "calls.log").read_text()
    )
    deadline = time.monotonic() + 5
    while _running(fake_smi) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(fake_smi), "nvidia-smi outlived its sampler"


def test_a_local_gpu_campaign_lands_gpu_samples_with_its_units(
    fake_smi: Path, tmp_path: Path
) -> None:
    launcher = tmp_path / "fake-sglang"
    launcher.write_text(LAUNCHER.format(python=sys.executable, engines=str(REPO)))
    launcher.chmod(0o755)
    text = _gpu_plan(launcher)
    db = run_here(text, tmp_path)
    with duckdb.connect(str(db), read_only=True) as con:
        services = dict(con.execute("SELECT method, gpus FROM services").fetchall())
        env = dict(con.execute("SELECT key, value FROM environment").fetchall())
        units = con.execute("SELECT count(*) FILTER (complete), count(*) FROM units").fetchone()
        windows = con.execute("""
            SELECT r.service_id, r.window_id, min(r.start_s), max(r.start_s + r.e2e_s),
                   min(g.t_s), max(g.t_s), count(DISTINCT g.t_s), any_value(g.gpu_index),
                   any_value(s.gpus), count(DISTINCT g.gpu_index)
            FROM requests r JOIN services s USING (service_id)
            JOIN gpu_samples g USING (service_id, window_id)
            WHERE NOT r.is_warmup GROUP BY ALL""").fetchall()
        reasons = con.execute(
            "SELECT DISTINCT gpu_index, throttle_reasons, temperature_c IS NULL "
            "FROM gpu_samples ORDER BY 1"
        ).fetchall()
        orphans = con.execute(
            "SELECT count(*) FROM gpu_samples g ANTI JOIN units u "
            "USING (campaign_id, config_id, workload)"
        ).fetchone()[0]
    # GPU 1 is busy; which method gets GPU 0 is the round's order (collect.scheduling.order)
    assert set(services) == {"autoregressive", "dflash"} and sorted(services.values()) == ["0", "2"]
    assert units == (2, 2) and orphans == 0
    assert env["gpus"] == "3" and env["gpu.0.name"] == "NVIDIA H200"
    assert env["cuda.version"] == "12.4" and "GPU-fake-1" in env["gpu.processes"]
    assert env["service.dflash.tp1.telemetry"] == "nvidia-smi every 0.05 s"
    assert env["price.gpu_hour_usd"] == "3.5"
    assert len(windows) == 4  # 2 services x 2 concurrency levels
    for _sid, _wid, first, end, t_min, t_max, n, gpu, gpus, n_gpus in windows:
        assert (str(gpu), n_gpus) == (gpus, 1)
        assert t_min <= first and t_max >= end, "the samples do not span the window"
        assert t_min > -0.5 and t_max < end + 0.5
        assert n >= end / 0.05 * 0.5  # about one sample per period
    assert reasons == [(0, "", False), (2, "hw_slowdown,hw_thermal_slowdown", True)]
    assert not _running(fake_smi), "an nvidia-smi stream outlived its service"
