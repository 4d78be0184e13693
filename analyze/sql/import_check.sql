-- reads: environment, latency_conventions
-- import_check: for files imported by `specsweep import`, each summary figure the
-- tool printed beside the same figure recomputed from the imported requests.
-- grain: (campaign_id, run, metric, stat); key: the same columns. Only imported campaigns
-- (environment key 'import.tool': vllm | sglang, also a column) have rows; run k is the
-- k-th JSON object of the file (0-based).
-- Reads environment (the importer stores every scalar field of run k as
-- 'import.run<k>.<field>' = its JSON text) and latency_conventions (08), whose window of run
-- k is window_id = campaign_id || '-w' || k (the importer's naming).
--   metric       ttft | tpot | itl | e2el; stat: mean | median | std | p99
--   file_ms      = the file's '<stat>_<metric>_ms' (SGLang names e2el '<stat>_e2e_latency_ms')
--   specsweep_ms = latency_conventions.<metric>_ms_<stat> of that window (NULL: no value)
--   file_printed, specsweep_printed = printf('%.2f', ...), the way both tools print them;
--                  a missing value prints 0.00, as the tools print a statistic over nothing
--   match        = file_printed = specsweep_printed (equal to the printed digit)

CREATE OR REPLACE TABLE import_check AS

WITH

tools AS (
    SELECT campaign_id, trim(value, '"') AS tool
    FROM environment
    WHERE key = 'import.tool'
),

file_fields AS (
    SELECT
        e.campaign_id,
        t.tool,
        CAST(regexp_extract(e.key, '^import\.run(\d+)\.', 1) AS INTEGER) AS run,
        regexp_extract(e.key, '^import\.run\d+\.(mean|median|std|p99)_', 1) AS stat,
        regexp_extract(e.key, '_(ttft|tpot|itl|e2el|e2e_latency)_ms$', 1) AS field_metric,
        TRY_CAST(e.value AS DOUBLE) AS file_ms
    FROM environment AS e
    JOIN tools AS t USING (campaign_id)
    WHERE regexp_matches(
        e.key, '^import\.run\d+\.(mean|median|std|p99)_(ttft|tpot|itl|e2el|e2e_latency)_ms$'
    )
),

file_figures AS (
    -- each tool's own name for E2E latency; a stray key of the other spelling is not its figure
    SELECT
        campaign_id, tool, run, stat, file_ms,
        CASE WHEN field_metric = 'e2e_latency' THEN 'e2el' ELSE field_metric END AS metric
    FROM file_fields
    WHERE file_ms IS NOT NULL
      AND NOT (tool = 'sglang' AND field_metric = 'e2el')
      AND NOT (tool <> 'sglang' AND field_metric = 'e2e_latency')
),

ours AS (
    SELECT window_id, figure, specsweep_ms
    FROM (
        UNPIVOT latency_conventions
        ON COLUMNS('^(ttft|tpot|itl|e2el)_ms_(mean|median|std|p99)$')
        INTO NAME figure VALUE specsweep_ms
    )
),

windows AS (
    SELECT DISTINCT campaign_id, workload, window_id FROM latency_conventions
),

final AS (
    SELECT
        f.campaign_id, f.tool, f.run, w.workload, f.metric, f.stat,
        f.file_ms,
        o.specsweep_ms,
        printf('%.2f', f.file_ms) AS file_printed,
        printf('%.2f', coalesce(nullif(o.specsweep_ms, 'NaN'::DOUBLE), 0)) AS specsweep_printed,
        printf('%.2f', f.file_ms)
            = printf('%.2f', coalesce(nullif(o.specsweep_ms, 'NaN'::DOUBLE), 0)) AS match
    FROM file_figures AS f
    LEFT JOIN windows AS w
        ON w.campaign_id = f.campaign_id AND w.window_id = f.campaign_id || '-w' || f.run
    LEFT JOIN ours AS o
        ON o.window_id = w.window_id AND o.figure = f.metric || '_ms_' || f.stat
)

SELECT * FROM final
