"""SGLang's two streamed replies and the requests-row statistics they give.

- Native `POST /generate` (the default, `api: generate`): chunks carry the cumulative
  `text` (or deltas with --incremental-streaming-output) and a cumulative `meta_info`;
  the last one's meta_info holds the request's counters: `completion_tokens`,
  `spec_verify_ct`, `spec_accept_length`, `spec_accept_rate`, `spec_num_correct_drafts`,
  `spec_num_proposed_drafts` (older builds: `spec_accept_token_num`,
  `spec_draft_token_num`) and `spec_correct_drafts_histogram`.
- OpenAI `POST /v1/chat/completions` (`api: chat`) with `"return_spec_tokens_details":
  true` (SGLang with PR #33518): after the last text chunk a chunk with empty `choices`
  carries `sglext.spec_tokens_details`, the same keys copied from meta_info
  (`spec_tokens_details_from_meta_info`, srt/entrypoints/openai/utils.py: missing
  numbers default to 0, missing histograms to []), then the usage chunk. Builds without
  the PR send no sglext: the row then has no speculative counters.

Acceptance (collect/engines/acceptance.py):
    spec_verify_ct       = spec_verify_ct as reported
    accept_length        = (completion_tokens - 1) / spec_verify_ct
    engine_accept_length = spec_accept_length (SGLang's completion_tokens / spec_verify_ct,
                           which counts the prefill token), else that ratio computed here
    accept_histogram     = spec_correct_drafts_histogram, as reported
"""

from __future__ import annotations

import json
from typing import Any

from specsweep.collect.engines.acceptance import accept_length, sglang_details
from specsweep.collect.engines.openai import OpenAIChatStream


class GenerateStream:
    """Parser state of one streaming /generate reply."""

    def __init__(self) -> None:
        self.text = ""
        self.completion_tokens = 0
        self.meta: dict[str, Any] = {}

    def feed(self, event: dict[str, Any]) -> tuple[str, int | None]:
        """(text added since the last chunk, tokens added = delta of completion_tokens)."""
        meta = event.get("meta_info")
        if isinstance(meta, dict):
            self.meta = meta
        return self._delta(event.get("text")), self._new_tokens(meta)

    def _delta(self, text: Any) -> str:
        if not isinstance(text, str):
            return ""
        if text.startswith(self.text):
            delta, self.text = text[len(self.text) :], text
        else:  # a server run with --incremental-streaming-output sends deltas
            delta, self.text = text, self.text + text
        return delta

    def _new_tokens(self, meta: Any) -> int | None:
        count = meta.get("completion_tokens") if isinstance(meta, dict) else None
        if not isinstance(count, int):
            return None
        new, self.completion_tokens = count - self.completion_tokens, count
        return new

    def stats(self) -> dict[str, Any]:
        return sglang_stats(self.meta)


class SGLangChatStream(OpenAIChatStream):
    """An OpenAI chat stream whose `sglext.spec_tokens_details` chunk is kept."""

    def __init__(self) -> None:
        super().__init__()
        self.details: dict[str, Any] = {}

    def feed(self, event: dict[str, Any]) -> tuple[str, int | None]:
        ext = event.get("sglext")
        details = ext.get("spec_tokens_details") if isinstance(ext, dict) else None
        if isinstance(details, list):  # n > 1: one per choice; specsweep sends n = 1
            details = details[0] if details else None
        if isinstance(details, dict):
            self.details = details
        return super().feed(event)

    def stats(self) -> dict[str, Any]:
        usage = self.usage
        meta = {
            **self.details,
            "completion_tokens": usage.get("completion_tokens"),
            "prompt_tokens": usage.get("prompt_tokens"),
            "cached_tokens": (usage.get("prompt_tokens_details") or {}).get("cached_tokens"),
            "finish_reason": self.finish_reason,
        }
        out = sglang_stats(meta)
        out["server_stats"] = json.dumps(
            {"usage": usage, "sglext": {"spec_tokens_details": self.details}},
            sort_keys=True,
            default=str,
        )
        return out


def sglang_stats(meta: dict[str, Any]) -> dict[str, Any]:
    """The requests-table statistics from the last `meta_info` of a /generate reply (or
    the chat reply's details merged with its usage)."""
    completion, verify = meta.get("completion_tokens"), meta.get("spec_verify_ct")
    return {
        "output_tokens": completion,
        "prompt_tokens": meta.get("prompt_tokens"),
        "cached_tokens": meta.get("cached_tokens"),
        "finish_reason": _finish_reason(meta.get("finish_reason")),
        "spec_verify_ct": verify,
        "draft_tokens": _first(meta, "spec_num_proposed_drafts", "spec_draft_token_num"),
        "accepted_tokens": _first(meta, "spec_num_correct_drafts", "spec_accept_token_num"),
        "accept_length": accept_length(completion, verify),
        **sglang_details(meta),
        "server_stats": json.dumps(meta, sort_keys=True, default=str),
    }


def _finish_reason(value: Any) -> str | None:
    """SGLang sends {"type": "length", "length": N} (older builds: a string)."""
    if isinstance(value, dict):
        value = value.get("type")
    return None if value is None else str(value)


def _first(meta: dict[str, Any], *keys: str) -> Any:
    return next((meta[k] for k in keys if meta.get(k) is not None), None)
