"""How many bytes of weights a model's files hold, read over a host without loading them:
the number `check --probe`'s memory budget (collect.scheduling.memory) puts on the GPU.

Three layouts, tried in this order for a model folder (a path ending in .gguf is a file):

- sharded safetensors: `model.safetensors.index.json`'s `metadata.total_size`, which the
  writer sets to the sum of the tensors' bytes;
- one safetensors file, `model.safetensors` (most models under about 10 GB): its header.
  The file starts with an unsigned 64-bit little-endian length n, then n bytes of JSON
  that map each tensor name to {dtype, shape, data_offsets: [begin, end]} (plus an optional
  `__metadata__` of strings). Weight bytes = sum over tensors of (end - begin). The offsets
  are the bytes the file stores, which equal prod(shape) x dtype bytes for every dtype, so
  no dtype table is needed and packed 4-bit dtypes count right. Only the header is read;
- GGUF (llama.cpp's format, which vLLM also serves): the file size. Parsing the tensor
  infos means reading a binary header that carries the whole tokenizer first (megabytes of
  strings), so the size stands in for the tensors' bytes; it over-counts by that metadata,
  about 1-3% for a 100 MB model and well under 1% from 1 GB up.

The host is any `collect.hosts` host with `read_file` and `run` (local or SSH): the header
and the size come from `head`, `tail`, `od` and `wc` run there, so a remote file is never
copied whole.
"""

from __future__ import annotations

import json
from typing import Any

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"

# $1: the file. Line 1: its first 8 bytes as decimals; then the n-byte JSON header, where n
# is those bytes read little-endian (the shell's arithmetic is 64-bit; Python checks n).
_HEADER_SCRIPT = r"""p=$1
case $p in "~"/*) p=$HOME/${p#"~/"} ;; esac
[ -f "$p" ] || { echo "no such file: $1" >&2; exit 2; }
set -- $(head -c 8 "$p" | od -An -tu1 -v)
[ $# -eq 8 ] || { echo "shorter than 8 bytes: $p" >&2; exit 3; }
echo "$@"
n=$(( $1 | $2 << 8 | $3 << 16 | $4 << 24 | $5 << 32 | $6 << 40 | $7 << 48 | $8 << 56 ))
tail -c +9 "$p" | head -c "$n"
"""
_SIZE_SCRIPT = r"""p=$1
case $p in "~"/*) p=$HOME/${p#"~/"} ;; esac
[ -f "$p" ] || { echo "no such file: $1" >&2; exit 2; }
wc -c < "$p"
"""


def header_length(prefix: list[int]) -> int:
    """The safetensors header length: the first 8 bytes as an unsigned little-endian int."""
    return int.from_bytes(bytes(prefix), "little")


def safetensors_bytes(header: dict[str, Any]) -> int:
    """Sum over the header's tensors of data_offsets end - begin (`__metadata__` skipped)."""
    return sum(
        int(t["data_offsets"][1]) - int(t["data_offsets"][0])
        for name, t in header.items()
        if name != "__metadata__"
    )


def parse_header_reply(out: str) -> dict[str, Any]:
    """The JSON header from _HEADER_SCRIPT's output; ValueError when it is cut short."""
    first, _, text = out.partition("\n")
    n = header_length([int(b) for b in first.split()])
    if len(text.encode()) != n:
        raise ValueError(f"the safetensors header says {n} bytes, {len(text.encode())} came")
    return json.loads(text)


def _run(host: Any, script: str, path: str) -> str:
    rc, out, err = host.run(["sh", "-c", script, "sh", path])
    if rc != 0:
        raise OSError(err.strip() or f"exit {rc} reading {path}")
    return out


def safetensors_file_bytes(host: Any, path: str) -> int:
    """Weight bytes of one .safetensors file, from its header alone."""
    return safetensors_bytes(parse_header_reply(_run(host, _HEADER_SCRIPT, path)))


def file_bytes(host: Any, path: str) -> int:
    """A file's size in bytes (wc -c on the host)."""
    return int(_run(host, _SIZE_SCRIPT, path).split()[0])


def is_gguf(path: str) -> bool:
    return path.lower().endswith(".gguf")


def weight_bytes(host: Any, path: str) -> int:
    """The weight bytes of the model at path: a .gguf file's size, else the folder's
    safetensors index total, else its single safetensors file's header sum. OSError says
    which files were looked for."""
    if is_gguf(path):
        return file_bytes(host, path)
    folder = path.rstrip("/")
    try:
        return int(json.loads(host.read_file(f"{folder}/{INDEX}"))["metadata"]["total_size"])
    except FileNotFoundError:
        pass  # not sharded: one file, below
    try:
        return safetensors_file_bytes(host, f"{folder}/{SINGLE}")
    except OSError as exc:
        raise OSError(f"neither {INDEX} nor {SINGLE} in {folder}: {exc}") from exc


def config_path(path: str) -> str:
    """Where the model's config.json is: in its folder, or beside a .gguf file."""
    folder = path.rsplit("/", 1)[0] if is_gguf(path) else path.rstrip("/")
    return f"{folder}/config.json"
