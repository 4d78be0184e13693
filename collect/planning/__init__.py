"""Planning before and during a run: will each service fit its GPUs (`memory`), how long will
it take (`estimate`), which configurations run side by side on which GPUs (`schedule`), and the
whole plan on a simulated clock (`simulation`). Nothing here starts a server."""
