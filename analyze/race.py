"""The races of a campaign's phases (plan `search:`, docs/race.md) as tables: the state of every
arm after every closed round (`race_rounds`), each level's decision (`race_decisions`) and what
the race cost against the grid it replaced (`race_cost`).

Every decision here is stats.race.replay's, called as collect calls it before each round
(collect/scheduling/race.py): on schema/measured.sql's race_values at the phase's tp, rows of the
phase's workloads (races.workloads; '' = all), the arms of races.methods in their order, no
prior. The analysis only adds what a reader needs to see the decisions: running means, gaps to
the leader and the continuation half-width (stats.race.continuation), so a table can never say
other than what collect did.

Closed rounds: every round seen of a campaign whose campaigns.status is 'complete'; otherwise
all but the last round seen, which may still be running (collect decides round r + 1 from
rounds 1..r only).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np

from specsweep.stats import dist
from specsweep.stats.paired import LEVEL
from specsweep.stats.race import Drop, Level, Prior, RaceRule, Row, continuation, replay

RACES_SQL = (
    "SELECT r.campaign_id, r.phase, r.tp, r.methods, r.workloads, r.within, r.confidence, "
    "r.first_rounds, r.max_rounds, c.status, r.priors FROM races AS r "
    "JOIN campaigns AS c USING (campaign_id) ORDER BY r.campaign_id, r.phase"
)
VALUES_SQL = "SELECT method, level, run, value, workload, requests FROM race_values(?, ?)"
# a phase that names its workloads counts only the starts that ran one of them: another phase
# at the same tp (a best_of phase on other workloads) starts the same configurations
SERVICES_SQL = (
    "SELECT method, count(*), sum(epoch(stopped_at - requested_at)), count(stopped_at) "
    "FROM services AS s WHERE campaign_id = ? AND tp = ? AND state <> 'failed' AND run <= ? "
    "AND (? = '' OR EXISTS (SELECT 1 FROM units AS u WHERE u.service_id = s.service_id "
    "AND list_contains(string_split(?, ','), u.workload))) GROUP BY method"
)


@dataclass(frozen=True)
class Raced:
    """One raced phase as stored: its races row, rule and arms, the values of its arms
    (stats.race rows), the requests each value rests on, its closed rounds, and the priors
    collect fixed for it (by level)."""

    race: dict[str, Any]
    rule: RaceRule
    arms: list[str]
    rows: list[Row]
    requests: dict[tuple[str, str, int], int]
    closed: int
    priors: dict[str, Prior]

    def levels(self, rounds: int) -> list[Level]:
        """The race's levels after `rounds` closed rounds, as collect replays them."""
        return replay(self.rows, self.arms, self.rule, rounds, self.priors)

    def key(self) -> dict[str, Any]:
        return {k: self.race[k] for k in ("campaign_id", "phase", "tp")}

    def values(self, arm: str, level: str, upto: int) -> list[float]:
        """The arm's values at the level in rounds 1..upto (the rounds it has one)."""
        return [v for a, lv, r, v in self.rows if a == arm and lv == level and r <= upto]


def closed_rounds(status: str, seen: int) -> int:
    """The rounds a race is shown after (module docstring)."""
    return seen if status == "complete" else max(0, seen - 1)


def raced(con: duckdb.DuckDBPyConnection) -> list[Raced]:
    """Every row of `races` with its values, as collect reads them."""
    out = []
    for row in con.execute(RACES_SQL).fetchall():
        race = dict(zip(("campaign_id", "phase", "tp", "methods", "workloads", "within",
                         "confidence", "first_rounds", "max_rounds", "status", "priors"),
                        row))  # fmt: skip
        arms = [a for a in race["methods"].split(",") if a]
        workloads = set(race["workloads"].split(",")) if race["workloads"] else None
        found = [
            r
            for r in con.execute(VALUES_SQL, [race["campaign_id"], race["tp"]]).fetchall()
            if r[0] in arms and (workloads is None or r[4] in workloads)
        ]
        rule = RaceRule(race["within"], race["confidence"], race["max_rounds"],
                        race["first_rounds"])  # fmt: skip
        seen = max((int(r[2]) for r in found), default=0)
        priors = {lv: Prior(*v) for lv, v in json.loads(race["priors"]).items()}
        out.append(Raced(race, rule, arms, [(a, lv, int(r), float(v)) for a, lv, r, v, *_ in found],
                         {(a, lv, int(r)): int(n) for a, lv, r, _, _, n in found},
                         closed_rounds(race["status"], seen), priors))  # fmt: skip
    return out


# --- race_rounds ---------------------------------------------------------------------------

ROUNDS_DDL = """
CREATE OR REPLACE TABLE race_rounds (
    campaign_id  VARCHAR NOT NULL,
    phase        VARCHAR NOT NULL,
    tp           INTEGER NOT NULL,
    level        VARCHAR NOT NULL,   -- workload:max_tokens:c<concurrency>
    round        INTEGER NOT NULL,
    method       VARCHAR NOT NULL,   -- an arm
    status       VARCHAR NOT NULL,   -- racing | dropped | missing | winner | in set | open
    mean_ln      DOUBLE,             -- mean over its rounds 1..round of the mean ln decode tok/s
    decode_tps   DOUBLE,             -- exp(mean_ln): the geometric mean decode tok/s
    rounds_measured INTEGER NOT NULL,
    requests     INTEGER NOT NULL,
    leader       VARCHAR,            -- the survivor with the highest mean_ln at this round
    gap_ln       DOUBLE,             -- leader's mean_ln - this arm's
    gap          DOUBLE,             -- 1 - exp(-gap_ln): how far below the leader, a share
    margin_ln    DOUBLE,             -- W(round): drop when gap_ln > margin_ln (NULL: round < n0)
    margin       DOUBLE,             -- 1 - exp(-margin_ln)
    PRIMARY KEY (campaign_id, phase, level, round, method)
)
"""


def rounds_rows(r: Raced) -> list[dict[str, Any]]:
    """race_rounds: one row per (campaign_id, phase, level, round, method), for every closed
    round of every raced phase (stats.race.replay with rounds = round) and every arm still in
    the level's race at that round: the round an arm leaves is its last row.
      status     = 'dropped' (its mean was more than margin_ln below the leader's: the round
                   it was dropped), 'missing' (no value in a round it should have run: its
                   start failed), 'winner' or 'in set' (the round the level was decided:
                   one arm left, or every survivor within `within` of the best), 'open' (a
                   survivor at the last closed round of an undecided level), else 'racing'
      mean_ln    = the mean over rounds 1..round (those it has) of the arm's value, the mean
                   ln decode tok/s of its window (race_values); decode_tps = exp(mean_ln)
      gap_ln     = mean_ln(leader) - mean_ln, the leader the survivor with the highest mean
                   (for a dropped arm, the one it was dropped behind); gap = 1 - exp(-gap_ln)
      margin_ln  = W(r) = max(0, delta / (2 r) (h2 2 sigma2 / delta^2 - r)), delta =
                   -ln(1 - within) (stats.race.continuation); NULL before first_rounds;
                   margin = 1 - exp(-margin_ln): an arm is dropped once gap > margin
      requests   = the measured requests its values rest on; rounds_measured = its rounds
    A decided level has no rows after the round that decided it."""
    out: list[dict[str, Any]] = []
    before: dict[str, Level] = {}
    for k in range(1, r.closed + 1):
        levels = {lv.name: lv for lv in r.levels(k)}
        for name, lv in levels.items():
            if lv.rounds == k:
                out += _level_rows(r, lv, k, before.get(name), k == r.closed)
        before = levels
    return out


def _level_rows(r: Raced, lv: Level, k: int, prev: Level | None, last: bool) -> list[dict]:
    gone = {d.arm for d in prev.drops} if prev is not None else set()
    new = {d.arm: d for d in lv.drops if d.arm not in gone}
    means = {a: _mean(r.values(a, lv.name, k)) for a in r.arms}
    racing = [a for a in r.arms if a in lv.survivors or (a in new and new[a].reason == "behind")]
    ranked = [a for a in racing if not math.isnan(means[a])]
    top = max(ranked, key=lambda a: means[a], default=None)  # the first of equal means
    margin = continuation(r.rule, lv.h2, lv.sigma2, k) if _has_region(lv, k, r.rule) else None
    rows = []
    for arm in (a for a in r.arms if a in lv.survivors or a in new):
        drop = new.get(arm)
        leader = top if drop is None else drop.leader if drop.reason == "behind" else None
        mean = means[arm]
        gap = means[leader] - mean if leader is not None and not math.isnan(mean) else None
        rows.append({
            **r.key(), "level": lv.name, "round": k, "method": arm,
            "status": _status(arm, lv, drop, last), "mean_ln": _or_none(mean),
            "decode_tps": _or_none(math.exp(mean)) if not math.isnan(mean) else None,
            "rounds_measured": len(r.values(arm, lv.name, k)),
            "requests": sum(r.requests.get((arm, lv.name, j), 0) for j in range(1, k + 1)),
            "leader": leader,
            "gap_ln": gap, "gap": _share(gap), "margin_ln": margin, "margin": _share(margin),
        })  # fmt: skip
    return rows


def _has_region(lv: Level, k: int, rule: RaceRule) -> bool:
    return lv.h2 is not None and lv.sigma2 is not None and k >= rule.first_rounds


def _status(arm: str, lv: Level, drop: Drop | None, last: bool) -> str:
    if drop is not None:
        return "dropped" if drop.reason == "behind" else "missing"
    if lv.decided:
        return "winner" if lv.winner == arm else "in set"
    return "open" if last else "racing"


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else math.nan


def _or_none(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


def _share(ln: float | None) -> float | None:
    """1 - exp(-ln): a gap on the ln scale as a share of the larger value."""
    return None if ln is None else float(-math.expm1(-ln))


# --- race_decisions ------------------------------------------------------------------------

DECISIONS_DDL = """
CREATE OR REPLACE TABLE race_decisions (
    campaign_id  VARCHAR NOT NULL,
    phase        VARCHAR NOT NULL,
    tp           INTEGER NOT NULL,
    level        VARCHAR NOT NULL,
    decision     VARCHAR NOT NULL,   -- winner | set | open
    winner       VARCHAR,            -- the one arm left (decision 'winner')
    survivors    VARCHAR NOT NULL,   -- comma-separated, in the phase's order
    arms         INTEGER NOT NULL,   -- arms raced at the level
    dropped      INTEGER NOT NULL,
    rounds       INTEGER NOT NULL,   -- rounds the level used
    within       DOUBLE NOT NULL,
    confidence   DOUBLE NOT NULL,
    sigma2       DOUBLE,             -- pooled start variance of one arm's ln value
    df           DOUBLE,
    h2           DOUBLE,             -- KN's h^2
    best         VARCHAR,            -- the survivor with the highest mean (the winner if one)
    best_decode_tps DOUBLE,          -- its geometric mean decode tok/s
    ci_low       DOUBLE,
    ci_high      DOUBLE,
    guarantee    VARCHAR NOT NULL,
    PRIMARY KEY (campaign_id, phase, level)
)
"""


def decision_rows(r: Raced) -> list[dict[str, Any]]:
    """race_decisions: one row per (campaign_id, phase, level) of a raced phase after its
    closed rounds (stats.race.replay).
      decision         = 'winner' (one arm left), 'set' (every survivor within `within` of
                         the best at the confidence: any will do) or 'open' (undecided: at
                         max_rounds, or the campaign is still running)
      winner           = the arm left ('winner' only); survivors = the arms left
      rounds           = the rounds the level used; sigma2, df, h2 = its pooled start
                         variance (the arm x round interaction of the first rounds) and KN's h^2
      best             = the survivor with the highest mean ln value (the winner when one)
      best_decode_tps  = exp(m), m its mean over those rounds: a geometric mean decode tok/s
      ci_low, ci_high  = exp(m -+ t_{df, 0.975} sqrt(sigma2 / n)), n its rounds: the 95% t
                         interval of that mean from the level's pooled variance. sigma2 is the
                         spread of an arm's value around arm + round effects, so the interval
                         says how well the arm's level is known relative to the rounds run; a
                         shift shared by every arm of a round (the host that day) is not in it.
                         Its coverage is not checked by any test: the report does not print it
      guarantee        = docs/race.md's guarantee, in words, for the decision taken"""
    if r.closed == 0:
        return []
    levels = r.levels(r.closed)
    return [_decision(r, lv, len(levels)) for lv in levels]


def _decision(r: Raced, lv: Level, n_levels: int) -> dict[str, Any]:
    decision = "winner" if lv.winner else "set" if lv.equivalent else "open"
    means = {a: _mean(r.values(a, lv.name, lv.rounds)) for a in lv.survivors}
    best = max(lv.survivors, key=lambda a: means[a], default=None)
    low = high = point = None
    if best is not None:
        m, n = means[best], len(r.values(best, lv.name, lv.rounds))
        point = math.exp(m)
        if lv.sigma2 is not None and lv.df:
            half = float(dist.t_ppf((1 + LEVEL) / 2, lv.df)) * math.sqrt(lv.sigma2 / n)
            low, high = math.exp(m - half), math.exp(m + half)
    return {
        **r.key(), "level": lv.name, "decision": decision, "winner": lv.winner,
        "survivors": ",".join(lv.survivors), "arms": len(lv.survivors) + len(lv.drops),
        "dropped": len(lv.drops), "rounds": lv.rounds, "within": r.rule.within,
        "confidence": r.rule.confidence, "sigma2": lv.sigma2, "df": lv.df, "h2": lv.h2,
        "best": best, "best_decode_tps": point, "ci_low": low, "ci_high": high,
        "guarantee": guarantee(lv, r.rule, n_levels),
    }  # fmt: skip


def guarantee(lv: Level, rule: RaceRule, levels: int) -> str:
    """docs/race.md's guarantee as it applies to the level's decision."""
    within, conf = f"{rule.within:.0%}", f"{rule.confidence:.0%}"
    every = " at every level of the phase at once" if levels > 1 else ""
    missing = [d.arm for d in lv.drops if d.reason == "missing"]
    failed = f"; not covered: {', '.join(missing)} (no value in a round it should have run)"
    failed = failed if missing else ""
    if not lv.decided:
        return f"no guarantee: still open after {lv.rounds} rounds"
    if len(lv.survivors) + len(lv.drops) - len(missing) < 2:
        return f"no race: {lv.survivors[0]} was the only arm with a value{failed}"
    if lv.winner:
        return (f"{lv.winner} is the best arm, or within {within} of it, with probability at "
                f"least {conf}{every}{failed}")  # fmt: skip
    return (f"every survivor ({', '.join(lv.survivors)}) is within {within} of the best, "
            f"with probability at least {conf}{every}{failed}")  # fmt: skip


# --- race_cost -----------------------------------------------------------------------------

COST_DDL = """
CREATE OR REPLACE TABLE race_cost (
    campaign_id    VARCHAR NOT NULL,
    phase          VARCHAR NOT NULL,
    tp             INTEGER NOT NULL,
    methods        VARCHAR NOT NULL,   -- the arms, comma-separated, in the phase's order
    within         DOUBLE NOT NULL,    -- the rule (table races)
    confidence     DOUBLE NOT NULL,
    first_rounds   INTEGER NOT NULL,
    arms           INTEGER NOT NULL,
    levels         INTEGER NOT NULL,
    decided        INTEGER NOT NULL,   -- levels with decision winner or set
    rounds         INTEGER NOT NULL,   -- closed rounds
    max_rounds     INTEGER NOT NULL,
    starts         INTEGER NOT NULL,   -- service starts of the arms (not failed), run <= max_rounds
    grid_starts    INTEGER NOT NULL,   -- arms x max_rounds
    starts_share   DOUBLE NOT NULL,    -- starts / grid_starts
    device_s       DOUBLE,             -- sum of stopped_at - requested_at over those starts
    grid_device_s  DOUBLE,             -- sum over arms of mean seconds a start x max_rounds
    device_share   DOUBLE,             -- device_s / grid_device_s
    PRIMARY KEY (campaign_id, phase)
)
"""


def cost_row(r: Raced, con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """race_cost: one row per raced phase, its rule and what its rounds cost against the grid
    (every arm started in each of max_rounds rounds).
      methods, within, confidence, first_rounds, max_rounds = the rule, as table races has it
      starts        = services rows of the campaign at the phase's tp of an arm, state not
                      'failed', run <= max_rounds, and (when the phase names its workloads)
                      that ran one of them: another phase at the same tp starts the same
                      configurations (a start is one services row; the baseline's A/A
                      control is no arm and is not counted)
      device_s      = the sum over those starts of stopped_at - requested_at, seconds (a
                      start not yet stopped adds nothing)
      grid_device_s = sum over the arms of (its mean seconds a stopped start) x max_rounds;
                      an arm with no stopped start takes the phase's mean a start
      starts_share, device_share = the race's over the grid's
      levels, decided = the levels raced and those decided ('winner' or 'set') after the
                      closed rounds (rounds)"""
    key = [r.race["campaign_id"], r.race["tp"], r.rule.max_rounds, *[r.race["workloads"]] * 2]
    found = {m: (n, s, t) for m, n, s, t in con.execute(SERVICES_SQL, key).fetchall()
             if m in r.arms}  # fmt: skip
    starts = sum(n for n, _, _ in found.values())
    spent = [(s, t) for _, s, t in found.values() if t]
    device = sum(s for s, _ in spent) if spent else None
    pooled = device / sum(t for _, t in spent) if spent else None
    per = [found[a][1] / found[a][2] if a in found and found[a][2] else pooled for a in r.arms]
    grid_s = sum(p * r.rule.max_rounds for p in per) if pooled is not None else None
    levels = r.levels(r.closed) if r.closed else []
    grid = len(r.arms) * r.rule.max_rounds
    return {
        **r.key(), "methods": ",".join(r.arms), "within": r.rule.within,
        "confidence": r.rule.confidence, "first_rounds": r.rule.first_rounds,
        "arms": len(r.arms), "levels": len(levels),
        "decided": sum(lv.decided for lv in levels), "rounds": r.closed,
        "max_rounds": r.rule.max_rounds, "starts": starts, "grid_starts": grid,
        "starts_share": starts / grid, "device_s": device, "grid_device_s": grid_s,
        "device_share": device / grid_s if device is not None and grid_s else None,
    }  # fmt: skip


def build(con: duckdb.DuckDBPyConnection) -> None:
    """race_rounds, race_decisions and race_cost for every row of `races`."""
    found = raced(con)
    tables = (
        (ROUNDS_DDL, "race_rounds", [row for r in found for row in rounds_rows(r)]),
        (DECISIONS_DDL, "race_decisions", [row for r in found for row in decision_rows(r)]),
        (COST_DDL, "race_cost", [cost_row(r, con) for r in found]),
    )
    for ddl, name, rows in tables:
        con.execute(ddl)
        if rows:
            names = list(rows[0])
            marks = ", ".join("?" for _ in names)
            con.executemany(
                f"INSERT INTO {name} ({', '.join(names)}) VALUES ({marks})",  # names: ours
                [[row[n] for n in names] for row in rows],
            )
