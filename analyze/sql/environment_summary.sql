-- reads: environment
-- environment_summary: the facts recorded about each campaign's hosts, as the report lists them.
-- grain: (campaign_id, host, key); key: the same columns (one value each).
-- Columns: campaign_id, host, key, value (the raw `environment` row: cpu.model,
-- engine.version, service.<config_id>.flags, import.* provenance of imported files, ...),
-- plus
--   topic   = the key up to its first '.' (cpu, gpu, engine, service, import, ...)
--   n_hosts = how many hosts of the campaign recorded facts (a report shows the host
--             column only when there are several)
-- No formula: this view exists so that the report reads the analysis layer only, and the
-- raw table may change under it.

CREATE OR REPLACE TABLE environment_summary AS

WITH

facts AS (
    SELECT campaign_id, host, key, value FROM environment
),

final AS (
    SELECT
        campaign_id, host, key, value,
        split_part(key, '.', 1) AS topic,
        count(DISTINCT host) OVER (PARTITION BY campaign_id) AS n_hosts
    FROM facts
)

SELECT * FROM final
