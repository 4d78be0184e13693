"""The memory budget of `collect check`, checked by hand on the seed plan's numbers.

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/collect/test_memory.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.support.model_files import TINY, model_dir
from tests.unit.collect.test_memory import GIB, _check


def test_probe_reads_the_model_files_over_ssh(ssh_cfg: dict[str, Any], tmp_path: Path) -> None:
    """--probe connects to the real test sshd: no nvidia-smi there, so the GPU memory is
    the declared one; config.json and the safetensors index are read over SFTP."""
    model = model_dir(tmp_path, "model", TINY)
    index = {"metadata": {"total_size": 2 * GIB}, "weight_map": {}}
    (model / "model.safetensors.index.json").write_text(json.dumps(index))
    plan = {
        "name": "probe",
        "host": {**ssh_cfg, "gpus": [0], "gpu_memory_gib": 10},
        "engine": {"kind": "vllm", "model": str(model)},
        "methods": [{"name": "autoregressive"}],
        "workloads": [
            {"name": "w", "prompts": {"kind": "inline", "texts": ["hi"]}, "max_tokens": [16]}
        ],
    }
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    assert "not checked (add engine.model_info" in _check(path).output  # no probe: no link
    result = _check(path, "--probe")
    assert result.exit_code == 0, result.output
    assert "GPUs on test-sshd (probed): nvidia-smi lists none" in result.output
    # 2 GiB from the index; 10 x 0.9 - 2 = 7 GiB; 2 x 2 x 2 x 16 x 2 = 256 B/token
    assert "weights 2.00 GiB = (2.00 target + 0.00 draft) / 1" in result.output
    assert f"-> {7 * GIB // 256:,} tokens in 7.00 GiB" in result.output


def test_probe_reads_a_single_file_draft_over_ssh(ssh_cfg: dict[str, Any], tmp_path: Path) -> None:
    """The draft of vLLM's --speculative-config is one model.safetensors: its header is read
    over the SSH link (head/od/tail there), the file never copied."""
    config = {k: v for k, v in TINY.items() if k != "max_position_embeddings"}
    target, draft = model_dir(tmp_path, "target", config), model_dir(tmp_path, "draft", config)
    (target / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": GIB}, "weight_map": {}})
    )
    # one f32 tensor of shape [2^27] (2^29 B = 0.5 GiB), stored as a hole; header padded to 8
    header = json.dumps(
        {
            "w": {"dtype": "F32", "shape": [1 << 27], "data_offsets": [0, 1 << 29]},
            "__metadata__": {"note": "y" * 400},
        }
    ).encode()
    header += b" " * (-len(header) % 8)
    with (draft / "model.safetensors").open("wb") as f:
        f.write(len(header).to_bytes(8, "little") + header)
        f.truncate(8 + len(header) + (1 << 29))
    spec = json.dumps({"model": str(draft), "num_speculative_tokens": 2})
    plan = {
        "name": "probe",
        "host": {**ssh_cfg, "gpus": [0], "gpu_memory_gib": 10},
        "engine": {"kind": "vllm", "model": str(target)},
        "methods": [{"name": "draft", "args": ["--speculative-config", spec]}],
        "workloads": [
            {"name": "w", "prompts": {"kind": "inline", "texts": ["hi"]}, "max_tokens": [16]}
        ],
    }
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    result = _check(path, "--probe")
    assert result.exit_code == 0, result.output
    # 1 + 0.5 GiB; 10 x 0.9 - 1.5 = 7.5 GiB; 256 + 256 B/token (same shapes)
    assert "weights 1.50 GiB = (1.00 target + 0.50 draft) / 1" in result.output
    assert f"-> {int(7.5 * GIB) // 512:,} tokens in 7.50 GiB" in result.output
