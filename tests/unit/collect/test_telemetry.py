"""GPU telemetry: nvidia-smi lines parsed by hand, the sampler's window cut, the nvidia-smi
stream as a local subprocess (a scripted nvidia-smi on PATH, tests/support/fake_gpus.py),
the NVML source where a GPU exists, and a local campaign whose services hold (scripted)
GPUs: their gpu_samples land with each unit and cover each window."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from specsweep.collect.plan.components import Telemetry
from specsweep.collect.telemetry import Sample, Sampler, open_sampler, smi
from specsweep.collect.telemetry.nvml import open_nvml
from tests.support import fake_gpus

REPO = Path(__file__).resolve().parents[3]
QUERY = (
    "--query-gpu=index,power.draw,clocks.sm,clocks.mem,utilization.gpu,utilization.memory,"
    "memory.used,temperature.gpu,clocks_event_reasons.active"
)

# --- parsing, on hand-built lines ----------------------------------------------------------


def test_a_line_becomes_the_gpu_samples_values() -> None:
    gpu, row = smi.parse_line("3, 431.27, 1980, 2619, 97, 41, 80123, 61, 0x0000000000000004")
    assert gpu == 3
    assert row == {
        "power_w": 431.27,
        "sm_clock_mhz": 1980.0,
        "mem_clock_mhz": 2619.0,
        "util_gpu_pct": 97.0,
        "util_mem_pct": 41.0,
        "memory_used_mib": 80123.0,
        "temperature_c": 61.0,
        "energy_j": None,
        "throttle_reasons": "sw_power_cap",
    }


def test_not_available_values_become_null() -> None:
    _, row = smi.parse_line("0, [N/A], [Not Supported], 2619, [N/A], 0, 5, [Unknown Error], [N/A]")
    assert row["power_w"] is row["sm_clock_mhz"] is row["util_gpu_pct"] is None
    assert row["temperature_c"] is None and row["throttle_reasons"] == ""
    assert (row["mem_clock_mhz"], row["util_mem_pct"], row["memory_used_mib"]) == (2619, 0, 5)


@pytest.mark.parametrize(
    ("mask", "names"),
    [
        ("0x0000000000000000", ""),
        ("0x0000000000000001", ""),  # idle is not a throttle
        ("0x0000000000000005", "sw_power_cap"),
        ("0x0000000000000048", "hw_slowdown,hw_thermal_slowdown"),
        (
            "0x00000000000001FE",
            "applications_clocks_setting,sw_power_cap,hw_slowdown,sync_boost,"
            "sw_thermal_slowdown,hw_thermal_slowdown,hw_power_brake_slowdown,"
            "display_clock_setting",
        ),
        ("0x0000000000000A00", "0x200,0x800"),  # bits NVML had not named: their hex value
        ("Not Active", ""),
    ],
)
def test_the_clock_event_bitmask_is_named(mask: str, names: str) -> None:
    assert smi.decode_reasons(mask) == names


def test_other_lines_are_not_samples() -> None:
    assert smi.parse_line("No devices were found") is None
    assert smi.parse_line('Field "clocks_event_reasons.active" is not a valid field') is None
    assert smi.parse_line("") is None


def test_lines_split_over_chunks_are_joined_and_stamped_on_arrival() -> None:
    def chunks():  # noqa: ANN202
        yield b"0, 1, 2"
        time.sleep(0.05)
        yield b", 3\n1, 9\n2,"
        yield b" 7\n"

    lines = list(smi.stamped_lines(chunks()))
    assert [text for _, text in lines] == ["0, 1, 2, 3", "1, 9", "2, 7"]
    assert lines[0][0] == lines[1][0] < lines[2][0]


def test_the_command_asks_for_the_period_and_gpus() -> None:
    argv = smi.command([2, 5], 0.1)
    assert argv[-7:] == [
        "nvidia-smi",
        QUERY,
        "--format=csv,noheader,nounits",
        "-lms",
        "100",
        "-i",
        "2,5",
    ]


# --- the sampler's cut ---------------------------------------------------------------------


class _Listed:
    name = "listed"

    def __init__(self, samples: list[Sample]):
        self.items = samples

    def samples(self):  # noqa: ANN201
        yield from self.items

    def close(self) -> None:
        pass


def test_a_window_takes_its_samples_with_one_before_and_one_after_per_gpu() -> None:
    samples = [Sample(t, g, {"power_w": t}) for t in (1.0, 2.0, 3.0, 4.0, 5.0, 6.0) for g in (0, 1)]
    sampler = Sampler(_Listed(samples), [0, 1], 1.0).start()
    sampler._thread.join(5)
    taken = sampler.take(2.5, 4.5)
    assert [(s.t, s.gpu) for s in taken] == [
        (2.0, 0),
        (3.0, 0),
        (4.0, 0),
        (5.0, 0),
        (2.0, 1),
        (3.0, 1),
        (4.0, 1),
        (5.0, 1),
    ]
    assert sampler.has_after(4.5) and not sampler.has_after(6.0)
    assert [s.t for s in sampler.take(5.5, 5.9)] == [5.0, 6.0, 5.0, 6.0]  # older ones dropped


# --- the nvidia-smi stream as a local subprocess ------------------------------------------


@pytest.fixture
def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    script = fake_gpus.install(tmp_path / "bin", count=3, busy=(1,))
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")
    return script


def _running(script: Path) -> list[str]:
    out = subprocess.run(["pgrep", "-f", str(script)], capture_output=True, text=True)
    return out.stdout.split()


def test_a_driver_before_r535_is_asked_for_the_old_reasons_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = fake_gpus.install(tmp_path / "bin", count=3, old_driver=True)
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")
    sampler = Sampler(smi.LocalSmi([2], 0.1), [2], 0.1).start()
    taken = fake_gpus.sample_for(sampler, 0.6)[0]
    assert len(taken) >= 3 and {s.gpu for s in taken} == {2}
    assert {s.values["throttle_reasons"] for s in taken} == {"hw_slowdown,hw_thermal_slowdown"}
    calls = (script.parent / "calls.log").read_text().splitlines()
    assert [c.split()[0].split(",")[-1] for c in calls] == [
        "clocks_event_reasons.active",
        "clocks_throttle_reasons.active",
    ]


def test_a_stream_that_fails_warns_and_stores_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    script = fake_gpus.install_without_driver(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")
    sampler = Sampler(smi.LocalSmi([0], 0.1), [0], 0.1).start()
    sampler._thread.join(5)
    assert not sampler.alive() and sampler.take(0, time.perf_counter()) == []
    assert "couldn't communicate with the NVIDIA driver" in caplog.text
    sampler.stop()


def test_no_sampler_without_gpus_or_when_off(fake_smi: Path) -> None:
    from specsweep.collect.hosts.local import Local
    from specsweep.collect.plan.components import LocalHost

    host = Local(LocalHost(kind="local"))
    assert open_sampler(host, [], Telemetry()) is None
    assert open_sampler(host, [0], Telemetry(enabled=False)) is None


# --- NVML, where a GPU exists -------------------------------------------------------------


def _nvml_reason() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
    except Exception as exc:  # ImportError, NVMLError_LibraryNotFound, NVMLError_DriverNotLoaded
        return f"NVML cannot be initialised here ({type(exc).__name__}: {exc})"
    return None


@pytest.mark.skipif(_nvml_reason() is not None, reason=str(_nvml_reason()))
def test_nvml_reads_gpu_0() -> None:
    source = open_nvml([0], 0.05)
    assert source is not None
    sampler = Sampler(source, [0], 0.05).start()
    taken = fake_gpus.sample_for(sampler, 0.6)[0]
    assert len(taken) >= 8 and {s.gpu for s in taken} == {0}
    values = taken[-1].values
    assert values["power_w"] > 0 and values["sm_clock_mhz"] >= 0
    assert values["memory_used_mib"] > 0 and values["temperature_c"] > 0
    energy = [s.values["energy_j"] for s in taken]
    if energy[0] is not None:  # Volta and newer
        assert energy == sorted(energy)


def test_without_nvml_a_local_host_falls_back_to_nvidia_smi(fake_smi: Path) -> None:
    if _nvml_reason() is None:
        pytest.skip("NVML works here: the local host uses it, not nvidia-smi")
    from specsweep.collect.hosts.local import Local
    from specsweep.collect.plan.components import LocalHost

    sampler = open_sampler(Local(LocalHost(kind="local")), [2], Telemetry(period_s=0.1))
    assert sampler is not None and sampler.name == "nvidia-smi"
    sampler.stop()


# --- a campaign on local (scripted) GPUs ---------------------------------------------------

LAUNCHER = """#!{python}
# stands in for `python -m sglang.launch_server ... --port N`: the SGLang-shaped test server
import asyncio, sys
sys.path.insert(0, {engines!r})
from tests.support.shaped_servers import SGLangServer, Script

port = int(sys.argv[sys.argv.index("--port") + 1])

async def main():
    server = await asyncio.start_server(SGLangServer(Script()).connection, "127.0.0.1", port)
    async with server:
        await server.serve_forever()

asyncio.run(main())
"""


def _gpu_plan(launcher: Path) -> str:
    with socket.socket() as s:  # services listen on port + their first GPU's index
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return yaml.safe_dump(
        {
            "name": "local-gpu-telemetry",
            "repeat": 1,  # one round: this test is not about rounds
            "host": {"kind": "local"},
            "engine": {
                "kind": "sglang",
                "python": str(launcher),
                "model": "/models/m",
                "port": port,
                "startup_timeout_s": 30,
                "chat_template": "{% for m in messages %}{{ m.content }}\n{% endfor %}",
            },
            "methods": [{"name": "autoregressive"}, {"name": "dflash"}],
            "telemetry": {"period_s": 0.05},
            "gpu_hour_usd": 3.5,
            "workloads": [
                {
                    "name": "w",
                    "prompts": {"kind": "inline", "texts": ["a", "b"]},
                    "max_tokens": [28],
                    "concurrency": [1, 2],
                    "repetitions": 2,
                }
            ],
        }
    )
