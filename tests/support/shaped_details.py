"""The per-request acceptance details the engine-shaped servers send, shaped as the engines'
sources document them (field names and nesting read there; see the engine adapters'
docstrings):

- SGLang `meta_info` on /generate and `sglext.spec_tokens_details` on OpenAI endpoints
  (PR #33518, srt/entrypoints/openai/utils.py `spec_tokens_details_from_meta_info`): the
  same keys; `spec_correct_drafts_histogram[j]` = verify steps with exactly j correct
  drafts; `spec_accept_length` = completion_tokens / spec_verify_ct.
- vLLM `metrics.speculative_decoding` on the final usage chunk (vLLM 0.29,
  docs/features/speculative_decoding/acceptance_metrics.md): dense `acceptance_histogram`
  of length num_spec_tokens + 1, `per_step_accepted` / `per_step_drafted` with
  `detailed`; an earlier form (`speculative_decoding_stats` on the terminal chunk's
  choice) sent the histogram as a sparse map {"j": steps}.

Like a real engine, a Script's reply starts with the token sampled at prefill (the first
token of chunk 0); every other token comes from a verify step yielding its accepted drafts
plus one: chunk i > 0 is one step, chunk 0 holds one more step when it has more than
that first token. So (tokens - 1) / steps = 1 + accepted / steps, as in vLLM and SGLang.
"""

from __future__ import annotations

from typing import Any


def step_accepted(chunk_tokens: tuple[int, ...], drafts: int) -> list[int]:
    """Accepted drafts of each verify step of a reply streamed as chunk_tokens."""
    yields = [chunk_tokens[0] - 1, *chunk_tokens[1:]] if chunk_tokens else []
    return [min(y - 1, drafts) for y in yields if y > 0]


def histogram(accepted: list[int], drafts: int) -> list[int]:
    """[j] = steps that accepted exactly j drafts, j = 0..drafts."""
    return [accepted.count(j) for j in range(drafts + 1)]


def sglang_spec(chunk_tokens: tuple[int, ...], drafts: int) -> dict[str, Any]:
    """SGLang's speculative meta_info keys after the given verify steps."""
    accepted = step_accepted(chunk_tokens, drafts)
    tokens, steps = sum(chunk_tokens), len(accepted)
    proposed = steps * drafts
    return {
        "spec_verify_ct": steps,
        "spec_accept_length": tokens / steps if steps else 0.0,  # the prefill token counted
        "spec_accept_rate": sum(accepted) / proposed if proposed else 0.0,
        "spec_num_correct_drafts": sum(accepted),
        "spec_num_proposed_drafts": proposed,
        "spec_correct_drafts_histogram": histogram(accepted, drafts),
    }


def sglext_details(meta: dict[str, Any]) -> dict[str, Any]:
    """`spec_tokens_details_from_meta_info`: every key, missing numbers 0, lists []."""
    floats = (
        "spec_accept_rate",
        "spec_accept_length",
        "spec_cap_length",
        "spec_block_accept_length",
    )
    ints = ("spec_num_correct_drafts", "spec_num_proposed_drafts", "spec_verify_ct")
    lists = ("spec_correct_drafts_histogram", "spec_cap_lens_histogram")
    out: dict[str, Any] = {k: meta.get(k) or 0.0 for k in floats}
    out |= {k: meta.get(k) or 0 for k in ints}
    return out | {k: meta.get(k) or [] for k in lists}


def vllm_spec(
    chunk_tokens: tuple[int, ...], drafts: int, level: str, sparse: bool = False
) -> dict[str, Any]:
    """vLLM's per-request acceptance object at `summary` or `detailed`."""
    accepted = step_accepted(chunk_tokens, drafts)
    steps = len(accepted)
    hist: Any = histogram(accepted, drafts)
    if sparse:
        hist = {str(j): n for j, n in enumerate(hist) if n}
    spec: dict[str, Any] = {
        "mean_acceptance_length": 1 + sum(accepted) / steps,
        "draft_acceptance_rate": sum(accepted) / (steps * drafts),
        "acceptance_histogram": hist,
        "num_spec_steps": steps,
        "num_accepted_draft_tokens": sum(accepted),
        "num_draft_tokens": steps * drafts,
        "num_spec_tokens": drafts,
    }
    if level == "detailed":
        spec |= {"per_step_accepted": accepted, "per_step_drafted": [drafts] * steps}
    return spec
