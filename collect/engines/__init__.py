"""Engine adapters: how to launch a server, when it is ready, how to send one request and
where its speculative statistics are. `create(cfg)` picks the adapter for a plan's engine."""

from __future__ import annotations

from collect.engines.llamacpp import LlamaCpp
from collect.engines.sglang import SGLang
from collect.engines.vllm import VLLM
from collect.plan.components import Engine

Adapter = LlamaCpp | SGLang | VLLM


def create(cfg: Engine) -> Adapter:
    if cfg.kind == "llamacpp":
        return LlamaCpp(cfg)
    if cfg.kind == "sglang":
        return SGLang(cfg)
    if cfg.kind == "vllm":
        return VLLM(cfg)
    raise ValueError(f"unknown engine kind {cfg.kind!r}")
