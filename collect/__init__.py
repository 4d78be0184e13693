"""collect: run a campaign plan against inference servers and record every request."""
