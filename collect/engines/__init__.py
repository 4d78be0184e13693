"""Engine adapters, one module per engine owning all its knowledge: its plan model, launch flags,
stream parser, fingerprint, scrapes, memory rules and result-file format.

A module here is an engine when it defines `KIND` (the plan's `engine.kind`), `Config` (its
pydantic plan model) and `Adapter` (a class satisfying `collect.engines.base.Engine`, built from
a `Config`). Modules are found by listing this package's `__path__`, so adding an engine is
adding one module; `create(cfg)` (`registry`) picks the adapter for a plan's engine. The
registry is what the plan reads (`config_models()` builds its `engine` union): the plan imports
the engines, never the reverse. The helper modules beside them: `base` (the protocols), `config`
(the plan model every `Config` subclasses), `openai` (the OpenAI-compatible chat stream and
/metrics the adapters share; no adapter imports another), `acceptance` (the one acceptance
definition).
"""

from specsweep.collect.engines.registry import config_models, create, modules, result_formats

__all__ = ["config_models", "create", "modules", "result_formats"]
