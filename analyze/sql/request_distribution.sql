-- reads: request_metrics
-- request_distribution: the box-plot statistics of per-request decode speed and TTFT, per
-- method, so that the report draws its distribution charts from aggregates (matplotlib's
-- Axes.bxp) and never loads request_metrics whole.
-- grain: (campaign_id, method, metric); key: the same columns. metric is 'decode_tps' or
-- 'ttft_s' (the request_metrics column); every engine, tp, workload, max_tokens and
-- concurrency of the method is pooled, as the report's chart pools them.
-- Values: the metric's non-NULL values in request_metrics (decode_tps is NULL for failed and
-- one-token requests; ttft_s is the raw column, kept wherever a first token arrived).
-- A (campaign, method, metric) without any non-NULL value has no row.
--   n            = count of the values; mean = their mean; min, max
--   p25, p50, p75 = quantile_cont(value, 0.25 / 0.5 / 0.75): linear interpolation between
--                  order statistics, numpy's default percentile; matplotlib's
--                  cbook.boxplot_stats calls them q1, med, q3
--   iqr          = p75 - p25
--   whislo       = the lowest value >= p25 - 1.5 * iqr, whishi = the highest value
--                  <= p75 + 1.5 * iqr (matplotlib's whis = 1.5 rule); p25 (p75) instead when
--                  that value lies above p25 (below p75), as boxplot_stats does

CREATE OR REPLACE TABLE request_distribution AS

WITH

metric_values AS (
    SELECT campaign_id, method, 'decode_tps' AS metric, decode_tps::DOUBLE AS value
    FROM request_metrics
    WHERE decode_tps IS NOT NULL
    UNION ALL
    SELECT campaign_id, method, 'ttft_s' AS metric, ttft_s::DOUBLE AS value
    FROM request_metrics
    WHERE ttft_s IS NOT NULL
),

quartiles AS (
    SELECT
        campaign_id, method, metric,
        count(*) AS n,
        avg(value) AS mean,
        min(value) AS min,
        max(value) AS max,
        quantile_cont(value, [0.25, 0.5, 0.75]) AS q
    FROM metric_values
    GROUP BY campaign_id, method, metric
),

fences AS (
    SELECT
        * EXCLUDE (q),
        q[1] AS p25, q[2] AS p50, q[3] AS p75,
        q[3] - q[1] AS iqr,
        q[1] - 1.5 * (q[3] - q[1]) AS lo_fence,
        q[3] + 1.5 * (q[3] - q[1]) AS hi_fence
    FROM quartiles
),

whiskers AS (
    SELECT
        v.campaign_id, v.method, v.metric,
        min(v.value) FILTER (WHERE v.value >= f.lo_fence) AS lowest_inside,
        max(v.value) FILTER (WHERE v.value <= f.hi_fence) AS highest_inside
    FROM metric_values AS v
    JOIN fences AS f USING (campaign_id, method, metric)
    GROUP BY v.campaign_id, v.method, v.metric
),

final AS (
    SELECT
        f.campaign_id, f.method, f.metric, f.n, f.mean,
        f.p25, f.p50, f.p75, f.iqr,
        CASE WHEN w.lowest_inside IS NULL OR w.lowest_inside > f.p25 THEN f.p25
             ELSE w.lowest_inside END AS whislo,
        CASE WHEN w.highest_inside IS NULL OR w.highest_inside < f.p75 THEN f.p75
             ELSE w.highest_inside END AS whishi,
        f.min, f.max
    FROM fences AS f
    JOIN whiskers AS w USING (campaign_id, method, metric)
)

SELECT * FROM final
ORDER BY campaign_id, method, metric
