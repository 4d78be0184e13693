"""Services take the first `tp` GPUs with no compute process, or are skipped."""

from __future__ import annotations

from pathlib import Path

import pytest

from specsweep.collect.engines import create
from specsweep.collect.engines.llamacpp import LlamaCppEngine
from specsweep.collect.hosts.local import Local
from specsweep.collect.plan.model import LocalHost, Method, ServiceConfig
from specsweep.collect.run.service import Service, ServiceFailed


class GpuLocal(Local):
    """This machine, told it has GPUs 0-3 of which 0 and 2 run someone else's process."""

    def gpu_indices(self) -> list[int]:
        return [0, 1, 2, 3]

    def busy_gpus(self) -> set[int]:
        return {0, 2}

    def start(self, argv, env, log_path):  # noqa: ANN001, ANN201 - never reached in these tests
        raise AssertionError("not started: only the claim is under test")


def _service(tmp_path: Path, tp: int) -> Service:
    engine = LlamaCppEngine(kind="llamacpp", binary="/bin/true", model="/m.gguf", port=1234)
    config = ServiceConfig(method=Method(name="m"), tp=tp, engine=engine)
    return Service(GpuLocal(LocalHost(kind="local")), create(engine), config, tmp_path, "c")


def test_free_gpus_are_claimed_in_order(tmp_path: Path) -> None:
    svc = _service(tmp_path, 2)
    svc._claim_gpus()
    assert svc.env["CUDA_VISIBLE_DEVICES"] == "1,3" and svc.row["gpus"] == "1,3"
    assert svc.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"  # nvidia-smi's numbering
    assert svc.row["launch_command"].startswith(
        "CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=1,3 "
    )


def test_too_few_free_gpus_fail_with_the_reason(tmp_path: Path) -> None:
    svc = _service(tmp_path, 3)
    with pytest.raises(ServiceFailed, match=r"needs 3 free GPUs; free \[1, 3\], busy \[0, 2\]"):
        svc._claim_gpus()
    assert svc.row["state"] == "failed" and "needs 3 free GPUs" in svc.row["error"]
