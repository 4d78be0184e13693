"""The coverage tier: simulated campaigns that check each printed interval covers at its
nominal rate in the design collect runs (docs/statistics.md)."""
