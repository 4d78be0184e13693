-- reads: kept_request_rows, server_metrics, services
-- window_acceptance: acceptance from the servers' own counters over each measured
-- workload, next to the per-request figure of the same requests.
-- grain: (campaign_id, service_id, workload); key: the same columns.
-- Counters (server_metrics, phase 'before' and 'after' the workload; the engine prefix
-- `vllm:`/`llamacpp:` and a `_total` suffix are ignored, samples summed over labels):
--   d_drafts       = delta spec_decode_num_drafts
--   d_draft_tokens = delta spec_decode_num_draft_tokens
--   d_accepted     = delta spec_decode_num_accepted_tokens
--   accept_length_window = 1 + d_accepted / d_drafts        (vLLM's definition: tokens
--                          per drafting step; equal to tokens per target step only when
--                          every step drafts, as in vLLM. llama.cpp's n-gram drafters
--                          draft on some steps only, and there it is far larger)
--   accept_length_steps  = d_generated / (d_generated - d_accepted)  (tokens per target
--                          step, every step counted, each request's prefill step too: the
--                          per-request figure below leaves it out, so the two part on short
--                          replies; NULL where the server counts no generated tokens;
--                          foreign tokens, if any, are in it)
--   accept_rate_window   = d_accepted / d_draft_tokens
--   d_verify_calls = delta spec_verify_calls (SGLang: it has no draft or accepted counters,
--                          but every verify step drafts). Where d_drafts is NULL:
--   accept_length_window = d_generated / d_verify_calls and accept_length_steps the same:
--                          tokens per verify step, each request's first (prefill) token
--                          included, so it reads above the per-request figure on short replies
-- Per request (kept requests of the same service and workload: warm-ups and rows of
-- incomplete units excluded, schema/measured.sql's kept_request_rows(); ok only):
--   accept_length_requests = sum(output_tokens - 1) / sum(spec_verify_ct)  (the one
--                          definition, pooled: schema/metrics.sql's accept_length_tw; rows
--                          with output_tokens > 1 and spec_verify_ct > 0)
--   accept_length_diff     = accept_length_window - accept_length_requests
-- Counters are server-wide: other traffic in the window (a warm-up, another client) leaks
-- in; `foreign_tokens` = delta of generated tokens by the counters minus the tokens of the
-- measured requests, when the server counts generated tokens (> 0 means foreign traffic).
-- server_avg_accept_length: SGLang's cumulative average at the end of the window.

CREATE OR REPLACE TABLE window_acceptance AS

WITH

samples AS (
    SELECT
        campaign_id, service_id, config_id, workload, phase, value,
        regexp_replace(regexp_replace(name, '^[a-z_]+:', ''), '_total$', '') AS counter
    FROM server_metrics
),

summed AS (
    SELECT campaign_id, service_id, config_id, workload, counter, phase, sum(value) AS value
    FROM samples
    GROUP BY ALL
),

deltas AS (
    SELECT
        campaign_id, service_id, config_id, workload, counter,
        max(value) FILTER (WHERE phase = 'after')
            - max(value) FILTER (WHERE phase = 'before') AS delta,
        max(value) FILTER (WHERE phase = 'after') AS after_value
    FROM summed
    GROUP BY ALL
),

windows AS (
    SELECT
        campaign_id, service_id, config_id, workload,
        max(delta) FILTER (WHERE counter = 'spec_decode_num_drafts') AS d_drafts,
        max(delta) FILTER (WHERE counter = 'spec_decode_num_draft_tokens') AS d_draft_tokens,
        max(delta) FILTER (WHERE counter = 'spec_decode_num_accepted_tokens') AS d_accepted,
        max(delta) FILTER (WHERE counter = 'spec_verify_calls') AS d_verify_calls,
        max(delta) FILTER (
            WHERE counter IN ('tokens_predicted', 'generation_tokens')
        ) AS d_generated,
        max(after_value) FILTER (
            WHERE counter = 'avg_spec_accept_length'
        ) AS server_avg_accept_length
    FROM deltas
    GROUP BY ALL
),

per_request AS (
    SELECT
        campaign_id, service_id, workload,
        sum(output_tokens) FILTER (WHERE ok) AS output_tokens,
        accept_length_tw(ok, output_tokens, spec_verify_ct) AS accept_length_requests
    FROM kept_request_rows()
    GROUP BY ALL
),

-- tokens per step by each counter family: drafting steps (vLLM, llama.cpp) or verify calls
-- (SGLang)
per_step AS (
    SELECT
        *,
        accept_length_counters(d_accepted, d_drafts) AS per_draft,
        d_generated / nullif(d_verify_calls, 0) AS per_verify
    FROM windows
),

final AS (
    SELECT
        w.campaign_id, s.engine, s.tp, s.method, w.workload, w.service_id, w.config_id,
        w.d_drafts, w.d_draft_tokens, w.d_accepted, w.d_verify_calls,
        coalesce(w.per_draft, w.per_verify) AS accept_length_window,
        coalesce(w.d_generated / nullif(w.d_generated - w.d_accepted, 0), w.per_verify)
            AS accept_length_steps,
        w.d_accepted / nullif(w.d_draft_tokens, 0) AS accept_rate_window,
        r.accept_length_requests,
        coalesce(w.per_draft, w.per_verify) - r.accept_length_requests AS accept_length_diff,
        w.d_generated - r.output_tokens AS foreign_tokens,
        w.server_avg_accept_length
    FROM per_step AS w
    JOIN services AS s ON s.service_id = w.service_id
    LEFT JOIN per_request AS r
        ON r.campaign_id = w.campaign_id AND r.service_id = w.service_id
        AND r.workload = w.workload
)

SELECT * FROM final
