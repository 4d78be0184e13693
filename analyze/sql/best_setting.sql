-- reads: method_families, rate_speedup, services, speedup
-- best_setting: the setting to deploy at each load, per method family: the member with the
-- highest speedup among those the campaign's family-wise test backs, or speculation off when
-- none is backed.
-- grain: (campaign_id, engine, tp, workload, max_tokens, load_kind, load, family); key: the
-- same columns.
--   load_kind 'concurrency': load = concurrency; candidates = the `speedup` table's claims
--             (not the A/A control): decode speedup, Holm-adjusted `significant`
--   load_kind 'rate': load = offered requests/s; candidates = rate_speedup's claims (steady
--             TPOT speedup tpot_speedup), engine = the method's service's
--   family  = method_families.family; '(any)' = every non-baseline method of the key together
--   n_candidates = the family's methods compared at the key (whatever their interval)
--   pays    = significant (Holm) AND speedup > 1
--   method, params_label, speedup = the best candidate: the highest speedup among those that
--             pay (ties: the method name first in order); all NULL when none pays
--   ci_low, ci_high = the pick's SIMULTANEOUS interval (sim_ci_low / sim_ci_high: level
--             1 - 0.05 / n_family over the campaign's claims). The pick was chosen by looking
--             at the candidates, so its plain 95% interval would overstate it (issue 24: the
--             '(any)' pick of about 9 candidates read 1.22x [1.00, 1.43]); the simultaneous
--             interval holds for every claim at once, the pick included.
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
        concurrency::DOUBLE AS load, method, speedup, significant,
        sim_ci_low AS ci_low, sim_ci_high AS ci_high
    FROM speedup
    WHERE NOT is_control
),

opened AS (
    SELECT
        r.campaign_id, e.engine, r.tp, r.workload, r.max_tokens, 'rate' AS load_kind,
        r.rate AS load, r.method,
        r.tpot_speedup AS speedup, r.significant,
        r.sim_ci_low AS ci_low, r.sim_ci_high AS ci_high
    FROM rate_speedup AS r
    JOIN engines AS e USING (campaign_id, tp, method)
    WHERE NOT r.is_control
),

candidates AS (
    SELECT
        c.*,
        coalesce(f.family, c.method) AS family,
        coalesce(f.params_label, '') AS params_label,
        coalesce(c.significant AND c.speedup > 1 AND NOT isnan(c.speedup), false) AS pays
    FROM (SELECT * FROM closed UNION ALL BY NAME SELECT * FROM opened) AS c
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
