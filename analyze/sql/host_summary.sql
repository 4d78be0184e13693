-- reads: environment, services
-- host_summary: one row per host of a campaign, the facts the report's host table shows.
-- grain: (campaign_id, host); key: the same. Every host with `environment` facts has a row.
-- Columns, each read from one `environment` key of the host (NULL when not recorded):
--   os (os), cpu_model (cpu.model), cpu_count (cpu.count), memory_gb (memory.total_gb),
--   python (python), specsweep_version (specsweep.version), engine_kind (engine.kind),
--   engine_model (engine.model), driver (gpu.driver), cuda (cuda.version),
--   gpu_hour_usd (price.gpu_hour_usd as a number)
-- and derived:
--   n_gpus       = gpus as a number (0 when it says 'none' or is missing)
--   gpu_models   = the distinct gpu.<i>.name values, each as 'N x name', sorted by name
--   gpu_memory_gib = largest gpu.<i>.memory_total_mib / 1024
--   engine_build = engine.build, else engine.version, else the distinct build strings the
--                  services reported (service.<method>.tp<N>.engine.build_info or
--                  .engine.version), '; '-separated
--   n_services   = `services` rows of the campaign on this host

CREATE OR REPLACE TABLE host_summary AS

WITH

facts AS (
    SELECT campaign_id, host, key, value FROM environment
),

plain AS (
    SELECT
        campaign_id, host,
        max(value) FILTER (WHERE key = 'os') AS os,
        max(value) FILTER (WHERE key = 'cpu.model') AS cpu_model,
        max(value) FILTER (WHERE key = 'cpu.count') AS cpu_count,
        max(value) FILTER (WHERE key = 'memory.total_gb') AS memory_gb,
        max(value) FILTER (WHERE key = 'python') AS python,
        max(value) FILTER (WHERE key = 'specsweep.version') AS specsweep_version,
        max(value) FILTER (WHERE key = 'engine.kind') AS engine_kind,
        max(value) FILTER (WHERE key = 'engine.model') AS engine_model,
        max(value) FILTER (WHERE key = 'gpu.driver') AS driver,
        max(value) FILTER (WHERE key = 'cuda.version') AS cuda,
        max(try_cast(value AS DOUBLE)) FILTER (WHERE key = 'price.gpu_hour_usd') AS gpu_hour_usd,
        coalesce(max(try_cast(value AS INTEGER)) FILTER (WHERE key = 'gpus'), 0) AS n_gpus,
        max(try_cast(value AS DOUBLE)) FILTER (WHERE regexp_matches(key, '^gpu\.[0-9]+\.memory_total_mib$'))
            / 1024 AS gpu_memory_gib,
        coalesce(max(value) FILTER (WHERE key = 'engine.build'),
                 max(value) FILTER (WHERE key = 'engine.version')) AS engine_declared
    FROM facts
    GROUP BY campaign_id, host
),

gpu_names AS (
    SELECT campaign_id, host,
           string_agg(n || ' x ' || value, ', ' ORDER BY value) AS gpu_models
    FROM (
        SELECT campaign_id, host, value, count(*) AS n
        FROM facts
        WHERE regexp_matches(key, '^gpu\.[0-9]+\.name$')
        GROUP BY ALL
    )
    GROUP BY ALL
),

service_builds AS (
    SELECT campaign_id, host, string_agg(DISTINCT value, '; ' ORDER BY value) AS builds
    FROM facts
    WHERE key LIKE 'service.%'
      AND (key LIKE '%.engine.build_info' OR key LIKE '%.engine.version') AND value <> ''
    GROUP BY ALL
),

service_counts AS (
    SELECT campaign_id, host, count(*) AS n_services FROM services GROUP BY ALL
),

final AS (
    SELECT
        p.campaign_id, p.host, p.os, p.cpu_model, p.cpu_count, p.memory_gb, p.n_gpus,
        g.gpu_models, p.gpu_memory_gib, p.driver, p.cuda, p.engine_kind, p.engine_model,
        coalesce(p.engine_declared, b.builds) AS engine_build, p.python,
        p.specsweep_version, p.gpu_hour_usd, coalesce(s.n_services, 0) AS n_services
    FROM plain AS p
    LEFT JOIN gpu_names AS g USING (campaign_id, host)
    LEFT JOIN service_builds AS b USING (campaign_id, host)
    LEFT JOIN service_counts AS s USING (campaign_id, host)
)

SELECT * FROM final
