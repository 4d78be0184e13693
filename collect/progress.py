"""The live progress display of a campaign: one bar over every measured request, with ETA."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class CampaignProgress:
    """A rich progress bar; a no-op when disabled (tests, no terminal)."""

    def __init__(self, total: int, enabled: bool = True):
        self.console = Console(stderr=True)
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=self.console,
            disable=not enabled,
        )
        self._task = self._progress.add_task("campaign", total=total)

    def __enter__(self) -> CampaignProgress:
        self._progress.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._progress.stop()

    def add_total(self, n: int) -> None:
        """More requests to come (a phase's work is known once it starts)."""
        task = self._progress.tasks[0]
        self._progress.update(self._task, total=(task.total or 0) + n)

    def advance(self) -> None:
        self._progress.advance(self._task)

    def status(self, text: str) -> None:
        self._progress.update(self._task, description=text)

    def note(self, text: str) -> None:
        self._progress.console.print(text)
