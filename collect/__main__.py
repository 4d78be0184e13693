"""Command line of the collect stage: `specsweep run|check|simulate|provision|import`, and
`python -m specsweep.collect run|check|simulate|schema|provision|import`.

A machine that is not ready (a prompt set, the llama-server build or a model missing, a
server program it cannot execute, a results file or log folder that cannot be written) ends
`run` before it starts anything, with one `error:` line naming the fix and exit code 2, never
a traceback; a missing prompt set ends `check` and `simulate` likewise, an unwritable --db
`import`; `check` only warns of a missing build, model or program (its plan may be for
another machine). docs/reference.md, "Exit codes"."""

from __future__ import annotations

import faulthandler
import json
import logging
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer

from specsweep.collect.plan.file import PlanError, load_plan
from specsweep.interrupt import Interrupted, unwind_on_signals
from specsweep.schema.defaults import DEFAULT_DB
from specsweep.writing import FileFault, file_faults

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False)
DEFAULT_PLAN = Path("plans/local.yaml")
UNREACHABLE = 4  # exit code: the host cannot be reached (2: bad plan, 3: does not fit)


@contextmanager
def _ready() -> Iterator[None]:
    """A missing resource (collect.resources: prompt sets, the llama-server build, a model)
    ends the command with its one line, which names the fix, and exit code 2."""
    from specsweep.collect.resources import ResourceError

    try:
        yield
    except ResourceError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


def _writable_or_exit(path: Path, option: str, folder: bool = False) -> None:
    """Exit 2 with one line before any work when the results file (or, folder=True, a file
    in the log folder) cannot be written where the option names it."""
    from specsweep.writing import unwritable

    why = unwritable(path / "probe" if folder else path)
    if why:
        typer.echo(f"error: cannot write {option} {path}: {why}: choose another {option}", err=True)
        raise typer.Exit(2)


def _plan_or_exit(path: Path):  # noqa: ANN202 - returns Plan
    try:
        return load_plan(path)
    except PlanError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


@app.command()
def run(
    plan: Path = typer.Argument(DEFAULT_PLAN, help="Campaign plan (YAML)."),
    db: Path = typer.Option(DEFAULT_DB, help="DuckDB results file."),
    logs: Path = typer.Option(Path("results/logs"), help="Folder for server logs."),
    progress: bool = typer.Option(True, help="Show the live progress bar."),
    phase: list[str] = typer.Option(None, help="Run only this phase (repeatable)."),
    only: list[str] = typer.Option(
        None,
        help="Run only this configuration, METHOD or METHOD/TP (repeatable; the "
        "baseline too only if named).",
    ),
    repeat: int = typer.Option(
        None,
        min=1,
        max=100,
        help="Rounds of service starts: each starts every configuration once, in a "
        "seeded counterbalanced order (default: the plan's `repeat`, 3 unless it says); "
        "more rounds than a measured campaign has add rounds to it. 1 gives no interval.",
    ),
) -> None:
    """Run or resume the plan's campaign.

    Exit codes: 0 done; 2 bad plan, or this machine or its host is not ready (a prompt
    set, the llama-server build or a model missing, a server program it cannot execute, a
    chat template SGLang cannot read; --db or --logs not writable): one line names the fix;
    4 host cannot be reached (one line names the host, user@host:port and why; the campaign
    is marked unreachable); 130 interrupted by Ctrl-C, 143 stopped by SIGTERM. A disk that
    refuses a write mid-run (no space left, a read-only file system) or a results file
    DuckDB cannot read is 2 too, one line naming the file. Completed units are saved
    whenever it stops: rerun to resume."""
    from specsweep.collect.cluster import launch
    from specsweep.collect.engines.base import EngineNotReady
    from specsweep.collect.hosts.base import HostUnreachable
    from specsweep.collect.plan.workloads import request_count
    from specsweep.collect.run import runner

    parsed = _plan_or_exit(plan)
    try:
        runner.select_phases(parsed, phase)
        runner.select_configs(parsed, only)
        parsed.engine.api_key()
    except ValueError as exc:
        typer.echo(f"error: {plan}: {exc}", err=True)
        raise typer.Exit(2) from None
    _writable_or_exit(db, "--db")
    _writable_or_exit(logs, "--logs", folder=True)
    with _ready():
        for workload in parsed.workloads:
            request_count(workload)  # reads its prompt set as the runner will
        _require_engine(parsed)
    # `kill -USR1 PID` prints every thread's stack to stderr: where a run that seems stuck is
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    start = runner.run if parsed.cluster is None else launch.run  # cluster: above runner
    try:  # SIGTERM unwinds as Ctrl-C does: every running service is stopped on the way out
        with _ready(), unwind_on_signals(), file_faults():
            campaign = start(
                parsed,
                plan.read_text(),
                db,
                logs,
                show_progress=progress,
                phases=phase or None,
                only=only or None,
                repeat=repeat,
            )
    except (HostUnreachable, EngineNotReady) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(UNREACHABLE if isinstance(exc, HostUnreachable) else 2) from None
    except Interrupted as exc:  # SIGINT or SIGTERM
        typer.echo("interrupted: completed units are saved; rerun to resume", err=True)
        raise typer.Exit(exc.exit_code) from None
    except FileFault as exc:
        kept = "; completed units are saved; rerun to resume" if exc.refused else ""
        typer.echo(f"error: {exc}{kept}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"campaign {campaign}: results in {db}")


@app.command()
def check(
    plan: Path = typer.Argument(DEFAULT_PLAN, help="Campaign plan (YAML)."),
    probe: bool = typer.Option(
        False, help="Connect to the host: list its GPUs and their memory, read model files."
    ),
    db: Path = typer.Option(
        None,
        help="Results file whose measured speeds (on the plan's host and newest engine build "
        f"there) replace the plan's assumed ones; default {DEFAULT_DB} when it exists.",
    ),
) -> None:
    """Validate a plan, list the services and requests it would run, estimate the device time
    of its rounds against one start per configuration and check that each service fits its
    GPUs' memory.

    Exit codes: 0 valid and fits (a local host without the engine's build or model: a
    warning line naming the fix); 2 bad plan, or a prompt set is missing (one line names the
    fix); 3 a service does not fit its GPUs' memory; 4 (with --probe) host cannot be reached
    (one line names the host, user@host:port and why)."""
    from specsweep.collect.hosts.base import HostUnreachable

    parsed = _plan_or_exit(plan)
    from specsweep.collect.scheduling.sizing import service_lines, window_warnings

    with _ready():  # the prompt sets, read to count requests
        typer.echo("\n".join(service_lines(parsed)))
    from specsweep.collect.resources import ResourceError

    try:  # a plan for another machine is checked here too: a warning, not an error
        _require_engine(parsed)
    except ResourceError as exc:
        typer.echo(f"warning: not ready to run on this machine: {exc}")
    for line in window_warnings(parsed):
        typer.echo(f"warning: {line}")
    typer.echo("\n".join(_time_estimate(parsed, db, seed=None)))
    from specsweep.collect.scheduling.memory import check_plan

    try:
        memory_lines, too_big = check_plan(parsed, probe=probe)
    except HostUnreachable as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(UNREACHABLE) from None
    typer.echo("\n".join(memory_lines))
    if too_big:
        raise typer.Exit(3)


def _require_engine(parsed) -> None:  # noqa: ANN001 - Plan
    """On a local host, build the first service's command line as `run` builds it: it finds
    the engine's build and model, and its program can be executed, or raises ResourceError
    naming the fix (the plan field that gave the program). A cluster's nodes and other hosts
    have their own (`check --probe` reads a remote host's model files)."""
    if parsed.host.kind != "local" or parsed.cluster is not None:
        return
    from specsweep.collect import engines
    from specsweep.collect.resources import ResourceError, exec_problem

    argv, env = engines.create(parsed.engine).launch(parsed.methods[0], 1, 0)
    why = exec_problem(argv[0], env.get("PATH"))
    if why:
        field = next((f"engine.{k}" for k, v in parsed.engine if v == argv[0]), "engine")
        raise ResourceError(f"{field}: {argv[0]}: {why}")


def _time_estimate(
    parsed,
    db: Path | None,
    seed: int | None,
    gantt: bool = False,  # noqa: ANN001 - Plan
    hosts: list[int] | None = None,
) -> list[str]:
    from specsweep.collect.scheduling import simulation

    if db is None and DEFAULT_DB.exists():  # the ETA learns from the default results file
        db = DEFAULT_DB
    try:
        with _ready():  # the prompt sets, read to count requests
            return simulation.report_lines(parsed, db, seed, gantt, hosts)
    except FileNotFoundError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    except ValueError as exc:  # a configuration that can never run; the memory check says why
        return [f"time estimate: none ({exc})"]


def _host_counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1 or max(counts) > 64:
        raise typer.BadParameter(f"{text!r}: host counts from 1 to 64, comma-separated (1,2,4)")
    return counts


@app.command()
def simulate(
    plan: Path = typer.Argument(DEFAULT_PLAN, help="Campaign plan (YAML)."),
    db: Path = typer.Option(
        None,
        help="Results file whose measured speeds (on the plan's host and newest engine build "
        f"there) replace the plan's assumed ones; default {DEFAULT_DB} when it exists.",
    ),
    seed: int = typer.Option(0, help="Seed of the start-up times drawn from estimates.startup_s."),
    hosts: str = typer.Option(
        "1",
        help="Host counts to simulate, comma-separated (1,2,4): copies of the plan's host "
        "and its GPUs; a job never spans hosts. The packed order's table is the first count's.",
    ),
) -> None:
    """Run the scheduler on simulated services, round after round (plan `repeat`): serial
    and packed makespan (replicas included unless host.replicas is false), lower bounds, the
    device time of the rounds against one start per configuration, and the packed order;
    with --hosts, the packed makespan and its bounds on each host count."""
    counts = _host_counts(hosts)
    lines = _time_estimate(
        _plan_or_exit(plan), db, seed, gantt=True, hosts=counts if counts != [1] else None
    )
    if lines[0].startswith("time estimate: none"):
        typer.echo(f"error: {plan}: {lines[0]}", err=True)
        raise typer.Exit(2)
    typer.echo("\n".join(lines))


@app.command()
def schema(
    markdown: bool = typer.Option(
        False, help="Print the plan reference as markdown instead (docs/plan-reference.md)."
    ),
) -> None:
    """Print the plan's JSON Schema (for editors), or with --markdown the plan reference."""
    from specsweep.collect.plan.file import json_schema
    from specsweep.collect.plan.reference import markdown as reference

    typer.echo(reference() if markdown else json.dumps(json_schema(), indent=2), nl=not markdown)


@app.command()
def provision(
    cuda: bool = typer.Option(
        False,
        help="Build the CUDA flavour of llama-server (needs nvcc); "
        "plans ask for it with engine.binary: auto-cuda.",
    ),
    cuda_arch: str = typer.Option(
        None,
        help="CUDA architectures, e.g. 90 (implies --cuda); "
        "default: nvidia-smi's compute_cap, else CMake's native.",
    ),
    source: Path = typer.Option(
        None,
        help="Build from this local llama.cpp tree, unpacked "
        "llama-cpp-python sdist or .tar.gz of either, with no network "
        "(default: $SPECSWEEP_LLAMA_SOURCE, else the sdist from PyPI).",
    ),
) -> None:
    """Build the cached llama-server and fetch the prompt sets."""
    from specsweep.collect.provision import provision as do_provision
    from specsweep.collect.resources import ResourceError

    try:
        with unwind_on_signals():
            do_provision(cuda=cuda, cuda_arch=cuda_arch, source=source)
    except Interrupted as exc:  # the build's processes ended, its folder removed
        typer.echo("interrupted: nothing half-built was installed; rerun", err=True)
        raise typer.Exit(exc.exit_code) from None
    except ResourceError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


@app.command("import")
def import_results(
    file: Path = typer.Argument(..., help="vLLM bench serve JSON or SGLang bench_serving JSONL."),
    db: Path = typer.Option(DEFAULT_DB, help="DuckDB results file."),
    method: str = typer.Option("unknown", help="Method the server ran (not in the file)."),
    tp: int = typer.Option(1, min=1, help="Tensor-parallel size (not in the file)."),
    engine: str = typer.Option(None, help="Server engine [default: the tool that wrote FILE]."),
    workload: str = typer.Option(None, help="Workload name [default: the file's dataset]."),
    concurrency: int = typer.Option(None, min=1, help="Client concurrency limit."),
    max_tokens: int = typer.Option(None, min=1, help="Requested output length."),
) -> None:
    """Import a vLLM/SGLang benchmark result file as raw rows; `specsweep analyze` compares."""
    from specsweep.collect.importing import importer as importers

    options = importers.ImportOptions(method, tp, engine, workload, concurrency, max_tokens)
    _writable_or_exit(db, "--db")
    try:
        with file_faults():
            lines = importers.run(file, db, options)
    except (FileFault, OSError, importers.ImportFileError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo("\n".join(lines))


def main(argv: list[str] | None = None, prog_name: str | None = None) -> None:
    """Run the command line on argv (default sys.argv[1:]); exits with the command's code.
    `specsweep run|check|...` calls it with its own argv and prog_name."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    app(args=argv, prog_name=prog_name)


if __name__ == "__main__":
    main()
