"""One acceptance-length definition for every engine, and the per-request acceptance
details engines report, renamed into the `requests` columns.

    spec_verify_ct = target verify (decode) steps after the prefill
    accept_length  = (output_tokens - 1) / spec_verify_ct

The token sampled at prefill is excluded: a decode step yields its accepted draft tokens
plus one (the bonus token), so accept_length = 1 + accepted / steps, vLLM's
mean_acceptance_length and the DFlash paper's tau (1 for plain decoding). None when
output_tokens <= 1 or spec_verify_ct is None or 0. The formula is schema.metrics.accept_length,
re-exported here. Each engine's own per-request figure is kept beside it in
`engine_accept_length`.

The detail columns (lists of counts, None when the engine gives none):
    accept_histogram [j]   = verify steps that accepted exactly j draft tokens, j = 0..K
    accepted_per_pos [k-1] = verify steps whose draft token at position k was accepted
    step_accepted    [i]   = draft tokens accepted at verify step i, in order
"""

from __future__ import annotations

from typing import Any

# the one definition (schema/metrics.sql's accept_length_of macro); its Python twin lives
# beside the macro, with the test that proves the two agree, and the engines import it here
from specsweep.schema.metrics import accept_length as accept_length

DETAIL_KEYS = ("engine_accept_length", "accept_histogram", "accepted_per_pos", "step_accepted")


def no_details() -> dict[str, Any]:
    return dict.fromkeys(DETAIL_KEYS)


def counts(value: Any) -> list[int] | None:
    """A list of non-negative integer counts as reported; None when absent, empty or not
    such a list (a malformed reply must not fail the row's contract)."""
    if not isinstance(value, list) or not value:
        return None
    if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in value):
        return None
    return list(value)


def dense_histogram(value: Any, k: Any = None) -> list[int] | None:
    """A histogram over accepted counts as a dense list [j] = steps, j = 0..K.

    vLLM 0.29 sends a dense list of length num_spec_tokens + 1 (taken as it is); an
    earlier form of the same feature sent a sparse map {"j": steps} with zero counts
    omitted, spread here over 0..max(K, largest j)."""
    if isinstance(value, dict):
        try:
            sparse = {int(j): n for j, n in value.items()}
        except (TypeError, ValueError):
            return None
        if not sparse or min(sparse) < 0:
            return None
        size = max(max(sparse) + 1, k + 1 if isinstance(k, int) and k >= 0 else 0)
        value = [sparse.get(j, 0) for j in range(size)]
    return counts(value)


def number(value: Any) -> float | None:
    """A reported figure as a float; None when absent or not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


# --- SGLang ------------------------------------------------------------------------------


def sglang_details(meta: dict[str, Any]) -> dict[str, Any]:
    """SGLang's per-request details from a /generate `meta_info` or an OpenAI reply's
    `sglext.spec_tokens_details` (same keys: `spec_tokens_details_from_meta_info` copies
    them from meta_info).

    engine_accept_length = spec_accept_length (SGLang's completion_tokens /
        spec_verify_ct, the prefill token counted), else completion_tokens / spec_verify_ct
    accept_histogram     = spec_correct_drafts_histogram ([j] = verify steps with exactly
        j correct drafts, bonus token excluded), as reported
    accepted_per_pos, step_accepted: SGLang reports neither (None); per-position rates
        follow from the histogram (accepted at k = sum_{j >= k} hist[j]).
    `spec_cap_lens_histogram` (DFlash cap lengths) stays in server_stats only."""
    own = number(meta.get("spec_accept_length"))
    completion, verify = meta.get("completion_tokens"), meta.get("spec_verify_ct")
    if own is None and isinstance(completion, int) and isinstance(verify, int) and verify > 0:
        own = completion / verify
    return {
        "engine_accept_length": own,
        "accept_histogram": counts(meta.get("spec_correct_drafts_histogram")),
        "accepted_per_pos": None,
        "step_accepted": None,
    }


# --- vLLM --------------------------------------------------------------------------------


def vllm_spec_metrics(event: dict[str, Any]) -> dict[str, Any] | None:
    """The per-request acceptance object of one streamed chunk, if it carries one.

    vLLM >= 0.29 with `--per-request-spec-decode-metrics summary|detailed` puts
    `metrics.speculative_decoding` at the root of the final usage chunk (n == 1 only);
    an earlier form of the feature (`--per-request-spec-decode-stats`) put
    `speculative_decoding_stats` on the terminal chunk's choice."""
    metrics = event.get("metrics")
    spec = metrics.get("speculative_decoding") if isinstance(metrics, dict) else None
    if isinstance(spec, dict):
        return spec
    for choice in event.get("choices") or []:
        stats = choice.get("speculative_decoding_stats") if isinstance(choice, dict) else None
        if isinstance(stats, dict):
            return stats
    return None


def vllm_details(spec: dict[str, Any] | None) -> dict[str, Any]:
    """vLLM's `metrics.speculative_decoding` renamed into the requests columns:

    spec_verify_ct       = num_spec_steps
    draft_tokens         = num_draft_tokens
    accepted_tokens      = num_accepted_draft_tokens
    engine_accept_length = mean_acceptance_length (1 + accepted / num_spec_steps)
    accept_histogram     = acceptance_histogram ([j] = steps with exactly j accepted, j =
                           0..num_spec_tokens; a sparse map is made dense)
    step_accepted        = per_step_accepted (`detailed` only)
    accepted_per_pos     = None (vLLM reports it per window on /metrics, not per request)
    """
    if not spec:
        return {
            "spec_verify_ct": None,
            "draft_tokens": None,
            "accepted_tokens": None,
            **no_details(),
        }
    return {
        "spec_verify_ct": _count(spec.get("num_spec_steps")),
        "draft_tokens": _count(spec.get("num_draft_tokens")),
        "accepted_tokens": _count(spec.get("num_accepted_draft_tokens")),
        "engine_accept_length": number(spec.get("mean_acceptance_length")),
        "accept_histogram": dense_histogram(
            spec.get("acceptance_histogram"), spec.get("num_spec_tokens")
        ),
        "accepted_per_pos": None,
        "step_accepted": counts(spec.get("per_step_accepted")),
    }


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
