"""Cost of the paired bootstrap before and after issue 12 (a benchmark: it prints figures,
asserts nothing).

    .venv/bin/python tests/bench/bench_bootstrap.py [--prompts 30] [--reps 1,10,100,1000]
        [--db ANALYZED.duckdb] [--workdir /tmp/specsweep-bench-bootstrap]

Part 1, one comparison (schema.paired.bootstrap_ratio_of_medians, N_BOOT = 2000 resamples)
on --prompts prompts x each --reps reps per side, lognormal values: wall time (best of 3)
and peak traced memory (tracemalloc, which sees numpy's buffers) of the algorithm before
issue 12 (cumulative counts over an n_boot x n_values matrix, copied here) and of today's
(a binary search in rank space), and whether the two (point, ci_low, ci_high) are identical.

Part 2, with --db (a file `python -m analyze` has built, e.g. from tests/bench/bench_scale.py's
generate()): analyze.stats.build_speedup against the path before issue 12 (the whole
speedup_pairs view read into pandas, grouped there, the old bootstrap), each in its own child
process on its own copy of the file (the file itself is never written): wall time, the
child's peak resident memory (VmHWM, DuckDB included) and whether the two `speedup`
tables are identical.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from analyze import stats
from schema import paired

# the old algorithm is the oracle of tests/schema/test_paired.py; timed here against the new
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "schema"))
from test_paired import _cumsum_medians as old_medians  # noqa: E402


def old_bootstrap(m: list[np.ndarray], b: list[np.ndarray]) -> tuple[float, float, float]:
    """bootstrap_ratio_of_medians before issue 12 (same draws, same seed)."""
    (m_values, m_idx), (b_values, b_idx) = paired._flatten(m), paired._flatten(b)
    counts = paired.resample_counts(np.random.default_rng(paired.SEED), len(m), paired.N_BOOT)
    ratios = old_medians(m_values, m_idx, counts) / old_medians(b_values, b_idx, counts)
    tail = (1 - paired.LEVEL) / 2 * 100
    lo, hi = np.percentile(ratios, [tail, 100 - tail])
    return float(np.median(m_values) / np.median(b_values)), float(lo), float(hi)


def measure(fn, *args) -> tuple[object, float, float]:
    """(result, best wall seconds of 3, peak traced MiB of one more call)."""
    walls = []
    for _ in range(3):
        t0 = time.perf_counter()
        result = fn(*args)
        walls.append(time.perf_counter() - t0)
    tracemalloc.start()
    fn(*args)
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return result, min(walls), peak


def one_comparison(n_prompts: int, reps_list: list[int]) -> None:
    print(f"one comparison, {n_prompts} prompts, {paired.N_BOOT} resamples, both sides")
    print(f"{'reps':>6} {'values/side':>11} {'old s':>9} {'old MiB':>9} {'new s':>9} "
          f"{'new MiB':>9}  identical")  # fmt: skip
    rng = np.random.default_rng(12)
    for reps in reps_list:
        speed = rng.lognormal(3, 0.2, size=n_prompts)
        m = [rng.lognormal(np.log(s * 1.3), 0.1, size=reps) for s in speed]
        b = [rng.lognormal(np.log(s), 0.1, size=reps) for s in speed]
        old, old_s, old_mib = measure(old_bootstrap, m, b)
        new, new_s, new_mib = measure(paired.bootstrap_ratio_of_medians, m, b)
        print(f"{reps:>6} {n_prompts * reps:>11} {old_s:>9.3f} {old_mib:>9.1f} {new_s:>9.3f} "
              f"{new_mib:>9.1f}  {'yes' if old == new else f'NO {old} {new}'}")  # fmt: skip
        sys.stdout.flush()


def old_build_speedup(con: duckdb.DuckDBPyConnection) -> int:
    """build_speedup before issue 12: the whole view into pandas, grouped there."""
    pairs = con.execute("SELECT * FROM speedup_pairs").df()
    records = []
    for key, rows in pairs.groupby(stats.GROUP_KEY, sort=True):
        method, base = rows[rows["role"] == "method"], rows[rows["role"] == "baseline"]
        by_prompt = [{p: g.to_numpy(dtype=float) for p, g in s.groupby("prompt_id")["decode_tps"]}
                     for s in (method, base)]  # fmt: skip
        shared = sorted(by_prompt[0].keys() & by_prompt[1].keys())
        point, lo, hi = old_bootstrap(*([side[p] for p in shared] for side in by_prompt))
        records.append({
            **dict(zip(stats.GROUP_KEY, key)), "baseline": rows["baseline"].iat[0],
            "speedup": point, "ci_low": lo, "ci_high": hi, "significant": lo > 1 or hi < 1,
            "n": len(method), "n_baseline": len(base), "n_prompts": len(shared),
            "ttft_ratio": method["ttft_s"].median() / base["ttft_s"].median(),
            "method_decode_tps_p50": method["decode_tps"].median(),
            "baseline_decode_tps_p50": base["decode_tps"].median(),
            "n_boot": paired.N_BOOT, "seed": paired.SEED,
        })  # fmt: skip
    frame = pd.DataFrame.from_records(records)
    if not frame.empty:
        frame = stats.attach_window_ratios(frame, con.execute("SELECT * FROM config_summary").df())
    stats.write_speedup(con, frame)
    return len(frame)


def child(which: str, db: Path) -> None:
    """Run one build_speedup on db and print its figures as JSON (a child process)."""
    build = old_build_speedup if which == "old" else stats.build_speedup
    with duckdb.connect(str(db)) as con:
        t0 = time.perf_counter()
        rows = build(con)
        wall = time.perf_counter() - t0
    print(json.dumps({"wall_s": wall, "peak_mib": peak_rss_mib(), "rows": rows}))


def peak_rss_mib() -> float:
    """This process's peak resident memory: VmHWM (ru_maxrss would carry the peak of the
    parent it was forked from across exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def build_speedup_both(db: Path, workdir: Path) -> None:
    with duckdb.connect(str(db), read_only=True) as con:
        n_pairs = con.execute("SELECT count(*) FROM speedup_pairs").fetchone()[0]
    print(f"\nbuild_speedup on {db} ({n_pairs} speedup_pairs rows), a child process each")
    workdir.mkdir(parents=True, exist_ok=True)
    tables = {}
    for which in ("old", "new"):
        copy = workdir / f"{which}.duckdb"
        shutil.copyfile(db, copy)
        out = subprocess.run([sys.executable, __file__, "--child", which, "--db", str(copy)],
                             capture_output=True, text=True, check=True)  # fmt: skip
        got = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"  {which}: {got['wall_s']:.2f} s, peak RSS {got['peak_mib']:.0f} MiB, "
              f"{got['rows']} comparisons")  # fmt: skip
        with duckdb.connect(str(copy), read_only=True) as con:
            tables[which] = con.execute("SELECT * FROM speedup ORDER BY ALL").df()
    print(f"  speedup tables identical: {'yes' if tables['old'].equals(tables['new']) else 'NO'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=30)
    parser.add_argument("--reps", default="1,10,100,1000", help="comma-separated reps/prompt")
    parser.add_argument("--db", type=Path, help="an analyzed DuckDB file (copied, not written)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/specsweep-bench-bootstrap"))
    parser.add_argument("--child", choices=["old", "new"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.db)
        return
    one_comparison(args.prompts, [int(r) for r in args.reps.split(",") if r])
    if args.db:
        try:
            build_speedup_both(args.db, args.workdir)
        finally:
            shutil.rmtree(args.workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
