"""One plan across the nodes of a Ray cluster (the plan's `cluster:` block). `config` holds
the plan model (no ray import: `Plan` imports it); `driver` connects to the cluster and turns
each job of the runner's queue into a Ray task and lands what it returns, the one writer of
the results file; `task` is what runs on a node: the configuration's server and client there,
into a scratch store whose rows go back to the driver. Only a plan with `cluster:` imports
ray (`pip install specsweep[ray]`)."""
