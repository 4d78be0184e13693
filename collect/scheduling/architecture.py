"""A model's shape as the memory budget needs it, read from its config.json (a multimodal
model's `text_config`): KV layers, KV heads, head size and dtype, and for hybrid models
(Gated DeltaNet linear-attention layers) the linear layers and their state sizes.
collect.scheduling.memory turns these numbers into bytes per token and per sequence."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DTYPE_BYTES = {
    "float32": 4,
    "float": 4,
    "bfloat16": 2,
    "bf16": 2,
    "float16": 2,
    "half": 2,
    "fp16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "float8_e4m3fn": 1,
}


@dataclass(frozen=True)
class Architecture:
    """The numbers of a model's config.json the budget needs."""

    kv_layers: int
    kv_heads: int
    head_dim: int
    dtype_bytes: int
    max_positions: int | None = None
    linear_layers: int = 0
    key_heads: int = 0
    value_heads: int = 0
    key_dim: int = 0
    value_dim: int = 0
    conv_kernel: int = 0
    state_bytes: int = 4


def layer_kinds(cfg: dict[str, Any]) -> list[str]:
    """Per layer: `layer_types` if given, else every `full_attention_interval`-th layer is
    full attention and the others linear (Qwen3-Next style), else all full attention."""
    n = int(cfg["num_hidden_layers"])
    if cfg.get("layer_types"):
        return list(cfg["layer_types"])[:n]
    interval = cfg.get("full_attention_interval")
    if interval:
        return [
            "full_attention" if (i + 1) % int(interval) == 0 else "linear_attention"
            for i in range(n)
        ]
    return ["full_attention"] * n


def architecture(config: dict[str, Any]) -> Architecture:
    """Read a config.json (a multimodal one's `text_config`); KeyError names a missing key."""
    cfg = config.get("text_config") or config
    kinds = layer_kinds(cfg)
    linear = sum(k == "linear_attention" for k in kinds)
    dtype = str(
        cfg.get("torch_dtype") or cfg.get("dtype") or config.get("torch_dtype") or "bfloat16"
    )
    heads = int(cfg["num_attention_heads"])
    return Architecture(
        kv_layers=len(kinds) - linear,
        kv_heads=int(cfg.get("num_key_value_heads") or heads),
        head_dim=int(cfg.get("head_dim") or int(cfg["hidden_size"]) // heads),
        dtype_bytes=DTYPE_BYTES[dtype],
        max_positions=cfg.get("max_position_embeddings"),
        linear_layers=linear,
        key_heads=int(cfg.get("linear_num_key_heads", 0)) if linear else 0,
        value_heads=int(cfg.get("linear_num_value_heads", 0)) if linear else 0,
        key_dim=int(cfg.get("linear_key_head_dim", 0)) if linear else 0,
        value_dim=int(cfg.get("linear_value_head_dim", 0)) if linear else 0,
        conv_kernel=int(cfg.get("linear_conv_kernel_dim", 4)) if linear else 0,
        state_bytes=DTYPE_BYTES[str(cfg.get("mamba_ssm_dtype") or "float32")],
    )
