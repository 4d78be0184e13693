-- reads: analysis_params, config_summary, speedup
-- best_config: the fastest method of each measured load point, with an interval that keeps
-- its coverage although the data chose the pick.
-- grain: (campaign_id, engine, tp, workload, max_tokens, concurrency); key: the same columns.
-- Ranking (the one paired comparison the report prints, issue 24): method = argmax over the
--   methods compared at the load point, the baseline included at speedup 1 and the A/A
--   control left out, of the `speedup` table's point estimate (the geometric mean of
--   per-prompt ratios); ties by method name, the baseline first.
-- speedup, ci_low, ci_high, significant: the pick's row of `speedup` (95%, Holm).
-- pick_ci_low, pick_ci_high = speedup.sim_ci_low / sim_ci_high: the simultaneous interval
--   over the campaign's family (level 1 - 0.05 / n_family). All the family's simultaneous
--   intervals hold at once with probability >= 95%, so the one of the method picked after
--   looking does too; the pick's plain 95% interval does not (winner's curse).
-- pick_holds = pick_ci_low > 1 (the pick beats the baseline even allowing for the choice);
--   the baseline itself gets speedup 1.0, significant false, NULL intervals.
-- decode_tps_p50, throughput_tps: the pick's window (config_summary).
-- Baseline name: analysis_params.baseline (bound by analyze.build.run).
CREATE OR REPLACE TABLE best_config AS
WITH
params AS (
    SELECT baseline FROM analysis_params
),
summary AS (
    SELECT
        COLUMNS(comparison_key()), method,
        decode_tps_p50, throughput_tps
    FROM config_summary
    WHERE decode_tps_p50 IS NOT NULL
),
candidates AS (
    SELECT
        COLUMNS(comparison_key()), method,
        speedup, ci_low, ci_high, significant, sim_ci_low, sim_ci_high
    FROM speedup
    WHERE NOT is_control AND speedup IS NOT NULL AND NOT isnan(speedup)
    UNION ALL
    SELECT DISTINCT
        COLUMNS(comparison_key()), p.baseline,
        1.0, NULL, NULL, false, NULL, NULL
    FROM speedup AS s
    CROSS JOIN params AS p
),
ranked AS (
    SELECT
        c.*,
        count(*) OVER (PARTITION BY row(*COLUMNS(comparison_key()))) AS n_methods,
        -- a column, not QUALIFY: DuckDB takes a star expression (COLUMNS) in the SELECT list only
        row_number() OVER (
            PARTITION BY row(*COLUMNS(comparison_key()))
            ORDER BY speedup DESC, c.method <> p.baseline, c.method
        ) AS place
    FROM candidates AS c
    CROSS JOIN params AS p
),
picked AS (
    SELECT * EXCLUDE (place) FROM ranked WHERE place = 1
),
baseline_speed AS (
    SELECT
        COLUMNS(comparison_key()),
        s.decode_tps_p50 AS baseline_decode_tps_p50
    FROM summary AS s
    JOIN params AS p ON s.method = p.baseline
),
final AS (
    SELECT
        COLUMNS(comparison_key()),
        r.method,
        w.decode_tps_p50,
        r.speedup,
        coalesce(r.significant, false) AS significant,
        r.ci_low,
        r.ci_high,
        r.sim_ci_low AS pick_ci_low,
        r.sim_ci_high AS pick_ci_high,
        coalesce(r.sim_ci_low > 1, false) AS pick_holds,
        r.method = p.baseline AS is_baseline,
        b.baseline_decode_tps_p50,
        w.throughput_tps,
        r.n_methods
    FROM picked AS r
    CROSS JOIN params AS p
    LEFT JOIN summary AS w
        USING (campaign_id, engine, tp, workload, max_tokens, concurrency, method)
    LEFT JOIN baseline_speed AS b
        USING (campaign_id, engine, tp, workload, max_tokens, concurrency)
)
SELECT * FROM final
