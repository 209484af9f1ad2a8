"""The public Rhai binding: a hardened script engine, compiled scripts and their errors.

Usable on its own::

    from lev_nb.rhai import Engine, RhaiError

    engine = Engine()                          # sandboxed, upstream limits
    engine.eval("40 + x", x=2)                 # -> 42
    ast = engine.compile("fn shout(s) { s.to_upper() }")
    engine.call(ast, "shout", "hi")            # -> "HI"
    engine.register_fn("lookup", {"a": 1}.get) # Python callable as a Rhai function

Every engine is hardened (see ``DEFAULT_LIMITS``): an operation budget backed by a wall-clock
deadline, size limits on strings/arrays/maps, a memory budget (``max_memory``, every byte a script
holds, closures and map keys included), bounded recursion and expression depth, bounded script
size and function count (compilation runs under the deadline too), ``eval`` refused at compile
time, ``import`` unable to find any module, ``sleep`` disabled, and ``print``/``debug`` sent to
``on_print``/``on_debug`` callbacks (or dropped). Scripts have no file, network, process or
environment access unless the host registers functions for it. A limit out of its range (negative,
or more than the evaluation stack can take) raises ValueError when the engine is built.

No script, value or limit can end the process: scripts compile and run on threads with a large
native stack (``STACK_SIZE``) whose evaluator part is guarded, and data can only nest as deep as the
limits allow (see ``rust_ext/src/limits.rs``). Python callbacks (registered functions, print and
debug sinks) still run on the calling thread, so thread-locals and context are theirs as before.
An engine without callbacks first tries each script on the calling thread under capped operations
and sizes, when that thread's stack has room for them; a script past the caps runs again on an
evaluation thread (it is pure, so only the time of the first try is lost).

Values cross the boundary as: None <-> (), bool, int <-> INT (i64), float <-> FLOAT, str <-> string
(a Rhai char becomes a one-character str), list/tuple -> array -> list, dict (str keys) <-> map,
bytes <-> BLOB. A Python int outside the i64 range becomes a FLOAT, as an oversized JSON number does
upstream. Anything else raises TypeError naming the value and its type; a script result that is
not plain data (a function pointer, a timestamp) raises ``NotPlainDataError``, a TypeError.
``Value(data)`` converts data once: placed inside later arguments (a list of them, a map's
value), it is cloned natively instead of being converted again::

    held = Value({"role": "user", "content": "hi"})
    engine.call(ast, "count", [held, held])     # the script sees two maps

The GIL is released while a script runs; an ``Engine`` and an ``AST`` may be shared by threads.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from lev_nb import _rhai
from lev_nb.errors import render_traceback
from lev_nb._rhai import (
    AST,
    Later,
    MAX_NESTING,
    MAX_VARIADIC_ARITY,
    RHAI_VERSION,
    STACK_SIZE,
    NotPlainDataError,
    RhaiError,
    RhaiLimitError,
    RhaiRuntimeError,
    RhaiSyntaxError,
    Value,
)

if TYPE_CHECKING:  # asyncio only where a loop calls in: `lev validate` never loads it
    import asyncio

__all__ = [
    "AST",
    "DEFAULT_LIMITS",
    "Engine",
    "Later",
    "MAX_NESTING",
    "MAX_VARIADIC_ARITY",
    "NotPlainDataError",
    "RHAI_VERSION",
    "RhaiError",
    "RhaiLimitError",
    "RhaiRuntimeError",
    "RhaiSyntaxError",
    "STACK_SIZE",
    "Value",
    "arities_of",
]

# The default of every limit: the upstream sandbox numbers (docs/rhai.md#the-sandbox) plus lev_nb's
# wall-clock deadline, read from the native module so they are stated once, in Rust.
DEFAULT_LIMITS: dict[str, int | None] = dict(_rhai.DEFAULT_LIMITS)

# Exceptions report themselves as part of this module, and show in a notebook as one clean
# block (the message with its line and position) instead of a traceback through lev_nb.
for _exc in (RhaiError, RhaiSyntaxError, RhaiRuntimeError, RhaiLimitError, NotPlainDataError):
    _exc.__module__ = __name__
    setattr(_exc, "_render_traceback_", render_traceback)

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def arities_of(func: Callable[..., Any]) -> list[int]:
    """Return the argument counts a Python callable accepts positionally.

    A callable taking ``*args`` (or whose signature cannot be read, like some builtins) accepts
    0..``MAX_VARIADIC_ARITY`` beyond its required parameters.
    """
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return list(range(0, MAX_VARIADIC_ARITY + 1))
    params = list(signature.parameters.values())
    blocking = [
        p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is inspect.Parameter.empty
    ]
    if blocking:
        raise ValueError(
            f"cannot register {func!r}: Rhai passes arguments by position, but it requires "
            f"keyword-only argument(s) {', '.join(blocking)}"
        )
    positional = [p for p in params if p.kind in _POSITIONAL]
    required = sum(1 for p in positional if p.default is inspect.Parameter.empty)
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        most = max(MAX_VARIADIC_ARITY, len(positional))
    else:
        most = len(positional)
    return list(range(required, most + 1))


class Engine(_rhai.Engine):
    """A hardened Rhai engine that compiles and runs scripts.

    Construct with keyword limits (defaults in ``DEFAULT_LIMITS``; ``max_operations=0`` or
    ``timeout_ms=None`` lifts that bound; a value out of range raises ValueError) and optional
    ``on_print``/``on_debug`` callables that receive the text a script prints. Methods:

    - ``eval(source, **variables)``: compile and run; the variables are in the script's scope.
    - ``compile(source) -> AST`` and ``run(ast, **variables)``.
    - ``call(ast, fn_name, *args)``: call a function the script defines.
    - ``await call_async(ast, fn_name, *args)``: ``call`` from an event loop, which serves the
      script's callbacks on its own thread between other work and never blocks on it (see
      :meth:`call_async`).
    - ``register_fn(name, func, *, arity=None)``: expose a Python callable to scripts; one that
      returns a :class:`Later` makes the script wait for ``Later.resolve(value)``.

    Failures raise ``RhaiSyntaxError``, ``RhaiRuntimeError`` or ``RhaiLimitError``; a result that
    is not plain data (e.g. a function pointer) raises ``NotPlainDataError`` (a TypeError).
    """

    def register_fn(  # type: ignore[override]
        self,
        name: str,
        func: Callable[..., Any],
        *,
        arity: int | Iterable[int] | None = None,
    ) -> None:
        """Expose ``func`` to scripts as the Rhai function ``name``.

        By default it is registered for every argument count its signature accepts (``*args``
        means 0..MAX_VARIADIC_ARITY); pass ``arity`` to choose. An exception raised by ``func``
        becomes a Rhai runtime error whose message is ``str(exc)``, which a script can catch with
        ``try``/``catch``. Registering a name again replaces the earlier registration.
        """
        if not callable(func):
            raise TypeError(f"cannot register {name!r}: {func!r} is not callable")
        if arity is None:
            arities = arities_of(func)
        elif isinstance(arity, int):
            arities = [arity]
        else:
            arities = sorted(set(arity))
        super().register_fn(name, func, arities)

    async def call_async(self, ast: AST, fn_name: str, *args: Any,
                         serve: Callable[[Callable[[], bool]], bool] | None = None) -> Any:
        """``call(ast, fn_name, *args)`` awaited from the running loop, which it never blocks.

        The script runs on an evaluation thread; its Python callbacks run on the loop's thread
        when the loop gets to them (``serve(step)`` runs each, when given: to set what the
        callbacks act for). A callback may return a :class:`Later` and answer it from a task:
        the script waits for it on its own thread, holding no thread of Python's. Cancelling the
        awaiting task makes the script's next host call fail with an uncatchable error; its
        pending ``Later`` answers are for the caller to settle.
        """
        import asyncio

        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[Any] = loop.create_future()
        evaluation = self.start(_dispatch(loop), _Waiting(waiter, serve), ast, fn_name, *args)
        try:
            return await waiter
        except asyncio.CancelledError:
            evaluation.cancel()
            raise


class _Waiting:
    """What a detached evaluation carries back to its loop: the future awaiting it and how to
    serve its callbacks."""

    __slots__ = ("serve", "waiter")

    def __init__(self, waiter: asyncio.Future[Any], serve: Callable[[Callable[[], bool]], bool] | None) -> None:
        self.waiter = waiter
        self.serve = serve


_dispatches: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _rhai.Dispatch] = weakref.WeakKeyDictionary()


def _dispatch(loop: asyncio.AbstractEventLoop) -> _rhai.Dispatch:
    """The loop's dispatch, watched by the loop from its first detached evaluation on."""
    dispatch = _dispatches.get(loop)
    if dispatch is None:
        dispatch = _dispatches[loop] = _rhai.Dispatch()
        loop.add_reader(dispatch.fileno(), _serve_ready, dispatch)
    return dispatch


def _serve_ready(dispatch: _rhai.Dispatch) -> None:
    """On the loop: serve every evaluation that asked, and settle the ones that ended."""
    for evaluation in dispatch.ready():
        waiting: _Waiting = evaluation.tag
        try:
            ended = waiting.serve(evaluation.step) if waiting.serve is not None else evaluation.step()
        except BaseException as exc:  # noqa: BLE001 - an interrupt in a callback goes to the awaiting task
            _settle(waiting.waiter, None, exc)
            continue
        if not ended:
            continue
        try:
            value = evaluation.result()
        except BaseException as exc:  # noqa: BLE001 - the awaiting task re-raises it
            _settle(waiting.waiter, None, exc)
        else:
            _settle(waiting.waiter, value, None)


_T = TypeVar("_T")


def _settle(waiter: asyncio.Future[_T], value: _T | None, error: BaseException | None) -> None:
    if waiter.done():  # the awaiting task was cancelled meanwhile
        return
    if error is None:
        waiter.set_result(value)  # type: ignore[arg-type]
    else:
        waiter.set_exception(error)
