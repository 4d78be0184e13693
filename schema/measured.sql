-- Which requests are measured, written once. Table macros over the raw layer, installed
-- beside schema/metrics.sql by schema.metrics.install (only where `requests` and `units`
-- exist: DuckDB binds a table macro's tables when it creates it). The analysis
-- (analyze/sql/measured_requests.sql and the window objects), collect's best-of ranking
-- (collect/scheduling/ranking.py) and its time estimates (collect/scheduling/estimate.py) all
-- read these, so a request counts in all of them or in none.

-- incomplete_units(): the units marked incomplete (units.complete = false: the run was
--   interrupted in it; a unit is one run's (campaign_id, config_id, workload, run)). Their
--   rows and windows stay out of every measurement until resume redoes the unit.
CREATE OR REPLACE MACRO incomplete_units() AS TABLE
    SELECT campaign_id, config_id, workload, run FROM units WHERE NOT complete;

-- kept_request_rows(): the requests every measurement keeps, closed- and open-loop:
--   NOT is_warmup AND the row's unit is not in incomplete_units().
--   rid = requests.rowid (stable within one transaction), then every requests column.
CREATE OR REPLACE MACRO kept_request_rows() AS TABLE
    SELECT r.rowid AS rid, r.*
    FROM requests AS r
    WHERE NOT r.is_warmup
      AND NOT EXISTS (
          SELECT 1 FROM incomplete_units() AS i
          WHERE i.campaign_id = r.campaign_id AND i.config_id = r.config_id
            AND i.workload = r.workload AND i.run = r.run
      );

-- measured_request_rows(): the closed-loop kept requests (scheduled_s IS NULL). Every
--   closed-loop measurement groups by concurrency, which an open-loop window does not have.
CREATE OR REPLACE MACRO measured_request_rows() AS TABLE
    SELECT * FROM kept_request_rows() WHERE scheduled_s IS NULL;

-- race_values(cid, at_tp): a race's values (docs/race.md): per method, closed-loop window
--   (level: workload:max_tokens:c<concurrency>) and round (run) of campaign cid at tp, the
--   mean ln decode tok/s of its measured ok requests (schema/metrics.sql's decode_tps),
--   and how many requests it rests on. Collect reads it to choose a round's arms
--   (collect/scheduling/race.py), the analysis to show the race (analyze/race.py); both
--   replay stats.race on it.
CREATE OR REPLACE MACRO race_values(cid, at_tp) AS TABLE
    SELECT method, workload || ':' || max_tokens || ':c' || concurrency AS level, workload,
           run, avg(ln(decode_tps(output_tokens, e2e_s, ttft_s))) AS value,
           count(*) AS requests
    FROM measured_request_rows()
    WHERE campaign_id = cid AND tp = at_tp AND ok
      AND decode_tps(output_tokens, e2e_s, ttft_s) > 0
    GROUP BY ALL
    ORDER BY level, method, run;
