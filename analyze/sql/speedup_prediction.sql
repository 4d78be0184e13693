-- reads: config_summary, method_families, request_metrics, speedup, speedup_pairs,
-- reads: window_acceptance
-- speedup_prediction: does the textbook model of speculative decoding, speedup = acceptance
-- length / step cost, predict a window it was not fitted on? The step cost (a verify step's
-- time in baseline tokens' time) is taken from the OTHER windows of the same method family and
-- draft length, where only the acceptance differs (a synthetic-acceptance sweep, or the same
-- drafter on other prompts), and the window's own acceptance length then predicts its speedup.
-- grain: (campaign_id, engine, tp, workload, max_tokens, concurrency, method); key: the same.
-- One row per comparison of the `speedup` table that is not the baseline.
--   accept_length    = config_summary.accept_length_tw (per request: decode tokens / verify
--                      steps) where the engine counts verify steps per request; else the
--                      window counters of the method's services on that workload,
--                      1 + sum(d_accepted) / sum(d_drafts) (vLLM without per-request metrics:
--                      window_acceptance, pooled over the workload's concurrency levels and
--                      output lengths, which its counters do not separate)
--   acceptance_source = 'requests' | 'window counters' | NULL (none: no row is predicted)
--   draft_tokens_per_step = the draft length K as the server counted it: per request,
--                      sum(draft_tokens) / sum(spec_verify_ct) over the window's ok requests
--                      (SGLang's /generate); else the window counters, sum(d_draft_tokens) /
--                      sum(d_drafts) (vLLM); NULL without either
--   speedup, ci_low, ci_high = the `speedup` table's (measured)
--   step_cost        = accept_length / speedup: the measured step cost implied by the model
--   step_time_s      = step_cost * baseline_token_time_s, where baseline_token_time_s =
--                      exp(mean over the comparison's baseline requests of ln(decode_s /
--                      (output_tokens - 1))), decode_s = e2e_s - ttft_s
--   n_siblings       = other windows with the same (campaign_id .. concurrency, family,
--                      draft_tokens_per_step rounded to a whole number) and a step_cost: the
--                      draft length counted is a little under K where drafts are cut short
--                      near the end of a reply (llama.cpp: 3.91-3.97 at K = 4, 7.71-7.78 at
--                      K = 8), so it is matched as a whole number of drafted tokens
--   predicted_step_cost = exp(mean of ln(step_cost) over those siblings) (leave one out)
--   predicted_speedup   = accept_length / predicted_step_cost
--   prediction_error    = predicted_speedup / speedup - 1
--   sibling_log_sd      = stddev_samp of ln(step_cost) over the siblings (NULL below 2)
--   pred_low, pred_high = the 95% prediction interval of the window's speedup, with 2 or more
--                      siblings: accept_length / exp(m +- t975(n - 1) * sd * sqrt(1 + 1/n)),
--                      m and sd the mean and sd of the siblings' ln(step_cost), n their count.
--                      If a family's step costs are independent draws from one log-normal
--                      (the model: step cost does not depend on the acceptance; windows
--                      differ by start-to-start and sampling noise), a window's measured
--                      speedup falls inside with probability 95% (the t prediction interval;
--                      coverage simulated in tests/unit/analyze/test_prediction_interval.py). Wide
--                      with few siblings: t975(1) = 12.7.
--   within_interval  = pred_low <= speedup <= pred_high: the model is not rejected by this
--                      window at the 5% level (NULL without an interval)
--   reason           = why a row has no prediction: 'no acceptance figure', 'no draft-length
--                      counters', 'no other window of the same family and draft length'
-- The model holds when the step cost does not depend on how many drafts are accepted; a large
-- error says it does (longer accepted runs write more KV, a tree verifies more nodes) or that
-- the windows differ in something else (docs/gpu-vllm.md).

-- t975(df): Student's t 0.975 quantile for df = 1..30 (scipy.stats.t.ppf, to 4 decimals;
-- tests/unit/analyze/test_prediction_interval.py checks them); df > 30 takes df = 30's, which is
-- wider than the true quantile (conservative)
CREATE OR REPLACE TEMP MACRO t975(df) AS list_extract(
    [12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
     2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
     2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423]::DOUBLE[],
    least(df, 30));

CREATE OR REPLACE TABLE speedup_prediction AS

WITH

counters AS (
    SELECT
        campaign_id, engine, tp, method, workload,
        sum(d_drafts) AS d_drafts,
        sum(d_draft_tokens) AS d_draft_tokens,
        sum(d_accepted) AS d_accepted
    FROM window_acceptance
    GROUP BY ALL
),

per_request AS (
    SELECT
        COLUMNS(comparison_key()), method,
        sum(draft_tokens) / nullif(sum(spec_verify_ct), 0) AS draft_tokens_per_step
    FROM request_metrics
    WHERE ok AND draft_tokens IS NOT NULL AND spec_verify_ct > 0
    GROUP BY ALL
),

baseline_time AS (
    SELECT
        COLUMNS(comparison_key()), p.method,
        exp(avg(ln(tpot_s(r.output_tokens, r.e2e_s, r.ttft_s)))) AS baseline_token_time_s
    FROM speedup_pairs AS p
    -- only what the pair's request adds: request_metrics holds the key too
    JOIN (SELECT request_id, output_tokens, e2e_s, ttft_s FROM request_metrics) AS r
        USING (request_id)
    WHERE p.role = 'baseline' AND r.output_tokens > 1 AND r.e2e_s > r.ttft_s
    GROUP BY ALL
),

windows AS (
    SELECT
        COLUMNS(comparison_key()), s.method,
        f.family,
        coalesce(c.accept_length_tw, accept_length_counters(k.d_accepted, k.d_drafts))
            AS accept_length,
        CASE
            WHEN c.accept_length_tw IS NOT NULL THEN 'requests'
            WHEN k.d_drafts > 0 THEN 'window counters'
        END AS acceptance_source,
        coalesce(q.draft_tokens_per_step, k.d_draft_tokens / nullif(k.d_drafts, 0))
            AS draft_tokens_per_step,
        s.speedup, s.ci_low, s.ci_high,
        b.baseline_token_time_s
    FROM speedup AS s
    LEFT JOIN config_summary AS c
        USING (campaign_id, engine, tp, workload, max_tokens, concurrency, method)
    LEFT JOIN counters AS k USING (campaign_id, engine, tp, method, workload)
    LEFT JOIN per_request AS q
        USING (campaign_id, engine, tp, workload, max_tokens, concurrency, method)
    LEFT JOIN method_families AS f USING (campaign_id, method)
    LEFT JOIN baseline_time AS b
        USING (campaign_id, engine, tp, workload, max_tokens, concurrency, method)
    WHERE s.method <> s.baseline AND NOT s.is_control
),

costed AS (
    SELECT
        *,
        accept_length / nullif(speedup, 0) AS step_cost,
        round(draft_tokens_per_step) AS k_key,
        row(*COLUMNS(comparison_key())) AS load_point  -- the key as one value, to join on
    FROM windows
),

predicted AS (
    SELECT
        a.load_point, a.method,
        count(b.method) AS n_siblings,
        exp(avg(ln(b.step_cost))) AS predicted_step_cost,
        stddev_samp(ln(b.step_cost)) AS sibling_log_sd
    FROM costed AS a
    LEFT JOIN costed AS b
        ON b.load_point = a.load_point AND b.family = a.family AND b.k_key = a.k_key
        AND b.method <> a.method AND b.step_cost > 0
    GROUP BY ALL
),

final AS (
    SELECT
        COLUMNS(comparison_key()), c.method,
        c.family, c.accept_length, c.acceptance_source, c.draft_tokens_per_step,
        c.speedup, c.ci_low, c.ci_high, c.step_cost,
        c.step_cost * c.baseline_token_time_s AS step_time_s,
        c.baseline_token_time_s,
        p.n_siblings, p.predicted_step_cost,
        c.accept_length / p.predicted_step_cost AS predicted_speedup,
        c.accept_length / p.predicted_step_cost / c.speedup - 1 AS prediction_error,
        p.sibling_log_sd,
        c.accept_length / exp(ln(p.predicted_step_cost) + p.half) AS pred_low,
        c.accept_length / exp(ln(p.predicted_step_cost) - p.half) AS pred_high,
        CASE
            WHEN c.accept_length IS NULL THEN 'no acceptance figure'
            WHEN c.draft_tokens_per_step IS NULL THEN 'no draft-length counters'
            WHEN p.n_siblings = 0 THEN 'no other window of the same family and draft length'
        END AS reason
    FROM costed AS c
    JOIN (
        SELECT
            *,
            CASE WHEN n_siblings >= 2
                THEN t975(n_siblings - 1) * sibling_log_sd * sqrt(1 + 1 / n_siblings)
            END AS half
        FROM predicted
    ) AS p
        USING (load_point, method)
)

SELECT * EXCLUDE (reason), speedup BETWEEN pred_low AND pred_high AS within_interval, reason
FROM final
