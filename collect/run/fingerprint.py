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
"""

from __future__ import annotations

import json
import os
from typing import Any

from collect.hosts.base import Site
from collect.plan.model import Plan
from collect.redact import MASK, SECRET_NAME, redact
from collect.resources import resolve_model
from schema.store import Store

PROMPT_KEYS = ("messages", "text", "prompt", "input_ids")
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
