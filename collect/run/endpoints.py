"""A service's optional endpoints (fingerprint, metrics scrape) and its before-workload hook,
called so that their failure never ends the campaign.

A server may answer these paths with something else than the engine expects: an
OpenAI-compatible proxy in front of it answers /metrics with 200 and an HTML page, a build
without /server_info answers 404 or resets the connection. Such a failure is recorded in
`endpoint_errors` (which hook, the last request it sent and that reply's status, the error)
and the measurement goes on without what the call would have given. The request and its
status come from event hooks on the service's httpx client: the parse error of a 200 reply
has no request of its own to name.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import Any, TypeVar

import httpx

from specsweep.schema.store import Store, utcnow

log = logging.getLogger("specsweep.collect")
T = TypeVar("T")


class Endpoints:
    """Optional calls of one service, and the record of those that failed."""

    def __init__(self, store: Store, campaign_id: str, service_id: str, config_id: str):
        self.store = store
        self.key = {"campaign_id": campaign_id, "service_id": service_id, "config_id": config_id}
        self.endpoint, self.status = "", None  # the last request sent, its reply's status

    def hooks(self) -> dict[str, list[Any]]:
        """httpx event hooks that keep the last request and its status."""
        return {"request": [self._request], "response": [self._response]}

    async def _request(self, request: httpx.Request) -> None:
        self.endpoint, self.status = f"{request.method} {request.url.path}", None

    async def _response(self, response: httpx.Response) -> None:
        self.status = response.status_code

    async def call(self, hook: str, workload: str, phase: str, work: Awaitable[T], default: T) -> T:
        """The result of `work`, or `default` once its failure is recorded."""
        self.endpoint, self.status = "", None
        try:
            return await work
        except Exception as exc:  # whatever the engine's code raised: recorded, not fatal
            self.record(hook, workload, phase, exc)
            return default

    def record(self, hook: str, workload: str, phase: str, exc: BaseException) -> None:
        """One endpoint_errors row for a failed call (its traceback goes to the debug log)."""
        error = f"{type(exc).__name__}: {exc}"[:1000]
        where = self.endpoint or hook
        log.warning("%s: %s failed (%s): %s", self.key["config_id"], where, phase, error)
        log.debug("%s: %s failed", self.key["config_id"], where, exc_info=exc)
        self.store.append(
            "endpoint_errors",
            [
                {
                    **self.key,
                    "workload": workload,
                    "hook": hook,
                    "phase": phase,
                    "endpoint": self.endpoint,
                    "status": self.status,
                    "error": error,
                    "failed_at": utcnow(),
                }
            ],
        )
