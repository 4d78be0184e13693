"""One plan across the nodes of a Ray cluster (the plan's `cluster:` block, whose model
`collect.plan.components.Cluster` is the plan's). `driver` connects to the cluster and turns
each job of the runner's queue into a Ray task and lands what it returns, the one writer of
the results file; `task` is what runs on a node: the configuration's server and client there,
into a scratch store whose rows go back to the driver. Only a plan with `cluster:` imports
ray (`pip install specsweep[ray]`).

The cluster sits above the runner (it drives `collect.run`'s configuration code on every node),
so the runner never imports it: `launch.run` is the runner's `run` with the plan's cluster as where
the campaign runs (a `collect.hosts.base.Cluster`), what `specsweep run` calls for a plan
with `cluster:`."""
