-- request_metrics: one row per measured request (warm-up requests excluded).
-- grain: request; key: request_id.
-- Columns: every column of `requests` except output_text and server_stats, plus
--   tpot_s           = (e2e_s - ttft_s) / (output_tokens - 1)    when ok and output_tokens > 1
--   decode_tps       = (output_tokens - 1) / (e2e_s - ttft_s)    when ok, output_tokens > 1, e2e_s > ttft_s
--   e2e_tps          = output_tokens / e2e_s                     when ok and e2e_s > 0
--   n_chunks         = len(chunk_times_s)                        (0 when no chunk arrived)
--   itl_chunk_gaps_s = [chunk_times_s[i+1] - chunk_times_s[i]]   per-chunk gaps (vLLM's pooled ITL)
--   itl_chunk_mean_s, itl_chunk_p50_s, itl_chunk_p99_s over those gaps (quantile_cont)
--   itl_token_mean_s = mean over chunks i >= 2 of (chunk_times_s[i] - chunk_times_s[i-1]) / chunk_tokens[i]
--                      (a missing chunk_tokens list or element counts as 1 token)
--   end_s            = start_s + e2e_s (offset of the last token from the window start)
--   colocated        = the request's unit ran while other services of the campaign ran on
--                      the same host (units.colocated_with <> ''; packed configurations)
--   neighbours       = how many such services (0 when it ran alone)
-- tpot_s, decode_tps and e2e_tps are schema/metrics.sql's macros of the same names.
-- Failed requests (ok = false) keep their row (error_rate needs them) but every derived
-- latency/speed column is NULL for them. Rows of a unit marked incomplete (units.complete =
-- false: the run was interrupted in it) are left out until resume redoes the unit.

CREATE OR REPLACE VIEW request_metrics AS

WITH

incomplete AS (
    SELECT campaign_id, config_id, workload FROM units WHERE NOT complete
),

colocation AS (
    SELECT campaign_id, config_id, workload, colocated_with <> '' AS colocated,
           CASE WHEN colocated_with = '' THEN 0
                ELSE len(string_split(colocated_with, ',')) END AS neighbours
    FROM units
),

measured AS (
    SELECT * EXCLUDE (output_text, server_stats)
    FROM requests AS r
    WHERE NOT is_warmup
      AND NOT EXISTS (
          SELECT 1 FROM incomplete AS i
          WHERE i.campaign_id = r.campaign_id AND i.config_id = r.config_id
            AND i.workload = r.workload
      )
),

chunk_gaps AS (
    SELECT
        request_id,
        -- slice [2:] is chunks 2..n (1-based); lambda index i points at the previous chunk
        list_transform(chunk_times_s[2:], lambda t, i: t - chunk_times_s[i]) AS gaps_s,
        list_transform(
            chunk_times_s[2:],
            lambda t, i: (t - chunk_times_s[i]) / coalesce(nullif(chunk_tokens[i + 1], 0), 1)
        ) AS token_gaps_s
    FROM measured
    WHERE ok
),

derived AS (
    SELECT
        m.*,
        -- tpot_s, decode_tps, e2e_tps: the macros of schema/metrics.sql (defined once)
        CASE WHEN m.ok THEN tpot_s(m.output_tokens, m.e2e_s, m.ttft_s) END AS tpot_s,
        CASE WHEN m.ok THEN decode_tps(m.output_tokens, m.e2e_s, m.ttft_s) END AS decode_tps,
        CASE WHEN m.ok THEN e2e_tps(m.output_tokens, m.e2e_s) END AS e2e_tps,
        coalesce(len(m.chunk_times_s), 0) AS n_chunks,
        g.gaps_s AS itl_chunk_gaps_s,
        list_avg(g.gaps_s) AS itl_chunk_mean_s,
        list_aggregate(g.gaps_s, 'quantile_cont', 0.5) AS itl_chunk_p50_s,
        list_aggregate(g.gaps_s, 'quantile_cont', 0.99) AS itl_chunk_p99_s,
        list_avg(g.token_gaps_s) AS itl_token_mean_s,
        m.start_s + m.e2e_s AS end_s,
        coalesce(u.colocated, false) AS colocated,
        coalesce(u.neighbours, 0) AS neighbours
    FROM measured AS m
    LEFT JOIN chunk_gaps AS g USING (request_id)
    LEFT JOIN colocation AS u USING (campaign_id, config_id, workload)
),

final AS (
    SELECT * FROM derived
)

SELECT * FROM final
