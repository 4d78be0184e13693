"""Replayed traces: `read` reads a plan's trace file (JSON Lines: arrival times, lengths, hash
ids) into its requests; `text` gives a line without text real prose and code of the requested
length from a pool of real prompts."""
