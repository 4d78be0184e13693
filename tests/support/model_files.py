"""Model folders as the memory budget reads them (collect.scheduling.weights,
collect.scheduling.architecture): a config.json of a tiny transformer, written where a test
needs a model path; the weights files are the test's own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# 2 x 2 x 2 x 16 x 2 = 256 bytes of KV cache per token (K and V, 2 layers, 2 KV heads of
# 64 / 4 = 16 dimensions, bf16)
TINY = {
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "torch_dtype": "bfloat16",
    "max_position_embeddings": 4096,
}


def model_dir(root: Path, name: str, config: dict[str, Any]) -> Path:
    """root/name holding config.json = config; returns the folder."""
    folder = root / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return folder
