"""The memory budget of `collect check`, checked by hand on the seed plan's numbers.

Seed (plans/ct200-qwen36.yaml): Qwen3.6-27B BF16, 52 GiB of weights, 64 layers of which
every 4th is full attention (16 KV layers, 4 KV heads, head_dim 256) and 48 are Gated
DeltaNet layers (16 key heads, 48 value heads, head dims 128, conv kernel 4, float32
recurrent state); DFlash drafter 3.3 GiB, 5 layers, 8 KV heads, head_dim 128; 96 GiB GPUs;
--mem-fraction-static 0.80 at TP1 and 0.85 at TP4/TP8; SGLang's state ratio 0.9.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from specsweep.collect.__main__ import app
from specsweep.collect.engines import sglang, vllm
from specsweep.collect.plan.file import parse_plan
from specsweep.collect.scheduling import architecture, memory

REPO = Path(__file__).resolve().parents[3]
SEED = REPO / "plans" / "ct200-qwen36.yaml"
GIB = 1 << 30


QWEN = architecture.architecture(yaml.safe_load(SEED.read_text())["engine"]["model_info"]["config"])
DRAFT = architecture.architecture(
    {
        "num_hidden_layers": 5,
        "hidden_size": 5120,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "torch_dtype": "bfloat16",
    }
)


def test_the_seed_config_reads_as_16_kv_and_48_linear_layers() -> None:
    assert (QWEN.kv_layers, QWEN.linear_layers) == (16, 48)
    assert (QWEN.kv_heads, QWEN.head_dim, QWEN.dtype_bytes, QWEN.state_bytes) == (4, 256, 2, 4)
    assert (DRAFT.kv_layers, DRAFT.linear_layers, DRAFT.kv_heads) == (5, 0, 8)


@pytest.mark.parametrize(
    ("tp", "weights", "pool"),
    [
        (1, 55.3, 21.5),  # 96 x 0.80 = 76.8; 76.8 - (52 + 3.3) / 1 = 21.5
        (4, 13.825, 67.775),  # 96 x 0.85 = 81.6; 81.6 - 55.3 / 4 = 67.775
        (8, 6.9125, 74.6875),  # 81.6 - 55.3 / 8 = 74.6875
    ],
)
def test_weights_and_pool_per_gpu(tp: int, weights: float, pool: float) -> None:
    fraction = 0.80 if tp == 1 else 0.85
    assert memory.weights_per_gpu(52, 3.3, tp) == pytest.approx(weights)
    assert memory.static_pool_gib(96, fraction, weights) == pytest.approx(pool)


@pytest.mark.parametrize(
    ("tp", "target", "draft"),
    [
        (1, 65_536, 20_480),  # 2 x 16 x 4 x 256 x 2; draft 2 x 5 x 8 x 128 x 2
        (4, 16_384, 5_120),  # 2 x 16 x 1 x 256 x 2; draft 2 x 5 x 2 x 128 x 2
        (8, 16_384, 2_560),  # 4 KV heads on 8 GPUs: each keeps 1 (replicated), not 1/2
    ],
)
def test_kv_bytes_per_token(tp: int, target: int, draft: int) -> None:
    assert memory.kv_bytes_per_token(QWEN, tp) == target
    assert memory.kv_bytes_per_token(DRAFT, tp) == draft


def test_linear_state_per_sequence() -> None:
    # conv: 3 x (2 x 16 x 128 + 48 x 128 = 10,240) x 2 B = 61,440; recurrent: 48 x 128 x 128
    # x 4 B = 3,145,728; x 48 layers = 153,944,064 B (0.143 GiB)
    assert memory.linear_state_bytes(QWEN, 1) == 48 * (61_440 + 3_145_728) == 153_944_064
    # TP8: conv 3 x 1,280 x 2 = 7,680; recurrent 6 x 128 x 128 x 4 = 393,216
    assert memory.linear_state_bytes(QWEN, 8) == 48 * (7_680 + 393_216) == 19_243_008


def test_tp1_dflash_tokens_that_fit() -> None:
    # SGLang gives the states 0.9 / 1.9 of the 21.5 GiB pool (10.18 GiB), the KV cache
    # 21.5 / 1.9 = 11.3158 GiB = 12,150,236,429 B; / (65,536 + 20,480) B = 141,255 tokens
    kv, states = memory.split_pool(21.5, 0.0, 0.9)
    assert states == pytest.approx(10.1842, abs=1e-4)
    assert memory.tokens_that_fit(kv, 65_536 + 20_480) == 141_255
    # one sequence's states with 16 draft tokens: 153,944,064 x 17 B = 2.437 GiB < 10.18
    per_sequence = memory.linear_state_bytes(QWEN, 1) * 17 / GIB
    assert per_sequence == pytest.approx(2.4373, abs=1e-4)


def test_vllm_takes_the_states_out_of_the_pool() -> None:
    assert memory.split_pool(20.0, 3.0, None) == (17.0, 3.0)


def test_dense_model_has_no_linear_state() -> None:
    llama = architecture.architecture(
        {
            "num_hidden_layers": 32,
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "torch_dtype": "float16",
        }
    )
    assert (llama.kv_layers, llama.linear_layers, llama.head_dim) == (32, 0, 128)
    assert memory.kv_bytes_per_token(llama, 1) == 2 * 32 * 8 * 128 * 2 == 131_072
    assert memory.kv_bytes_per_token(llama, 2) == 65_536
    assert memory.linear_state_bytes(llama, 1) == 0


def test_kv_heads_fewer_than_gpus_are_replicated() -> None:
    two = architecture.Architecture(kv_layers=10, kv_heads=2, head_dim=64, dtype_bytes=2)
    assert memory.kv_bytes_per_token(two, 2) == 2 * 10 * 1 * 64 * 2
    assert memory.kv_bytes_per_token(two, 8) == memory.kv_bytes_per_token(two, 2)
    assert memory.kv_bytes_per_token(two, 1, dtype_bytes=1) == 2 * 10 * 2 * 64


def test_layer_types_win_over_the_interval() -> None:
    cfg = {
        "num_hidden_layers": 4,
        "full_attention_interval": 2,
        "layer_types": ["linear_attention", "full_attention", "full_attention", "linear_attention"],
    }
    assert architecture.layer_kinds(cfg) == cfg["layer_types"]
    del cfg["layer_types"]
    assert architecture.layer_kinds(cfg) == ["linear_attention", "full_attention"] * 2


def test_verdicts() -> None:
    assert memory.verdict(80, 100, True) == memory.FITS
    assert memory.verdict(81, 100, True) == memory.TIGHT
    assert memory.verdict(101, 100, True) == memory.NO_FIT
    assert memory.verdict(1, 100, False) == memory.NO_FIT


def test_flags_and_fraction_defaults() -> None:
    args = ["--mem-fraction-static", "0.7", "--x", "--mem-fraction-static=0.75"]
    assert memory.flag(args, "--mem-fraction-static") == "0.75"
    assert vllm.MEMORY.fraction([], 80, 1) == (0.9, "--gpu-memory-utilization default")
    assert sglang.MEMORY.fraction([], 80, 1)[0] == pytest.approx(1 - 10 / 80)
    assert sglang.MEMORY.fraction(args, 80, 1) == (0.75, "--mem-fraction-static")
    spec = ["--speculative-config", '{"method": "dflash", "model": "/m/draft"}']
    assert vllm.MEMORY.draft_path(spec) == "/m/draft"
    assert sglang.MEMORY.draft_tokens(["--speculative-num-draft-tokens", "4"]) == 4
    assert sglang.MEMORY.state_ratio([]) == 0.9 and vllm.MEMORY.state_ratio([]) is None


def _check(plan: Path, *extra: str) -> Any:
    return CliRunner().invoke(app, ["check", str(plan), *extra])


def test_check_prints_the_seed_budget() -> None:
    result = _check(SEED)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "GPUs: declared [0, 1, 2, 3, 4, 5, 6, 7] (8); phases need up to 8" in out
    assert "tp1/autoregressive: FITS" in out
    assert "tp1/dflash-linear, tp1/ddtree-b8" in out
    assert "-> 141,255 tokens in 11.32 GiB" in out
    assert "tp8/dflash-linear" in out and "-> 2,228,037 tokens in 39.31 GiB" in out
    assert "x17 for 16 draft tokens) x 32 = 9.75 of 35.38 GiB" in out
    assert "DOES NOT FIT" not in out


def _seed_variant(tmp_path: Path, change: Any) -> Path:
    data = yaml.safe_load(SEED.read_text())
    change(data)
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_plan_that_does_not_fit_exits_3_naming_the_config(tmp_path: Path) -> None:
    # 48 GiB x 0.80 = 38.4 GiB < 55.3 GiB of weights at TP1; TP4 and TP8 still fit
    plan = _seed_variant(tmp_path, lambda d: d["host"].update(gpu_memory_gib=48))
    result = _check(plan)
    assert result.exit_code == 3, result.output
    assert "tp1/dflash-linear, tp1/ddtree-b8" in result.output
    assert "tp1/autoregressive: DOES NOT FIT" in result.output
    assert "tp4/autoregressive: FITS" in result.output


def test_a_host_with_too_few_gpus_does_not_fit(tmp_path: Path) -> None:
    plan = _seed_variant(tmp_path, lambda d: d["host"].update(gpus=[0, 1, 2, 3]))
    result = _check(plan)
    assert result.exit_code == 3
    assert "DOES NOT FIT: a phase needs 8 GPUs, the host has 4" in result.output


def test_a_plan_without_model_info_is_not_checked(tmp_path: Path) -> None:
    plan = _seed_variant(tmp_path, lambda d: d["engine"].pop("model_info"))
    result = _check(plan)
    assert result.exit_code == 0, result.output
    assert "memory: not checked (add engine.model_info {weights_gib, config}" in result.output


def test_a_missing_draft_is_named(tmp_path: Path) -> None:
    plan = _seed_variant(tmp_path, lambda d: d["methods"][1].pop("draft"))
    result = _check(plan)
    assert result.exit_code == 0, result.output
    assert (
        "tp1/dflash-linear, tp4/dflash-linear, tp8/dflash-linear: not checked\n"
        "    add methods[1].draft {weights_gib, config}, or run check --probe"
    ) in result.output


def test_model_info_fields_are_strict() -> None:
    data = yaml.safe_load(SEED.read_text())
    data["engine"]["model_info"]["weights_gb"] = 52
    with pytest.raises(ValueError, match="weights_gb"):
        parse_plan(yaml.safe_dump(data))
