"""What every engine adapter shares: the hooks a campaign calls around measurements.

An adapter also provides `kind`, `health_path`, `launch(method, tp, port)`,
`request(messages, max_tokens)`, `parser()`, `fingerprint(client, url)` and
`scrape(client, url)`; see collect/engines/llamacpp.py for the reference.
"""

from __future__ import annotations

from typing import Any

import httpx


class HookFailed(RuntimeError):
    """A hook could not do its job (e.g. the server refused to flush its cache): the
    service is treated as failed, which restarts it once (a fresh server has a clean
    cache), then skips the configuration."""


class EngineHooks:
    """Default (no-op) hooks; adapters override what their engine needs."""

    def prepare(self, host: Any) -> None:
        """Once per campaign before any service starts (e.g. read a chat template)."""

    async def before_workload(self, client: httpx.AsyncClient, base_url: str) -> None:
        """Before each workload on a running service (e.g. flush a prefix cache)."""
