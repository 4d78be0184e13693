-- reads: request_metrics, speedup, speedup_pairs
-- speedup_decomposition: why a method is fast or slow. Its decode speedup over the baseline,
-- split exactly into the acceptance gain (tokens per verify step) and the step cost (a verify
-- step's time in baseline tokens' time): speedup = acceptance_gain / step_cost.
-- grain: (campaign_id, engine, tp, workload, max_tokens, concurrency, method); key: the same
-- columns. One row per comparison of speedup_pairs (03) whose method has verify counts
-- (spec_verify_ct > 0 on at least one of its paired requests); the baseline has no row.
-- Request set: every term below is computed over ONE set, the comparison's speedup_pairs rows
-- (role 'method': M's requests, role 'baseline': the baseline's), i.e. the requests, the
-- (run, prompt) cells and the weights of the `speedup` table's point estimate
-- (stats/paired.py: exp(mean over cells of mean ln M - mean ln B)); their output_tokens,
-- spec_verify_ct, e2e_s and ttft_s come from request_metrics (joined on request_id).
-- Per request: tokens = output_tokens - 1 (the prefill token excluded), steps = spec_verify_ct,
-- decode_s = e2e_s - ttft_s. Per cell c = (run, prompt_id), means over the cell's requests:
--   g_c = mean over M's of ln(tokens / steps)      (log acceptance length: the macro
--         accept_length_of of schema/metrics.sql)
--   s_c = mean over M's of ln(decode_s / steps)    (log time of one verify step)
--   b_c = mean over the baseline's of ln(decode_s / tokens)   (log time of one baseline token)
-- Columns:
--   n_prompts, n_runs     = distinct prompt_id, run of the comparison's cells
--   n, n_baseline         = M's requests, the baseline's requests (as the speedup table's n)
--   n_verified            = M's requests with spec_verify_ct > 0
--   acceptance_gain       = exp(mean over cells of g_c): the geometric mean acceptance length
--                           (not config_summary.accept_length_tw, which is pooled over the
--                           whole window)
--   step_time_s           = exp(mean over cells of s_c)
--   baseline_token_time_s = exp(mean over cells of b_c)
--   step_cost             = step_time_s / baseline_token_time_s / drift_correction =
--                           exp(mean over cells of s_c - b_c) / speedup.drift_correction: a
--                           verify step's time in baseline tokens, with the drift along the
--                           campaign's start order taken out as the `speedup` table takes it
--                           (drift moves the time of every step, never the tokens a step
--                           yields; drift_correction is 1 where none was estimated)
--   (the four are NULL when n_verified < n: a request without a verify count would leave the
--   set, and the factors would no longer be those of the speedup's requests)
--   speedup, ci_low, ci_high = the `speedup` table's point estimate and 95% interval
--   limited_by            = NULL when acceptance_gain >= step_cost (not slower) or unknown;
--                           'acceptance' when acceptance_gain < step_cost and acceptance_gain
--                           <= 1.05 (a step yields hardly more than the one token it would
--                           without speculation); 'step cost' when acceptance_gain <
--                           step_cost and acceptance_gain > 1.05 (drafts are accepted, a step
--                           costs more than they save)
-- An identity, not a prediction: per request ln decode_tps = ln(tokens / steps) -
-- ln(decode_s / steps) for M and -ln(decode_s / tokens) for the baseline, so
--   acceptance_gain / step_cost = exp(mean over cells of (mean ln decode_tps of M
--                                 - mean ln decode_tps of the baseline)) * drift_correction
--                               = speedup
-- (to rounding). Any split of tokens/s into tokens per step and seconds per step multiplies
-- back to the speed, so nothing here predicts the speedup: the table says which factor
-- made it, on the very requests it was measured on (docs/decomposition-and-concurrency.md).

CREATE OR REPLACE TABLE speedup_decomposition AS

WITH

pairs AS (
    SELECT
        COLUMNS(comparison_key()), p.method, p.role, p.run, p.prompt_id,
        r.output_tokens - 1 AS tokens,
        r.spec_verify_ct AS steps,
        accept_length_of(r.output_tokens, r.spec_verify_ct) AS accept_length,
        r.e2e_s - r.ttft_s AS decode_s
    FROM speedup_pairs AS p
    -- only what the pair's request adds: request_metrics holds the key too
    JOIN (SELECT request_id, output_tokens, spec_verify_ct, e2e_s, ttft_s FROM request_metrics)
        AS r USING (request_id)
),

cells AS (
    SELECT
        COLUMNS(comparison_key()), method, run, prompt_id,
        count(*) FILTER (WHERE role = 'method') AS n,
        count(*) FILTER (WHERE role = 'baseline') AS n_baseline,
        count(*) FILTER (WHERE role = 'method' AND steps > 0) AS n_verified,
        avg(ln(accept_length)) FILTER (WHERE role = 'method') AS g,
        avg(CASE WHEN steps > 0 THEN ln(decode_s / steps) END)
            FILTER (WHERE role = 'method') AS s,
        avg(ln(decode_s / tokens)) FILTER (WHERE role = 'baseline') AS b
    FROM pairs
    GROUP BY ALL
),

comparisons AS (
    SELECT
        COLUMNS(comparison_key()), method,
        count(DISTINCT prompt_id) AS n_prompts,
        count(DISTINCT run) AS n_runs,
        sum(n)::BIGINT AS n,
        sum(n_baseline)::BIGINT AS n_baseline,
        sum(n_verified)::BIGINT AS n_verified,
        exp(avg(g)) AS acceptance_gain,
        exp(avg(s)) AS step_time_s,
        exp(avg(b)) AS baseline_token_time_s,
        exp(avg(s - b)) AS step_cost
    FROM cells
    GROUP BY ALL
    HAVING sum(n_verified) > 0
),

factors AS (
    SELECT
        COLUMNS(comparison_key()), method,
        n_prompts, n_runs, n, n_baseline, n_verified,
        CASE WHEN n_verified = n THEN acceptance_gain END AS acceptance_gain,
        CASE WHEN n_verified = n THEN step_time_s END AS step_time_s,
        CASE WHEN n_verified = n THEN baseline_token_time_s END AS baseline_token_time_s,
        CASE WHEN n_verified = n THEN step_cost END AS step_cost
    FROM comparisons
),

corrected AS (
    SELECT
        f.* REPLACE (f.step_cost / coalesce(s.drift_correction, 1.0) AS step_cost),
        s.speedup, s.ci_low, s.ci_high
    FROM factors AS f
    LEFT JOIN speedup AS s
        USING (campaign_id, engine, tp, workload, max_tokens, concurrency, method)
),

final AS (
    SELECT
        f.*,
        CASE
            WHEN f.acceptance_gain >= f.step_cost THEN NULL
            WHEN f.acceptance_gain <= 1.05 THEN 'acceptance'
            WHEN f.acceptance_gain > 1.05 THEN 'step cost'
        END AS limited_by
    FROM corrected AS f
)

SELECT * FROM final
