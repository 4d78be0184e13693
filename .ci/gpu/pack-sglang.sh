#!/usr/bin/env bash
# Build the pieces that install SGLang 0.5.15 on the lent GPU machine (no network there; its image has
# CPython 3.12.3, torch 2.11.0+cu130, transformers 5.17, tokenizers 0.23.2, numpy, scipy, ...).
# SGLang 0.5.15 pins torch==2.11.0, like vLLM 0.24.0, but also transformers==5.12.1, openai==2.6.1,
# xgrammar==0.2.1, apache-tvm-ffi==0.1.11, so it goes in its own --target folder (/tmp/sglang-site).
#
#   .ci/gpu/pack-sglang.sh OUT_DIR      (e.g. device/sglang, which git ignores)
#
# Downloads the wheels listed below (what `import sglang.srt.entrypoints.http_server` and a server with
# the NGRAM worker import at start that the image lacks, or has at a version SGLang rejects), writes
# their sha256 into sglang-0.5.15.sha256 beside this script the first time (REPIN=1 rewrites it) and
# checks them against it afterwards, splits wheels over 50 MiB (sglang_kernel, 587 MiB) into 50 MiB
# parts and lays everything out as OUT_DIR/p01 ... pNN, each at most 55 MiB, so that one piece travels
# per device call. Every piece gets SHA256SUMS and MANIFEST.txt; p01 also gets install.sh (a copy of
# install-sglang.sh). On the device, gather the pieces under /tmp/sglangparts, then
#   bash /tmp/sglangparts/p01/install.sh /tmp/sglangparts
# Left out on purpose (SGLang imports them lazily, only for other models/backends/flags):
# flashinfer-cubin, tilelang, tokenspeed-mla, nvidia-mathdx, llguidance,
# mistral-common, modelscope, torchao, flash-attn-4, quack-kernels, outlines, timm,
# datasets, smg-grpc-servicer, kernels, py-spy, blobfile, anthropic, cuda-python (the image's
# cuda-bindings serves `cuda.bindings`).
# Knobs: KEEP_DOWNLOAD=1 keeps OUT_DIR/.download (default: removed after packing); REPIN=1.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: pack-sglang.sh OUT_DIR}
pins=$here/sglang-0.5.15.sha256
work=$out/.download
limit=$((55 * 1024 * 1024))
reqs=(
  # SGLang itself and its kernels
  sglang==0.5.15 sglang-kernel==0.4.4 flashinfer-python==0.6.12 nvidia-cudnn-frontend==1.25.0
  apache-tvm-ffi==0.1.11 xgrammar==0.2.1 torch-memory-saver==0.0.10
  # exact pins that differ from the image: transformers 5.12.1 accepts tokenizers <=0.23.0 only
  transformers==5.12.1 tokenizers==0.22.2
  # server / API stack
  fastapi==0.136.3 starlette==1.3.1 uvicorn==0.49.0 python-multipart==0.0.32 pydantic==2.13.4
  pydantic-core==2.46.4 annotated-types==0.7.0 typing-inspection==0.4.2 openai==2.6.1 distro==1.9.0
  jiter==0.16.0 sniffio==1.3.1 openai-harmony==0.0.4 pyzmq==27.1.0 watchfiles==1.2.0 orjson==3.13.0
  msgspec==0.21.1 setproctitle==1.3.7 partial-json-parser==0.2.1.1.post7 pybase64==1.4.3
  zstandard==0.25.0 dill==0.4.1 jsonschema==4.26.0 jsonschema-specifications==2025.9.1
  referencing==0.37.0 rpds-py==2026.5.1 compressed-tensors==0.17.0 loguru==0.7.3 gguf==0.19.0
  soundfile==0.13.1 cffi==2.0.0 pycparser==3.0
  # STANDALONE (a draft model): its draft worker's CUDA-graph capture imports `cutlass`
  # (2026-12-04: ModuleNotFoundError without it). It imports only cuda.bindings of cuda-python,
  # which the image's cuda-bindings has.
  nvidia-cutlass-dsl==4.5.2 nvidia-cutlass-dsl-libs-base==4.5.2 nvidia-cutlass-dsl-libs-cu13==4.5.2
  # ... and then `import deep_gemm` (sglang/srt/layers/attention/dsa_backend.py, imported by the
  # same capture on any CUDA GPU; 2026-12-04 evening: ModuleNotFoundError once cutlass was there).
  # Its _C.so is prebuilt against CUDA 13 and torch, no JIT at import.
  sgl-deep-gemm==0.1.4
  # sglang.utils does `from IPython.display import ...` at import time
  ipython==9.18.1 ipython-pygments-lexers==1.1.1 jedi==0.20.1 parso==0.8.7 matplotlib-inline==0.2.2
  traitlets==5.16.1 pexpect==4.9.0 ptyprocess==0.7.0 prompt-toolkit==3.0.53 wcwidth==0.9.4
  stack-data==0.6.3 asttokens==3.0.2 executing==2.3.0 pure-eval==0.2.4
)
mkdir -p "$work"
plat=()
for p in manylinux_2_34 manylinux_2_31 manylinux_2_28 manylinux_2_27 manylinux_2_26 manylinux_2_24 \
         manylinux_2_17 manylinux2014 manylinux_2_5 manylinux1; do plat+=(--platform "${p}_x86_64"); done
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp "${plat[@]}" -d "$work" "${reqs[@]}"
n=$(ls "$work"/*.whl | wc -l)
[ "$n" -eq ${#reqs[@]} ] || { echo "pack-sglang.sh: $n wheels in $work, expected ${#reqs[@]}" >&2; exit 1; }
if [ ! -f "$pins" ] || [ "${REPIN:-0}" = 1 ]; then
  (cd "$work" && sha256sum -- *.whl) > "$pins"
  echo "wrote $pins"
fi
[ "$(grep -c . "$pins")" -eq "$n" ] || { echo "pack-sglang.sh: $pins does not list the $n wheels" >&2; exit 1; }
(cd "$work" && sha256sum -c --quiet "$pins") || { echo "pack-sglang.sh: checksum mismatch" >&2; exit 1; }
rm -rf "$work/split" && mkdir -p "$work/split"
for w in "$work"/*.whl; do
  [ "$(stat -c %s "$w")" -gt $((50 * 1024 * 1024)) ] && split -b 50m -d -a 2 "$w" "$work/split/$(basename "$w").part"
done
rm -rf "$out"/p[0-9][0-9] "$out/MANIFEST.txt"
# first fit, largest first
python3 - "$work" "$out" "$limit" <<'PY'
import os, shutil, sys
work, out, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
split = [os.path.join(work, "split", f) for f in sorted(os.listdir(os.path.join(work, "split")))]
whole = {os.path.basename(f).rsplit(".part", 1)[0] for f in split}
files = split + [os.path.join(work, f) for f in os.listdir(work) if f.endswith(".whl") and f not in whole]
files.sort(key=os.path.getsize, reverse=True)
pieces = []
for f in files:
    size = os.path.getsize(f)
    for p in pieces:
        if p[0] + size <= limit - 64 * 1024:
            p[0] += size; p[1].append(f); break
    else:
        pieces.append([size, [f]])
lines = []
for i, (_, fs) in enumerate(pieces, 1):
    d = os.path.join(out, f"p{i:02d}"); os.makedirs(d, exist_ok=True)
    for f in sorted(fs):
        shutil.copy(f, d); lines.append(f"p{i:02d}  {os.path.basename(f)}  {os.path.getsize(f)}")
with open(os.path.join(out, "MANIFEST.txt"), "w") as m:
    m.write("# piece  file  bytes   (split wheels: cat NAME.whl.part00 NAME.whl.part01 ... > NAME.whl)\n")
    m.write("\n".join(lines) + "\n")
print(f"{len(pieces)} pieces in {out}")
PY
for p in "$out"/p[0-9][0-9]; do
  cp "$pins" "$p/SHA256SUMS"; cp "$out/MANIFEST.txt" "$p/"
done
cp "$here/install-sglang.sh" "$out/p01/install.sh"
cp "$here/gather-wheels.sh" "$out/p01/"  # install.sh sources it
echo "$n wheels, $(du -cm "$work"/*.whl | tail -1 | cut -f1) MiB"
[ "${KEEP_DOWNLOAD:-0}" = 1 ] || rm -rf "$work"
du -sh "$out"/p[0-9][0-9]
