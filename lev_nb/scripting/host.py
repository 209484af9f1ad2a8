"""The host functions a tool script may call (docs/rhai.md#host-functions): ``http_get``, ``http_post``,
``shell``, ``read_file``, ``write_file`` and ``env_var``, and the pure ``encode_uri`` and
``html_to_text`` (:mod:`lev_nb.scripting.textfuncs`).

Each call goes to the :class:`ToolHost` of the tool running on the calling thread (the tool engine
is shared, hosts are not); :class:`DenyAllHost` refuses everything. Arguments are checked here, and
results are cut to :data:`HOST_RESULT_LIMIT` bytes before they reach the script.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Protocol, runtime_checkable

from lev_nb.rhai import Engine

from ._common import rhai_type_name
from .budgets import TOOL_MAX_OPERATIONS
from .textfuncs import encode_uri, html_to_text

# Host I/O results are cut to this many UTF-8 bytes before they reach a script, so a large
# response cannot trip the (uncatchable) string-size limit.
HOST_RESULT_LIMIT = 900_000
_TRUNCATION_NOTE = "\n[...truncated by lev_nb: result exceeded 900 KB]"


@runtime_checkable
class ToolHost(Protocol):
    """What a tool script may ask of its host. Each method returns text or raises; the exception
    text becomes a Rhai error the script can catch (``try { ... } catch (e) { ... }``)."""

    def read_file(self, path: str) -> str:
        """Contents of a file of the workspace."""
        ...

    def write_file(self, path: str, content: str) -> str:
        """Write a file of the workspace; returns a short confirmation."""
        ...

    def shell(self, command: str) -> str:
        """Run a shell command; returns its output."""
        ...

    def http_get(self, url: str, headers: dict[str, str]) -> str:
        """GET a URL; returns the body."""
        ...

    def http_post(self, url: str, body: str, headers: dict[str, str]) -> str:
        """POST a body to a URL; returns the response body."""
        ...

    def env_var(self, name: str) -> str:
        """Value of an environment variable (raise when unset or refused)."""
        ...


class DenyAllHost:
    """A host that refuses everything: every call raises ``[denied] ...``."""

    @staticmethod
    def _deny(function: str) -> PermissionError:
        return PermissionError(f"[denied] script host function '{function}' is not available here")

    def read_file(self, path: str) -> str:
        """Refuse."""
        raise self._deny("read_file")

    def write_file(self, path: str, content: str) -> str:
        """Refuse."""
        raise self._deny("write_file")

    def shell(self, command: str) -> str:
        """Refuse."""
        raise self._deny("shell")

    def http_get(self, url: str, headers: dict[str, str]) -> str:
        """Refuse."""
        raise self._deny("http_get")

    def http_post(self, url: str, body: str, headers: dict[str, str]) -> str:
        """Refuse."""
        raise self._deny("http_post")

    def env_var(self, name: str) -> str:
        """Refuse."""
        raise self._deny("env_var")


def _cap(text: str) -> str:
    """Cut host output to HOST_RESULT_LIMIT bytes at a character boundary."""
    data = text.encode("utf-8")
    if len(data) <= HOST_RESULT_LIMIT:
        return text
    return data[:HOST_RESULT_LIMIT].decode("utf-8", errors="ignore") + _TRUNCATION_NOTE


def _text(function: str, what: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{function}: {what} must be a string, got {rhai_type_name(value)}")
    return value


def _header_value(value: object) -> str:
    # As Rhai's to_string() would print it.
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return json.dumps(value) if isinstance(value, (list, dict)) else str(value)


def _headers(function: str, headers: object) -> dict[str, str]:
    if not isinstance(headers, dict):
        raise TypeError(f"{function}: headers must be a map, got {rhai_type_name(headers)}")
    return {str(k): _header_value(v) for k, v in headers.items()}


def _host_result(function: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{function}: the host returned {type(value).__name__}, not text")
    return _cap(value)


class _CurrentHost(threading.local):
    """The host of the tool running on this thread (tool engines are shared, hosts are not)."""

    host: ToolHost | None = None


_current = _CurrentHost()


@contextmanager
def serving(host: ToolHost | None) -> Iterator[None]:
    """Send this thread's host calls to ``host`` (:class:`DenyAllHost` when None) for the block."""
    previous, _current.host = _current.host, (host if host is not None else DenyAllHost())
    try:
        yield
    finally:
        _current.host = previous


def _host() -> ToolHost:
    host = _current.host
    if host is None:  # only reachable if a script engine is misused outside run_tool
        raise RuntimeError("no tool host is active")
    return host


def _http_get(url: object, headers: object = None) -> str:
    hdrs = {} if headers is None else _headers("http_get", headers)
    return _host_result("http_get", _host().http_get(_text("http_get", "url", url), hdrs))


def _http_post(url: object, body: object, headers: object = None) -> str:
    hdrs = {} if headers is None else _headers("http_post", headers)
    result = _host().http_post(_text("http_post", "url", url), _text("http_post", "body", body), hdrs)
    return _host_result("http_post", result)


def _shell(command: object) -> str:
    return _host_result("shell", _host().shell(_text("shell", "command", command)))


def _read_file(path: object) -> str:
    return _host_result("read_file", _host().read_file(_text("read_file", "path", path)))


def _write_file(path: object, content: object) -> str:
    result = _host().write_file(_text("write_file", "path", path), _text("write_file", "content", content))
    return _host_result("write_file", result)


def _env_var(name: object) -> str:
    return _host_result("env_var", _host().env_var(_text("env_var", "name", name)))


@cache
def tool_engine() -> Engine:
    """The tool engine (500k budget) with host I/O registered; calls go to this thread's host."""
    engine = Engine(max_operations=TOOL_MAX_OPERATIONS)
    engine.register_fn("http_get", _http_get, arity=[1, 2])
    engine.register_fn("http_post", _http_post, arity=[2, 3])
    engine.register_fn("shell", _shell)
    engine.register_fn("read_file", _read_file)
    engine.register_fn("write_file", _write_file)
    engine.register_fn("env_var", _env_var)
    engine.register_fn("encode_uri", encode_uri)  # pure: no host, no permission
    engine.register_fn("html_to_text", html_to_text)
    return engine
