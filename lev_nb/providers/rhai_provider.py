"""Model providers written in Rhai (docs/rhai.md#provider-scripts, docs/rhai.md#host-functions).

A provider script lives in ``$LEV_HOME/providers/<name>.rhai`` (or where ``[model_providers.<name>]
script`` points) and a stage names it as ``provider = "<name>"``. It must define
``initialize(config)`` and ``inference(state, request)``; ``stream(state, request, on_chunk)``,
``count_tokens(state, text, model)`` and ``list_models(state)`` are used when defined at exactly
that arity. ``// @key value`` comments give metadata (``@max_context_tokens``, ``@default_model``...).

The script is compiled and ``initialize`` run when a stage first calls it (with no HTTP: the
``[model_providers.<name>]`` options, ``base_url``, the key named by ``api_key_env``), and again when
the file changes (its modification time and size are looked at again at most every
``RECHECK_S``). A script that does not load makes the provider unusable, so the stage falls back
to its next model. Each call runs on an evaluation thread served by the caller's event loop
(``Engine.call_async``): its host functions run on the loop, and its HTTP too, asynchronously, so a
script waiting on the network holds no Python thread and only ``max_concurrent_inferences`` bounds
the calls in flight. The engine is a shared hardened one (500k operations, 2 MB strings, 50k
arrays and maps, a wall-clock cap of the request's timeout; one engine per cap, its host functions
acting for the call being served) with the provider host functions: ``parse_json``/``to_json``,
``parse_sse``, ``encode_uri``, ``encode_base64``, ``env_var`` (the credential-name rule: ``()`` for a
refused or unset name), ``count_tokens_heuristic``, and, outside ``initialize``,
``http_get``/``http_post``/``stream_request`` under the address policy of
:mod:`lev_nb.providers.script_http` (on the loop: :mod:`lev_nb.providers.script_http_async`). A
failed HTTP call throws ``#{kind, message, retry_after?}``, a map the script can catch; what the
script throws becomes a :class:`ProviderError` whose kind keeps the retry and fallback rules
(``rate_limited``, ``transport``/``server`` retried, ``api`` read for credits, auth and
unknown-model answers).

The HTTP wrappers and the streaming bridge are a small Rhai prelude compiled after the script; the
Python host functions they call are registered with ``lev_nb.rhai.Engine.register_fn``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import math
import os
import re
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from dataclasses import field
from pathlib import Path
from typing import Any

from lev_nb.messages import Message, ModelRequest, ModelResponse, TextBlock, ToolCall, ToolResultBlock, ToolUseBlock, Usage
from lev_nb.providers.base import ProviderError
from lev_nb.providers.blocking import run_blocking
from lev_nb.providers import script_http_async
from lev_nb.providers.script_http import ScriptHttpError
from lev_nb.records import record
from lev_nb.rhai import AST, Engine, Later, NotPlainDataError, RhaiError, RhaiLimitError, Value
from lev_nb.secrets import env_var_allowed
from lev_nb.settings.model import Settings

__all__ = [
    "ProviderMeta",
    "ProviderScript",
    "ProviderScriptError",
    "RhaiProvider",
    "find_script",
    "load_provider_script",
    "parse_meta",
    "script_window",
]

MAX_OPERATIONS = 500_000
MAX_STRING_SIZE = 2_000_000
MAX_COLLECTION_SIZE = 50_000
PROVIDERS_DIR = "providers"
_REQUIRED = (("initialize", 1, "config"), ("inference", 2, "state, request"))
_OPTIONAL = {"stream": 3, "count_tokens": 3, "list_models": 1}
_FINISH = {
    "ToolCall": "tool_use", "tool_calls": "tool_use", "tool_use": "tool_use",
    "TokenLimit": "token_limit", "length": "token_limit", "max_tokens": "token_limit",
    "Stop": "stop", "stop_sequence": "stop",
}
_CREDIT_MARKERS = ("credit balance", "insufficient credits", "insufficient_quota", "quota", "billing")
_STATUS = re.compile(r"^\s*HTTP\s+(\d{3})\b", re.IGNORECASE)

# The HTTP wrappers (a failed call throws a map the script can catch) and the streaming bridge.
# Appended after the script, so its line numbers in errors are the script's own.
PRELUDE = r'''

fn __lev_result(r) { if r.error != () { throw r.error; } r.body }
fn http_get(url) { __lev_result(__lev_http("GET", url, (), #{})) }
fn http_get(url, headers) { __lev_result(__lev_http("GET", url, (), headers)) }
fn http_post(url, body) { __lev_result(__lev_http("POST", url, body, #{})) }
fn http_post(url, body, headers) { __lev_result(__lev_http("POST", url, body, headers)) }
fn stream_request(url, body, headers, callback) {
    let handle = __lev_result(__lev_sse_open(url, body, headers));
    loop {
        let next = __lev_sse_next(handle);
        if next.error != () { throw next.error; }
        if next.done { break; }
        callback.call(next.data);
    }
}
fn __lev_stream(state, request) { stream(state, request, Fn("__emit_chunk")); }
'''


class ProviderScriptError(Exception):
    """A provider script that cannot be used: unreadable, does not compile, lacks an entry point,
    or its ``initialize`` failed. The message names the script."""


@record
class ProviderMeta:
    """The ``// @key value`` metadata of a provider script (values that do not parse are ignored)."""

    provider: str = ""
    description: str = ""
    default_model: str = ""
    max_context_tokens: int = 8192
    max_output_tokens: int = 4096
    supports_streaming: bool = False


def parse_meta(source: str) -> ProviderMeta:
    """Read the ``// @key value`` comments of a provider script."""
    found: dict[str, Any] = {}
    for match in re.finditer(r"(?m)^\s*//\s*@(\w+)[ \t]+(.+?)\s*$", source):
        key, value = match.group(1), match.group(2)
        if key in ("provider", "description", "default_model"):
            found[key] = value
        elif key in ("max_context_tokens", "max_output_tokens") and value.isdigit():
            found[key] = int(value)
        elif key == "supports_streaming" and value.lower() in ("true", "false"):
            found[key] = value.lower() == "true"
    return ProviderMeta(**found)


@record(frozen=False)
class ProviderScript:
    """A loaded provider script: its compiled form, metadata, optional entry points and the state
    its ``initialize`` returned."""

    name: str
    path: Path
    mtime: float
    ast: AST
    meta: ProviderMeta
    state: Any
    has: dict[str, bool] = field(default_factory=dict)
    size: int = -1
    checked_at: float = 0.0  # time.monotonic() when the file was last seen unchanged


# ---------------------------------------------------------------------------------- finding scripts
# How long a found (or missing) script file, and a loaded script's modification time, are trusted
# before the file system is asked again: a provider script edited while runs go on is picked up
# within this time, and the thousands of model calls in between cost no file lookups.
RECHECK_S = 1.0
_found: dict[tuple[str, str | None, str], tuple[Path | None, float]] = {}

def _providers_dir() -> Path:
    from lev_nb.settings.paths import in_home

    return in_home(PROVIDERS_DIR)  # every model call asks: built once per home


def find_script(name: str, settings: Settings) -> Path | None:
    """The script file of provider ``name``: ``[model_providers.<name>] script`` (a path, or a name
    in the providers folder), else ``$LEV_HOME/providers/<name>.rhai``; None when there is none.

    Every model call asks, so the answer is kept for :data:`RECHECK_S` (a script added, moved or
    deleted is seen within that time)."""
    if not name or "/" in name or name.startswith("."):
        return None
    script = settings.provider(name).script
    key = (name, script, str(_providers_dir()))
    now = time.monotonic()
    known = _found.get(key)
    if known is not None and now - known[1] < RECHECK_S:
        return known[0]
    path = _locate(script, name)
    _found[key] = (path, now)
    return path


def _locate(script: str | None, name: str) -> Path | None:
    path = script_location(script, name)
    return path if path.is_file() else None


def script_location(script: str | None, name: str) -> Path:
    """Where provider ``name``'s script is looked for, there or not: ``script`` (the
    ``[model_providers.<name>] script`` setting; a relative path is read in the providers folder,
    and ``.rhai`` may be left off), else ``$LEV_HOME/providers/<name>.rhai``."""
    if not script:
        return _providers_dir() / f"{name}.rhai"
    path = Path(script).expanduser()
    if not path.is_absolute():
        path = _providers_dir() / path
    if path.suffix != ".rhai" and not path.exists():
        path = path.with_name(path.name + ".rhai")
    return path


def script_window(provider: str, settings: Settings) -> int | None:
    """A provider script's ``@max_context_tokens``, or None when no script serves ``provider``."""
    path = find_script(provider, settings)
    if path is None:
        return None
    try:
        stat = path.stat()
        seen = (stat.st_mtime, stat.st_size)
        known = _windows.get(path)
        if known is None or known[0] != seen:
            known = _windows[path] = (seen, parse_meta(path.read_text(encoding="utf-8")).max_context_tokens)
        return known[1]
    except (OSError, UnicodeDecodeError):
        return None


_windows: dict[Path, tuple[tuple[float, int], int]] = {}


# ------------------------------------------------------------------------------------- loading
_loaded: dict[tuple[str, str, str], ProviderScript] = {}
_loaded_lock = threading.Lock()


def _init_config(name: str, settings: Settings) -> dict[str, Any]:
    """What ``initialize(config)`` receives: the provider's options, its base_url and timeout, and
    the API key from the variable ``api_key_env`` names (naming it in the configuration allows it)."""
    options = settings.provider(name)
    config: dict[str, Any] = json.loads(json.dumps(dict(options.options), default=str))
    config.setdefault("name", name)
    if options.base_url:
        config["base_url"] = options.base_url
    if options.request_timeout_secs:
        config["request_timeout_secs"] = options.request_timeout_secs
    if options.api_key:
        config.setdefault("api_key", options.api_key)
    if options.api_key_env and os.environ.get(options.api_key_env):
        config.setdefault("api_key", os.environ[options.api_key_env])
    return config


def load_provider_script(name: str, path: Path, settings: Settings) -> ProviderScript:
    """Compile, check and initialise ``path`` (cached until the file or the configuration changes;
    the file's modification time and size are looked at again after :data:`RECHECK_S`).
    Raises ProviderScriptError."""
    config = _init_config(name, settings)
    key = (name, str(path), json.dumps(config, sort_keys=True))
    now = time.monotonic()
    with _loaded_lock:
        cached = _loaded.get(key)
    if cached is not None and now - cached.checked_at < RECHECK_S:
        return cached
    try:
        stat = path.stat()
        if cached is not None and (cached.mtime, cached.size) == (stat.st_mtime, stat.st_size):
            cached.checked_at = now
            return cached
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProviderScriptError(f"provider script {path}: cannot read it: {exc}") from None
    mtime = stat.st_mtime
    label = str(path)
    context = _CallContext(settings, timeout_s=None, loop=None)
    engine = context.engine()
    try:
        ast = engine.compile(source + PRELUDE)
    except RhaiError as exc:
        raise ProviderScriptError(f"provider script {label}: does not compile: {exc}") from None
    functions = [(fn, arity) for fn, arity in ast.functions]
    for fn, arity, signature in _REQUIRED:
        arities = [a for f, a in functions if f == fn]
        if not arities:
            raise ProviderScriptError(f"{label}: script must define fn {fn}({signature})")
        if arity not in arities:
            raise ProviderScriptError(f"{label}: fn {fn} must take {arity} parameters ({signature}), found {arities[0]}")
    has = {fn: (fn, arity) in functions for fn, arity in _OPTIONAL.items()}
    try:
        state = engine.call(ast, "initialize", config)
    except RhaiError as exc:
        raise ProviderScriptError(f"provider script {label}: initialize failed: {_thrown_message(exc)}") from None
    except NotPlainDataError as exc:
        raise ProviderScriptError(f"provider script {label}: initialize returned a value that is not data: {exc}") from None
    script = ProviderScript(name, path, mtime, ast, parse_meta(source), state, has, size=stat.st_size, checked_at=now)
    with _loaded_lock:
        _loaded[key] = script
    return script


# ---------------------------------------------------------------------------------- host functions
def _encode_uri(text: str) -> str:
    keep = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~")
    return "".join(chr(b) if b in keep else f"%{b:02X}" for b in str(text).encode("utf-8"))


def _encode_base64(text: str) -> str:
    return base64.b64encode(str(text).encode("utf-8")).decode("ascii")


def _parse_sse(chunk: Any) -> Any:
    text = str(chunk).strip()
    if text.startswith("data:"):
        text = text[5:].strip()
    if not text or text == "[DONE]":
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _count_tokens_heuristic(text: Any, hint: Any) -> int:
    size = len(str(text).encode("utf-8"))
    if str(hint).lower() == "anthropic":
        return math.ceil(size / 3.5)
    # "openai" would be tiktoken upstream; lev_nb carries no tokenizer, so every other hint uses the
    # runtime's own estimate.
    return math.ceil(size / 4)


class _CallContext:
    """What the host functions of one call may do: the configuration's address policy and
    environment grants, the request's timeout, the open event streams and the chunk sink.

    ``loop`` is the event loop that serves the call (``Engine.call_async``); the call's HTTP runs
    on it (:mod:`lev_nb.providers.script_http_async`): each network host function answers with a
    :class:`Later` that a task of the loop resolves, so the script waits on its own thread and no
    Python thread waits with it. Without a loop (``initialize()``, run when the script is loaded)
    the call is offline and the network functions say so."""

    def __init__(self, settings: Settings, *, timeout_s: float | None, loop: asyncio.AbstractEventLoop | None,
                 on_chunk: Callable[[dict[str, Any]], None] | None = None) -> None:
        security = settings.security
        self.allow_local = security.allow_local_network
        self.allowed_env = tuple(security.allow_env_vars)
        fallback = settings.limits.script_http_timeout_secs or None
        self.timeout_s = timeout_s or fallback
        self.on_chunk = on_chunk
        self.loop = loop
        self.streams: dict[int, AsyncIterator[str]] = {}
        self.opened = 0
        self.tasks: set[asyncio.Task[None]] = set()
        self.warnings: list[str] = []

    def engine(self) -> _Bound:
        """The hardened provider engine for this call's timeout, its host functions bound to this
        call (see :class:`_Bound`)."""
        return _Bound(self)

    def env_var(self, name: Any) -> str | None:
        """The variable's value; None when unset or refused by the credential-name rule."""
        name = str(name)
        if not env_var_allowed(name, self.allowed_env):
            self.warnings.append(f"env_var('{name}') refused: it looks like a credential; add it to "
                                 "[security] allow_env_vars to let provider scripts read it")
            return None
        return os.environ.get(name)

    def _no_network(self, function: str) -> dict[str, Any]:
        return {"error": {"kind": "api", "message": f"{function} is not available in initialize(): it runs offline"}}

    @staticmethod
    def _headers(headers: Any) -> dict[str, str]:
        if not isinstance(headers, dict):
            return {}
        return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in headers.items()}

    def http(self, method: Any, url: Any, body: Any, headers: Any) -> dict[str, Any] | Later:
        """One HTTP call: ``#{body}`` or ``#{error: #{kind, message, retry_after?}}``."""
        if self.loop is None:
            return self._no_network("http_get" if method == "GET" else "http_post")
        return self._later(self.loop, self._fetch(str(method), str(url), None if body is None else str(body),
                                                  self._headers(headers)))

    async def _fetch(self, method: str, url: str, body: str | None, headers: dict[str, str]) -> dict[str, Any]:
        text = await script_http_async.request(method, url, body, headers, timeout=self.timeout_s,
                                               allow_local=self.allow_local)
        return {"body": text}

    def sse_open(self, url: Any, body: Any, headers: Any) -> dict[str, Any]:
        """Open an event stream (always a POST): ``#{body: handle}`` or ``#{error}``."""
        if self.loop is None:
            return self._no_network("stream_request")
        self.opened += 1
        self.streams[self.opened] = script_http_async.sse_payloads(
            str(url), str(body), self._headers(headers), timeout=self.timeout_s, allow_local=self.allow_local)
        return {"body": self.opened}

    def sse_next(self, handle: Any) -> dict[str, Any] | Later:
        """The next payload of an open stream: ``#{data}``, ``#{done: true}`` or ``#{error}``."""
        payloads = self.streams.get(int(handle))
        if payloads is None or self.loop is None:
            return {"error": {"kind": "api", "message": "stream_request: no such stream"}}
        return self._later(self.loop, self._next_event(int(handle), payloads))

    async def _next_event(self, handle: int, payloads: AsyncIterator[str]) -> dict[str, Any]:
        try:
            return {"data": await anext(payloads), "done": False}
        except StopAsyncIteration:
            self.streams.pop(handle, None)
            return {"done": True}
        except ScriptHttpError:
            self.streams.pop(handle, None)
            raise

    def _later(self, loop: asyncio.AbstractEventLoop, answer: Coroutine[Any, Any, dict[str, Any]]) -> Later:
        """A Later that a task of ``loop`` resolves with what ``answer`` gives (a failure as
        ``#{error}``)."""
        later = Later()
        task = loop.create_task(_resolve(later, answer))
        self.tasks.add(task)

        def done(finished: asyncio.Task[None]) -> None:
            self.tasks.discard(finished)
            if finished.cancelled():  # perhaps before it began: then nothing awaited the answer
                answer.close()
                later.fail("the call was cancelled")

        task.add_done_callback(done)
        return later

    def emit_chunk(self, chunk: Any) -> None:
        """``on_chunk.call(map)`` from a ``stream`` function."""
        if self.on_chunk is not None and isinstance(chunk, dict):
            self.on_chunk(chunk)

    def close(self) -> None:
        """The call is over (or abandoned): stop its HTTP still in flight and its open streams."""
        for task in list(self.tasks):
            task.cancel()
        streams, self.streams = list(self.streams.values()), {}
        if self.loop is not None:
            for stream in streams:
                self.loop.create_task(_close_stream(stream))


async def _close_stream(stream: AsyncIterator[str]) -> None:
    with contextlib.suppress(RuntimeError):  # one still running closes itself as its task is cancelled
        await stream.aclose()  # type: ignore[attr-defined]


async def _resolve(later: Later, answer: Coroutine[Any, Any, dict[str, Any]]) -> None:
    """Answer ``later`` with what ``answer`` gives: its map, or ``#{error}`` for a failure (a
    cancelled call is failed by the task's done callback, see ``_CallContext._later``)."""
    try:
        value = await answer
    except ScriptHttpError as exc:
        value = {"error": exc.to_map()}
    except Exception as exc:  # noqa: BLE001 - a fault of ours still reaches the script, as a failed call
        value = {"error": {"kind": "transport", "message": f"request failed: {type(exc).__name__}: {exc}"}}
    later.resolve(value)


# ----------------------------------------------------------------------------- shared engines
# One hardened engine per wall-clock cap, shared by every call: building an engine and registering
# its host functions cost more than a short script's whole run. The host functions it registers
# act for the call running on the current thread (a registered function runs on the thread that
# called the script), which :class:`_Bound` names while the script runs.
_engines: dict[int | None, Engine] = {}
_engines_lock = threading.Lock()
_current = threading.local()


def _for_call(method: str) -> Callable[..., Any]:
    def host(*args: Any) -> Any:
        return getattr(_current.context, method)(*args)

    host.__name__ = method
    return host


def shared_engine(timeout_s: float | None) -> Engine:
    """The provider engine whose wall-clock cap suits a call of ``timeout_s`` seconds."""
    timeout_ms = int(timeout_s * 1000) + 5000 if timeout_s else None
    engine = _engines.get(timeout_ms)
    if engine is not None:
        return engine
    engine = Engine(max_operations=MAX_OPERATIONS, max_string_size=MAX_STRING_SIZE,
                    max_array_size=MAX_COLLECTION_SIZE, max_map_size=MAX_COLLECTION_SIZE, timeout_ms=timeout_ms)
    engine.register_fn("parse_sse", _parse_sse, arity=1)
    engine.register_fn("encode_uri", _encode_uri, arity=1)
    engine.register_fn("encode_base64", _encode_base64, arity=1)
    engine.register_fn("count_tokens_heuristic", _count_tokens_heuristic, arity=2)
    for name, method, arity in (("env_var", "env_var", 1), ("__lev_http", "http", 4),
                                ("__lev_sse_open", "sse_open", 3), ("__lev_sse_next", "sse_next", 1),
                                ("__emit_chunk", "emit_chunk", 1)):
        engine.register_fn(name, _for_call(method), arity=arity)
    with _engines_lock:
        return _engines.setdefault(timeout_ms, engine)


class _Bound:
    """A shared engine seen from one call: ``eval``, ``compile`` and ``call`` run with this call's
    context as the one the host functions act for."""

    def __init__(self, context: _CallContext) -> None:
        self.context = context
        self.engine = shared_engine(context.timeout_s)

    def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        outer = getattr(_current, "context", None)
        _current.context = self.context
        try:
            return fn(*args)
        finally:
            _current.context = outer

    def compile(self, source: str) -> AST:
        """Compile ``source`` with the shared engine."""
        return self._run(self.engine.compile, source)

    def call(self, ast: AST, fn_name: str, *args: Any) -> Any:
        """Call a function of ``ast`` for this call."""
        return self._run(self.engine.call, ast, fn_name, *args)

    async def call_async(self, ast: AST, fn_name: str, *args: Any) -> Any:
        """Call a function of ``ast`` for this call from its loop (``Engine.call_async``); the
        call's HTTP and streams still in flight when it ends are stopped."""
        try:
            return await self.engine.call_async(ast, fn_name, *args, serve=self._run)
        finally:
            self.context.close()

    def eval(self, source: str, **variables: Any) -> Any:
        """Evaluate ``source`` for this call."""
        return self._run(lambda: self.engine.eval(source, **variables))


# ------------------------------------------------------------------------------------ conversion
_SCALARS = (str, int, float, bool, type(None))


def _plain(value: Any) -> Any:
    """``value`` as the plain data a script receives: maps with string keys, lists, scalars, and
    anything else as its text (what a JSON round trip with ``default=str`` gave, without one)."""
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


def _block_map(block: Any) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": _plain(block.input)}
    return {"type": "tool_result", "tool_use_id": block.tool_use_id, "content": str(block.content),
            "is_error": bool(block.is_error)}


_BLOCK_TYPES = (TextBlock, ToolUseBlock, ToolResultBlock)
# id(block) -> (a weak reference to the block, its map as a Rhai value). Kept beside the blocks,
# not on them (a block's attributes are what it serialises as), and dropped with each block.
_HELD: dict[int, tuple[weakref.ref[Any], Value]] = {}


def held_value(block: Any) -> Value:
    """``block``'s map as a Rhai value, converted the first time a script is handed the block and
    kept while the block lives: the context assembler hands a provider the same blocks turn after
    turn (blocks never change once made, see lev_nb.messages), so a request converts only its new
    messages, and the rest are cloned natively."""
    key = id(block)
    held = _HELD.get(key)
    if held is not None and held[0]() is block:
        return held[1]
    value = Value(_block_map(block))
    _HELD[key] = (weakref.ref(block, _Forget(key)), value)
    return value


class _Forget:
    """Drops a block's converted value once the block is gone (a weak reference's callback)."""

    __slots__ = ("key",)

    def __init__(self, key: int) -> None:
        self.key = key

    def __call__(self, _gone: weakref.ref[Any]) -> None:
        _HELD.pop(self.key, None)


def _message_map(message: Message, convert: Callable[[Any], Any] = _block_map) -> dict[str, Any]:
    content: Any
    if isinstance(message.content, str):
        content = message.content
    else:
        content = [convert(block) for block in message.content if isinstance(block, _BLOCK_TYPES)]
    data: dict[str, Any] = {"role": message.role, "content": content}
    if message.cache_breakpoint:
        data["cache_breakpoint"] = True
    return data


_CACHE_HINTS = {0: "stable", 1: "until_written", 2: "never"}


def request_map(request: ModelRequest, default_model: str = "", held: bool = False) -> dict[str, Any]:
    """The ``request`` map a script receives (docs/rhai.md#provider-scripts), built as plain data
    directly; with ``held``, each message block is its converted value (:func:`held_value`)."""
    convert = held_value if held else _block_map
    return {
        "system": [{"text": b.text, "cache_hint": _CACHE_HINTS.get(b.cache_tier, "never"), "region": b.region,
                    "volatility": b.volatility} for b in request.described_system()],
        "messages": [_message_map(m, convert) for m in request.messages],
        "tools": [{"name": t.name, "description": t.description, "parameters": _plain(t.parameters)}
                  for t in request.tools],
        "model": request.model or default_model,
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "request_timeout_secs": request.timeout_s,
        "extra": _plain(request.extra),
    }


def _arguments(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def _usage(tokens: Any) -> Usage:
    def count(key: str) -> int:
        value = tokens.get(key) if isinstance(tokens, dict) else None
        return max(0, int(value)) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0

    return Usage(prompt_tokens=count("prompt_tokens"), completion_tokens=count("completion_tokens"),
                 cached_tokens=count("cached_tokens"), cache_write_tokens=count("cache_write_tokens"))


def response_from(value: Any) -> ModelResponse:
    """The map ``inference`` returned as a ModelResponse (lenient: missing fields default)."""
    if not isinstance(value, dict):
        raise ProviderError("invalid_response",
                            f"provider script `inference` must return a map, got: {json.dumps(value, default=str)[:200]}")
    calls = [ToolCall(id=str(c.get("id") or ""), name=str(c.get("name") or ""), arguments=_arguments(c.get("arguments")))
             for c in value.get("tool_calls") or [] if isinstance(c, dict)]
    content = value.get("content")
    return ModelResponse(
        text=content if isinstance(content, str) else "",
        tool_calls=calls,
        usage=_usage(value.get("tokens_used")),
        finish_reason=_FINISH.get(str(value.get("finish_reason")), "complete"),
    )


class _Chunks:
    """The chunks a ``stream`` function emitted, gathered into one response."""

    def __init__(self, on_text: Callable[[str], None] | None) -> None:
        self.on_text = on_text
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.tokens: Any = None
        self.finish: str | None = None

    def take(self, chunk: dict[str, Any]) -> None:
        delta = chunk.get("delta")
        if isinstance(delta, str) and delta:
            self.text.append(delta)
            if self.on_text is not None:
                self.on_text(delta)
        for piece in chunk.get("tool_calls") or []:
            if not isinstance(piece, dict):
                continue
            slot = self.calls.setdefault(int(piece.get("index") or 0), {"id": "", "name": "", "arguments": []})
            slot["id"] = piece.get("id") or slot["id"]
            slot["name"] = piece.get("name") or slot["name"]
            slot["arguments"].append(str(piece.get("arguments_delta") or ""))
        if "tokens" in chunk and chunk["tokens"] is not None:
            self.tokens = chunk["tokens"]
        if chunk.get("finish_reason") is not None:
            self.finish = str(chunk["finish_reason"])

    def response(self) -> ModelResponse:
        calls = [ToolCall(id=str(c["id"]), name=str(c["name"]), arguments=_arguments("".join(c["arguments"])))
                 for _, c in sorted(self.calls.items())]
        finish = _FINISH.get(self.finish or "", "complete")
        if self.finish is None and calls:
            finish = "tool_use"
        return ModelResponse(text="".join(self.text), tool_calls=calls, usage=_usage(self.tokens), finish_reason=finish)


# ---------------------------------------------------------------------------------------- errors
def _thrown_message(exc: RhaiError) -> str:
    value = getattr(exc, "value", None)
    if isinstance(value, dict):
        return str(value.get("message") or "provider script error")
    return str(getattr(exc, "message", None) or exc)


def classify_api_message(message: str) -> ProviderError:
    """An ``api`` failure read the way docs/providers.md#errors-and-retries reads an answer: credits, auth,
    unknown model, rate limit or server trouble by status and text, else a plain api error."""
    status_match = _STATUS.match(message)
    status = int(status_match.group(1)) if status_match else None
    lowered = message.lower()
    if status == 429:
        return ProviderError("rate_limited", message)
    if status == 402 or any(marker in lowered for marker in _CREDIT_MARKERS):
        return ProviderError("credits", message)
    if status in (401, 403) or "unauthorized" in lowered or "invalid api key" in lowered:
        return ProviderError("auth", message)
    if status == 404 and "model" in lowered:
        return ProviderError("unknown_model", message)
    if status is not None and status >= 500:
        return ProviderError("server", message)
    return ProviderError("api", message)


def map_script_error(exc: RhaiError, label: str) -> ProviderError:
    """What a script threw (or a limit it hit) as a ProviderError (docs/rhai.md#provider-scripts)."""
    if isinstance(exc, RhaiLimitError):
        return ProviderError("api", f"provider script {label} hit a limit: {exc}")
    value = getattr(exc, "value", None)
    if not isinstance(value, dict):
        return ProviderError("api", f"provider script {label}: {_thrown_message(exc)}")
    kind = value.get("kind")
    message = str(value.get("message") or "provider script error")
    retry = value.get("retry_after")
    retry_after = float(retry) if isinstance(retry, (int, float)) and not isinstance(retry, bool) else None
    if kind == "rate_limited":
        return ProviderError("rate_limited", message, retry_after)
    if kind in ("transport", "server"):
        return ProviderError(str(kind), message, retry_after)
    if kind == "api":
        return classify_api_message(message)
    if kind == "invalid_response":
        return ProviderError("invalid_response", message)
    if value.get("transient") is True:
        return ProviderError("transport", message)
    return ProviderError("api", message)


# -------------------------------------------------------------------------------------- provider
# The script each (provider name, configuration object) last loaded: a run's model calls find it
# here without building the initialize() configuration again. The entry holds the configuration
# it was made for, so a new object that reuses an old one's id() never matches.
_ready: dict[tuple[str, int], tuple[Settings, ProviderScript]] = {}
_READY_MAX = 64


class RhaiProvider:
    """A provider whose requests and answers a Rhai script maps (see the module docstring)."""

    def __init__(self, name: str, model: str, settings: Settings | None = None) -> None:
        self.name = name
        self.model = model
        self._settings = settings

    @property
    def settings(self) -> Settings:
        """The configuration this provider reads (the current one unless given)."""
        if self._settings is None:
            from lev_nb.settings import current

            self._settings = current()
        return self._settings

    def script(self) -> ProviderScript:
        """The loaded script; ProviderError ``unknown_model`` when it is missing or broken (the
        stage then falls back to its next model)."""
        ready = self.ready_script()
        if ready is not None:
            return ready
        path = find_script(self.name, self.settings)
        if path is None:
            raise ProviderError("unknown_model", f"no provider script for '{self.name}' in {_providers_dir()}")
        try:
            script = load_provider_script(self.name, path, self.settings)
        except ProviderScriptError as exc:
            raise ProviderError("unknown_model", str(exc)) from None
        with _loaded_lock:
            _ready[(self.name, id(self.settings))] = (self.settings, script)
            while len(_ready) > _READY_MAX:  # the oldest first: a long session keeps no stale configurations
                _ready.pop(next(iter(_ready)))
        return script

    def ready_script(self) -> ProviderScript | None:
        """The script this provider loaded for the same configuration less than :data:`RECHECK_S`
        ago (no file system access, no thread needed), else None."""
        known = _ready.get((self.name, id(self.settings)))
        if known is None or known[0] is not self.settings:
            return None
        script = known[1]
        return script if time.monotonic() - script.checked_at < RECHECK_S else None

    async def _loaded(self) -> ProviderScript:
        """The loaded script: at once when ready, else found and loaded on a thread (file I/O)."""
        ready = self.ready_script()
        return ready if ready is not None else await run_blocking(self.script)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer ``request`` through the script (``stream`` when it has one, else ``inference``).

        The script runs on an evaluation thread served by this loop, its HTTP on this loop: a
        call waiting on the network holds no thread of Python's (see :class:`_CallContext`)."""
        script = await self._loaded()
        chunks = _Chunks(request.on_text)
        streaming = script.has.get("stream", False)
        context = _CallContext(self.settings, timeout_s=request.timeout_s, loop=asyncio.get_running_loop(),
                               on_chunk=chunks.take if streaming else None)
        payload = request_map(request, self.model or script.meta.default_model, held=True)
        label = str(script.path)
        try:
            if streaming:
                await context.engine().call_async(script.ast, "__lev_stream", script.state, payload)
                return chunks.response()
            value = await context.engine().call_async(script.ast, "inference", script.state, payload)
        except RhaiError as exc:
            raise map_script_error(exc, label) from None
        except NotPlainDataError as exc:
            raise ProviderError("invalid_response", f"provider script {label}: inference returned {exc}") from None
        response = response_from(value)
        if request.on_text is not None and response.text:
            request.on_text(response.text)  # a script without `stream` answers in one piece
        return response

    async def count_tokens(self, text: str, model: str = "") -> int:
        """The script's ``count_tokens`` (clamped at 0), else the heuristic."""
        script = await self._loaded()
        if script.has.get("count_tokens"):
            context = _CallContext(self.settings, timeout_s=None, loop=asyncio.get_running_loop())
            try:
                value = await context.engine().call_async(script.ast, "count_tokens", script.state, text,
                                                          model or self.model)
                if isinstance(value, int) and not isinstance(value, bool):
                    return max(0, value)
            except (RhaiError, NotPlainDataError):
                pass
        return math.ceil(len(text.encode("utf-8")) / 4)

    async def list_models(self) -> list[dict[str, Any]]:
        """The script's ``list_models`` (entries without a string id skipped); [] without one."""
        script = await self._loaded()
        if not script.has.get("list_models"):
            return []
        context = _CallContext(self.settings, timeout_s=None, loop=asyncio.get_running_loop())
        try:
            value = await context.engine().call_async(script.ast, "list_models", script.state)
        except RhaiError as exc:
            raise map_script_error(exc, str(script.path)) from None
        models = []
        for item in value if isinstance(value, list) else []:
            if isinstance(item, dict) and isinstance(item.get("id"), str):
                models.append({"id": item["id"], "display_name": item.get("display_name") or item["id"],
                               "max_context_tokens": item.get("max_context_tokens") or 8192,
                               "max_output_tokens": item.get("max_output_tokens") or 4096})
        return models
