"""Scheduling a plan's services, before and during a run (the plan itself is collect.plan): will
each service fit its GPUs (`memory`, with a model's shape read from its config.json by
`architecture`), how long will it take (`estimate`), which configurations run side by side on
which GPUs (`schedule`), which long configurations run as several replicas (`replicas`), and the
whole plan on a simulated clock, on one host or several (`simulation`). Nothing here starts a
server."""
