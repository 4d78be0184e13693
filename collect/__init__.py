"""collect: run a campaign plan against inference servers and record every request.

Its folders are layered; each imports only the layers below it (the `collect` contract of
/.importlinter, checked by tests/unit/test_layout.py), top to bottom:

    __main__               the command line
    cluster                one plan across a Ray cluster: drives `run` on every node
    run                    the runner: phases, the job queue, one configuration's service,
                           windows and rows
    planning | importing   estimates, memory budget, schedule; results files of engines' tools
    hosts | telemetry      where servers run (local, SSH, external); GPU sampling
    plan                   the pydantic plan; its `engine` union read from the engines' registry
    engines                adapters, each with its plan model (`Config`), found by `kind`
    provision              builds llama-server and fetches the prompt sets (set-up only)
    http | resources | redact   the streaming client; cached binaries and models; secrets

Where a lower layer needs something of a higher one it gets a protocol (the runner takes the
cluster as a `collect.hosts.base.Cluster` from `collect.cluster.launch.run`; an adapter reads
a plan's method as `collect.engines.base.MethodFlags`), never an import.
"""
