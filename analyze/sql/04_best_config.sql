-- best_config: the fastest method of each measured load point.
-- grain: (campaign_id, engine, tp, workload, max_tokens, concurrency); key: the same columns.
-- method = argmax over methods (baseline included) of config_summary.decode_tps_p50
--          (ties broken by method name, so the choice is deterministic).
-- speedup, ci_low, ci_high, significant: from the speedup table for that method;
--   the baseline itself gets speedup = 1.0, significant = false, NULL CI.
-- Baseline name: analysis_params.baseline (bound by analyze.build.run).

CREATE OR REPLACE TABLE best_config AS

WITH

params AS (
    SELECT baseline FROM analysis_params
),

summary AS (
    SELECT
        campaign_id, engine, tp, workload, max_tokens, concurrency, method,
        decode_tps_p50, throughput_tps
    FROM config_summary
    WHERE decode_tps_p50 IS NOT NULL
),

speedups AS (
    SELECT
        campaign_id, engine, tp, workload, max_tokens, concurrency, method,
        speedup, ci_low, ci_high, significant
    FROM speedup
),

ranked AS (
    SELECT
        *,
        count(*) OVER (
            PARTITION BY campaign_id, engine, tp, workload, max_tokens, concurrency
        ) AS n_methods
    FROM summary
    QUALIFY row_number() OVER (
        PARTITION BY campaign_id, engine, tp, workload, max_tokens, concurrency
        ORDER BY decode_tps_p50 DESC, method
    ) = 1
),

baseline_speed AS (
    SELECT
        s.campaign_id, s.engine, s.tp, s.workload, s.max_tokens, s.concurrency,
        s.decode_tps_p50 AS baseline_decode_tps_p50
    FROM summary AS s
    JOIN params AS p ON s.method = p.baseline
),

final AS (
    SELECT
        r.campaign_id, r.engine, r.tp, r.workload, r.max_tokens, r.concurrency,
        r.method,
        r.decode_tps_p50,
        CASE WHEN r.method = p.baseline THEN 1.0 ELSE sp.speedup END AS speedup,
        CASE WHEN r.method = p.baseline THEN false ELSE sp.significant END AS significant,
        CASE WHEN r.method <> p.baseline THEN sp.ci_low END AS ci_low,
        CASE WHEN r.method <> p.baseline THEN sp.ci_high END AS ci_high,
        r.method = p.baseline AS is_baseline,
        b.baseline_decode_tps_p50,
        r.throughput_tps,
        r.n_methods
    FROM ranked AS r
    CROSS JOIN params AS p
    LEFT JOIN speedups AS sp
        USING (campaign_id, engine, tp, workload, max_tokens, concurrency, method)
    LEFT JOIN baseline_speed AS b
        USING (campaign_id, engine, tp, workload, max_tokens, concurrency)
)

SELECT * FROM final
