"""The driver's side of a finished task: its rows into the results file, the only writer.

Every row is validated again by `Store.append` (the node's scratch store validated it once;
the contracts are the same, and a row that fails here goes to `quarantine` like any other).
The order keeps the campaign's resume rule: first the environment (latest value wins), the
services and endpoint errors; then each unit in one transaction of its own, which deletes
what an earlier try left of that unit (the same rows `collect.run.configuration.commit_unit`
deletes) and lands its requests, windows, server metrics, GPU samples and `units` row. A
unit is complete or absent; nothing is written twice.

`units.colocated_with` is the driver's to fill across tasks (a node knows only its own
task's services): for every unit on the nodes a task ran on, the other services of the
campaign on the same node (services.host) whose span [requested_at, stopped_at or still
running] overlaps the unit's [started_at, finished_at], the rule of a single host's packed
runner; recomputed as each task lands, so an earlier unit learns of a later neighbour.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from specsweep.collect.run.campaign import Campaign
from specsweep.collect.run.configuration import replace_unit
from specsweep.collect.run.fingerprint import put_environment

UNIT_TABLES = ("requests", "windows", "server_metrics", "gpu_samples")


def land(c: Campaign, key: str, result: dict[str, Any]) -> int:
    """Write one task's rows; print its notes (named by node); the number of units landed."""
    rows: dict[str, list[dict[str, Any]]] = result["rows"]
    for text in result["notes"]:
        c.progress.note(f"{result['node']}: {text}")
    facts: dict[str, dict[str, str]] = defaultdict(dict)
    for r in rows["environment"]:
        if r["host"] != "campaign":  # the plan's objectives: the driver recorded them
            facts[r["host"]][r["key"]] = r["value"]
    with c.store.transaction():
        for host, values in facts.items():
            put_environment(c.store, c.campaign_id, host, values)
        c.store.append("services", rows["services"])
        c.store.append("endpoint_errors", rows["endpoint_errors"])
        c.store.append("quarantine", rows["quarantine"])
    for unit in rows["units"]:
        _commit_unit(c, unit, rows)
        measured = [
            r for r in rows["requests"] if r["workload"] == unit["workload"] and not r["is_warmup"]
        ]
        for _ in measured:
            c.progress.request_done(key)
    nodes = sorted({r["host"] for r in rows["services"]})
    if nodes:
        c.store.execute(COLOCATED, [c.campaign_id, c.campaign_id, nodes])
    return len(rows["units"])


COLOCATED = """
UPDATE units SET colocated_with = coalesce((
    SELECT string_agg(other.service_id, ',' ORDER BY other.service_id)
    FROM services own JOIN services other
      ON other.campaign_id = own.campaign_id AND other.host = own.host
     AND other.service_id <> own.service_id
    WHERE own.service_id = units.service_id
      AND other.requested_at < units.finished_at
      AND (other.stopped_at IS NULL OR other.stopped_at > units.started_at)), '')
WHERE campaign_id = ? AND service_id IN (
    SELECT service_id FROM services WHERE campaign_id = ? AND list_contains(?, host))
"""


def _commit_unit(c: Campaign, unit: dict[str, Any], rows: dict[str, list[dict[str, Any]]]) -> None:
    """One transaction: the unit's old rows out (an interrupted earlier try, on this or
    another node), its new ones in (collect.run.configuration.replace_unit)."""
    replace_unit(c.store, unit, {t: [r for r in rows[t] if _of(r, unit)] for t in UNIT_TABLES})


def _of(row: dict[str, Any], unit: dict[str, Any]) -> bool:
    """The row belongs to the unit: its configuration and workload (and run, where the
    table has one; a task measures one run)."""
    return (
        row["config_id"] == unit["config_id"]
        and row["workload"] == unit["workload"]
        and row.get("run", unit["run"]) == unit["run"]
    )
