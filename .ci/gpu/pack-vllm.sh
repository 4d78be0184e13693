#!/usr/bin/env bash
# Build the pieces that install vLLM 0.24.0 on the lent GPU machine (no network there; its image has
# CPython 3.12, torch 2.11.0+cu130, transformers, numpy, pandas, scipy, matplotlib ...).
# vLLM 0.24.0 is the newest vLLM that pins torch==2.11.0 (0.25+ pin 2.13/2.14).
#
#   .ci/gpu/pack-vllm.sh OUT_DIR        (.ci/device-pieces vllm calls it with device/vllm)
#
# Downloads the 78 wheels named in vllm-0.24.0.sha256 (beside this script) from the package index, checks each
# against its sha256, splits the vllm wheel (279 MB) into 50 MiB parts and lays everything out as
# OUT_DIR/p01 ... pNN, each at most 55 MiB, so that one piece travels per device call beside a small
# project copy (a call carries at most 64 MiB). p01 also gets install.sh, SHA256SUMS and MANIFEST.txt.
# On the device: gather the pieces in one folder (keep state under /tmp there: an ignored path not
# carried again is removed from the repo copy on the next call), then
#   INSTALL_MODE=env bash /tmp/vllmparts/p01/install.sh /tmp/vllmparts
# (about 80 s; `vllm` lands on PATH in the image's python). .ci/device-engine.sh does it, and
# docs/gpu-vllm.md says what was measured with it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: pack.sh OUT_DIR}
work=$out/.download
limit=$((55 * 1024 * 1024))
mkdir -p "$work"
plat=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_31_x86_64
      --platform manylinux_2_26_x86_64 --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64)
while read -r sum file; do
  [ -f "$work/$file" ] && continue
  name=$(echo "$file" | cut -d- -f1); version=$(echo "$file" | cut -d- -f2)
  python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${plat[@]}" -d "$work" "$name==$version"
  [ -f "$work/$file" ] || { echo "pack.sh: pip did not fetch $file" >&2; exit 1; }
done < "$here/vllm-0.24.0.sha256"
(cd "$work" && sha256sum -c --quiet "$here/vllm-0.24.0.sha256") || { echo "pack.sh: checksum mismatch" >&2; exit 1; }
big=$(ls "$work"/vllm-0.24.0-*.whl)
rm -rf "$work/split" && mkdir -p "$work/split"
split -b 50m -d -a 2 "$big" "$work/split/$(basename "$big").part"
# first fit, largest first
python3 - "$work" "$out" "$limit" <<'PY'
import os, shutil, sys
work, out, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
files = [os.path.join(work, "split", f) for f in sorted(os.listdir(os.path.join(work, "split")))]
files += [os.path.join(work, f) for f in os.listdir(work) if f.endswith(".whl") and not f.startswith("vllm-")]
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
    for f in fs:
        shutil.copy(f, d); lines.append(f"p{i:02d}  {os.path.basename(f)}  {os.path.getsize(f)}")
with open(os.path.join(out, "MANIFEST.txt"), "w") as m:
    m.write("# piece  file  bytes   (split wheels: cat NAME.whl.part00 NAME.whl.part01 ... > NAME.whl)\n")
    m.write("\n".join(lines) + "\n")
print(f"{len(pieces)} pieces in {out}")
PY
for p in "$out"/p[0-9][0-9]; do
  cp "$here/vllm-0.24.0.sha256" "$p/SHA256SUMS"; cp "$out/MANIFEST.txt" "$p/"
done
cp "$here/install-vllm.sh" "$out/p01/install.sh"
cp "$here/gather-wheels.sh" "$out/p01/"  # install.sh sources it
du -sh "$out"/p[0-9][0-9]
