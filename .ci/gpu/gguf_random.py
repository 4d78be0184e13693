#!/usr/bin/env python3
"""A random-weight llama GGUF of a real model's shape, with SmolLM2's tokenizer.

    python3 .ci/gpu/gguf_random.py SOURCE.gguf OUT.gguf SHAPE [--type f16|bf16|q8_0]

What it is for: llama-server's synthetic acceptance (`--spec-synth-len L`) times a step of an
8B-shaped target on a GPU machine that has no network. The weights carry no knowledge, but the
bytes a decode step reads and the matrix shapes it multiplies are those of the real model, and
synthetic acceptance sets the tokens each step yields. SOURCE (SmolLM2-135M-Instruct's GGUF)
gives every `tokenizer.*` key (vocabulary, merges, bos/eos ids, chat template), so SmolLM2
can draft for the new model (llama.cpp checks that draft and target vocabularies agree).

Shapes (SHAPE): `llama8b` has Llama-3-8B's dimensions (32 layers, hidden 4096, ffn 14336, 32 heads,
8 KV heads, rope theta 500000, rms eps 1e-5, context 8192) but SmolLM2's 49152-token vocabulary
instead of 128256, so 7.38e9 parameters instead of 8.03e9 (the embedding and the untied output
matrix are 49152 x 4096 each). `qwen14b` has Qwen2.5-14B's dimensions (48 layers, hidden 5120,
ffn 13824, 40 heads, 8 KV heads, rope theta 1e6, rms eps 1e-6) in llama's architecture: 13.7e9
parameters with the same vocabulary, 27.4 GB in f16. Qwen2's q/k/v biases are left out (0.003% of
its bytes), so a step reads what a real Qwen2.5-14B step reads to within that. `tiny` (2
layers, hidden 64) is for the test.

Weights: one seeded normal tile of 2^20 values scaled by 0.02 (std 0.02: q = Wx has std
0.02 * sqrt(4096) = 1.3 after the RMS norm, so no f16 overflow), rotated by a per-tensor
offset so layers differ, converted once per tensor to the output type, then written again
and again, whole rows at a time, until the tensor is full. Norm weights are 1.0 (f32).

Memory: tensors are written one by one through GGUFWriter.write_tensor_data, each as an object
that streams its repeated tile; the process holds what GGUFReader parsed of the source (about
160 MiB for SmolLM2's tokens and merges) and one tile (4 MiB f32 plus its conversion),
whatever the shape, so peak RSS does not grow with the model (printed at the end): 217 MiB for
`tiny`, 216 MiB for a 4-layer hidden-2048 shape written as a 0.9 GB f16 file (2-core machine).
The 15 GB of an 8B f16 file go through the page cache to disk, never into this process.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import gguf
import numpy as np
from gguf import quants

TILE_VALUES = 1 << 20
SCALE = 0.02
TYPES = {
    "f16": (gguf.GGMLQuantizationType.F16, gguf.LlamaFileType.MOSTLY_F16),
    "bf16": (gguf.GGMLQuantizationType.BF16, gguf.LlamaFileType.MOSTLY_BF16),
    "q8_0": (gguf.GGMLQuantizationType.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
}


@dataclass(frozen=True)
class Shape:
    layers: int
    hidden: int
    ffn: int
    heads: int
    kv_heads: int
    rope_theta: float = 500000.0
    rms_eps: float = 1e-5
    context: int = 8192

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


SHAPES = {
    "llama8b": Shape(layers=32, hidden=4096, ffn=14336, heads=32, kv_heads=8),
    "qwen14b": Shape(
        layers=48, hidden=5120, ffn=13824, heads=40, kv_heads=8, rope_theta=1e6, rms_eps=1e-6
    ),
    "tiny": Shape(layers=2, hidden=64, ffn=128, heads=4, kv_heads=2),
}


def _name(tensor: gguf.MODEL_TENSOR, bid: int | None = None) -> str:
    """llama.cpp's name of a llama tensor (gguf's table, so a rename upstream shows here)."""
    assert tensor in gguf.MODEL_TENSORS[gguf.MODEL_ARCH.LLAMA]
    return gguf.TENSOR_NAMES[tensor].format(bid=bid) + ".weight"


def tensor_plan(shape: Shape, vocab: int) -> list[tuple[str, tuple[int, ...]]]:
    """(name, numpy shape) in file order; numpy's (rows, cols) is GGUF's ne = (cols, rows)."""
    t, h, kv = gguf.MODEL_TENSOR, shape.hidden, shape.kv_heads * shape.head_dim
    plan = [(_name(t.TOKEN_EMBD), (vocab, h))]
    for b in range(shape.layers):
        plan += [
            (_name(t.ATTN_NORM, b), (h,)),
            (_name(t.ATTN_Q, b), (h, h)),
            (_name(t.ATTN_K, b), (kv, h)),
            (_name(t.ATTN_V, b), (kv, h)),
            (_name(t.ATTN_OUT, b), (h, h)),
            (_name(t.FFN_NORM, b), (h,)),
            (_name(t.FFN_GATE, b), (shape.ffn, h)),
            (_name(t.FFN_UP, b), (shape.ffn, h)),
            (_name(t.FFN_DOWN, b), (h, shape.ffn)),
        ]
    # Llama-3-8B does not tie the output matrix to the embedding: its bytes are read every step
    return [*plan, (_name(t.OUTPUT_NORM), (h,)), (_name(t.OUTPUT), (vocab, h))]


class TiledTensor:
    """What GGUFWriter.write_tensor_data uses of an array (nbytes, tofile): `rows` rows made
    of `blob` (whole rows, already in the output type) repeated, so only `blob` is in memory."""

    def __init__(self, blob: bytes, row_bytes: int, rows: int) -> None:
        assert len(blob) % row_bytes == 0
        self.blob, self.nbytes = blob, rows * row_bytes

    def tofile(self, fp: BinaryIO) -> None:
        full, rest = divmod(self.nbytes, len(self.blob))
        for _ in range(full):
            fp.write(self.blob)
        fp.write(self.blob[:rest])


def tiled(
    tile: np.ndarray, index: int, dims: tuple[int, int], qtype: gguf.GGMLQuantizationType
) -> TiledTensor:
    """Tensor `index` of `dims` (rows, cols): the tile rotated by a per-tensor offset, cut to
    whole rows, converted to `qtype` once."""
    rows, cols = dims
    per_tile = min(rows, len(tile) // cols)
    block = np.roll(tile, index * 7919)[: per_tile * cols].reshape(per_tile, cols)
    blob = quants.quantize(block, qtype).tobytes()
    return TiledTensor(blob, len(blob) // per_tile, rows)


def copy_tokenizer(reader: gguf.GGUFReader, writer: gguf.GGUFWriter) -> int:
    """Every tokenizer.* key of SOURCE, with its types; returns the vocabulary size."""
    for key, field in reader.fields.items():
        if key.startswith("tokenizer."):
            sub = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
            writer.add_key_value(key, field.contents(), field.types[0], sub_type=sub)
    return len(reader.fields["tokenizer.ggml.tokens"].data)


def add_hparams(
    writer: gguf.GGUFWriter, label: str, shape: Shape, vocab: int, ftype: gguf.LlamaFileType
) -> None:
    writer.add_type("model")
    writer.add_name(f"random-{label} (SmolLM2 tokenizer)")
    writer.add_block_count(shape.layers)
    writer.add_context_length(shape.context)
    writer.add_embedding_length(shape.hidden)
    writer.add_feed_forward_length(shape.ffn)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.kv_heads)
    writer.add_rope_freq_base(shape.rope_theta)
    writer.add_layer_norm_rms_eps(shape.rms_eps)
    writer.add_rope_dimension_count(shape.head_dim)
    writer.add_vocab_size(vocab)
    writer.add_file_type(int(ftype))
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)


def build(source: Path, out: Path, label: str, type_name: str, seed: int = 0) -> int:
    """Write OUT (metadata, tensor infos, then tensor by tensor); returns the parameters."""
    shape, (qtype, ftype) = SHAPES[label], TYPES[type_name]
    reader = gguf.GGUFReader(source)
    if reader.fields["general.architecture"].contents() != "llama":
        raise SystemExit(f"{source}: not a llama GGUF")
    writer = gguf.GGUFWriter(out, "llama")
    vocab = copy_tokenizer(reader, writer)
    add_hparams(writer, label, shape, vocab, ftype)
    plan = tensor_plan(shape, vocab)
    for name, dims in plan:
        if len(dims) == 1:
            writer.add_tensor_info(name, dims, np.dtype(np.float32), dims[0] * 4)
        else:
            nbytes = dims[0] * quants.quant_shape_to_byte_shape(dims[1:], qtype)[0]
            writer.add_tensor_info(name, dims, np.dtype(np.float32), nbytes, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    rng = np.random.default_rng(seed)
    tile = rng.standard_normal(TILE_VALUES, dtype=np.float32) * np.float32(SCALE)
    for index, (_, dims) in enumerate(plan):
        if len(dims) == 1:
            writer.write_tensor_data(np.ones(dims, dtype=np.float32))
        else:
            writer.write_tensor_data(tiled(tile, index, dims, qtype))  # type: ignore[arg-type]
    writer.close()
    return sum(int(np.prod(dims)) for _, dims in plan)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", type=Path, help="SmolLM2-135M-Instruct's GGUF (the tokenizer)")
    ap.add_argument("out", type=Path)
    ap.add_argument("shape", choices=sorted(SHAPES))
    ap.add_argument("--type", choices=sorted(TYPES), default="f16")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    started = time.perf_counter()
    params = build(args.source, args.out, args.shape, args.type, args.seed)
    seconds = time.perf_counter() - started
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(
        f"{args.out}: {args.shape} {args.type}, {params} parameters, "
        f"{args.out.stat().st_size} bytes, {seconds:.2f} s, peak RSS {peak_mib:.0f} MiB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
