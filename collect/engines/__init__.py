"""Engine adapters: how to launch a server, when it is ready, how to send one request and
where its speculative statistics are. `create(cfg)` picks the adapter for a plan's engine."""

from __future__ import annotations

from collect.engines.llamacpp import LlamaCpp
from collect.plan import LlamaCppEngine


def create(cfg: LlamaCppEngine) -> LlamaCpp:
    if cfg.kind == "llamacpp":
        return LlamaCpp(cfg)
    raise ValueError(f"unknown engine kind {cfg.kind!r}")
