"""Blocking services across a Ray cluster: a phase that stops one runs alone on its node.

A blocking service is per host. A node that runs one joins Ray WITHOUT that service's GPUs
and with a custom resource `specsweep:<service name>` that marks it, e.g. for a service on
GPU0 of an 8-GPU host:

    CUDA_VISIBLE_DEVICES=1,2,3,4,5,6,7 ray start --address HEAD:6379 \
        --resources '{"specsweep:gpu0-service": 1}'

so that Ray never gives that GPU to a configuration. A job of a phase with `stop_services`
becomes a task that asks for every one of those resources (1 each: at most one such task per
node at a time) and for ALL the node's Ray GPUs (`num_gpus` = the GPU count Ray has for the
nodes that hold the resources, the largest where they differ: a node with fewer does not run
the phase), so nothing else that needs a GPU runs there meanwhile. A job whose tp exceeds
those GPUs plus the services' `gpus` is skipped, said, as a too-wide tp is on one host.

On its node the task (collect/cluster/task.py) runs each service's `stop` command; then the
configuration on the GPUs Ray assigned plus the stopped services' `gpus`, the first tp of
them, Ray's first (a single host too gives unreserved GPUs first); then `start` again for
every service that stopped, in reverse order, also on failure or cancellation. Decisions:

- Stop and start per TASK, not per phase as on one host: a phase's configurations may run
  on different nodes and at different times, so each task stops the services of its own
  node and starts them when it ends. The cost: one restart of each blocking service per
  configuration of that phase, on that node.
- The start runs in a guard process the task spawns before the first stop (detached: its
  own session, reparented away from the Ray worker). The task tells it each service that
  stopped through a pipe; when that pipe closes (the task ends, fails, is cancelled with
  force on Ctrl-C, or its worker dies) the guard runs their `start` commands, so a killed
  worker still leaves its node's services running. While the task lives it waits for the
  guard's answers: a start that fails is logged (error level), sent to the driver as a red
  note and recorded in the node's environment rows (`blocking.<name>.start_error`); never
  silent. (Only a node that dies as a whole keeps no guard: its services went with it.)
- A service that will not stop: the task measures nothing and says so (the driver notes it;
  the phase's other jobs still try, each on its node). The services it did stop are started
  again; the one whose `stop` failed is NOT started (as on one host: it was not stopped by
  us, and its state is unknown to us), which the note says.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import ray

from specsweep.collect.plan.components import BlockingService
from specsweep.collect.plan.model import Plan
from specsweep.collect.redact import redact

log = logging.getLogger("specsweep.collect")
TIMEOUT_S = 300  # each stop or start command, as on one host

# The guard: leaves the worker's process tree (second fork), reads the names of services
# that stopped until its stdin closes, then starts them (reverse order) and answers in JSON
GUARD = r"""
import json, os, subprocess, sys
if os.fork():
    os._exit(0)
starts = json.loads(sys.argv[1])
names = [line.strip() for line in sys.stdin if line.strip()]
out = []
for name in reversed(names):
    try:
        done = subprocess.run(starts[name], capture_output=True, text=True, check=False,
                              timeout=float(sys.argv[2]), stdin=subprocess.DEVNULL)
        out.append([name, done.returncode, done.stderr[-2000:]])
    except (OSError, subprocess.TimeoutExpired) as exc:
        out.append([name, 127, str(exc)])
try:
    sys.stdout.write(json.dumps(out))
    sys.stdout.flush()
except OSError:
    pass
"""


def resource(name: str) -> str:
    """The custom resource that marks the nodes running blocking service `name`."""
    return f"specsweep:{name}"


def services_of(plan: Plan, phase: str) -> list[BlockingService]:
    """The blocking services phase `phase` stops, in the plan's order of stop_services."""
    names = next((p.stop_services for p in plan.all_phases() if p.name == phase), [])
    return [s for n in names for s in plan.host.blocking_services if s.name == n]


def ask(plan: Plan, phase: str, tp: int) -> tuple[dict[str, float], int, str]:
    """For a job of `phase`: (custom resources, num_gpus, why it is skipped or '').
    Nothing asked when the phase stops no service."""
    services = services_of(plan, phase)
    if not services:
        return {}, 0, ""
    need = {resource(s.name): 1.0 for s in services}
    gpus = [
        int(n["Resources"].get("GPU", 0))
        for n in ray.nodes()
        if n["Alive"] and all(n["Resources"].get(k, 0) >= v for k, v in need.items())
    ]
    node_gpus = max(gpus, default=0)
    extra = len({g for s in services for g in s.gpus})
    if gpus and tp > node_gpus + extra:
        return (
            need,
            node_gpus,
            (
                f"tp {tp} needs more GPUs than a node running "
                f"{', '.join(s.name for s in services)} has: {node_gpus} "
                f"of Ray's and {extra} of the stopped services"
            ),
        )
    return need, node_gpus, ""


def gpus_for(
    ray_gpus: tuple[int, ...], services: list[BlockingService], tp: int
) -> tuple[int, ...]:
    """The GPUs a stop phase's configuration gets: Ray's, then the services' (first tp)."""
    extra = [g for s in services for g in s.gpus if g not in ray_gpus]
    return (tuple(ray_gpus) + tuple(dict.fromkeys(extra)))[:tp]


class Stopped:
    """What `stopped` yields: `failure` ('' when every service stopped); after the block,
    `start_errors` (service name -> what its start said)."""

    def __init__(self) -> None:
        self.failure = ""
        self.start_errors: dict[str, str] = {}


@contextmanager
def stopped(host: Any, services: list[BlockingService], notes: Any) -> Iterator[Stopped]:
    """Stop the services on this node (host.run), start again those that stopped when the
    block ends, by any way (the module docstring: the guard)."""
    state = Stopped()
    if not services:
        yield state
        return
    starts = json.dumps({s.name: s.start for s in services})
    guard = subprocess.Popen(
        [sys.executable, "-c", GUARD, starts, str(TIMEOUT_S)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    guard.wait()  # the first fork returns at once; the guard lives on, holding the pipes
    assert guard.stdin is not None and guard.stdout is not None
    try:
        for s in services:
            rc, _, err = host.run(s.stop, timeout_s=TIMEOUT_S)
            if rc != 0:
                state.failure = (
                    f"could not stop blocking service {s.name!r} (exit {rc}): "
                    f"{redact(err.strip())[-500:]}; not measured here, and "
                    f"{s.name} not started again (its state is unknown)"
                )
                log.error("%s", state.failure)
                notes.note(f"[red]{state.failure}[/red]")
                break
            guard.stdin.write(s.name + "\n")
            guard.stdin.flush()
            notes.note(f"stopped blocking service {s.name}")
        yield state
    finally:
        guard.stdin.close()  # the guard starts what stopped now
        _answers(state, guard.stdout.read(), notes)


def _answers(state: Stopped, text: str, notes: Any) -> None:
    """Read the guard's JSON: each start's exit status, said loudly when not 0."""
    try:
        answers = json.loads(text or "[]")
    except ValueError:
        answers = [["(guard)", 127, f"unreadable answer: {text[-200:]!r}"]]
    for name, rc, err in answers:
        if rc == 0:
            notes.note(f"started blocking service {name} again")
            continue
        state.start_errors[name] = f"exit {rc}: {redact(str(err).strip())[-500:]}"
        log.error("could not start blocking service %s again (%s)", name, state.start_errors[name])
        notes.note(
            f"[red]blocking service {name} did NOT start again ({state.start_errors[name]})[/red]"
        )
