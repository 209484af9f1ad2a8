"""ScriptedModel: a provider that replays canned turns, for tests and reproducible demos.

A script is either a list (every request, whatever its purpose, takes the next entry) or a dict
mapping stage names to lists, with ``"*"`` as the list for stages without their own. Each entry is
``{"text"?, "tool_calls"?: [{"name", "arguments"?, "id"?}], "error"?: {"kind", "message",
"retry_after"?}, "usage"?: {...}, "finish_reason"?}``.

Give each run its own instance: the script is consumed as requests arrive. A lock still guards the
cursor, so sharing one between threads or tasks never hands the same entry out twice.
"""

from __future__ import annotations

import json
import threading
from dataclasses import field
from pathlib import Path
from typing import Any

from lev_nb.errors import CleanError
from lev_nb.messages import ModelRequest, ModelResponse, ToolCall, Usage, request_text
from lev_nb.providers.base import ERROR_KINDS, ProviderError
from lev_nb.records import record
from lev_nb.text import estimate_tokens

__all__ = ["ScriptedModel", "ScriptFileError"]

_ENTRY_KEYS = ("text", "tool_calls", "error", "usage", "finish_reason")
_CALL_KEYS = ("name", "arguments", "id")
_USAGE_KEYS = ("prompt_tokens", "completion_tokens", "cached_tokens", "cache_write_tokens")
_SCRIPTABLE_ERROR_KINDS = tuple(k for k in ERROR_KINDS if k != "exhausted")


class ScriptFileError(CleanError, ValueError):
    """A scripted model file has the wrong shape. The message names the source, the entry and what to fix
    (in a notebook, one clean block)."""


@record(frozen=False)
class _Entry:
    """One validated script entry."""

    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    error: dict[str, Any] | None = None
    usage: dict[str, int] | None = None
    finish_reason: str | None = None


def _check_entry(raw: Any, where: str) -> _Entry:
    """Validate one raw entry; ``where`` names it in error messages."""
    if not isinstance(raw, dict):
        raise ScriptFileError(f"{where}: expected an object like {{\"text\": \"...\"}}, got {type(raw).__name__}")
    unknown = [k for k in raw if k not in _ENTRY_KEYS]
    if unknown:
        raise ScriptFileError(f"{where}: unknown key {unknown[0]!r} (valid: {', '.join(_ENTRY_KEYS)})")
    text = raw.get("text", "")
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise ScriptFileError(f"{where}.text: expected a string, got {type(text).__name__}")
    calls_raw = raw.get("tool_calls", []) or []
    if not isinstance(calls_raw, list):
        raise ScriptFileError(f"{where}.tool_calls: expected a list of {{\"name\", \"arguments\"}} objects")
    calls: list[dict[str, Any]] = []
    for j, call in enumerate(calls_raw):
        cwhere = f"{where}.tool_calls[{j}]"
        if not isinstance(call, dict):
            raise ScriptFileError(f"{cwhere}: expected an object with 'name' and 'arguments'")
        bad = [k for k in call if k not in _CALL_KEYS]
        if bad:
            raise ScriptFileError(f"{cwhere}: unknown key {bad[0]!r} (valid: {', '.join(_CALL_KEYS)})")
        name = call.get("name")
        if not isinstance(name, str) or not name:
            raise ScriptFileError(f"{cwhere}.name: expected a non-empty tool name")
        args = call.get("arguments", {})
        if args is None:
            args = {}
        if not isinstance(args, dict):
            raise ScriptFileError(f"{cwhere}.arguments: expected an object, got {type(args).__name__}")
        call_id = call.get("id")
        if call_id is not None and not isinstance(call_id, str):
            raise ScriptFileError(f"{cwhere}.id: expected a string")
        calls.append({"name": name, "arguments": args, "id": call_id})
    error = raw.get("error")
    if error is not None:
        if not isinstance(error, dict):
            raise ScriptFileError(f"{where}.error: expected {{\"kind\": ..., \"message\": ...}}")
        kind = error.get("kind")
        if kind not in _SCRIPTABLE_ERROR_KINDS:
            raise ScriptFileError(
                f"{where}.error.kind: {kind!r} is not an error kind (valid: {', '.join(_SCRIPTABLE_ERROR_KINDS)})"
            )
        message = error.get("message", "")
        if not isinstance(message, str):
            raise ScriptFileError(f"{where}.error.message: expected a string")
        retry_after = error.get("retry_after")
        if retry_after is not None and not isinstance(retry_after, (int, float)):
            raise ScriptFileError(f"{where}.error.retry_after: expected a number of seconds")
        if text or calls:
            raise ScriptFileError(f"{where}: an entry with 'error' cannot also have 'text' or 'tool_calls'")
    usage = raw.get("usage")
    if usage is not None:
        if not isinstance(usage, dict) or any(
            k not in _USAGE_KEYS or not isinstance(v, int) or isinstance(v, bool) for k, v in usage.items()
        ):
            raise ScriptFileError(f"{where}.usage: expected integer counts among {', '.join(_USAGE_KEYS)}")
    finish = raw.get("finish_reason")
    if finish is not None and not isinstance(finish, str):
        raise ScriptFileError(f"{where}.finish_reason: expected a string")
    return _Entry(text=text, tool_calls=calls, error=error, usage=usage, finish_reason=finish)


def _check_list(raw: Any, where: str) -> list[_Entry]:
    """Validate a list of entries."""
    if not isinstance(raw, list):
        raise ScriptFileError(f"{where}: expected a list of turns, got {type(raw).__name__}")
    return [_check_entry(item, f"{where}[{i}]") for i, item in enumerate(raw)]


class ScriptedModel:
    """Replays a script of canned turns; see the module docstring for the shape.

    ``requests`` records every :class:`ModelRequest` received, in arrival order.
    """

    name = "scripted"

    def __init__(self, turns: list[Any] | dict[str, list[Any]], *, source: str = "script") -> None:
        self.source = source
        self._lock = threading.Lock()
        self.requests: list[ModelRequest] = []
        if isinstance(turns, dict):
            self._by_stage: dict[str, list[_Entry]] | None = {}
            for stage, entries in turns.items():
                if not isinstance(stage, str):
                    raise ScriptFileError(f"{source}: stage names must be strings, got {stage!r}")
                self._by_stage[stage] = _check_list(entries, f"{source}[{stage!r}]")
            self._list: list[_Entry] = []
        elif isinstance(turns, list):
            self._by_stage = None
            self._list = _check_list(turns, source)
        else:
            raise ScriptFileError(
                f"{source}: expected a list of turns or an object mapping stage names to lists, "
                f"got {type(turns).__name__}"
            )
        self._cursors: dict[str, int] = {}

    @classmethod
    def from_file(cls, path: str | Path) -> "ScriptedModel":
        """Load a script from a JSON file; errors name the file and the bad entry."""
        p = Path(path)
        try:
            raw = p.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ScriptFileError(f"{p}: scripted model file not found") from None
        except OSError as exc:
            raise ScriptFileError(f"{p}: cannot read scripted model file ({exc.strerror or exc})") from None
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ScriptFileError(f"{p}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})") from None
        return cls(data, source=str(p))

    def remaining(self, stage: str | None = None) -> int:
        """How many entries are left (for ``stage``'s list when the script is per stage)."""
        with self._lock:
            key, entries = self._pick_list(stage or "")
            if entries is None:
                return 0
            return len(entries) - self._cursors.get(key, 0)

    def _pick_list(self, stage: str) -> tuple[str, list[_Entry] | None]:
        """The list a request from ``stage`` consumes, with the cursor key for it."""
        if self._by_stage is None:
            return "", self._list
        if stage in self._by_stage:
            return stage, self._by_stage[stage]
        if "*" in self._by_stage:
            return "*", self._by_stage["*"]
        return stage, None

    def _take(self, request: ModelRequest) -> tuple[str, int, _Entry]:
        """Pop the next entry for the request, or raise an ``exhausted`` ProviderError."""
        with self._lock:
            self.requests.append(request)
            key, entries = self._pick_list(request.stage)
            if entries is None:
                raise ProviderError(
                    "exhausted",
                    f"script exhausted: {self.source} has no turns for stage '{request.stage}' and no '*' list",
                )
            index = self._cursors.get(key, 0)
            if index >= len(entries):
                raise ProviderError("exhausted", "script exhausted")
            self._cursors[key] = index + 1
            return key, index, entries[index]

    def replayed(self, request: ModelRequest) -> None:
        """A resumed run took ``request``'s answer from its journal: step past the entry that
        answered it then, so the script goes on where the run stopped (:class:`Replayable`)."""
        with self._lock:
            key, entries = self._pick_list(request.stage)
            if entries is not None:
                self._cursors[key] = min(self._cursors.get(key, 0) + 1, len(entries))

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer with the next scripted entry."""
        key, index, entry = self._take(request)
        if entry.error is not None:
            raise ProviderError(entry.error["kind"], entry.error.get("message", ""), entry.error.get("retry_after"))
        # Ids depend only on where the entry sits in the script, so reruns produce the same ids.
        calls = []
        if entry.tool_calls:
            prefix = f"call-{index}" if key == "" else f"call-any-{index}" if key == "*" else f"call-{key}-{index}"
            calls = [
                ToolCall(id=c["id"] or f"{prefix}-{j}", name=c["name"], arguments=dict(c["arguments"]))
                for j, c in enumerate(entry.tool_calls)
            ]
        if entry.usage is not None:
            usage = Usage(**entry.usage)
        else:
            out = entry.text + "".join(json.dumps(c.arguments) for c in calls)
            usage = Usage(prompt_tokens=estimate_tokens(request_text(request)), completion_tokens=estimate_tokens(out))
        finish = entry.finish_reason or ("tool_use" if calls else "complete")
        return ModelResponse(text=entry.text, tool_calls=calls, usage=usage, finish_reason=finish)
