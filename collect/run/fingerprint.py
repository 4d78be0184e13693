"""The environment rows: the host's and the campaign's facts (`record_environment`), written
latest-value-wins (`put_environment`); and what changes acceptance, recorded per service in
`environment` (keys `service.<method>.tp<tp>.<name>`) next to what the server says about
itself:

- `request_path`, `request_body`: the body the adapter sends, as sorted JSON with the prompt
  (`messages` / `text` / `prompt`) and the per-window token limit (`max_tokens`,
  `sampling_params.max_new_tokens`) left out, secrets redacted: sampling parameters,
  stream options, `request_extra` (e.g. chat_template_kwargs: thinking mode collapses some
  drafters' acceptance).
- `draft_model`: the draft model the method's launch flags name ({model} expanded);
  `draft_model_bytes`: its size on the host (`du -sbL`, symlinks followed as in a hub
  cache), absent when the host cannot say (a hub id, no such path, an external host).
- `chat_template_sha256`, `chat_template_source`: the chat template the server applies (sha256
  of its text) and where it came from (collect/engines/templates.py; llama.cpp's GET /props,
  SGLang's plan or tokenizer_config.json template, a `--chat-template` flag, the model's own);
  '' and 'unknown' when nothing says. `thinking`: the reasoning/thinking settings in force,
  sorted JSON of the request_extra fields and launch flags whose names say think or reason
  (chat_template_kwargs.enable_thinking, reasoning_effort, --reasoning-parser, ...); ''
  when none is set.

And per workload, from the plan and the request body (`workload_facts`, host 'campaign';
keys `workload.<name>.prompt.<name>`): `system` (the system message; one longer than
SYSTEM_MAX characters is stored as `sha256:<hex> chars:<n>`, not its text), `temperature`
('' when the body leaves it to the server), `sampling` (sorted JSON of every sampling field
the body carries, the token limit as the workload's max_tokens list), `stop` (JSON of the
stop strings or ids, '' without), `template` (sha256 of the prompt source's template, only
for workloads that have one). Every text is redacted as the request body is. A trace workload
with `text:` adds `workload.<name>.text.*` (TraceWorkload.text_facts, docs/trace-text.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any

from specsweep.collect.hosts.base import Site
from specsweep.collect.plan.load import TraceWorkload
from specsweep.collect.plan.model import Plan
from specsweep.collect.redact import MASK, SECRET_NAME, redact
from specsweep.collect.resources import resolve_model
from specsweep.schema.store import Store

PROMPT_KEYS = ("messages", "text", "prompt", "input_ids")
TRANSPORT_KEYS = ("stream", "stream_options", "model", "return_spec_tokens_details")
STOP_KEYS = ("stop", "stop_token_ids")
SYSTEM_MAX = 200  # longer system prompts are stored as their hash and length
THINKING = re.compile(r"think|reason", re.IGNORECASE)
DU_TIMEOUT_S = 60.0


def request_facts(engine: Any) -> dict[str, str]:
    """request_path and request_body of one request, prompt and token limit left out;
    {} when the adapter cannot build one (e.g. no chat template)."""
    try:
        path, body = engine.request([{"role": "user", "content": ""}], 1)
    except Exception:  # noqa: BLE001 - a fingerprint never fails a service
        return {}
    body = {k: v for k, v in body.items() if k not in PROMPT_KEYS and k != "max_tokens"}
    sampling = body.get("sampling_params")
    if isinstance(sampling, dict):
        body["sampling_params"] = {k: v for k, v in sampling.items() if k != "max_new_tokens"}
    text = json.dumps(_redacted(body), sort_keys=True, default=str)
    return {"request_path": path, "request_body": text}


def _redacted(value: Any) -> Any:
    """value with secret-named keys' text values masked (a flag such as return_token_ids:
    true stays) and every string redacted; still JSON."""
    if isinstance(value, dict):
        return {
            k: MASK if SECRET_NAME.search(str(k)) and isinstance(v, str) else _redacted(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    return redact(value) if isinstance(value, str) else value


def prompt_facts(engine: Any, method: Any, host: Any, served: dict[str, str]) -> dict[str, str]:
    """chat_template_sha256/source (the adapter's, unless the server's own fingerprint
    `served` has them; else '' / 'unknown') and thinking."""
    out = {"thinking": thinking(engine.cfg.request_extra, [*engine.cfg.args, *method.args])}
    if "chat_template_source" in served:
        return out
    try:
        template = engine.template_facts(method, host)
    except Exception:  # noqa: BLE001 - a fingerprint never fails a service
        template = {}
    out["chat_template_sha256"] = template.get("chat_template_sha256", "")
    out["chat_template_source"] = redact(template.get("chat_template_source", "unknown"))
    return out


def thinking(extra: dict[str, Any], args: list[str]) -> str:
    """Sorted JSON of the thinking/reasoning settings: request_extra fields (and those of
    its chat_template_kwargs) and launch flags whose names match THINKING; '' for none."""
    kwargs = extra.get("chat_template_kwargs")
    found = {k: v for k, v in extra.items() if THINKING.search(k)}
    if isinstance(kwargs, dict):
        found |= {f"chat_template_kwargs.{k}": v for k, v in kwargs.items() if THINKING.search(k)}
    for i, arg in enumerate(args):
        if arg.startswith("-") and THINKING.search(arg):
            name, _, value = arg.partition("=")
            nxt = args[i + 1] if i + 1 < len(args) else ""
            found[name] = value or (nxt if nxt and not nxt.startswith("-") else True)
    return json.dumps(_redacted(found), sort_keys=True, default=str) if found else ""


def workload_facts(engine: Any, workloads: list[Any]) -> dict[str, str]:
    """`workload.<name>.prompt.*` of every workload (see the module docstring)."""
    body = _sampling_body(engine)
    out: dict[str, str] = {}
    for w in workloads:
        key = f"workload.{w.name}.prompt"
        limit = getattr(w, "max_tokens", None) or "per trace line"
        sampling = {**body, "max_tokens": limit} if body is not None else None
        out[f"{key}.system"] = _system(w.system)
        out[f"{key}.temperature"] = _temperature(body)
        out[f"{key}.sampling"] = (
            json.dumps(sampling, sort_keys=True, default=str) if sampling is not None else "unknown"
        )
        stops = {k: v for k, v in (body or {}).items() if k in STOP_KEYS}
        out[f"{key}.stop"] = json.dumps(stops, sort_keys=True) if stops else ""
        template = getattr(getattr(w, "prompts", None), "template", None)
        if template is not None:
            out[f"{key}.template"] = _sha256(template)
        if isinstance(w, TraceWorkload):  # the real text a trace drew (docs/trace-text.md)
            out.update({f"workload.{w.name}.text.{k}": v for k, v in w.text_facts().items()})
    return out


def _sampling_body(engine: Any) -> dict[str, Any] | None:
    """The request body's sampling fields, sampling_params flattened into it, prompt,
    transport and token limit left out, redacted; None when no body can be built."""
    try:
        _, body = engine.request([{"role": "user", "content": ""}], 1)
    except Exception:  # noqa: BLE001 - e.g. no chat template yet: recorded as unknown
        return None
    nested = body.get("sampling_params")
    flat = {**body, **(nested if isinstance(nested, dict) else {})}
    drop = {*PROMPT_KEYS, *TRANSPORT_KEYS, "sampling_params", "max_tokens", "max_new_tokens"}
    return _redacted({k: v for k, v in flat.items() if k not in drop})


def _temperature(body: dict[str, Any] | None) -> str:
    value = (body or {}).get("temperature")
    return "" if value is None else repr(value)


def _system(text: str | None) -> str:
    """The system message, redacted; its hash and length when longer than SYSTEM_MAX."""
    if not text:
        return ""
    if len(text) > SYSTEM_MAX:
        return f"sha256:{_sha256(text)} chars:{len(text)}"
    return redact(text)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def draft_facts(engine: Any, method: Any, host: Any) -> dict[str, str]:
    """draft_model (and draft_model_bytes when the host can measure it); {} without one."""
    path = engine.draft_model(method)
    if not path:
        return {}
    facts = {"draft_model": redact(path)}
    size = _size(host, path)
    if size is not None:
        facts["draft_model_bytes"] = str(size)
    return facts


def _size(host: Any, path: str) -> int | None:
    """Bytes under path on the host (`du -sbL`), None when that fails."""
    run = getattr(host, "run", None)
    if not callable(run):
        return None
    if path.startswith("~"):
        remote = getattr(host, "remote_path", None)
        path = str(remote(path)) if callable(remote) else os.path.expanduser(path)
    try:
        code, out, _ = run(["du", "-sbL", "--", path], timeout_s=DU_TIMEOUT_S)
    except Exception:  # noqa: BLE001 - an unreachable host: the path alone is recorded
        return None
    first = out.split()[0] if code == 0 and out.split() else ""
    return int(first) if first.isdigit() else None


def put_environment(store: Store, campaign_id: str, host: str, facts: dict[str, str]) -> None:
    """Latest value wins: a resumed campaign refreshes what it measured again."""
    with store.transaction():
        for key in facts:
            store.execute(
                "DELETE FROM environment WHERE campaign_id = ? AND host = ? AND key = ?",
                [campaign_id, host, key],
            )
        store.append(
            "environment",
            [
                {"campaign_id": campaign_id, "host": host, "key": k, "value": str(v)}
                for k, v in facts.items()
            ],
        )


def record_environment(store: Store, campaign_id: str, host: Site, plan: Plan) -> None:
    """The host's fingerprint and the campaign's facts (engine, model, specsweep version,
    what else runs on the GPUs, the price), and the plan's latency objectives."""
    facts = host.fingerprint()
    facts["engine.kind"] = plan.engine.kind
    # a package:// model only exists on this machine; other paths are the host's
    facts["engine.model"] = (
        resolve_model(plan.engine.model) if plan.host.kind == "local" else plan.engine.model
    )
    facts["specsweep.version"] = specsweep_version()
    if hasattr(host, "gpu_processes"):  # what else runs on the GPUs as the campaign starts
        facts["gpu.processes"] = json.dumps(host.gpu_processes(), sort_keys=True)
    if plan.gpu_hour_usd is not None:  # for cost per million output tokens (analyze)
        facts["price.gpu_hour_usd"] = repr(plan.gpu_hour_usd)
    put_environment(store, campaign_id, host.name, facts)
    # the latency objectives analysis reads (not measurements: a resume may change them)
    store.execute(
        "DELETE FROM environment WHERE campaign_id = ? AND host = 'campaign' AND key LIKE 'slo.%'",
        [campaign_id],
    )
    if plan.slo is not None:
        put_environment(store, campaign_id, "campaign", plan.slo.environment())


def specsweep_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("specsweep")
    except PackageNotFoundError:
        return "unknown"
