-- reads: request_metrics
-- config_summary: one row per measured window.
-- grain: (campaign_id, engine, tp, method, workload, max_tokens, concurrency);
-- key: the same columns (window_id is unique per group within a campaign).
-- Counts use every measured request; latency, speed and acceptance use ok requests only.
--   error_rate       = 1 - n_ok / n
--   ttft_p50/p90/p99 = quantile_cont(ttft_s, q); tpot_p50_s, e2e_p50_s, decode_tps_p50 likewise
--   throughput_tps   = sum(output_tokens) / (max(end_s) - min(start_s)) over ok requests of the
--                      window (if a group ever spans several windows: summed tokens / summed
--                      window durations, since start_s offsets are per window)
--   effective_concurrency = sum(e2e_s) / (max(end_s) - min(start_s)) over ok requests of the
--                      window: the mean number of requests in flight (Little's law: busy time
--                      over the span of throughput_tps; several windows: summed busy times /
--                      summed spans). Below the nominal concurrency when the window is short:
--                      9 requests at concurrency 4 run as 4 + 4 + 1, about 3 in flight
--                      (collect check warns below 4 requests per slot, collect/scheduling/sizing.py)
--   accept_length_tw = sum(output_tokens - 1) / sum(spec_verify_ct)  (the one definition,
--                      pooled: decode tokens / verify steps over rows with output_tokens > 1
--                      and spec_verify_ct > 0; the prefill token excluded)
--   accept_length_rw = avg((output_tokens - 1) / spec_verify_ct)  (request-weighted, same rows;
--                      recomputed, not the stored requests.accept_length, whose older rows
--                      counted llama.cpp's prefill token)
--   engine_accept_length_rw = avg(engine_accept_length)  (the engine's own per-request figure,
--                      as it reports it: SGLang's counts the prefill token; NULL for llama.cpp)
--   accept_rate      = sum(accepted_tokens) / sum(draft_tokens)
-- accept_length_tw, accept_length_of and accept_rate are schema/metrics.sql's macros.

CREATE OR REPLACE TABLE config_summary AS

WITH

measured AS (
    SELECT * FROM request_metrics
),

windows AS (
    SELECT
        COLUMNS(comparison_key()), method, window_id,
        sum(output_tokens) FILTER (WHERE ok) AS window_tokens,
        max(end_s) FILTER (WHERE ok) - min(start_s) FILTER (WHERE ok) AS window_s,
        sum(e2e_s) FILTER (WHERE ok) AS busy_s
    FROM measured
    GROUP BY ALL
),

throughput AS (
    SELECT
        COLUMNS(comparison_key()), method,
        min(window_id) AS window_id,
        count(*) AS n_windows,
        sum(window_tokens) / nullif(sum(window_s), 0) AS throughput_tps,
        sum(busy_s) / nullif(sum(window_s), 0) AS effective_concurrency
    FROM windows
    GROUP BY ALL
),

per_config AS (
    SELECT
        -- the window in the table's column order: the comparison key with method after tp
        COLUMNS(comparison_key()[:3]), method, COLUMNS(comparison_key()[4:]),
        count(*) AS n,
        count(*) FILTER (WHERE ok) AS n_ok,
        1 - count(*) FILTER (WHERE ok) / count(*) AS error_rate,
        count(DISTINCT prompt_id) AS n_prompts,
        quantile_cont(ttft_s, 0.5) FILTER (WHERE ok) AS ttft_p50_s,
        quantile_cont(ttft_s, 0.9) FILTER (WHERE ok) AS ttft_p90_s,
        quantile_cont(ttft_s, 0.99) FILTER (WHERE ok) AS ttft_p99_s,
        quantile_cont(tpot_s, 0.5) AS tpot_p50_s,
        quantile_cont(e2e_s, 0.5) FILTER (WHERE ok) AS e2e_p50_s,
        quantile_cont(decode_tps, 0.5) AS decode_tps_p50,
        avg(decode_tps) AS decode_tps_mean,
        sum(output_tokens) FILTER (WHERE ok) AS output_tokens_sum,
        avg(output_tokens) FILTER (WHERE ok) AS output_tokens_mean,
        accept_length_tw(ok, output_tokens, spec_verify_ct) AS accept_length_tw,
        avg(accept_length_of(output_tokens, spec_verify_ct)) FILTER (WHERE ok)
            AS accept_length_rw,
        avg(engine_accept_length) FILTER (WHERE ok) AS engine_accept_length_rw,
        sum(draft_tokens) FILTER (WHERE ok) AS draft_tokens_sum,
        sum(accepted_tokens) FILTER (WHERE ok) AS accepted_tokens_sum
    FROM measured
    GROUP BY ALL
),

final AS (
    SELECT
        p.*,
        accept_rate(p.accepted_tokens_sum, p.draft_tokens_sum) AS accept_rate,
        t.throughput_tps,
        t.effective_concurrency,
        t.window_id,
        t.n_windows
    FROM per_config AS p
    JOIN throughput AS t
        USING (campaign_id, engine, tp, workload, max_tokens, concurrency, method)
)

SELECT * FROM final
