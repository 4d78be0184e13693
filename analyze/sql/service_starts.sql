-- reads: services
-- service_starts: every service start of every campaign, in the order it happened: the
-- replicate of the analysis (stats/starts.py) and the record of the campaign's order.
-- grain: service start; key: (campaign_id, service_id).
-- Columns: campaign_id, service_id, config_id, engine, method, tp, run (the round: each round
-- starts every configuration of a phase once, collect.scheduling.order), replica, requested_at,
-- state, as in `services`, plus
--   start_index = its position among the campaign's starts, 0, 1, ...: row_number over
--                 requested_at (then service_id) - 1. Failed starts and restarts count: each
--                 is a step of the campaign's time, along which drift is measured
--   round_position = its position among the starts of its run and phase's tp, 0, 1, ...
--                 (the counterbalanced order: reversed in every second round)

CREATE OR REPLACE TABLE service_starts AS

WITH

ordered AS (
    SELECT
        campaign_id, service_id, config_id, engine, method, tp, run, replica, requested_at,
        state,
        row_number() OVER (PARTITION BY campaign_id ORDER BY requested_at, service_id) - 1
            AS start_index,
        row_number() OVER (PARTITION BY campaign_id, run, tp ORDER BY requested_at, service_id)
            - 1 AS round_position
    FROM services
),

final AS (
    SELECT * FROM ordered
)

SELECT * FROM final
