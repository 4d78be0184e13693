-- reads: analysis_params, request_metrics
-- agentic_turns: how latency and speed evolve over the turns of agentic sessions, and which
-- turns may be compared across methods.
-- grain: (campaign_id, engine, tp, method, workload, turn); key: the same columns.
-- Rows: measured requests with session_id NOT NULL. n counts them all; the medians
-- (quantile_cont(x, 0.5)) use ok requests only. prompt_tokens_p50 is the context length.
-- history: how the turn's prompt was built (requests.history): own (the method's own earlier
--   replies) | replay (the baseline's recorded replies, the plan's `history: replay`).
-- Pairing (docs/agentic-pairing.md): a turn's row compares with the baseline's same turn
--   (paired = true) only when its prompts are the baseline's:
--     pairing = 'first_turn'  turn 0: the plan's first messages, the same for every method;
--             = 'replay'      the method replayed the baseline's replies;
--             = 'script'      the baseline's turn in a workload some method replayed: its
--                             replies are the script, so its prompts are the methods';
--             = 'own_history' turn > 0 with the method's own replies: its prompt differs from
--                             every other method's, so no comparison (paired = false).
--   speedup_pairs (03) applies the same rule to the speedup table.

CREATE OR REPLACE TABLE agentic_turns AS

WITH

params AS (
    SELECT baseline FROM analysis_params
),

session_requests AS (
    SELECT *
    FROM request_metrics
    WHERE session_id IS NOT NULL
),

-- (campaign, tp, workload) where some method replayed the baseline's replies
replayed AS (
    SELECT DISTINCT campaign_id, engine, tp, workload
    FROM session_requests
    WHERE history = 'replay'
),

per_turn AS (
    SELECT
        campaign_id, engine, tp, method, workload, turn,
        -- one mode per (method, workload) in a campaign: the plan's ('own' for the baseline);
        -- 'replay' only if every request of the turn replayed
        CASE WHEN bool_and(history = 'replay') THEN 'replay' ELSE 'own' END AS history,
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
    GROUP BY campaign_id, engine, tp, method, workload, turn
),

pairing AS (
    SELECT
        t.*,
        CASE
            WHEN t.turn = 0 THEN 'first_turn'
            WHEN t.history = 'replay' THEN 'replay'
            WHEN t.method = p.baseline AND r.workload IS NOT NULL THEN 'script'
            ELSE 'own_history'
        END AS pairing
    FROM per_turn AS t
    CROSS JOIN params AS p
    LEFT JOIN replayed AS r USING (campaign_id, engine, tp, workload)
),

final AS (
    SELECT
        campaign_id, engine, tp, method, workload, turn, history,
        pairing <> 'own_history' AS paired,
        pairing,
        n, n_ok, n_sessions, ttft_p50_s, e2e_p50_s, decode_tps_p50, prompt_tokens_p50,
        cached_tokens_p50, output_tokens_p50
    FROM pairing
)

SELECT * FROM final
