"""The concurrency pools of this process: how many model calls and tool calls are in flight at
once (``[limits] max_concurrent_inferences``, ``max_concurrent_inferences_by_model``,
``max_concurrent_inferences_by_provider``, ``max_concurrent_tools``). The one home for the rule a
model call waits on before it is sent.

A model call holds a slot in its model's pool: the one ``max_concurrent_inferences_by_model``
names for it (by ``provider/model`` or by the bare model id), which replaces the overall pool for
that model, else the overall ``max_concurrent_inferences`` pool shared by every other model. A
provider named in ``max_concurrent_inferences_by_provider`` adds a separate pool in front, shared
by every model that provider serves: the call holds both until it finishes (upstream
configuration.md, "inference pools"). A width of 0 is not "no limit" (waiting for a full pool is
never failed, so a pool of nothing would park every call for good): it is read as 1 and said so
once; deleting the key lifts the limit.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from lev_nb.permits import Permits

if TYPE_CHECKING:
    from lev_nb.settings import Settings

__all__ = ["InferencePool", "INFERENCE_POOL", "TOOL_POOL", "inference_slots", "model_pool_width"]

log = logging.getLogger(__name__)


class InferencePool:
    """One pool of permits (a semaphore) whose width the configuration may change between calls.

    Used on the engine loop only. A changed width takes effect for the calls that start after it;
    calls already holding a permit of the old width finish normally.
    """

    def __init__(self) -> None:
        self._key: tuple[int, asyncio.AbstractEventLoop] | None = None
        self._slots = Permits(1)

    def permit(self, width: int) -> asyncio.Semaphore:
        """The semaphore to hold for one call, ``width`` permits wide (call it on the engine loop)."""
        key = (width, asyncio.get_running_loop())
        if key != self._key:  # a new width, or a new engine loop after the old one died
            self._key, self._slots = key, Permits(max(1, width))
        return self._slots


class _NamedPools:
    """A pool per name (a model or a provider), made on first use."""

    def __init__(self) -> None:
        self._pools: dict[str, InferencePool] = {}

    def permit(self, name: str, width: int) -> asyncio.Semaphore:
        return self._pools.setdefault(name, InferencePool()).permit(width)


# Model calls in flight at once across every run of this process, for every model without a pool
# of its own.
INFERENCE_POOL = InferencePool()
# Tool handler calls in flight at once across every run of this process (blocking tools run on
# worker threads, so this also bounds how many of those threads a batch of runs keeps busy).
TOOL_POOL = InferencePool()
_MODEL_POOLS = _NamedPools()
_PROVIDER_POOLS = _NamedPools()
_told_zero: set[str] = set()


def _width(table: str, name: str, width: int) -> int:
    if width < 1:
        if f"{table}.{name}" not in _told_zero:
            _told_zero.add(f"{table}.{name}")
            log.warning("[limits.%s] %s = %d is read as 1 (a pool of nothing would park every call); "
                        "delete the key to lift the limit", table, name, width)
        return 1
    return width


def model_pool_width(by_model: Mapping[str, int], provider: str, model: str) -> tuple[str, int] | None:
    """The pool ``max_concurrent_inferences_by_model`` gives ``provider/model`` (its key and
    width), or None when it names neither that nor the bare model id."""
    if not by_model:  # the usual configuration: no model has a pool of its own
        return None
    for key in (f"{provider}/{model}", model):
        if key in by_model:
            return key, by_model[key]
    return None


class _Slots:
    """The slots of one model call: its provider's pool (if any) taken first, then its model's,
    both held until the call ends. A plain async context manager, not a generator one: it is
    entered on every model call."""

    __slots__ = ("outer", "inner")

    def __init__(self, outer: asyncio.Semaphore | None, inner: asyncio.Semaphore) -> None:
        self.outer = outer
        self.inner = inner

    async def __aenter__(self) -> None:
        if self.outer is None:
            await self.inner.acquire()
            return
        await self.outer.acquire()
        try:
            await self.inner.acquire()
        except BaseException:  # cancelled while waiting for the model's pool
            self.outer.release()
            raise

    async def __aexit__(self, *exc: object) -> None:
        self.inner.release()
        if self.outer is not None:
            self.outer.release()


def inference_slots(settings: Settings, provider: str, model: str) -> _Slots:
    """The slots one call to ``provider/model`` needs, to hold (``async with``) for as long as the
    call runs (see the module docstring). The provider's pool is taken first, then the model's, by
    every call, so two calls never wait on each other's slot."""
    limits = settings.limits
    cap = limits.max_concurrent_inferences_by_provider.get(provider)
    own = model_pool_width(limits.max_concurrent_inferences_by_model, provider, model)
    if cap is None:
        outer: asyncio.Semaphore | None = None
    else:
        outer = _PROVIDER_POOLS.permit(provider, _width("max_concurrent_inferences_by_provider", provider, cap))
    if own is None:
        inner = INFERENCE_POOL.permit(limits.max_concurrent_inferences)
    else:
        inner = _MODEL_POOLS.permit(own[0], _width("max_concurrent_inferences_by_model", own[0], own[1]))
    return _Slots(outer, inner)
