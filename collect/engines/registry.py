"""The engine registry: every module of collect.engines that defines `KIND` is an engine
(the package docstring); `create(cfg)` builds the adapter for a plan's engine."""

from __future__ import annotations

import functools
import importlib
import pkgutil
from types import ModuleType
from typing import Any

from specsweep.collect import engines as package  # the package whose modules are the engines
from specsweep.collect.engines.base import Engine, ResultFormat


@functools.cache
def modules() -> dict[str, ModuleType]:
    """Every engine module by KIND, in module-name order (which orders the plan's union)."""
    found: dict[str, ModuleType] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        if "KIND" not in vars(module):  # helper modules (base, chat templates) have none
            continue
        kind = module.KIND
        if kind in found:
            raise ValueError(
                f"engine kind {kind!r} defined twice: {found[kind].__name__}, {module.__name__}"
            )
        found[kind] = module
    return found


def config_models() -> list[type[Any]]:
    """The plan models of every engine, for the plan's `engine` union."""
    return [m.Config for m in modules().values()]


def result_formats() -> dict[str, ResultFormat]:
    """The result-file format of every engine whose benchmark tool `collect import` reads."""
    return {k: m.RESULT_FILE for k, m in modules().items() if "RESULT_FILE" in vars(m)}


def create(cfg: Any) -> Engine:
    """The adapter for a plan's engine (`cfg.kind` names its module's KIND)."""
    module = modules().get(cfg.kind)
    if module is None:
        raise ValueError(f"unknown engine kind {cfg.kind!r}; known: {', '.join(modules())}")
    return module.Adapter(cfg)
