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

CREATE OR REPLACE TEMP MACRO wilson_lo(k, n) AS
    CASE WHEN n > 0 AND k >= 0 AND k <= n THEN greatest(0.0::DOUBLE,
        ((k / n + 1.959963984540054 ** 2 / (2 * n))
         - 1.959963984540054 * sqrt((k / n) * (1 - k / n) / n
                                    + 1.959963984540054 ** 2 / (4 * n * n)))
        / (1 + 1.959963984540054 ** 2 / n)) END;

CREATE OR REPLACE TEMP MACRO wilson_hi(k, n) AS
    CASE WHEN n > 0 AND k >= 0 AND k <= n THEN least(1.0::DOUBLE,
        ((k / n + 1.959963984540054 ** 2 / (2 * n))
         + 1.959963984540054 * sqrt((k / n) * (1 - k / n) / n
                                    + 1.959963984540054 ** 2 / (4 * n * n)))
        / (1 + 1.959963984540054 ** 2 / n)) END;
