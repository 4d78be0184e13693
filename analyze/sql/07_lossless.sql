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
        campaign_id, engine, tp, workload, max_tokens, concurrency, method, prompt_id, rep,
        CASE WHEN output_text IS NOT NULL THEN hash(output_text) END AS output_text
    FROM measured_requests
    WHERE ok AND (turn IS NULL OR turn = 0)
),

baseline AS (
    SELECT t.* FROM texts AS t, params AS p WHERE t.method = p.baseline
),

pairs AS (
    SELECT
        m.campaign_id, m.engine, m.tp, m.workload, m.max_tokens, m.concurrency, m.method,
        m.output_text = b.output_text AS identical
    FROM texts AS m
    JOIN baseline AS b
        ON m.campaign_id = b.campaign_id AND m.engine = b.engine AND m.tp = b.tp
        AND m.workload = b.workload AND m.max_tokens = b.max_tokens
        AND m.concurrency = b.concurrency AND m.prompt_id = b.prompt_id AND m.rep = b.rep
    WHERE m.method != b.method
),

self_consistency AS (
    SELECT
        r.campaign_id, r.engine, r.tp, r.workload, r.max_tokens, r.concurrency,
        avg((r.output_text = f.output_text)::DOUBLE) AS baseline_self_identical
    FROM baseline AS r
    JOIN baseline AS f
        ON r.campaign_id = f.campaign_id AND r.engine = f.engine AND r.tp = f.tp
        AND r.workload = f.workload AND r.max_tokens = f.max_tokens
        AND r.concurrency = f.concurrency AND r.prompt_id = f.prompt_id
        AND f.rep = 0 AND r.rep > 0
    GROUP BY ALL
),

final AS (
    SELECT
        p.campaign_id, p.engine, p.tp, p.workload, p.max_tokens, p.concurrency, p.method,
        count(*) AS n_pairs,
        count(*) FILTER (WHERE p.identical) AS n_identical,
        count(*) FILTER (WHERE p.identical) / count(*) AS share_identical,
        any_value(s.baseline_self_identical) AS baseline_self_identical
    FROM pairs AS p
    LEFT JOIN self_consistency AS s
        ON p.campaign_id = s.campaign_id AND p.engine = s.engine AND p.tp = s.tp
        AND p.workload = s.workload AND p.max_tokens = s.max_tokens
        AND p.concurrency = s.concurrency
    GROUP BY ALL
)

SELECT * FROM final
