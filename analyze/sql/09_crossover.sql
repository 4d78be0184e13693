-- crossover: the concurrency at which speculation stops paying, per method and setting.
-- grain: (campaign_id, engine, tp, workload, max_tokens, method); key: the same columns.
-- Input: the `speedup` table. A level is one measured concurrency of the group whose CI is
--   known (ci_low and ci_high neither NULL nor NaN); the others are left out.
-- Per level: pays = ci_low > 1 (significantly faster), slower = ci_high < 1 (significantly
--   slower), else the CI includes 1 (a bound equal to 1 counts as included, as in
--   speedup.significant).
-- Rule: "stops paying" needs that it paid. Scanning upwards from the lowest level, the
--   crossover is the first level that does not pay, provided every level below it pays;
--   the first such level counts even if a higher one pays again (pays_again_above = true).
-- status:
--   'single level'          fewer than 2 levels: nothing to cross.
--   'always pays'           every level pays: the crossover is beyond the highest level.
--   'crosses'               pays at the lowest level; the crossover level's CI includes 1.
--   'slows down'            pays at the lowest level; the crossover level's CI lies below 1.
--   'never pays'            no level pays (the lowest includes 1 or is already below it).
--   'pays only above lowest' the lowest level does not pay but a higher one does: no
--                           crossover from paying to not paying exists to report.
-- crossover_concurrency (and its speedup and CI) is set only for 'crosses' and
--   'slows down'; paid_up_to = the highest level below it (all pay). first_slower_concurrency
--   = the lowest level whose CI lies below 1, whatever the status.

CREATE OR REPLACE TABLE crossover AS

WITH

levels AS (
    SELECT
        campaign_id, engine, tp, workload, max_tokens, method, concurrency,
        speedup, ci_low, ci_high,
        ci_low > 1 AS pays,
        ci_high < 1 AS slower
    FROM speedup
    WHERE ci_low IS NOT NULL AND ci_high IS NOT NULL
      AND NOT isnan(ci_low) AND NOT isnan(ci_high)
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
        min(concurrency) FILTER (WHERE NOT pays) AS first_unpaid,
        min(concurrency) FILTER (WHERE slower) AS first_slower_concurrency
    FROM levels
    GROUP BY ALL
),

located AS (
    SELECT
        g.*,
        CASE WHEN g.n_levels >= 2 AND g.lowest_pays THEN g.first_unpaid END
            AS crossover_concurrency
    FROM groups AS g
),

around AS (
    SELECT
        l.campaign_id, l.engine, l.tp, l.workload, l.max_tokens, l.method,
        max(v.concurrency) FILTER (WHERE v.concurrency < l.crossover_concurrency)
            AS paid_up_to,
        coalesce(bool_or(v.pays) FILTER (WHERE v.concurrency > l.crossover_concurrency),
                 false) AS pays_again_above,
        any_value(v.slower) FILTER (WHERE v.concurrency = l.crossover_concurrency)
            AS crossover_slower,
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
            WHEN NOT l.any_pays THEN 'never pays'
            WHEN NOT l.lowest_pays THEN 'pays only above lowest'
            WHEN l.crossover_concurrency IS NULL THEN 'always pays'
            WHEN a.crossover_slower THEN 'slows down'
            ELSE 'crosses'
        END AS status,
        l.crossover_concurrency,
        a.crossover_speedup, a.crossover_ci_low, a.crossover_ci_high,
        a.paid_up_to, a.pays_again_above,
        l.first_slower_concurrency,
        l.n_levels, l.concurrencies, l.lowest_concurrency, l.highest_concurrency
    FROM located AS l
    JOIN around AS a USING (campaign_id, engine, tp, workload, max_tokens, method)
)

SELECT * FROM final
