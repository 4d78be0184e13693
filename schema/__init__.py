"""schema: the DuckDB tables, their pandera contracts and the store that writes them."""
