-- reads: analysis_params, request_metrics, services
-- replica_agreement: do the replicas of a configuration measure the same server? A long
-- configuration may run as several replicas (services.replica: service starts on GPUs of
-- their own, each a share of its workloads, collect/scheduling/replicas.py); their figures are
-- pooled as one configuration, which is sound only if the replicas agree.
-- grain: (campaign_id, run, config_id, max_tokens, concurrency, replica); only
-- configurations that ran as more than one replica in that run, closed-loop windows only.
-- A workload runs whole in one replica, so replicas of a run measured different workloads:
-- compare the baseline (is_baseline), whose decode speed hardly depends on the prompt;
-- a speculative method's speed follows its acceptance, which the workloads change.
--   workloads        the replica's workloads, comma-separated
--   gpus             the GPUs its service(s) ran on (services.gpus; ';' between several: a
--                    replica restarted after its server died, or split anew on resume,
--                    keeps its number)
--   n                ok requests with a decode speed
--   decode_tps_p50   median decode tok/s (request_metrics.decode_tps)
--   ci_low, ci_high  95% distribution-free interval of that median from order statistics:
--                    the sorted speeds' ranks floor((n - 1.96 sqrt(n)) / 2) and
--                    ceil(1 + (n + 1.96 sqrt(n)) / 2), clipped to 1..n (binomial coverage of
--                    at least about 95%; [min, max] when n < 6, which covers less)
--   n_replicas       replicas of the configuration at this (max_tokens, concurrency)
--   overlaps_all     this replica's interval meets every other replica's
--   agree            all the replicas' intervals share a point: max(ci_low) <= min(ci_high)
--   is_baseline      the method is analysis_params.baseline

CREATE OR REPLACE TABLE replica_agreement AS

WITH

replica_requests AS (
    SELECT r.campaign_id, r.run, r.config_id, r.method, r.tp, r.workload, r.max_tokens,
           r.concurrency, s.replica, s.gpus, r.decode_tps
    FROM request_metrics AS r
    JOIN services AS s USING (service_id)
    WHERE r.ok AND r.decode_tps IS NOT NULL AND r.scheduled_s IS NULL
),

split AS (  -- configurations that ran as several replicas in a run
    SELECT campaign_id, run, config_id, max_tokens, concurrency,
           count(DISTINCT replica) AS n_replicas
    FROM replica_requests
    GROUP BY ALL
    HAVING count(DISTINCT replica) > 1
),

per_replica AS (
    SELECT
        campaign_id, run, config_id, method, tp, max_tokens, concurrency, replica,
        string_agg(DISTINCT workload, ',' ORDER BY workload) AS workloads,
        string_agg(DISTINCT gpus, ';' ORDER BY gpus) AS gpus,
        count(*) AS n,
        median(decode_tps) AS decode_tps_p50,
        list_sort(list(decode_tps)) AS speeds
    FROM replica_requests
    SEMI JOIN split USING (campaign_id, run, config_id, max_tokens, concurrency)
    GROUP BY campaign_id, run, config_id, method, tp, max_tokens, concurrency, replica
),

intervals AS (
    SELECT
        * EXCLUDE (speeds),
        speeds[greatest(1, least(n, floor((n - 1.96 * sqrt(n)) / 2)::INTEGER))] AS ci_low,
        speeds[greatest(1, least(n, ceil(1 + (n + 1.96 * sqrt(n)) / 2)::INTEGER))] AS ci_high
    FROM per_replica
),

final AS (
    SELECT
        i.*,
        s.n_replicas,
        NOT EXISTS (
            SELECT 1 FROM intervals AS o
            WHERE (o.campaign_id, o.run, o.config_id, o.max_tokens, o.concurrency)
                  = (i.campaign_id, i.run, i.config_id, i.max_tokens, i.concurrency)
              AND o.replica <> i.replica
              AND (o.ci_high < i.ci_low OR o.ci_low > i.ci_high)
        ) AS overlaps_all,
        max(i.ci_low) OVER g <= min(i.ci_high) OVER g AS agree,
        i.method = (SELECT baseline FROM analysis_params) AS is_baseline
    FROM intervals AS i
    JOIN split AS s USING (campaign_id, run, config_id, max_tokens, concurrency)
    WINDOW g AS (PARTITION BY i.campaign_id, i.run, i.config_id, i.max_tokens, i.concurrency)
)

SELECT * FROM final
