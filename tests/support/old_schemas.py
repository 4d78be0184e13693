"""Results files as older specsweep versions wrote them, for the migration tests."""

from __future__ import annotations

import re

from specsweep.schema.store import DDL


def ddl_as_of(version: int) -> str:
    """The raw-layer DDL as schema `version` wrote it, cut from today's: v14 added
    windows.loop_lag_p99_s and loop_lag_max_s; v13 added races.priors; v12 added races;
    v11 added requests.category; v10 added requests.history; v9 added services.replica; v8
    added `run` to units (and its key), requests, windows and services; v6 added windows
    and requests.scheduled_s, v7 method_params and the requests' acceptance details, v5
    gpu_samples and services.transport, v4 endpoint_errors, v3 units.colocated_with, v2
    units.complete."""
    ddl = DDL.read_text()
    cuts = {
        13: [(r"\n    loop_lag_p99_s +DOUBLE,.*?NULL: before schema v14", "")],
        12: [(r"\n    ,priors +VARCHAR NOT NULL .*?\n    ,PRIMARY KEY", "\n    ,PRIMARY KEY")],
        11: [(r"-- One row per raced phase.*?\n\);\n\n", "")],
        10: [(r"\n    ,category +VARCHAR NOT NULL .*?\n\);", "\n);")],
        9: [(r"\n    ,history +VARCHAR .*?\n\);", "\n);")],
        8: [(r"\n    ,replica +INTEGER NOT NULL DEFAULT 1 -- which replica.*?\n\);", "\n);")],
        7: [
            (
                r"\n    run +INTEGER NOT NULL DEFAULT 1, -- which run[^\n]*\n    PRIMARY KEY "
                r"\(campaign_id, config_id, workload, run\)",
                "\n    PRIMARY KEY (campaign_id, config_id, workload)",
            ),
            (r"(step_accepted +INTEGER\[\]),(.*?)\n    run .*?\n\);", r"\1 \2\n);"),
            (r"\n    run +INTEGER NOT NULL DEFAULT 1, -- requests.run", ""),
            (r"\n    ,run +INTEGER NOT NULL DEFAULT 1 -- which run[^\n]*", ""),
        ],
        6: [
            (r"(scheduled_s +DOUBLE),(.*?)\n    engine_accept_length .*?\n\);", r"\1 \2\n);"),
            (r"-- One row per parameter of a method.*?\n\);\n\n", ""),
        ],
        5: [
            (r",\n    scheduled_s .*?\n\);", "\n);"),
            (
                r"-- One row per measured window.*?(CREATE TABLE IF NOT EXISTS server_metrics)",
                r"\1",
            ),
        ],
        4: [("-- GPU telemetry", None), (r",\n    transport .*?\n\);", "\n);")],
        3: [("-- One row per failed call", None)],
        2: [(r"\n    colocated_with VARCHAR[^\n]*\n[^\n]*\n[^\n]*\n", "\n")],
        1: [(r"\n    complete     BOOLEAN NOT NULL,[^\n]*\n[^\n]*\n", "\n")],
    }
    for v in range(13, version - 1, -1):
        for pattern, repl in cuts[v]:
            if repl is None:  # a table added at the end: drop it and what follows
                ddl = ddl.split(pattern)[0]
            else:
                cut = re.sub(pattern, repl, ddl, count=1, flags=re.S)
                assert cut != ddl, f"schema v{v + 1}'s change not found in the DDL"
                ddl = cut
    return ddl
