-- speedup_decomposition: why a method is fast or slow. Its decode speedup over the baseline is
-- the acceptance gain (tokens per verify step) divided by the step cost (time of one verify
-- step in baseline tokens' time).
-- grain: (campaign_id, engine, tp, workload, max_tokens, concurrency, method); key: the same
-- columns. Methods other than the baseline (analysis_params.baseline) with verify counts:
-- request_metrics rows (measured_requests: closed loop, warm-ups and incomplete units left
-- out) that are ok with output_tokens > 1 and spec_verify_ct > 0.
--   n                     = those requests
--   decode_tokens         = sum(output_tokens - 1)    (the prefill token excluded)
--   verify_steps          = sum(spec_verify_ct)
--   decode_time_s         = sum(e2e_s - ttft_s)
--   accept_length         = decode_tokens / verify_steps   (acceptance gain; the one
--                           definition, pooled, = config_summary.accept_length_tw)
--   step_time_s           = decode_time_s / verify_steps
--   baseline_token_time_s = sum(e2e_s - ttft_s) / sum(output_tokens - 1) of the baseline's
--                           window at the same key (ok rows with output_tokens > 1)
--   step_cost             = step_time_s / baseline_token_time_s  (a verify step's cost in
--                           baseline tokens)
--   predicted_speedup     = accept_length / step_cost
--                         = decode_tps_pooled / baseline_decode_tps_pooled (the identity:
--                           decode_tps_pooled = decode_tokens / decode_time_s,
--                           baseline_decode_tps_pooled = 1 / baseline_token_time_s)
--   speedup, ci_low, ci_high, significant = the `speedup` table's (median-of-requests ratio on
--                           the shared prompts, paired bootstrap CI)
--   residual              = speedup / predicted_speedup - 1  (how far the pooled identity is
--                           from the median ratio on this data)
--   limited_by            = 'step cost' when speedup < 1 and accept_length > 1.05;
--                           'acceptance' when speedup < 1 and accept_length <= 1.05;
--                           NULL when speedup >= 1 (or unknown)

CREATE OR REPLACE TABLE speedup_decomposition AS

WITH

params AS (
    SELECT baseline FROM analysis_params
),

decoded AS (
    SELECT
        campaign_id, engine, tp, workload, max_tokens, concurrency, method,
        output_tokens, spec_verify_ct, e2e_s - ttft_s AS decode_s
    FROM request_metrics
    WHERE ok AND output_tokens > 1
),

speedups AS (
    SELECT
        campaign_id, engine, tp, workload, max_tokens, concurrency, method,
        speedup, ci_low, ci_high, significant
    FROM speedup
),

method_side AS (
    SELECT
        d.campaign_id, d.engine, d.tp, d.workload, d.max_tokens, d.concurrency, d.method,
        count(*) AS n,
        sum(d.output_tokens - 1)::BIGINT AS decode_tokens,
        sum(d.spec_verify_ct)::BIGINT AS verify_steps,
        sum(d.decode_s) AS decode_time_s
    FROM decoded AS d
    JOIN params AS p ON d.method <> p.baseline
    WHERE d.spec_verify_ct > 0
    GROUP BY ALL
),

baseline_side AS (
    SELECT
        d.campaign_id, d.engine, d.tp, d.workload, d.max_tokens, d.concurrency,
        count(*) AS n_baseline,
        sum(d.decode_s) / nullif(sum(d.output_tokens - 1), 0) AS baseline_token_time_s
    FROM decoded AS d
    JOIN params AS p ON d.method = p.baseline
    GROUP BY ALL
),

factors AS (
    SELECT
        m.*,
        b.n_baseline,
        m.decode_tokens / m.verify_steps AS accept_length,
        m.decode_time_s / m.verify_steps AS step_time_s,
        b.baseline_token_time_s,
        m.decode_time_s / m.verify_steps / nullif(b.baseline_token_time_s, 0) AS step_cost,
        m.decode_tokens / nullif(m.decode_time_s, 0) AS decode_tps_pooled,
        1 / nullif(b.baseline_token_time_s, 0) AS baseline_decode_tps_pooled
    FROM method_side AS m
    LEFT JOIN baseline_side AS b
        USING (campaign_id, engine, tp, workload, max_tokens, concurrency)
),

final AS (
    SELECT
        f.*,
        f.accept_length / nullif(f.step_cost, 0) AS predicted_speedup,
        s.speedup, s.ci_low, s.ci_high, s.significant,
        s.speedup / nullif(f.accept_length / nullif(f.step_cost, 0), 0) - 1 AS residual,
        CASE
            WHEN s.speedup < 1 AND f.accept_length > 1.05 THEN 'step cost'
            WHEN s.speedup < 1 THEN 'acceptance'
        END AS limited_by
    FROM factors AS f
    LEFT JOIN speedups AS s
        USING (campaign_id, engine, tp, workload, max_tokens, concurrency, method)
)

SELECT * FROM final
