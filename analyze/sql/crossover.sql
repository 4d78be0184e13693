-- reads: speedup
-- crossover: the concurrency at which speculation stops paying, per method and setting.
-- grain: (campaign_id, engine, tp, workload, max_tokens, method); key: the same columns.
-- Input: the `speedup` table, claims only (not the A/A control). A level is one measured
--   concurrency of the group with a point estimate; its interval may be NULL (too few prompts).
-- Per level (the campaign's adjusted significance, speedup.significant = Holm's p < 0.05):
--   pays   = significant AND ci_low > 1   (faster, a claim the family backs)
--   slower = significant AND ci_high < 1  (slower, likewise)
--   else not separable from 1 at this sample size: neither "pays" nor "stops paying".
-- "Stops paying" is said only of a level that is significantly slower (issue 24): a level
--   whose interval holds 1 may still pay; it only lacks the data to say so.
-- status:
--   'single level'           fewer than 2 levels: nothing to cross.
--   'always pays'            every level pays.
--   'stops paying'           pays at the lowest level and a higher level is significantly
--                            slower: crossover_concurrency = the lowest such level.
--   'undetermined'           pays at the lowest level; some higher level does not pay, none
--                            is significantly slower: where it stops is not measured (paid_up_to
--                            set); or no level pays and not every level is significantly
--                            slower: whether it pays at all is not measured (paid_up_to NULL).
--   'never pays'             every level is significantly slower (issue 36: a level whose
--                            interval holds 1, or that has none, may pay; "never pays" is said
--                            only where the data rule it out at every level).
--   'pays only above lowest' the lowest level does not pay but a higher one does.
-- Columns: paid_up_to = the highest level up to which every level pays (NULL when the lowest
--   does not); first_unpaid_concurrency = the lowest level that does not pay (the old
--   "crossover", kept under its honest name); crossover_concurrency (and its speedup and CI)
--   only for 'stops paying'; point_crossover_concurrency = the lowest level above a level
--   whose point estimate is >= 1 where the point estimate falls below 1 (where the estimate
--   crosses 1, significant or not); first_slower_concurrency = the lowest significantly
--   slower level; pays_again_above = a level above crossover_concurrency (or, when
--   undetermined, above first_unpaid_concurrency) pays.
CREATE OR REPLACE TABLE crossover AS
WITH
levels AS (
    SELECT
        COLUMNS(comparison_key()), method,
        speedup, ci_low, ci_high,
        coalesce(significant AND ci_low > 1, false) AS pays,
        coalesce(significant AND ci_high < 1, false) AS slower
    FROM speedup
    WHERE NOT is_control AND speedup IS NOT NULL AND NOT isnan(speedup)
),
point_cross AS (
    SELECT campaign_id, engine, tp, workload, max_tokens, method,
           min(concurrency) AS point_crossover_concurrency
    FROM (
        SELECT *, max(speedup) OVER (
            PARTITION BY campaign_id, engine, tp, workload, max_tokens, method
            ORDER BY concurrency ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ) AS best_below
        FROM levels
    )
    WHERE speedup < 1 AND best_below >= 1
    GROUP BY ALL
),
groups AS (
    SELECT
        campaign_id, engine, tp, workload, max_tokens, method,
        count(*) AS n_levels,
        list(concurrency ORDER BY concurrency) AS concurrencies,
        min(concurrency) AS lowest_concurrency,
        max(concurrency) AS highest_concurrency,
        arg_min(pays, concurrency) AS lowest_pays,
        bool_or(pays) AS any_pays,
        bool_and(pays) AS all_pay,
        bool_and(slower) AS all_slower,
        min(concurrency) FILTER (WHERE NOT pays) AS first_unpaid_concurrency,
        min(concurrency) FILTER (WHERE slower) AS first_slower_concurrency
    FROM levels
    GROUP BY ALL
),
located AS (
    SELECT
        g.*,
        CASE WHEN g.n_levels >= 2 AND g.lowest_pays THEN g.first_slower_concurrency END
            AS crossover_concurrency,
        CASE WHEN g.lowest_pays THEN coalesce(
            (SELECT max(v.concurrency) FROM levels AS v
             WHERE v.campaign_id = g.campaign_id AND v.engine = g.engine AND v.tp = g.tp
               AND v.workload = g.workload AND v.max_tokens = g.max_tokens
               AND v.method = g.method AND v.concurrency < g.first_unpaid_concurrency),
            g.highest_concurrency) END AS paid_up_to
    FROM groups AS g
),
around AS (
    SELECT
        l.campaign_id, l.engine, l.tp, l.workload, l.max_tokens, l.method,
        coalesce(bool_or(v.pays) FILTER (
            WHERE v.concurrency > coalesce(l.crossover_concurrency,
                                           l.first_unpaid_concurrency)), false)
            AS pays_again_above,
        any_value(v.speedup) FILTER (WHERE v.concurrency = l.crossover_concurrency)
            AS crossover_speedup,
        any_value(v.ci_low) FILTER (WHERE v.concurrency = l.crossover_concurrency)
            AS crossover_ci_low,
        any_value(v.ci_high) FILTER (WHERE v.concurrency = l.crossover_concurrency)
            AS crossover_ci_high
    FROM located AS l
    JOIN levels AS v USING (campaign_id, engine, tp, workload, max_tokens, method)
    GROUP BY ALL
),
final AS (
    SELECT
        l.campaign_id, l.engine, l.tp, l.workload, l.max_tokens, l.method,
        CASE
            WHEN l.n_levels < 2 THEN 'single level'
            WHEN l.all_pay THEN 'always pays'
            WHEN l.all_slower THEN 'never pays'
            WHEN NOT l.any_pays THEN 'undetermined'
            WHEN NOT l.lowest_pays THEN 'pays only above lowest'
            WHEN l.crossover_concurrency IS NOT NULL THEN 'stops paying'
            ELSE 'undetermined'
        END AS status,
        l.crossover_concurrency,
        a.crossover_speedup,
        a.crossover_ci_low,
        a.crossover_ci_high,
        l.paid_up_to,
        l.first_unpaid_concurrency,
        p.point_crossover_concurrency,
        l.first_slower_concurrency,
        CASE WHEN l.n_levels >= 2 AND l.lowest_pays AND NOT l.all_pay
             THEN a.pays_again_above ELSE false END AS pays_again_above,
        l.n_levels,
        l.concurrencies,
        l.lowest_concurrency,
        l.highest_concurrency
    FROM located AS l
    JOIN around AS a USING (campaign_id, engine, tp, workload, max_tokens, method)
    LEFT JOIN point_cross AS p USING (campaign_id, engine, tp, workload, max_tokens, method)
)
SELECT * FROM final
