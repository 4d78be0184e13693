-- reads: measured_requests, request_itl, units
-- request_metrics: one row per measured request (measured_requests, 00: warm-up requests and
-- rows of incomplete units left out). A TABLE, rebuilt by every `specsweep analyze`.
-- grain: request; key: request_id.
-- Columns: every column of `requests` (run among them: which run of the campaign) except output_text, server_stats and the per-chunk and
-- per-step lists (chunk_times_s, chunk_tokens, step_accepted: join `requests` USING
-- (request_id) for them; position_acceptance and accepted_histogram read step_accepted), plus
--   tpot_s           = (e2e_s - ttft_s) / (output_tokens - 1)    when ok and output_tokens > 1
--   decode_tps       = (output_tokens - 1) / (e2e_s - ttft_s)    when ok, output_tokens > 1, e2e_s > ttft_s
--   e2e_tps          = output_tokens / e2e_s                     when ok and e2e_s > 0
--   n_chunks         = len(chunk_times_s), 0 when no chunk arrived          (analyze/itl/)
--   itl_chunk_mean_s = mean gap chunk_times_s[i+1] - chunk_times_s[i]          (analyze/itl/)
--   itl_chunk_max_s  = the longest such gap                                     (analyze/itl/)
--   itl_token_mean_s = mean of gap_i / chunk_tokens[i+1], a missing list or element (or 0)
--                      counting as 1 token                                      (analyze/itl/)
--                      (the three are NULL for failed requests and replies of one chunk)
--   end_s            = start_s + e2e_s (offset of the last token from the window start)
--   colocated        = the request's unit ran while other services of the campaign ran on
--                      the same host (units.colocated_with <> ''; packed configurations)
--   neighbours       = how many such services (0 when it ran alone)
-- tpot_s, decode_tps and e2e_tps are schema/metrics.sql's macros of the same names.
-- Failed requests (ok = false) keep their row (error_rate needs them) but every derived
-- latency/speed column is NULL for them.

CREATE OR REPLACE TABLE request_metrics AS

WITH

colocation AS (
    SELECT campaign_id, config_id, workload, run, colocated_with <> '' AS colocated,
           CASE WHEN colocated_with = '' THEN 0
                ELSE len(string_split(colocated_with, ',')) END AS neighbours
    FROM units
),

final AS (
    SELECT
        m.* EXCLUDE (rid, output_text, server_stats, chunk_times_s, chunk_tokens,
                   step_accepted),
        -- tpot_s, decode_tps, e2e_tps: the macros of schema/metrics.sql (defined once)
        CASE WHEN m.ok THEN tpot_s(m.output_tokens, m.e2e_s, m.ttft_s) END AS tpot_s,
        CASE WHEN m.ok THEN decode_tps(m.output_tokens, m.e2e_s, m.ttft_s) END AS decode_tps,
        CASE WHEN m.ok THEN e2e_tps(m.output_tokens, m.e2e_s) END AS e2e_tps,
        coalesce(i.n_chunks, 0) AS n_chunks,
        i.itl_chunk_mean_s,
        i.itl_chunk_max_s,
        i.itl_token_mean_s,
        m.start_s + m.e2e_s AS end_s,
        coalesce(u.colocated, false) AS colocated,
        coalesce(u.neighbours, 0) AS neighbours
    FROM measured_requests AS m
    LEFT JOIN request_itl AS i ON i.rid = m.rid
    LEFT JOIN colocation AS u USING (campaign_id, config_id, workload, run)
)

SELECT * FROM final
