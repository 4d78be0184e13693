-- reads: config_summary, method_params, speedup
-- param_sweep: acceptance and speedup against a swept parameter of a method family, one row
-- per measured window of a family member and parameter it sweeps.
-- grain: (campaign_id, engine, tp, workload, max_tokens, concurrency, family, param, held,
-- method); key: the same columns. Only parameters with at least 2 distinct values among the
-- family's methods (method_params); a parameter carried by hand by one method is no sweep.
--   value, value_num = the method's value of param (as written; as a number, NULL if none)
--   held             = the method's OTHER parameters, 'p=v' sorted by name and joined by ', '
--                      ('' in a one-parameter grid): one line per held in a 2-parameter grid
--   speedup, ci_low, ci_high, significant = the `speedup` table's (NULL for the baseline)
--   accept_length    = config_summary.accept_length_tw: sum(output_tokens - 1) /
--                      sum(spec_verify_ct), the one definition, pooled over the window
--   engine_accept_length = config_summary.engine_accept_length_rw (avg of the engine's own)
--   n                = ok requests of the window (config_summary.n_ok)
--   best_speedup     = the highest speedup of its (campaign_id .. concurrency, family, param,
--                      held) group; best_acceptance = the highest accept_length of the group.
--                      One row each (ties: the lowest value); false where the figure is NULL.

CREATE OR REPLACE TABLE param_sweep AS

WITH

params AS (
    SELECT campaign_id, method, family, param, value, value_num FROM method_params
),

windows AS (
    SELECT
        COLUMNS(comparison_key()), method,
        accept_length_tw AS accept_length,
        engine_accept_length_rw AS engine_accept_length,
        n_ok AS n
    FROM config_summary
),

speedups AS (
    SELECT
        COLUMNS(comparison_key()), method,
        speedup, ci_low, ci_high, significant
    FROM speedup
),

swept AS (
    SELECT campaign_id, family, param
    FROM params
    GROUP BY ALL
    HAVING count(DISTINCT value) >= 2
),

held AS (
    SELECT
        p.campaign_id, p.method, p.param,
        string_agg(o.param || '=' || o.value, ', ' ORDER BY o.param) AS held
    FROM params AS p
    JOIN params AS o
        ON o.campaign_id = p.campaign_id AND o.method = p.method AND o.param <> p.param
    GROUP BY ALL
),

points AS (
    SELECT p.campaign_id, p.family, p.param, coalesce(h.held, '') AS held, p.method,
           p.value, p.value_num
    FROM params AS p
    SEMI JOIN swept AS s USING (campaign_id, family, param)
    LEFT JOIN held AS h USING (campaign_id, method, param)
),

joined AS (
    SELECT
        COLUMNS(comparison_key()),
        p.family, p.param, p.held, w.method, p.value, p.value_num,
        s.speedup, s.ci_low, s.ci_high, s.significant,
        w.accept_length, w.engine_accept_length, w.n
    FROM windows AS w
    JOIN points AS p USING (campaign_id, method)
    LEFT JOIN speedups AS s
        USING (campaign_id, engine, tp, workload, max_tokens, concurrency, method)
),

-- the places are columns of their own: DuckDB takes COLUMNS(...) only as a whole SELECT item
ranked AS (
    SELECT
        *,
        row_number() OVER (
            PARTITION BY row(*COLUMNS(comparison_key())), family, param, held
            ORDER BY speedup DESC NULLS LAST, value_num NULLS LAST, value
        ) AS speedup_place,
        row_number() OVER (
            PARTITION BY row(*COLUMNS(comparison_key())), family, param, held
            ORDER BY accept_length DESC NULLS LAST, value_num NULLS LAST, value
        ) AS acceptance_place
    FROM joined
),

final AS (
    SELECT
        * EXCLUDE (speedup_place, acceptance_place),
        speedup IS NOT NULL AND speedup_place = 1 AS best_speedup,
        accept_length IS NOT NULL AND acceptance_place = 1 AS best_acceptance
    FROM ranked
)

SELECT * FROM final
