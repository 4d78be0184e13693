"""The statistics every stage shares: the paired speedup with its t interval, the Holm
adjustment (`paired`), and the start-to-start variance and drift of a campaign's rounds of
service starts (`starts`). numpy and scipy only: no DuckDB, no pandas, no other room of
specsweep, so collect's ranking, analyze's tables and the report's thresholds all read one
definition."""
