"""What a tool handler receives: the workspace, the run, and (from the engine) context-region access."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import field
from typing import Any, Awaitable, Protocol, TypeVar, Union, runtime_checkable

from lev_nb.permits import Permits
from lev_nb.records import record
from lev_nb.sandbox import Sandbox
from lev_nb.tools.write_budget import WriteBudget
from lev_nb.workspace import Workspace

__all__ = ["BLOCKING_PER_RUN", "ContextAccess", "ToolContext", "DEFAULT_SHELL_TIMEOUT_S"]

DEFAULT_SHELL_TIMEOUT_S = 60.0
# Worker threads one run's blocking tool calls may hold at once (the engine's pool has 32).
BLOCKING_PER_RUN = 4
T = TypeVar("T")

MaybeAwaitable = Union[str, Awaitable[str]]


@runtime_checkable
class ContextAccess(Protocol):
    """The engine's side of the context_* and todo_* tools.

    Each method returns the tool's result string (or an awaitable of it). Failures are returned as
    strings starting with ``[error]``, not raised.
    """

    def write(self, region: str, content: str, key: str | None = None) -> MaybeAwaitable:
        """Upsert a (keyed) entry in ``region``."""
        ...

    def append(self, region: str, content: str, key: str | None = None) -> MaybeAwaitable:
        """Append an entry to ``region``."""
        ...

    def read(self, region: str, key: str | None = None) -> MaybeAwaitable:
        """Read ``region`` (or one keyed entry of it)."""
        ...

    def delete(self, region: str, key: str | None = None, index: int | None = None, oldest: int | None = None) -> MaybeAwaitable:
        """Release entries from ``region`` by key, index, or the ``oldest`` N."""
        ...

    def list(self, region: str | None = None) -> MaybeAwaitable:
        """Usage listing of every region, or of one."""
        ...

    def todo_add(self, region: str, item: str) -> MaybeAwaitable:
        """Add an open item to a checklist region."""
        ...

    def todo_done(self, region: str, id: int) -> MaybeAwaitable:
        """Mark checklist item ``id`` done."""
        ...

    def todo_note(self, region: str, id: int, note: str) -> MaybeAwaitable:
        """Attach a note to checklist item ``id``."""
        ...


@record(frozen=False)
class ToolContext:
    """Per-run facts a handler needs. ``context`` is None until the engine provides regions."""

    workspace: Workspace
    run_id: str = ""
    context: ContextAccess | None = None
    shell_timeout_s: float = DEFAULT_SHELL_TIMEOUT_S
    # Where commands run (the shell tool, a script's shell()): the current stage's sandbox, set by
    # the engine; None runs them on the host.
    sandbox: Sandbox | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # [limits] write caps and the free-disk guard, which every writing tool asks first.
    writes: WriteBudget = field(default_factory=WriteBudget)
    _blocking: asyncio.Semaphore | None = field(default=None, repr=False, compare=False)
    _share: asyncio.Semaphore | None = field(default=None, repr=False, compare=False)

    def pool_share(self) -> asyncio.Semaphore:
        """This run's share of the process's tool pool (``[limits] max_concurrent_tools``): held
        before a pool slot, so one run's many calls never hold every slot while others wait."""
        if self._share is None:
            self._share = Permits(BLOCKING_PER_RUN)
        return self._share

    async def blocking(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on a worker thread of the shared pool, at most
        :data:`BLOCKING_PER_RUN` at a time for this run: however many blocking calls one run makes,
        the pool keeps threads for the others (a run's own calls queue behind each other)."""
        if self._blocking is None:
            self._blocking = Permits(BLOCKING_PER_RUN)
        async with self._blocking:
            return await asyncio.to_thread(fn, *args)
