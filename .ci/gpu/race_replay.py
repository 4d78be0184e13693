"""Replay a race on a grid's own starts: which starts a race (plan `search:`, docs/race.md)
would have made, what it would have decided, and its share of the grid's starts and device time.

    python .ci/gpu/race_replay.py RESULTS.duckdb [--campaign ID] [--tp 1] [--within 0.05]
        [--confidence 0.95] [--first-rounds 2] [--max-rounds R]

The grid is a campaign that started every configuration in each of R rounds (plan `repeat`).
Before each round r > first_rounds, collect calls stats.race.replay on race_values over rounds
1..r-1 and starts the survivors of open levels and the baseline
(collect/scheduling/race.py); stats.race.on_grid does the same on the grid's stored rows, so
its decisions are the ones a race would have reached on these starts. Its cost is the device seconds
(stopped_at - requested_at) of exactly those grid starts. It is a replay, not a second
campaign: a real race's later rounds would be new starts, with their own noise. No prior.
"""

from __future__ import annotations

import argparse
import math

from specsweep.schema.store import connect
from specsweep.stats.race import RaceRule, on_grid, replay

VALUES = "SELECT method, level, run, value FROM race_values(?, ?)"
STARTS = (
    "SELECT method, run, epoch(stopped_at - requested_at) FROM services "
    "WHERE campaign_id = ? AND tp = ? AND state <> 'failed' AND stopped_at IS NOT NULL"
)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("db")
    p.add_argument("--campaign", help="campaign_id (default: the latest complete campaign)")
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--within", type=float, default=0.05)
    p.add_argument("--confidence", type=float, default=0.95)
    p.add_argument("--first-rounds", type=int, default=2)
    p.add_argument("--max-rounds", type=int, help="default: the grid's rounds")
    a = p.parse_args()
    con = connect(a.db)
    cid = a.campaign or con.execute(
        "SELECT campaign_id FROM campaigns WHERE status = 'complete' "
        "ORDER BY started_at DESC LIMIT 1").fetchone()[0]  # fmt: skip
    baseline = con.execute("SELECT baseline FROM campaigns WHERE campaign_id = ?",
                           [cid]).fetchone()[0]  # fmt: skip
    rows = [
        (m, lv, int(r), float(v)) for m, lv, r, v in con.execute(VALUES, [cid, a.tp]).fetchall()
    ]
    seconds = {(m, int(r)): s for m, r, s in con.execute(STARTS, [cid, a.tp]).fetchall()}
    arms = [baseline] + sorted({m for m, *_ in rows} - {baseline})
    grid_rounds = max(r for _, _, r, _ in rows)
    rule = RaceRule(a.within, a.confidence, a.max_rounds or grid_rounds, a.first_rounds)
    print(f"campaign {cid}, tp {a.tp}: {len(arms)} arms x {grid_rounds} rounds of the grid; "
          f"race within {rule.within:.0%} at {rule.confidence:.0%}, first_rounds "
          f"{rule.first_rounds}, max_rounds {rule.max_rounds}")  # fmt: skip
    started = on_grid(rows, arms, rule, grid_rounds, keep=[baseline])
    seen = [row for row in rows if row[0] in started.get(row[2], ())]
    for lv in replay(seen, arms, rule, max(started)):
        state = "decided" if lv.decided else "open"
        drops = ", ".join(f"{d.arm} (round {d.round}, {d.reason})" for d in lv.drops) or "none"
        print(f"  {lv.name}: {state}, survivors {', '.join(lv.survivors)}; dropped {drops}")
    for name in dict.fromkeys(lv for _, lv, _, _ in rows):  # the grid's choice: best mean
        means = {a: [v for m, n, _, v in rows if m == a and n == name] for a in arms}
        best = max((a for a in arms if means[a]), key=lambda a: math.fsum(means[a]) / len(means[a]))
        tps = math.exp(math.fsum(means[best]) / len(means[best]))
        print(f"  grid's best at {name}: {best} ({tps:.1f} tok/s over {len(means[best])} rounds)")
    made = [(m, r) for r, ms in started.items() for m in ms]
    grid = [(m, r) for m in arms for r in range(1, grid_rounds + 1)]
    spent = sum(seconds.get(k, 0.0) for k in made)
    total = sum(seconds.get(k, 0.0) for k in grid)
    print(
        f"race: {len(made)} of the grid's {len(grid)} starts ({len(made) / len(grid):.1%}), "
        f"{spent:.0f} of {total:.0f} device seconds ({spent / total:.1%}); rounds "
        + ", ".join(f"{r}: {', '.join(ms) or 'nothing'}" for r, ms in started.items())
    )


if __name__ == "__main__":
    main()
