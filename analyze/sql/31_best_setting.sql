-- best_setting: the setting to deploy at each load, per method family: the member with the
-- highest speedup whose interval lies above 1, or speculation off when none has one.
-- grain: (campaign_id, engine, tp, workload, max_tokens, load_kind, load, family); key: the
-- same columns.
--   load_kind 'concurrency': load = concurrency; candidates = the `speedup` table's rows
--             (decode speedup, paired prompt bootstrap CI)
--   load_kind 'rate': load = offered requests/s; candidates = rate_speedup's rows (steady TPOT
--             speedup tpot_speedup, tpot_speedup_lo / _hi), engine = the method's service's
--   family  = method_families.family; '(any)' = every non-baseline method of the key together
--   n_candidates = the family's methods compared at the key (whatever their interval)
--   method, params_label, speedup, ci_low, ci_high = the best candidate: the highest speedup
--             among those with ci_low > 1 (ties: the method name first in order); all NULL
--             when none has ci_low > 1
--   decision = 'method' (a candidate pays) | 'off' (speculation off: none does)
-- NaN figures never count as paying.

CREATE OR REPLACE TABLE best_setting AS

WITH

families AS (
    SELECT campaign_id, method, family, params_label FROM method_families
),

engines AS (
    SELECT campaign_id, tp, method, any_value(engine) AS engine
    FROM services
    GROUP BY ALL
),

closed AS (
    SELECT
        campaign_id, engine, tp, workload, max_tokens, 'concurrency' AS load_kind,
        concurrency::DOUBLE AS load, method, speedup, ci_low, ci_high
    FROM speedup
),

opened AS (
    SELECT
        r.campaign_id, e.engine, r.tp, r.workload, r.max_tokens, 'rate' AS load_kind,
        r.rate AS load, r.method,
        r.tpot_speedup AS speedup, r.tpot_speedup_lo AS ci_low, r.tpot_speedup_hi AS ci_high
    FROM rate_speedup AS r
    JOIN engines AS e USING (campaign_id, tp, method)
),

candidates AS (
    SELECT
        c.*,
        coalesce(f.family, c.method) AS family,
        coalesce(f.params_label, '') AS params_label,
        c.ci_low > 1 AND NOT isnan(c.ci_low) AND NOT isnan(c.speedup) AS pays
    FROM (SELECT * FROM closed UNION ALL SELECT * FROM opened) AS c
    LEFT JOIN families AS f USING (campaign_id, method)
),

grouped AS (
    SELECT * FROM candidates
    UNION ALL
    SELECT * REPLACE ('(any)' AS family) FROM candidates
),

counts AS (
    SELECT
        campaign_id, engine, tp, workload, max_tokens, load_kind, load, family,
        count(*) AS n_candidates
    FROM grouped
    GROUP BY ALL
),

best AS (
    SELECT
        campaign_id, engine, tp, workload, max_tokens, load_kind, load, family,
        method, params_label, speedup, ci_low, ci_high
    FROM grouped
    WHERE pays
    QUALIFY row_number() OVER (
        PARTITION BY campaign_id, engine, tp, workload, max_tokens, load_kind, load, family
        ORDER BY speedup DESC, method
    ) = 1
),

final AS (
    SELECT
        c.campaign_id, c.engine, c.tp, c.workload, c.max_tokens, c.load_kind, c.load,
        c.family, b.method, b.params_label, b.speedup, b.ci_low, b.ci_high, c.n_candidates,
        CASE WHEN b.method IS NULL THEN 'off' ELSE 'method' END AS decision
    FROM counts AS c
    LEFT JOIN best AS b
        USING (campaign_id, engine, tp, workload, max_tokens, load_kind, load, family)
)

SELECT * FROM final
