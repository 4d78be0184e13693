-- reads: environment, windows
-- slo_targets: the latency objectives of each campaign that has them or that ran open-loop
-- windows, read from its environment rows (host 'campaign', written by collect from the
-- plan's `slo`; values are strings).
-- grain: campaign; key: campaign_id.
-- Columns:
--   ttft_ms, tpot_ms, e2e_ms = slo.ttft_ms, slo.tpot_ms, slo.e2e_ms (NULL where not given)
--   target  = slo.target, the attainment a rate must reach (0.99 when not given)
--   trim    = slo.trim, the steady-state trim fraction (0.1 when not given)
--   has_slo = at least one of ttft_ms, tpot_ms, e2e_ms is given (without it every goodput
--             and attainment column of the open-loop objects is NULL)
-- A value that is not a number counts as not given.

CREATE OR REPLACE TABLE slo_targets AS

WITH

slo_rows AS (
    SELECT campaign_id, key, TRY_CAST(value AS DOUBLE) AS value
    FROM environment
    WHERE host = 'campaign' AND key LIKE 'slo.%'
),

open_campaigns AS (
    SELECT DISTINCT campaign_id FROM windows WHERE load <> 'closed'
),

listed AS (
    SELECT campaign_id FROM slo_rows
    UNION
    SELECT campaign_id FROM open_campaigns
),

given AS (
    SELECT
        l.campaign_id,
        max(s.value) FILTER (WHERE s.key = 'slo.ttft_ms') AS ttft_ms,
        max(s.value) FILTER (WHERE s.key = 'slo.tpot_ms') AS tpot_ms,
        max(s.value) FILTER (WHERE s.key = 'slo.e2e_ms') AS e2e_ms,
        max(s.value) FILTER (WHERE s.key = 'slo.target') AS target,
        max(s.value) FILTER (WHERE s.key = 'slo.trim') AS trim
    FROM listed AS l
    LEFT JOIN slo_rows AS s USING (campaign_id)
    GROUP BY l.campaign_id
),

final AS (
    SELECT
        campaign_id, ttft_ms, tpot_ms, e2e_ms,
        coalesce(target, 0.99) AS target,
        coalesce(trim, 0.1) AS trim,
        ttft_ms IS NOT NULL OR tpot_ms IS NOT NULL OR e2e_ms IS NOT NULL AS has_slo
    FROM given
)

SELECT * FROM final
