-- agentic_turns: how latency and speed evolve over the turns of agentic sessions.
-- grain: (campaign_id, engine, tp, method, workload, turn); key: the same columns.
-- Rows: measured requests with session_id NOT NULL. n counts them all; the medians
-- (quantile_cont(x, 0.5)) use ok requests only. prompt_tokens_p50 is the context length.

CREATE OR REPLACE TABLE agentic_turns AS

WITH

session_requests AS (
    SELECT *
    FROM request_metrics
    WHERE session_id IS NOT NULL
),

per_turn AS (
    SELECT
        campaign_id, engine, tp, method, workload, turn,
        count(*) AS n,
        count(*) FILTER (WHERE ok) AS n_ok,
        count(DISTINCT session_id) AS n_sessions,
        quantile_cont(ttft_s, 0.5) FILTER (WHERE ok) AS ttft_p50_s,
        quantile_cont(e2e_s, 0.5) FILTER (WHERE ok) AS e2e_p50_s,
        quantile_cont(decode_tps, 0.5) AS decode_tps_p50,
        quantile_cont(prompt_tokens, 0.5) FILTER (WHERE ok) AS prompt_tokens_p50,
        quantile_cont(cached_tokens, 0.5) FILTER (WHERE ok) AS cached_tokens_p50,
        quantile_cont(output_tokens, 0.5) FILTER (WHERE ok) AS output_tokens_p50
    FROM session_requests
    GROUP BY ALL
),

final AS (
    SELECT * FROM per_turn
)

SELECT * FROM final
