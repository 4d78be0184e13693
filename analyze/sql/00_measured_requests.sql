-- kept_requests: the requests every analysis object measures, closed- and open-loop (TEMP
-- view); measured_requests: its closed-loop rows (TEMP view; the persistent result is
-- request_metrics). Both are gone when `python -m analyze` ends.
-- grain: request; key: rid (= requests.rowid, stable within the build's transaction), request_id.
-- Left out of both: warm-up requests (is_warmup) and rows of a unit marked incomplete
-- (units.complete = false: the run was interrupted in it; a unit is one run's) until resume
-- redoes the unit. Left
-- out of measured_requests: open-loop requests (scheduled_s set), which are open_requests'
-- (23_open_requests.sql): every closed-loop object groups by concurrency, which an open-loop
-- window does not have.

CREATE OR REPLACE TEMP VIEW kept_requests AS

WITH

incomplete AS (
    SELECT campaign_id, config_id, workload, run FROM units WHERE NOT complete
),

final AS (
    SELECT r.rowid AS rid, r.*
    FROM requests AS r
    WHERE NOT r.is_warmup
      AND NOT EXISTS (
          SELECT 1 FROM incomplete AS i
          WHERE i.campaign_id = r.campaign_id AND i.config_id = r.config_id
            AND i.workload = r.workload AND i.run = r.run
      )
)

SELECT * FROM final
;

CREATE OR REPLACE TEMP VIEW measured_requests AS
SELECT * FROM kept_requests WHERE scheduled_s IS NULL
