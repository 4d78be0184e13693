#!/usr/bin/env bash
# Offline installer for SGLang 0.5.15 on the GPU machine, into its own --target folder
# (/tmp/sglang-site): SGLang pins transformers 5.12.1, openai 2.6.1, xgrammar 0.2.1 and
# apache-tvm-ffi 0.1.11, which differ from the image's and from vLLM 0.24.0's. What else it needs at
# start (torch 2.11.0+cu130, triton, numpy, huggingface-hub, safetensors, aiohttp, ...) comes from the
# image; packages in the --target folder shadow the image's once PYTHONPATH names it. The image's
# tokenizers 0.23.2 is shadowed by a carried 0.22.2: transformers 5.12.1 refuses tokenizers > 0.23.0.
# Built by .ci/gpu/pack-sglang.sh; needs nothing from the vLLM install.
#
# Gather the piece folders p01 .. pNN in one folder, e.g. /tmp/sglangparts/p01 .., then run ONE of:
#     bash install.sh /tmp/sglangparts        # parts folder given explicitly
#     cd /tmp/sglangparts && bash install.sh  # parts folder = current folder
#     bash /tmp/sglangparts/p01/install.sh    # a copy of this script travels in p01
#
# What it does:
#   1. checks that every piece listed in MANIFEST.txt is present,
#   2. copies the wheels into a scratch folder and re-joins split wheels
#      (cat NAME.whl.part00 NAME.whl.part01 ... > NAME.whl),
#   3. checks every wheel against SHA256SUMS (stops on any mismatch),
#   4. installs them with: python3 -m pip install --no-index --no-deps --target /tmp/sglang-site,
#   5. prints the versions SGLang will see of the packages it needs (warnings only),
#   6. tries: PYTHONPATH=/tmp/sglang-site python3 -c 'import sglang, sglang.srt.entrypoints.http_server'
#      and prints success or the error's tail (exit status 1 on failure); then, as a non-fatal extra,
#      the GPU path (sgl_kernel, flashinfer, xgrammar, the scheduler and the NGRAM worker) and the
#      draft-model path (dsa_backend, cutlass, deep_gemm: what STANDALONE imports at start).
#
# Environment knobs:
#   PYTHON=...                 interpreter (default /opt/torch/.venv/bin/python3, else python3)
#   TARGET=/tmp/sglang-site    --target folder
#   WHEELDIR=...               scratch folder for the re-joined wheels (default: mktemp -d)
#   KEEP_WHEELS=1              keep the scratch folder afterwards
set -uo pipefail

TARGET=${TARGET:-/tmp/sglang-site}

WHEELS_NAME=sglang
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/gather-wheels.sh"  # steps 1-3

# 4. install
mapfile -t wheels < <(awk '{print $2}' "$sums" | sed 's/^\*//' | sed "s|^|$WHEELDIR/|")
pipargs=(--no-index --no-deps --disable-pip-version-check --no-warn-script-location)
echo "== installing ${#wheels[@]} wheels into --target $TARGET (python: $PYTHON)"
mkdir -p "$TARGET"
"$PYTHON" -m pip install "${pipargs[@]}" --upgrade --target "$TARGET" "${wheels[@]}" || die "pip install failed"
[ "${KEEP_WHEELS:-0}" = 1 ] || rm -rf "$WHEELDIR"
# A .pth file is read in site folders only, never in a PYTHONPATH folder: nvidia-cutlass-dsl's
# (nvidia_cutlass_dsl.pth -> nvidia_cutlass_dsl/python_packages, where `cutlass` lives) was
# ignored on 2026-12-04. Link what each .pth names into the folder itself.
for pth in "$TARGET"/*.pth; do
  [ -f "$pth" ] || continue
  while IFS= read -r line || [ -n "$line" ]; do  # the last line may lack its newline
    case $line in ''|'#'*|import*) continue ;; esac
    case $line in /*) dir=$line ;; *) dir=$TARGET/$line ;; esac
    [ -d "$dir" ] || continue
    for entry in "$dir"/*; do
      [ -e "$TARGET/$(basename "$entry")" ] || ln -s "$entry" "$TARGET/"
    done
    echo "== linked $(ls "$dir" | wc -l) entries of $line (from $(basename "$pth")) into $TARGET"
  done < "$pth"
done
export PYTHONPATH="$TARGET${PYTHONPATH:+:$PYTHONPATH}"

# 5. versions as SGLang sees them (the --target folder first, then the image)
echo "== pin check with PYTHONPATH=$TARGET (warnings only)"
"$PYTHON" - <<'PYEOF'
from importlib.metadata import version, PackageNotFoundError
try:
    from packaging.specifiers import SpecifierSet
except Exception:
    SpecifierSet = None
pins = {  # the image's: what sglang 0.5.15, sglang-kernel 0.4.4, transformers 5.12.1 etc. require
    "torch": "==2.11.0", "torchvision": "", "torchaudio": "==2.11.0", "triton": "", "numpy": "",
    "scipy": "", "huggingface-hub": ">=1.5.0,<2.0", "safetensors": ">=0.4.3",
    "regex": ">=2025.10.22", "tqdm": ">=4.60", "pyyaml": ">=5.1", "filelock": "",
    "packaging": ">=24.2", "accelerate": ">=1.1.0", "requests": "", "aiohttp": "", "psutil": ">=7",
    "pillow": "", "einops": "", "ninja": "", "nvidia-ml-py": "", "sentencepiece": "", "tiktoken": "",
    "prometheus-client": ">=0.20.0", "uvloop": "", "jinja2": "", "anyio": ">=3.5.0,<5",
    "httpx": ">=0.23.0,<1", "h11": "", "click": "", "typing-extensions": ">=4.11", "typer": "",
    "pygments": ">=2.14.0", "tabulate": "", "cuda-bindings": ">=13.0",
    # carried: these must resolve to the --target folder's versions
    "sglang": "==0.5.15", "sglang-kernel": "==0.4.4", "transformers": "==5.12.1",
    "tokenizers": ">=0.22.0,<=0.23.0", "flashinfer-python": "==0.6.12", "apache-tvm-ffi": "==0.1.11",
    "xgrammar": "==0.2.1", "openai": "==2.6.1", "openai-harmony": "==0.0.4",
}
bad = 0
for name, spec in pins.items():
    try:
        v = version(name)
    except PackageNotFoundError:
        print(f"   MISSING  {name} {spec}"); bad += 1; continue
    ok = True
    if spec and SpecifierSet is not None:
        try:
            ok = SpecifierSet(spec).contains(v.split("+")[0], prereleases=True)
        except Exception:
            ok = True
    bad += not ok
    print(f"   {'ok  ' if ok else 'WARN'}  {name}=={v}  (wants {spec or 'any'})")
print(f"   {bad} warning(s); a WARN is not necessarily fatal")
PYEOF

# 6. import test
echo "== import test: PYTHONPATH=$TARGET python3 -c 'import sglang, sglang.srt.entrypoints.http_server'"
if out=$("$PYTHON" -c 'import sglang, sglang.srt.entrypoints.http_server; print("sglang", sglang.__version__, "from", sglang.__file__)' 2>&1); then
  echo "$out" | tail -n 3
  echo "IMPORT SUCCESS"
  rc=0
else
  echo "$out" | tail -n 40
  echo "IMPORT FAILED"
  rc=1
fi
echo "== GPU path (non-fatal): sgl_kernel, flashinfer, xgrammar, scheduler, NGRAM worker"
gpu='import sgl_kernel, flashinfer, xgrammar, sglang.srt.managers.scheduler, sglang.srt.speculative.ngram_worker
print("sgl_kernel", sgl_kernel.__version__, "flashinfer", flashinfer.__version__)'
if out=$("$PYTHON" -c "$gpu" 2>&1); then
  echo "$out" | tail -n 3; echo "GPU-PATH IMPORT SUCCESS"
else
  echo "$out" | tail -n 25; echo "GPU-PATH IMPORT FAILED: $(echo "$out" | grep -E 'Error' | tail -1)"
fi
# a draft model (STANDALONE, EAGLE) captures its draft's CUDA graphs through dsa_backend, which
# imports cutlass and deep_gemm on any CUDA GPU; NGRAM never does
draft='import sglang.srt.layers.attention.dsa_backend, cutlass, deep_gemm
print("cutlass", cutlass.__file__, "deep_gemm", deep_gemm.__file__)'
if out=$("$PYTHON" -c "$draft" 2>&1); then
  echo "$out" | tail -n 2; echo "DRAFT-PATH IMPORT SUCCESS"
else
  echo "$out" | tail -n 15; echo "DRAFT-PATH IMPORT FAILED: $(echo "$out" | grep -E 'Error' | tail -1)"
fi

cat <<EOF

To run (the NGRAM corpus is JIT-compiled by tvm-ffi on first use: needs g++ and ninja):
  export PYTHONPATH=$TARGET\${PYTHONPATH:+:\$PYTHONPATH}
  export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
  $PYTHON -m sglang.launch_server --model-path /path/to/model --port 30000
  $PYTHON -m sglang.launch_server --model-path /path/to/model --port 30000 \\
      --speculative-algorithm NGRAM --speculative-num-draft-tokens 5 \\
      --speculative-ngram-max-bfs-breadth 1 --speculative-ngram-max-trie-depth 4
  # optional: --grammar-backend none skips creating the xgrammar backend at start
  # synthetic acceptance: SGLANG_SIMULATE_ACC_LEN=2.5 (mean accepted length incl. the bonus token;
  # SGLANG_SIMULATE_ACC_METHOD=match-expected|multinomial, SGLANG_SIMULATE_ACC_TOKEN_MODE=fixed)
EOF
exit $rc
