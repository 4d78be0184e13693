-- reads: method_params, services
-- method_families: each method's family and parameter values (raw method_params, written
-- when a campaign starts from the plan's `grid` / `params`), one row per method of a campaign.
-- grain: (campaign_id, method); key: the same columns. Every method with a services row.
--   family       = method_params.family; a method without method_params rows is a family of
--                  its own (family = method)
--   params_label = 'param=value' for each of its parameters, sorted by param name, joined by
--                  ', ' (value as the plan wrote it; '' without parameters)
--   n_params     = its method_params rows

CREATE OR REPLACE TABLE method_families AS

WITH

methods AS (
    SELECT DISTINCT campaign_id, method FROM services
),

params AS (
    SELECT campaign_id, method, family, param, value FROM method_params
),

labelled AS (
    SELECT
        campaign_id, method,
        any_value(family) AS family,
        string_agg(param || '=' || value, ', ' ORDER BY param) AS params_label,
        count(*) AS n_params
    FROM params
    GROUP BY ALL
),

final AS (
    SELECT
        m.campaign_id, m.method,
        coalesce(l.family, m.method) AS family,
        coalesce(l.params_label, '') AS params_label,
        coalesce(l.n_params, 0) AS n_params
    FROM methods AS m
    LEFT JOIN labelled AS l USING (campaign_id, method)
)

SELECT * FROM final
