-- reads: request_metrics
-- colocation: did running beside other services (GPU packing) disturb a configuration?
-- grain: (campaign_id, engine, tp, method, workload, max_tokens, concurrency); one row per
-- window that has ok requests. Requests split by request_metrics.colocated:
--   n_alone, n_colocated            ok requests measured alone / beside other services
--   neighbours_max                  most services that ran beside one of its units
--   decode_tps_p50_alone/_colocated median decode tok/s of each group
--   ttft_p50_alone/_colocated       median TTFT (s) of each group
--   colocated_over_alone            decode_tps_p50_colocated / decode_tps_p50_alone, NULL
--                                   unless the window was measured both ways (e.g. a unit
--                                   redone on resume, or `pack` switched between runs)
-- A packed campaign usually measures a window one way only; then compare a configuration
-- with itself across campaigns, or rerun it with --only on an empty host.

CREATE OR REPLACE TABLE colocation AS

WITH

ok AS (
    SELECT * FROM request_metrics WHERE ok
),

final AS (
    SELECT
        -- the window in the table's column order: the comparison key with method after tp
        COLUMNS(comparison_key()[:3]), method, COLUMNS(comparison_key()[4:]),
        count(*) FILTER (WHERE NOT colocated) AS n_alone,
        count(*) FILTER (WHERE colocated) AS n_colocated,
        max(neighbours) AS neighbours_max,
        median(decode_tps) FILTER (WHERE NOT colocated) AS decode_tps_p50_alone,
        median(decode_tps) FILTER (WHERE colocated) AS decode_tps_p50_colocated,
        median(ttft_s) FILTER (WHERE NOT colocated) AS ttft_p50_alone,
        median(ttft_s) FILTER (WHERE colocated) AS ttft_p50_colocated,
        median(decode_tps) FILTER (WHERE colocated)
            / nullif(median(decode_tps) FILTER (WHERE NOT colocated), 0) AS colocated_over_alone
    FROM ok
    GROUP BY ALL
)

SELECT * FROM final
