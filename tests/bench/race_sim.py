"""Simulated races against the grids they replace (a benchmark: it prints figures).

    .venv/bin/python tests/bench/race_sim.py [--n 1000] [--seed 1] [--db FILE --campaign ID ...]

For each case (tests/support/race_sim.py's model: round, start and window effects, drift), n
simulated campaigns: the share where the race picks, at every level, a setting within
`within` of the true best; the share where it drops the true best; the share with a level
still open at max_rounds; its service starts, as a share of the grid that starts every arm in
every one of max_rounds rounds and of the 3-round grid (issue 36's default); and how often the
3-round and the 1-round grid pick within `within` at every level (their best means). Starts
count restarts: every arm's start measures every level, so a start is the unit of device time
when the arms have one TP.

The built-in cases are parametric (normal start effects), with the start sd measured on the
H200 (docs/measurements/2026-12-03-h200-campaign.md: 3-5% at c=1, 22-24% at c=8) and speedups
in the range that campaign measured. With --db and --campaign, a stored campaign of several
rounds is a case too: its methods' means are the truth and its starts' residuals are
resampled whole (tests/support/race_sim.py:stored_case).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: tests.support
from specsweep.stats.race import RaceRule  # noqa: E402
from tests.support.race_sim import Case, stored_case, summary  # noqa: E402


def cases(delta: float) -> list[Case]:
    lfc = np.zeros((6, 3))
    lfc[1, :] = delta
    ln = np.log
    # arms: autoregressive, DFlash, DDTree budgets 8, 16, 32, 64; levels c = 1, 4, 8
    ct200 = ln(np.array([
        [1.0, 1.0, 1.0],
        [1.9, 1.5, 1.1],
        [1.7, 1.5, 1.3],
        [2.0, 1.6, 1.2],
        [2.1, 1.4, 1.0],
        [1.9, 1.1, 0.8],
    ]))  # fmt: skip
    return [
        Case("least favourable, 6 arms, 3 levels, start sd 3%", lfc, np.full(3, 0.03)),
        Case("CT200 shape, start sd 4/6/8%", ct200, np.array([0.04, 0.06, 0.08])),
        Case("CT200 shape, H200 start sd 4/10/23%", ct200, np.array([0.04, 0.10, 0.23])),
        Case("CT200 shape, start sd 4/6/8%, drift 1%/start", ct200, np.array([0.04, 0.06, 0.08]),
             drift=0.01),
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--db", help="a results file holding campaigns of several rounds")
    parser.add_argument("--campaign", action="append", default=[], help="a campaign id of --db")
    args = parser.parse_args(argv)
    rules = {
        "5%, n0=2": (RaceRule(within=0.05, confidence=0.95, max_rounds=6), 0),
        "5%, prior df 20": (RaceRule(0.05, 0.95, 6, first_rounds=1), 20),
        "10%, n0=2": (RaceRule(within=0.10, confidence=0.95, max_rounds=6), 0),
        "10%, prior df 20": (RaceRule(0.10, 0.95, 6, first_rounds=1), 20),
    }
    print(f"{'case':48} {'rule':18} {'correct':>7} {'drop best':>9} {'open':>5} {'starts':>6}",
          f"{'/6-round':>8} {'/3-round':>8} {'grid3 ok':>8} {'grid1 ok':>8}")  # fmt: skip
    stored = [stored_case(args.db, c) for c in args.campaign] if args.db else []
    for case in stored + cases(RaceRule().delta):
        for name, (rule, prior_df) in rules.items():
            c = Case(case.name, case.mu, case.start_sd, case.round_sd, case.noise_sd,
                     case.drift, case.scale, prior_df, case.residuals)  # fmt: skip
            s = summary(c, rule, args.n, args.seed)
            print(f"{case.name[:48]:48} {name:18} {s['correct']:7.3f} {s['dropped_best']:9.3f}",
                  f"{s['open']:5.2f} {s['starts']:6.1f} {s['share_of_max_grid']:8.2f}",
                  f"{s['share_of_grid']:8.2f} {s['grid_correct']:8.3f}",
                  f"{s['grid1_correct']:8.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
