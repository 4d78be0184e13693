-- reads: analysis_params, measured_requests
-- lossless: does a speculative method produce the baseline's text? At temperature 0 a
-- lossless method should repeat the autoregressive output exactly.
-- grain: (campaign_id, engine, tp, workload, max_tokens, concurrency, method), key: same.
-- Pairs: a method's ok request and the baseline's ok request with the same prompt_id and
--   rep in the same (campaign, engine, tp, workload, max_tokens, concurrency); agentic
--   turns after the first are left out (their context holds each method's own replies).
-- share_identical = n_identical / n_pairs (output_text equal byte for byte; compared by
--   their 64-bit DuckDB hash, so that joins carry 8 bytes instead of every text: a false
--   "identical" needs a hash collision, about 1 in 10^19 per pair).
-- baseline_self_identical: share of the baseline's own repetitions (rep > 0) whose text
--   equals its rep 0 for the same prompt: the noise floor. Below 1 the engine itself is not
--   deterministic here (batch composition and kernel choice change float rounding, e.g.
--   at concurrency > 1), so a method cannot be expected to match more often than that.

CREATE OR REPLACE TABLE lossless AS

WITH

params AS (
    SELECT baseline FROM analysis_params
),

texts AS (
    SELECT
        COLUMNS(comparison_key()), method, prompt_id, rep,
        CASE WHEN output_text IS NOT NULL THEN hash(output_text) END AS output_text
    FROM measured_requests
    WHERE ok AND (turn IS NULL OR turn = 0)
),

baseline AS (
    SELECT t.* FROM texts AS t, params AS p WHERE t.method = p.baseline
),

pairs AS (
    SELECT
        COLUMNS(comparison_key()), m.method,
        m.output_text = b.output_text AS identical
    FROM texts AS m
    JOIN baseline AS b
        USING (campaign_id, engine, tp, workload, max_tokens, concurrency, prompt_id, rep)
    WHERE m.method != b.method
),

self_consistency AS (
    SELECT
        COLUMNS(comparison_key()),
        avg((r.output_text = f.output_text)::DOUBLE) AS baseline_self_identical
    FROM baseline AS r
    JOIN baseline AS f
        USING (campaign_id, engine, tp, workload, max_tokens, concurrency, prompt_id)
    WHERE f.rep = 0 AND r.rep > 0
    GROUP BY ALL
),

final AS (
    SELECT
        COLUMNS(comparison_key()), p.method,
        count(*) AS n_pairs,
        count(*) FILTER (WHERE p.identical) AS n_identical,
        count(*) FILTER (WHERE p.identical) / count(*) AS share_identical,
        any_value(s.baseline_self_identical) AS baseline_self_identical
    FROM pairs AS p
    LEFT JOIN self_consistency AS s
        USING (campaign_id, engine, tp, workload, max_tokens, concurrency)
    GROUP BY ALL
)

SELECT * FROM final
