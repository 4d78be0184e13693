"""Which chat template a server applies and where it came from, for the service fingerprint
(`chat_template_sha256`, `chat_template_source`; collect/run/fingerprint.py records them).

The hash is sha256 of the template text (not of the file holding it), so the same template
read from a GGUF, a tokenizer_config.json or a `--chat-template` file hashes the same. A
server that renders prompts itself (vLLM, SGLang's chat API) applies, in order: its
`--chat-template` flag (a file, or vLLM's inline template), else the model's
`chat_template.jinja`, else the `chat_template` of its tokenizer_config.json; what the host
cannot read (a hub id, an external server) is recorded as source 'unknown'.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from specsweep.collect.engines.base import flag

UNKNOWN = "unknown"


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def facts(template: str | None, source: str) -> dict[str, str]:
    """The two fingerprint keys; no hash when the template text is not known."""
    return {
        "chat_template_sha256": sha256(template) if template else "",
        "chat_template_source": source,
    }


def config_template(text: str) -> str | None:
    """`chat_template` of a tokenizer_config.json (a string, or the list entry named
    "default"); None when it has none."""
    template = json.loads(text).get("chat_template")
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    return template if isinstance(template, str) else None


def served(args: list[str], model: str, host: Any) -> dict[str, str]:
    """The template a server rendering its own prompts applies (launch flags `args`)."""
    given = flag(args, "--chat-template")
    if given:
        return _flagged(given.replace("{model}", model), host)
    root = model.rstrip("/")
    text = _read(host, f"{root}/chat_template.jinja")
    if text:
        return facts(text, "model default (chat_template.jinja)")
    config = _read(host, f"{root}/tokenizer_config.json")
    try:
        template = config_template(config) if config else None
    except ValueError:  # not JSON: nothing known
        template = None
    if template:
        return facts(template, "model default (tokenizer_config.json)")
    return facts(None, UNKNOWN)


def _flagged(given: str, host: Any) -> dict[str, str]:
    """--chat-template's file, or the template itself (vLLM takes either)."""
    if "{" in given or "\n" in given:
        return facts(given, "--chat-template (inline)")
    text = _read(host, given)
    return facts(text, f"--chat-template {given}" + ("" if text else " (unreadable)"))


def _read(host: Any, path: str) -> str | None:
    read = getattr(host, "read_file", None)
    if not callable(read):
        return None
    try:
        return read(path)
    except Exception:  # noqa: BLE001 - an unreadable file leaves the template unknown
        return None
