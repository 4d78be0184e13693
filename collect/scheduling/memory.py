"""The memory budget of a plan's services, for `collect check`: does each one fit its GPUs?

Per GPU of a service at tensor-parallel size tp (GiB = 2^30 bytes throughout):

    weights  = (target + draft) / tp            the draft is sharded like the target
    static   = GPU memory x mem fraction        weights + cache pools, what the engine may take
    pool     = static - weights                 KV cache + linear-attention states
    KV/token = 2 x KV layers x ceil(kv_heads / tp) x head_dim x dtype bytes  (target + draft)
    state/sequence = linear layers x (conv + recurrent state) / tp  (hybrid models only)

Sources (SGLang, read 2026): `--mem-fraction-static` is "the fraction of the memory used
for static allocation (model weights and KV cache memory pool)"; without it SGLang derives
it from the GPU size, reserving at least 10 GiB on GPUs above 60 GiB (server_args
`_handle_gpu_memory_settings`). vLLM's `--gpu-memory-utilization` (default 0.9) is the
share of the GPU the instance may use for weights, activations and KV cache. The DFlash
draft runs as a `TpModelWorker` with the target's tp rank and tp-parallel linear layers
(speculative/dflash_worker.py, models/dflash.py), so its weights are sharded, not
replicated, and its own KV pool is added to the target's bytes per token
(model_executor/pool_configurator.py, `scale_kv_cell_size_per_token_for_dflash`).
Hybrid models (Gated DeltaNet linear-attention layers): SGLang gives the linear states
`--mamba-full-memory-ratio` / (1 + ratio) of the pool (default ratio 0.9) and the KV cache
the rest; with speculative decoding it also keeps an intermediate state per draft token
(`_handle_max_mamba_cache`). The conv state has (conv_kernel - 1) x (2 x key_heads x key_dim
+ value_heads x value_dim) values in the model dtype, the recurrent state value_heads x
key_dim x value_dim in `mamba_ssm_dtype` (default float32) (configs/mamba_utils.py).
vLLM takes the states from the same pool as the KV cache, so there they are subtracted.

Weights come from the plan's `model_info`, else (`check --probe`) from the model's files
over the host (collect.scheduling.weights: sharded or single-file safetensors, a GGUF file's
size). The draft is the model a method's flags name: vLLM's `--speculative-config` "model"
(a draft_model, EAGLE or DFlash head), SGLang's `--speculative-draft-model-path`; `{model}`
there is the target itself, loaded a second time, so it is counted twice.

Not modelled: activations and CUDA graphs (outside the static fraction for SGLang, a few
GiB inside vLLM's), sliding windows (a sliding layer is counted as a full KV layer, an
over-estimate), `--max-mamba-cache-size`, SGLang's extra mamba slots for radix caching.
Prompt lengths are estimated without a tokenizer as characters / 3 + 32 per message,
which over-counts for English text and code (3.5-4.5 characters per token).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specsweep.collect.engines.base import MemoryRules, flag
from specsweep.collect.plan.fields import EngineConfig, ModelInfo
from specsweep.collect.plan.load import TraceWorkload
from specsweep.collect.plan.model import Plan, ServiceConfig
from specsweep.collect.plan.workloads import AgenticWorkload, longest_session, prompts
from specsweep.collect.scheduling.architecture import DTYPE_BYTES, Architecture, architecture
from specsweep.collect.scheduling.weights import config_path, weight_bytes

GIB = 1 << 30


def service_args(config: ServiceConfig) -> list[str]:
    """Flags in launch order: engine args, method args, then tp_args (as collect.run.service)."""
    e = config.engine
    return [*e.args, *config.method.args, *e.tp_args.get(config.tp, [])]


def memory_rules(engine: EngineConfig) -> MemoryRules:
    """The engine's memory rules; engines without them get no budget (see _budgets)."""
    if engine.memory is None:
        raise ValueError(f"engine {engine.kind!r} has no memory rules")
    return engine.memory


TIGHT_SHARE = 0.8  # above 80% of the KV pool a config is TIGHT: estimates, fragmentation
CHARS_PER_TOKEN = 3
MESSAGE_OVERHEAD_TOKENS = 32
FITS, TIGHT, NO_FIT = "FITS", "TIGHT", "DOES NOT FIT"
_RANK = {FITS: 0, TIGHT: 1, NO_FIT: 2}

# --- the arithmetic ----------------------------------------------------------------------


def weights_per_gpu(target_gib: float, draft_gib: float, tp: int) -> float:
    """(target + draft) / tp: both are sharded over the tp ranks."""
    return (target_gib + draft_gib) / tp


def kv_bytes_per_token(arch: Architecture, tp: int, dtype_bytes: int | None = None) -> int:
    """2 (K and V) x KV layers x ceil(kv_heads / tp) x head_dim x dtype bytes. With fewer KV
    heads than GPUs every GPU keeps a whole head: the heads are replicated, not split."""
    per_elem = dtype_bytes or arch.dtype_bytes
    return 2 * arch.kv_layers * math.ceil(arch.kv_heads / tp) * arch.head_dim * per_elem


def linear_state_bytes(arch: Architecture, tp: int) -> int:
    """Per sequence: linear layers x (conv state + recurrent state), both split over tp.
    conv = (conv_kernel - 1) x ceil((2 x key_heads x key_dim + value_heads x value_dim) / tp)
    x dtype bytes; recurrent = ceil(value_heads / tp) x key_dim x value_dim x state bytes."""
    conv_dim = 2 * arch.key_heads * arch.key_dim + arch.value_heads * arch.value_dim
    conv = (arch.conv_kernel - 1) * math.ceil(conv_dim / tp) * arch.dtype_bytes
    recurrent = math.ceil(arch.value_heads / tp) * arch.key_dim * arch.value_dim
    return arch.linear_layers * (conv + recurrent * arch.state_bytes)


def static_pool_gib(gpu_gib: float, fraction: float, weights_gib: float) -> float:
    """GPU memory x mem fraction - weights per GPU: what is left for caches."""
    return gpu_gib * fraction - weights_gib


def tokens_that_fit(pool_gib: float, bytes_per_token: int) -> int:
    """Whole tokens of bytes_per_token in pool_gib (0 for an empty or negative pool)."""
    return max(0, int(pool_gib * GIB // bytes_per_token)) if bytes_per_token else 0


def split_pool(
    pool_gib: float, states_gib: float, state_ratio: float | None
) -> tuple[float, float]:
    """(KV share, state share) of the pool. SGLang: state_ratio / (1 + state_ratio) for the
    states whatever the load; otherwise (vLLM) the states the load needs come out first."""
    if state_ratio is None:
        return pool_gib - states_gib, states_gib
    return pool_gib / (1 + state_ratio), pool_gib * state_ratio / (1 + state_ratio)


def verdict(needed_tokens: int, kv_tokens: int, states_ok: bool) -> str:
    """DOES NOT FIT when the load or the states do not fit, TIGHT above TIGHT_SHARE."""
    if not states_ok or needed_tokens > kv_tokens:
        return NO_FIT
    return TIGHT if needed_tokens > TIGHT_SHARE * kv_tokens else FITS


def prompt_tokens(text: str) -> int:
    """A prompt's tokens estimated without a tokenizer: characters / 3 + message overhead."""
    return math.ceil(len(text) / CHARS_PER_TOKEN) + MESSAGE_OVERHEAD_TOKENS


def workload_peak(workload: Any) -> tuple[int, int]:
    """(most tokens cached at once, most sequences at once) over the workload's windows:
    concurrency x (longest prompt + max_tokens); an agentic session's last turn holds every
    earlier message and reply; an open-loop window holds at most its max_concurrency, and
    without one possibly every request it schedules (the only bound the plan gives)."""
    system = prompt_tokens(workload.system) if workload.system else 0
    if isinstance(workload, AgenticWorkload):
        turns = longest_session(workload)
        context = system + sum(prompt_tokens(t.content) for t in turns)
        per_seq = [context + mt * len(turns) for mt in workload.max_tokens]
    elif isinstance(workload, TraceWorkload):
        per_seq = [
            max(
                sum(prompt_tokens(m["content"]) for m in i.messages) + i.max_tokens
                for i in workload.items()
            )
        ]
    else:
        longest = system + max(prompt_tokens(p.text) for p in prompts(workload.prompts))
        per_seq = [longest + mt for mt in workload.max_tokens]
    most = max(workload.concurrency)
    load = getattr(workload, "load", None)
    if load is not None:  # open loop: its cap, else every request a window schedules at once
        most = load.max_concurrency or max(load.window_requests(r) for r in load.windows())
    return most * max(per_seq), most


# --- a plan's services -------------------------------------------------------------------


@dataclass(frozen=True)
class Model:
    """A model's weights and architecture, from the plan or read over the host."""

    weights_gib: float
    arch: Architecture


def read_model(info: ModelInfo | None, path: str | None, host: Any, field: str) -> Model | str:
    """The model's weights and config: the plan's values, else (with a probed host) the
    model's config.json and the bytes its weight files hold (collect.scheduling.weights:
    sharded or single-file safetensors, or a GGUF file); a str says what is missing."""
    info = info or ModelInfo()
    try:
        config = info.config
        if isinstance(config, str):
            config = json.loads(Path(config).expanduser().read_text())
        elif config is None and host is not None and path:
            config = json.loads(host.read_file(config_path(path)))
        weights_gib = info.weights_gib
        if weights_gib is None and host is not None and path:
            weights_gib = weight_bytes(host, path) / GIB
    except (OSError, ValueError, KeyError) as exc:
        return f"{field}: cannot read the model's files ({exc})"
    if config is None or weights_gib is None:
        return f"add {field} {{weights_gib, config}}, or run check --probe"
    try:
        return Model(weights_gib, architecture(config))
    except (KeyError, TypeError, ValueError) as exc:
        return f"{field}.config lacks or mistypes {exc}"


@dataclass(frozen=True)
class Budget:
    """One service's budget: its verdict and the lines `check` prints."""

    label: str
    verdict: str
    lines: tuple[str, ...]


def budget(
    config: ServiceConfig, gpu_gib: float, target: Model, draft: Model | None, peak: tuple[int, int]
) -> Budget:
    """The budget of one service at its tp for a load of peak = (tokens, sequences)."""
    tp, args, rules = config.tp, service_args(config), memory_rules(config.engine)
    fraction, fraction_src = rules.fraction(args, gpu_gib, tp)
    draft_gib = draft.weights_gib if draft else 0.0
    weights = weights_per_gpu(target.weights_gib, draft_gib, tp)
    pool = static_pool_gib(gpu_gib, fraction, weights)
    kv_dtype = DTYPE_BYTES.get(flag(args, "--kv-cache-dtype") or "auto")
    per_token = kv_bytes_per_token(target.arch, tp, kv_dtype)
    per_token += kv_bytes_per_token(draft.arch, tp, kv_dtype) if draft else 0
    d = rules.draft_tokens(args) if draft else 0
    per_seq = linear_state_bytes(target.arch, tp) * (1 + d) / GIB
    needed_tokens, sequences = peak
    ratio = rules.state_ratio(args)
    kv_pool, state_pool = split_pool(pool, per_seq * sequences, ratio if per_seq else None)
    kv_tokens = tokens_that_fit(kv_pool, per_token)
    states_ok = pool > 0 and per_seq * sequences <= state_pool
    context = int(flag(args, rules.context_flag) or target.arch.max_positions or 0)
    result = verdict(needed_tokens, kv_tokens, states_ok)
    if result == FITS and context > kv_tokens:
        result = TIGHT  # the engine starts, but one full-context request would not fit
    lines = [
        f"weights {weights:.2f} GiB = ({target.weights_gib:.2f} target + {draft_gib:.2f} "
        f"draft) / {tp}",
        f"pool    {pool:.2f} GiB = {gpu_gib:.1f} GiB x {fraction:.3g} ({fraction_src}) - weights",
    ]
    if per_seq:
        spec = f", x{1 + d} for {d} draft tokens" if d else ""
        lines.append(
            f"states  {per_seq:.3f} GiB/sequence ({target.arch.linear_layers} linear layers"
            f"{spec}) x {sequences} = {per_seq * sequences:.2f} of {state_pool:.2f} GiB"
        )
    draft_layers = f" + {draft.arch.kv_layers} draft" if draft else ""
    lines.append(
        f"KV      {per_token / 1024:.1f} KiB/token ({target.arch.kv_layers}{draft_layers} KV "
        f"layers) -> {kv_tokens:,} tokens in {max(kv_pool, 0):.2f} GiB"
    )
    share = f"{needed_tokens / kv_tokens:.1%}" if kv_tokens else "all"
    fits = "fits" if context <= kv_tokens else "does NOT fit"
    lines.append(
        f"context {context:,} tokens per sequence {fits}; plan peak "
        f"{needed_tokens:,} tokens = {share} of the KV cache"
    )
    return Budget(f"{config.phase}/{config.method.name}", result, tuple(lines))


def plan_configs(plan: Plan) -> list[ServiceConfig]:
    """Every service a phase may start: a best_of phase may pick any method at its tp."""
    names = [m.name for m in plan.methods]
    return [
        c
        for p in plan.all_phases()
        for c in plan.phase_configs(p, p.methods if isinstance(p.methods, list) else names)
    ]


def gpu_lines(plan: Plan, host: Any) -> tuple[list[str], float | None, bool]:
    """GPU availability lines, the GPU memory (GiB) to budget with, and whether the host
    has fewer GPUs than the largest phase needs. `host` is a probed host or None."""
    from specsweep.collect.hosts import facts

    declared, gpu_gib = plan.host.gpus, plan.host.gpu_memory_gib
    need = max(p.tp for p in plan.all_phases())
    lines = [
        f"GPUs: declared {declared} ({len(declared)}); phases need up to {need}"
        if declared is not None
        else f"GPUs: not declared (host.gpus); phases need up to {need}"
    ]
    count = len(declared) if declared is not None else None
    if host is not None:
        memory, busy = facts.gpu_memory_mib(host), host.busy_gpus()
        listed = (
            ", ".join(
                f"{i}: {mib / 1024:.1f} GiB {'busy' if i in busy else 'free'}"
                for i, mib in sorted(memory.items())
            )
            or "nvidia-smi lists none"
        )
        lines.append(f"GPUs on {host.name} (probed): {listed}")
        count = len(host.gpu_indices())
        gpu_gib = gpu_gib or (min(memory.values()) / 1024 if memory else None)
    short = count is not None and count < need
    if short:
        lines.append(f"DOES NOT FIT: a phase needs {need} GPUs, the host has {count}")
    return lines, gpu_gib, short


def check_plan(plan: Plan, probe: bool = False) -> tuple[list[str], bool]:
    """`check`'s GPU and memory lines, and whether some service does not fit. Only with
    probe does it connect to the host (GPUs, memory, the model folders' files)."""
    from specsweep.collect import hosts

    if plan.host.kind == "external":
        return ["memory: not checked (an external server: specsweep does not start it)"], False
    host = hosts.create(plan.host) if probe else None
    try:
        lines, gpu_gib, short = gpu_lines(plan, host)
        budgets = _budgets(plan, host, gpu_gib)
    finally:
        if host is not None:
            host.close()
    if isinstance(budgets, str):
        return [*lines, f"memory: not checked ({budgets})"], short
    lines.append(
        f"memory budget per GPU (GiB = 2^30 bytes; TIGHT above {TIGHT_SHARE:.0%} "
        "of the KV cache, or when one full-context sequence would not fit):"
    )
    groups: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for b in budgets:  # methods with the same numbers (same draft) share one entry
        groups.setdefault((b.verdict, b.lines), []).append(b.label)
    for (result, detail), labels in groups.items():
        lines.append(f"  {', '.join(labels)}: {result}")
        lines += [f"    {line}" for line in detail]
    return lines, short or any(b.verdict == NO_FIT for b in budgets)


def _budgets(plan: Plan, host: Any, gpu_gib: float | None) -> list[Budget] | str:
    """Every config's budget, or why none can be computed."""
    rules = plan.engine.memory
    if rules is None:
        return (
            f"{plan.engine.kind} has no memory rules: its server allocates what its flags "
            "ask at start-up, and one that does not fit fails and is skipped"
        )
    if gpu_gib is None:
        return "add host.gpu_memory_gib, or run check --probe"
    target = read_model(plan.engine.model_info, plan.engine.model, host, "engine.model_info")
    if isinstance(target, str):
        return target
    peaks = {w.name: workload_peak(w) for w in plan.workloads}
    result = []
    for config in plan_configs(plan):
        index = plan.methods.index(config.method)
        path = rules.draft_path(service_args(config))
        if path and plan.engine.model:  # the launch expands {model}: a target drafting itself
            path = path.replace("{model}", plan.engine.model)
        draft = None
        if path or config.method.draft:
            draft = read_model(config.method.draft, path, host, f"methods[{index}].draft")
        label = f"{config.phase}/{config.method.name}"
        if isinstance(draft, str):
            result.append(Budget(label, "not checked", (draft,)))
            continue
        loads = [peaks[w.name] for w in plan.workloads_of(config)] or [(0, 0)]
        peak = (max(t for t, _ in loads), max(s for _, s in loads))
        result.append(budget(config, gpu_gib, target, draft, peak))
    return result
