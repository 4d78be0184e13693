"""Importing other tools' result files (vLLM `bench serve`, SGLang `bench_serving`) into the raw
tables: `files` reads and checks them, `importer` turns each run into a measured window."""
