"""The local host reads its GPUs as the SSH host does (nvidia-smi through facts.py): here a
scripted nvidia-smi (tests/support/fake_gpus.py) first on PATH, for this process and the
commands it runs. No nvidia-smi, or one without its driver, means no GPUs."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from specsweep.collect.engines import create
from specsweep.collect.engines.llamacpp import LlamaCppEngine
from specsweep.collect.hosts.local import Local
from specsweep.collect.plan.model import LocalHost, Method, ServiceConfig
from specsweep.collect.run.service import Service, ServiceFailed
from tests.support import fake_gpus
from tests.support.model_files import TINY, model_dir


@pytest.fixture
def gpus3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Three H200s, GPU 1 running someone else's compute process."""
    script = fake_gpus.install(tmp_path / "bin", count=3, busy=(1,))
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")
    return script


def _local(**fields: object) -> Local:
    return Local(LocalHost(kind="local", **fields))


def test_local_lists_its_gpus_and_which_are_busy(gpus3: Path) -> None:
    host = _local()
    assert host.gpu_indices() == [0, 1, 2]
    assert host.busy_gpus() == {1}
    assert host.gpu_processes() == [
        {"gpu_uuid": "GPU-fake-1", "pid": "42421", "used_memory": "1024 MiB"}
    ]
    assert _local(gpus=[2, 0]).gpu_indices() == [2, 0]  # the plan's list wins


def test_local_fingerprint_records_the_gpus_with_the_ssh_hosts_keys(gpus3: Path) -> None:
    facts = _local().fingerprint()
    assert facts["gpus"] == "3"
    assert facts["gpu.0.name"] == facts["gpu.2.name"] == "NVIDIA H200"
    assert facts["gpu.1.memory_total_mib"] == "143771"
    assert facts["gpu.1.memory_used_mib"] == "4"
    assert (facts["gpu.driver"], facts["cuda.version"]) == ("550.54.15", "12.4")
    assert facts["cpu.count"] == str(os.cpu_count()) and facts["memory.total_gb"] != "unknown"


def test_a_service_gets_the_free_gpus_and_its_process_sees_them(
    gpus3: Path, tmp_path: Path
) -> None:
    """The claim skips busy GPU 1; CUDA_VISIBLE_DEVICES reaches a process Local starts."""
    host = _local()
    engine = LlamaCppEngine(kind="llamacpp", binary="/bin/true", model="/m.gguf", port=1234)
    config = ServiceConfig(method=Method(name="m"), tp=2, engine=engine)
    svc = Service(host, create(engine), config, tmp_path, "c")
    svc._claim_gpus()
    assert svc.env["CUDA_VISIBLE_DEVICES"] == "0,2" and svc.row["gpus"] == "0,2"
    seen = tmp_path / "seen"
    script = f'printf %s "$CUDA_VISIBLE_DEVICES" > {seen}'
    proc = host.start(["sh", "-c", script], svc.env, tmp_path / "log")
    proc.popen.wait(timeout=10)
    assert seen.read_text() == "0,2"


def test_three_gpus_wanted_with_one_busy_fail_after_gpu_wait(gpus3: Path, tmp_path: Path) -> None:
    host = _local(gpu_wait_s=0)
    engine = LlamaCppEngine(kind="llamacpp", binary="/bin/true", model="/m.gguf", port=1234)
    config = ServiceConfig(method=Method(name="m"), tp=3, engine=engine)
    svc = Service(host, create(engine), config, tmp_path, "c")
    t0 = time.monotonic()
    with pytest.raises(ServiceFailed, match=r"needs 3 free GPUs; free \[0, 2\], busy \[1\]"):
        svc._claim_gpus()
    assert time.monotonic() - t0 < 5


def test_without_nvidia_smi_the_machine_has_no_gpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", f"{tmp_path / 'empty'}{os.pathsep}/usr/bin{os.pathsep}/bin")
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has a real nvidia-smi in /usr/bin or /bin")
    host = _local()
    assert host.gpu_indices() == [] and host.busy_gpus() == set()
    assert host.gpu_processes() == []
    facts = host.fingerprint()
    assert facts["gpus"] == "none" and "cuda.version" not in facts


def test_an_nvidia_smi_without_its_driver_means_no_gpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = fake_gpus.install_without_driver(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")
    host = _local()
    assert host.gpu_indices() == [] and host.busy_gpus() == set()
    facts = host.fingerprint()
    assert facts["gpus"] == "none" and "gpu.driver" not in facts and "cuda.version" not in facts


def test_local_host_gpu_fields_default_like_the_ssh_host() -> None:
    cfg = LocalHost(kind="local")
    assert (cfg.gpus, cfg.gpu_memory_gib, cfg.gpu_wait_s, cfg.pack) == (None, None, 0, True)
    with pytest.raises(ValueError, match="gpu_memory_gib"):
        LocalHost(kind="local", gpu_memory_gib=0)
    assert json.loads(LocalHost(kind="local", gpus=[1]).model_dump_json())["gpus"] == [1]


def test_check_probe_budgets_memory_on_the_local_gpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`check --probe` on a local plan reads this machine's GPUs (two of 10 GiB, GPU 1
    busy) and budgets a vLLM service with them, as on an SSH host."""
    from typer.testing import CliRunner

    from specsweep.collect.__main__ import app

    script = fake_gpus.install(tmp_path / "bin", count=2, busy=(1,), memory_mib=10240)
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")
    model = model_dir(tmp_path, "model", TINY)
    index = {"metadata": {"total_size": 2 << 30}, "weight_map": {}}
    (model / "model.safetensors.index.json").write_text(json.dumps(index))
    plan = {
        "name": "local-gpu",
        "repeat": 1,
        "host": {"kind": "local"},
        "engine": {"kind": "vllm", "model": str(model)},
        "methods": [{"name": "autoregressive"}],
        "workloads": [
            {"name": "w", "prompts": {"kind": "inline", "texts": ["hi"]}, "max_tokens": [16]}
        ],
    }
    path = tmp_path / "plan.yaml"
    path.write_text(json.dumps(plan))
    result = CliRunner().invoke(app, ["check", str(path), "--probe"])
    assert result.exit_code == 0, result.output
    assert "GPUs on localhost (probed): 0: 10.0 GiB free, 1: 10.0 GiB busy" in result.output
    # 10 x 0.9 - 2 = 7 GiB of KV cache at 2 x 2 x 2 x 16 x 2 = 256 bytes per token
    assert f"-> {7 * (1 << 30) // 256:,} tokens in 7.00 GiB" in result.output
