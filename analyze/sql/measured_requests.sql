-- reads: kept_request_rows, measured_request_rows
-- kept_requests: the requests every analysis object measures, closed- and open-loop (TEMP
-- view); measured_requests: its closed-loop rows (TEMP view; the persistent result is
-- request_metrics). Both are gone when `specsweep analyze` ends.
-- grain: request; key: rid (= requests.rowid, stable within the build's transaction), request_id.
-- Left out of both: warm-up requests (is_warmup) and rows of a unit marked incomplete
-- (units.complete = false: the run was interrupted in it; a unit is one run's) until resume
-- redoes the unit. Left
-- out of measured_requests: open-loop requests (scheduled_s set), which are open_requests'
-- (open_requests.sql): every closed-loop object groups by concurrency, which an open-loop
-- window does not have.
-- The rule is written once, as the table macros kept_request_rows() and
-- measured_request_rows() of schema/measured.sql, which collect's ranking and estimates read
-- too.

CREATE OR REPLACE TEMP VIEW kept_requests AS
SELECT * FROM kept_request_rows()
;

CREATE OR REPLACE TEMP VIEW measured_requests AS
SELECT * FROM measured_request_rows()
