"""How `specsweep analyze` and `specsweep report` scale with a campaign's size (a benchmark: it
prints figures, asserts nothing).

    .venv/bin/python tests/bench/bench_scale.py [--sizes 10000,100000,1000000]
        [--campaigns K] [--add N] [--check]
        [--workdir /tmp/specsweep-scale] [--keep] [--seed 7] [--batch 50000] [--limit-s 600]
        [--max-rss-gb 16] [--views] [--no-cache] [--fixed-cost R]

For each size N it writes a synthetic campaign of N measured requests through the real
contracts and store (`schema.store.Store.append`: every batch validated by pandera, as
`collect` writes it; 1M requests take about 5 minutes, so the raw file is kept under
~/.cache/specsweep/bench-scale/, keyed by the text of scale_campaign.py and schema/ddl.sql, and
copied for each run: --no-cache writes it anew), then times `specsweep analyze --db FILE` and
`specsweep report --db FILE --out X.pdf` as child processes and prints, per size: the
generation time, the DuckDB file size, and each stage's wall time and peak resident memory,
and the most its processes held together (polled every 50 ms).
Peak memory is the largest VmHWM (the high-water mark of resident memory since the process's
exec) of any process of the stage, polled every 50 ms: not `ru_maxrss`, which for a child
forked from this script counts this script's own memory at the fork (1-2 GB after it
generated a 1M file in-process, which the figures before 2026-12-06 include). A stage past
--limit-s seconds or --max-rss-gb resident (polled: no OOM killer on a shared box) is killed.

The campaign is tests/bench/scale_campaign.py's. --campaigns K grows the file to K campaigns,
SQL copies of the first under campaign ids of their own (a file that grew by K nightly
campaigns: N * K requests). --add N then adds one more campaign of N generated requests and
times `specsweep analyze` again: the incremental build, which analyses only that campaign.
--check then analyses a copy with `--full` and compares every analysis table of the two
(tests/support/analysis_tables.py): it prints the differences and exits 1 when there are any.
--fixed-cost R times `specsweep analyze` of a fresh copy of each size's file instead, R rounds
in alternating order, and prints the line through the times: its intercept is a campaign's
fixed cost (Python's imports, the plan, 43 models of few rows, the commit), its slope the cost
per request. Files live under --workdir, deleted at the end unless --keep. --views also times
`SELECT count(*)` of each analysis object after analyze.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import scale_campaign  # noqa: E402  (tests/bench is the script's own folder, on the path)
from scale_campaign import generate, windows  # noqa: E402
from scale_copies import add_campaign, copies  # noqa: E402

from specsweep.analyze.build import TABLES  # noqa: E402
from tests.support.analysis_tables import differences  # noqa: E402


@dataclass
class Stage:
    """One child process's figures."""

    wall_s: float
    peak_mib: float  # the largest process's own peak (VmHWM, polled)
    rc: int | None  # None: killed at a limit
    killed: str = ""
    group_mib: float = 0.0  # the most its processes held together (polled every 50 ms)


def timed(cmd: list[str], limit_s: float, max_rss_mib: float, log: Path) -> Stage:
    """Run cmd; its wall time, the peak RSS of its largest process and the most its process
    group held at once (analyze's chunk-list pass runs worker processes). Killed past limit_s
    seconds or when the group's RSS passes max_rss_mib (rc None: see `killed`)."""
    started = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.Popen(
            cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    group = peak = 0.0
    while True:
        pid, status, _ = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return Stage(time.perf_counter() - started, peak, proc.returncode, group_mib=group)
        elapsed = time.perf_counter() - started
        rss, hwm = _group_memory_mib(proc.pid)
        group, peak = max(group, rss), max(peak, hwm)
        if elapsed > limit_s or rss > max_rss_mib:
            os.killpg(proc.pid, signal.SIGKILL)
            os.wait4(proc.pid, 0)
            why = (
                f"KILLED after {_clock(elapsed)}"
                if elapsed > limit_s
                else f"KILLED at {rss:,.0f} MiB resident after {_clock(elapsed)}"
            )
            return Stage(elapsed, peak, None, why)
        time.sleep(0.05)


def _group_memory_mib(pgid: int) -> tuple[float, float]:
    """(resident memory of every live process of process group pgid, summed; the largest
    high-water mark among them)."""
    total = peak = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid:  # fields after "(comm)": state, ppid, pgrp, ...
            rss, hwm = _memory_mib(int(stat.parent.name))
            total, peak = total + rss, max(peak, hwm)
    return total, peak


def _memory_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a live process in MiB (0 once it is gone)."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return 0.0, 0.0
    found = {
        x.split(":")[0]: int(x.split()[1]) / 1024 for x in lines if x[:6] in ("VmRSS:", "VmHWM:")
    }
    return found.get("VmRSS", 0.0), found.get("VmHWM", 0.0)


CACHE = Path.home() / ".cache" / "specsweep" / "bench-scale"


def raw_file(n: int, args: argparse.Namespace) -> tuple[Path, int, float | None]:
    """The generated file of n requests (cached unless --no-cache), its row count and the
    seconds generation took (None: it came from the cache)."""
    key = hashlib.sha256(
        Path(scale_campaign.__file__).read_bytes() + (ROOT / "schema" / "ddl.sql").read_bytes()
    ).hexdigest()[:12]
    path = (CACHE if not args.no_cache else args.workdir) / f"{key}-seed{args.seed}-n{n}.duckdb"
    if path.exists() and not args.no_cache:
        return path, n, None
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    started = time.perf_counter()
    landed = generate(partial, n, args.seed, args.batch)
    partial.rename(path)  # a file interrupted mid-generation is never taken for a whole one
    return path, landed, time.perf_counter() - started


def measure(n: int, args: argparse.Namespace) -> dict[str, Any]:
    folder = args.workdir / f"n{n}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    db = folder / "scale.duckdb"
    raw, landed, gen_s = raw_file(n, args)
    shutil.copyfile(raw, db)
    grow_s = None
    if args.campaigns > 1:
        started = time.perf_counter()
        copies(db, args.campaigns)
        grow_s = time.perf_counter() - started
    analyze = stage(args, folder, "analyze", db)
    report = (
        stage(args, folder, "report", db, "--out", str(folder / "scale.pdf"))
        if analyze.rc == 0
        else None
    )
    out = {
        "n": landed * args.campaigns,
        "gen_s": gen_s,
        "grow_s": grow_s,
        "mib": db.stat().st_size / 2**20,
        "analyze": analyze,
        "report": report,
        "folder": folder,
        "views": view_times(db) if args.views and analyze.rc == 0 else [],
    }
    if args.add and analyze.rc == 0:
        out |= added(db, folder, args)
    return out


def stage(args: argparse.Namespace, folder: Path, name: str, db: Path, *more: str) -> Stage:
    """`specsweep analyze|report --db db ...` as a child process, timed."""
    cmd = [sys.executable, "-m", f"specsweep.{name.split('-')[0]}", "--db", str(db), *more]
    return timed(cmd, args.limit_s, args.max_rss_gb * 1024, folder / f"{name}.log")


def added(db: Path, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One more campaign of args.add requests, then the incremental analyze; with --check a
    full rebuild of a copy and the tables that differ."""
    extra = folder / "added.duckdb"
    generate(extra, args.add, args.seed + 1, args.batch)
    add_campaign(db, extra, args.campaigns)
    out: dict[str, Any] = {"added": args.add, "incremental": stage(args, folder, "analyze-add", db)}
    if args.check:
        full = folder / "full.duckdb"
        shutil.copyfile(db, full)
        out["full"] = stage(args, folder, "analyze-full", full, "--full")
        out["diff"] = differences(db, full, TABLES)
    return out


def fixed_cost(sizes: list[int], args: argparse.Namespace) -> None:
    """--fixed-cost R: the user's command, `specsweep analyze --db F`, on a fresh copy of each
    size's file (a first build), R rounds, every other round in reverse order (a drift of the
    machine's speed falls on every size alike); each size's times and the least-squares line
    through all of them. Point estimates: nothing here has checked an interval's coverage."""
    import numpy as np

    folder = args.workdir / "fixed-cost"
    folder.mkdir(parents=True, exist_ok=True)
    times: dict[int, list[float]] = {n: [] for n in sizes}
    for r in range(args.fixed_cost):
        for n in sizes if r % 2 == 0 else sizes[::-1]:
            db = folder / f"n{n}.duckdb"
            shutil.copyfile(raw_file(n, args)[0], db)
            cmd = [sys.executable, "-m", "specsweep", "analyze", "--db", str(db)]
            done = timed(cmd, args.limit_s, args.max_rss_gb * 1024, folder / "analyze.log")
            if done.rc != 0:
                sys.exit(f"analyze of {n:,} requests failed: {done.killed or done.rc}")
            times[n].append(done.wall_s)
    print(f"specsweep analyze of a fresh campaign, {args.fixed_cost} runs a size (seconds):")
    for n, runs in times.items():
        print(f"  {n:>9,} requests: median {np.median(runs):.2f}, {min(runs):.2f}-{max(runs):.2f}")
    x = np.repeat(sizes, args.fixed_cost).astype(float)
    y = np.array([t for n in sizes for t in times[n]])
    slope, intercept = np.polyfit(x, y, 1)
    print(
        f"  least squares: fixed cost {intercept:.2f} s + {slope * 1e6:.1f} s per million "
        "requests (point estimates)"
    )


def view_times(db: Path) -> list[tuple[str, int, float]]:
    """(object, rows, seconds) of `SELECT count(*)` of each analysis object, slowest first."""
    import duckdb

    from specsweep.analyze.build import OBJECTS

    out = []
    with duckdb.connect(str(db), read_only=True) as con:
        for name in OBJECTS:  # constants of analyze.build, never user input
            started = time.perf_counter()
            rows = con.execute(f"SELECT count(*) FROM {name}").fetchone()[0]
            out.append((name, rows, time.perf_counter() - started))
    return sorted(out, key=lambda t: -t[2])


def stage_line(name: str, stage: Stage | None, log: Path) -> str:
    if stage is None:
        return f"  {name:<8} not run (analyze did not finish)"
    what = (
        stage.killed
        if stage.rc is None
        else "ok"
        if stage.rc == 0
        else f"FAILED rc={stage.rc}: {log.read_text()[-300:].strip()}"
    )
    return (
        f"  {name:<8} {_clock(stage.wall_s):>10} {stage.peak_mib:>10,.0f} "
        f"{stage.group_mib:>10,.0f}   {what}"
    )


def _clock(s: float) -> str:
    return f"{s:.1f} s" if s < 60 else f"{int(s // 60)} min {s % 60:.0f} s"


def show(r: dict[str, Any]) -> None:
    folder = r["folder"]
    made = (
        "taken from the cache"
        if r["gen_s"] is None
        else f"generated in {_clock(r['gen_s'])} through Store.append"
    )
    print(
        f"N = {r['n']:,} measured requests ({len(windows())} windows): {made}, DuckDB file "
        f"{r['mib']:,.0f} MiB"
    )
    if r["grow_s"] is not None:
        print(f"  grown to {r['n']:,} requests by SQL copies in {_clock(r['grow_s'])}")
    print(f"  {'stage':<8} {'wall':>10} {'peak MiB':>10} {'all MiB':>10}")
    print(stage_line("analyze", r["analyze"], folder / "analyze.log"))
    print(stage_line("report", r["report"], folder / "report.log"))
    if "incremental" in r:
        print(f"  one campaign of {r['added']:,} requests added:")
        print(stage_line("analyze", r["incremental"], folder / "analyze-add.log"))
        said = (folder / "analyze-add.log").read_text().splitlines()
        print(f"    {said[0][:150] if said else ''}")
    if "full" in r:
        print(stage_line("--full", r["full"], folder / "analyze-full.log"))
        same = "every analysis table equal" if not r["diff"] else "TABLES DIFFER"
        print(f"  incremental against --full: {same}")
        for line in r["diff"]:
            print(f"    {line}")
    for name, rows, seconds in r["views"]:
        print(f"    count(*) of {name:<20} {rows:>10,} rows {seconds:8.2f} s")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        default="10000,100000,1000000",
        help="comma-separated request counts (the full run: 10000,100000,1000000)",
    )
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/specsweep-scale"))
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--batch", type=int, default=50000, help="rows per Store.append")
    parser.add_argument("--limit-s", type=float, default=600.0, help="kill a stage after this")
    parser.add_argument("--max-rss-gb", type=float, default=16.0, help="or at this RSS (GiB)")
    parser.add_argument("--views", action="store_true", help="time count(*) of every view")
    parser.add_argument("--campaigns", type=int, default=1, help="grow to K campaigns")
    parser.add_argument("--add", type=int, default=0, help="then add a campaign of N requests")
    parser.add_argument(
        "--check", action="store_true", help="compare the incremental build with --full"
    )
    parser.add_argument(
        "--fixed-cost", type=int, default=0, metavar="R", help="time a fresh analyze, R rounds"
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="generate the files anew (in --workdir) instead of reusing them",
    )
    args = parser.parse_args()
    print(f"scale benchmark, {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d %H:%M %Z')}")
    failed = False
    try:
        if args.fixed_cost:
            fixed_cost([int(s) for s in args.sizes.split(",")], args)
            return
        for n in (int(s) for s in args.sizes.split(",")):
            result = measure(n, args)
            show(result)
            failed |= bool(result.get("diff")) or result["analyze"].rc != 0
    finally:
        if not args.keep:
            shutil.rmtree(args.workdir, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
