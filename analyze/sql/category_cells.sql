-- reads: request_metrics, service_starts, speedup_pairs
-- category_cells: the speedup's (run, prompt) cells labelled with the prompt's category, the
-- input of analyze/category.py (the category_speedup and category_pooled tables). A TEMP view:
-- gone when `specsweep analyze` ends.
-- grain: (campaign_id, engine, tp, workload, max_tokens, concurrency, method, run, prompt_id);
-- key: the same columns. One row per cell of speedup_pairs (03): the requests, prompts and
-- runs of the `speedup` table, so a category's speedup is the window's paired comparison
-- restricted to the category's prompts, nothing else changed.
--   category   = the prompt's category (requests.category: MT-Bench's 8, code, chat,
--                summarize, agentic, trace, inline): min(category) over the measured requests
--                of (campaign_id, workload, prompt_id), every method's, so that both sides of
--                a pair and every window read the same label
--   d          = mean ln decode_tps of M's requests in the cell - the baseline's (stats/paired.py's
--                d[r, p]: the speedup is exp(mean d))
--   n, n_baseline = M's and the baseline's requests in the cell
--   n_verified = M's requests with output_tokens > 1 and spec_verify_ct > 0
--   g          = mean over those of ln((output_tokens - 1) / spec_verify_ct) (log acceptance
--                length, schema/metrics.sql's accept_length_of); NULL without one
--   tokens, steps = sum(output_tokens - 1), sum(spec_verify_ct) over the same requests (the
--                pooled acceptance length is sum(tokens) / sum(steps): accept_length_tw)
--   dt         = mean start position (service_starts.start_index) of M's requests in the cell
--                - the baseline's: the drift correction's input (stats/paired.py); NULL for
--                imported rows

CREATE OR REPLACE TEMP VIEW category_cells AS

WITH

prompt_category AS (
    SELECT campaign_id, workload, prompt_id, min(category) AS category
    FROM request_metrics
    GROUP BY ALL
),

pairs AS (
    SELECT
        COLUMNS(comparison_key()), p.method,
        p.role, p.run, p.prompt_id, ln(p.decode_tps) AS log_tps,
        accept_length_of(r.output_tokens, r.spec_verify_ct) AS accept_length,
        r.output_tokens - 1 AS tokens, r.spec_verify_ct AS steps, s.start_index
    FROM speedup_pairs AS p
    -- only what the pair's request and its start add (both tables hold the key too)
    JOIN (SELECT request_id, output_tokens, spec_verify_ct FROM request_metrics) AS r
        USING (request_id)
    LEFT JOIN (SELECT campaign_id, service_id, start_index FROM service_starts) AS s
        USING (campaign_id, service_id)
),

cells AS (
    SELECT
        COLUMNS(comparison_key()), method, run, prompt_id,
        avg(log_tps) FILTER (WHERE role = 'method')
            - avg(log_tps) FILTER (WHERE role = 'baseline') AS d,
        count(*) FILTER (WHERE role = 'method') AS n,
        count(*) FILTER (WHERE role = 'baseline') AS n_baseline,
        count(accept_length) FILTER (WHERE role = 'method') AS n_verified,
        avg(ln(accept_length)) FILTER (WHERE role = 'method') AS g,
        sum(tokens) FILTER (WHERE role = 'method' AND accept_length IS NOT NULL) AS tokens,
        sum(steps) FILTER (WHERE role = 'method' AND accept_length IS NOT NULL) AS steps,
        avg(start_index) FILTER (WHERE role = 'method')
            - avg(start_index) FILTER (WHERE role = 'baseline') AS dt
    FROM pairs
    GROUP BY ALL
),

final AS (
    SELECT c.*, k.category
    FROM cells AS c
    JOIN prompt_category AS k USING (campaign_id, workload, prompt_id)
)

SELECT * FROM final
