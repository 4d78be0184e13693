-- reads:
-- wilson_lo, wilson_hi: the 95% Wilson score interval of a proportion k / n, written once for
-- the open-loop objects (SLO attainment and goodput of one window in open_windows: one
-- service start's requests; over the rounds' starts, analyze/attainment.py's interval
-- carries the start variance instead). TEMP macros: they live for the build's connection
-- only; the tables keep their values.
--   z      = 1.959963984540054 (the standard normal's 97.5th percentile)
--   p      = k / n
--   centre = (p + z^2 / (2n)) / (1 + z^2 / n)
--   half   = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / (4 n^2))
--   lo     = centre - half, hi = centre + half (clamped to [0, 1] against rounding)
-- NULL when n is 0 or NULL (no trial, no interval) or k is NULL (no SLO: greatest and least
-- would otherwise skip the NULL and answer 0 or 1), and NULL outside 0 <= k <= n: there
-- p (1 - p) < 0 and sqrt raised "cannot take square root of a negative number" (issue 26:
-- k > n is an inconsistent file; open_windows names such a window in invalid_reason).

-- Each term written once, at the normal quantile z: lo, hi = (mid -/+ spread) / (1 + z^2 / n),
-- the centre -/+ half above with the denominator taken out (k = 0 gives lo = 0 exactly).
-- wilson_lo and wilson_hi take z as an optional third argument (95% without it). Python
-- twin: analyze.compare.stats.wilson (tests/unit/analyze/test_compare_stats.py proves they agree).
CREATE OR REPLACE TEMP MACRO wilson_mid(k, n, z) AS
    k / n + z ** 2 / (2 * n);

CREATE OR REPLACE TEMP MACRO wilson_spread(k, n, z) AS
    z * sqrt((k / n) * (1 - k / n) / n + z ** 2 / (4 * n * n));

CREATE OR REPLACE TEMP MACRO wilson_lo(k, n, z := 1.959963984540054) AS
    CASE WHEN n > 0 AND k >= 0 AND k <= n THEN greatest(0.0::DOUBLE,
        (wilson_mid(k, n, z) - wilson_spread(k, n, z)) / (1 + z ** 2 / n)) END;

CREATE OR REPLACE TEMP MACRO wilson_hi(k, n, z := 1.959963984540054) AS
    CASE WHEN n > 0 AND k >= 0 AND k <= n THEN least(1.0::DOUBLE,
        (wilson_mid(k, n, z) + wilson_spread(k, n, z)) / (1 + z ** 2 / n)) END;
