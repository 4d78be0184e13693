"""What a service's flags say about its memory: the engines' flag names, their defaults
and the draft model a method names (for `collect.planning.memory`'s budget). Flags are read in
launch order (engine args, method args, tp_args), the last occurrence winning as in the
engines' argparse."""

from __future__ import annotations

import json
from dataclasses import dataclass

from collect.plan.model import ServiceConfig


@dataclass(frozen=True)
class EngineRules:
    """Where an engine's flags put the numbers the budget reads."""

    fraction_flag: str
    context_flag: str
    state_ratio_flag: str | None  # None: states come out of the shared pool (vLLM)


RULES = {
    "sglang": EngineRules("--mem-fraction-static", "--context-length", "--mamba-full-memory-ratio"),
    "vllm": EngineRules("--gpu-memory-utilization", "--max-model-len", None),
}
SGLANG_STATE_RATIO = 0.9


def flag(args: list[str], name: str) -> str | None:
    """The value of the last `name V` or `name=V` in args (the engines' argparse keeps it)."""
    value = None
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
    return value


def service_args(config: ServiceConfig) -> list[str]:
    """Flags in launch order: engine args, method args, then tp_args (as collect.run.service)."""
    e = config.engine
    return [*e.args, *config.method.args, *e.tp_args.get(config.tp, [])]


def mem_fraction(kind: str, args: list[str], gpu_gib: float, tp: int) -> tuple[float, str]:
    """The flag's value, else the engine's default: vLLM 0.9; SGLang reserves at least
    10 GiB on GPUs above 60 GiB, else about 3.5 GiB + tp/8 GiB (its own estimate)."""
    rules = RULES[kind]
    given = flag(args, rules.fraction_flag)
    if given is not None:
        return float(given), rules.fraction_flag
    if kind == "vllm":
        return 0.9, f"{rules.fraction_flag} default"
    reserved = 10.0 if gpu_gib > 60 else 3.5 + tp / 8
    return 1 - reserved / gpu_gib, f"SGLang's default estimate: {reserved:g} GiB reserved"


def draft_path(kind: str, args: list[str]) -> str | None:
    """The draft model a method's flags name (SGLang's flag, vLLM's speculative-config)."""
    if kind == "sglang":
        return flag(args, "--speculative-draft-model-path")
    spec = flag(args, "--speculative-config")
    return json.loads(spec).get("model") if spec else None


def draft_tokens(kind: str, args: list[str]) -> int:
    """Tokens verified per step, for which SGLang keeps intermediate linear states."""
    given = flag(args, "--speculative-num-draft-tokens") if kind == "sglang" else None
    return int(given) if given else 0
