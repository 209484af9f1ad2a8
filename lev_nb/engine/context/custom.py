"""Custom context regions: a Rhai script decides how the region is shown, written and evicted.

A region declared ``kind = "custom"`` with ``script = "context_hooks/x.rhai"``
(docs/rhai.md#custom-context-regions) is held by a :class:`ScriptedRegion`:

- ``render(ctx)`` runs on every request assembly, even when the region is empty, and returns a
  string (one system block; ``""`` shows nothing) or a map ``{system: str | [str], messages: [...]}``.
  A failing script or an answer of any other shape falls back to the default block
  ``[<name>]:`` + entries, and the run gets a ``warning`` event.
- ``on_write(ctx)`` (optional) sees every write: a string replaces the content, ``true``/``()``
  accepts it, ``false`` drops it; anything else, or an error, accepts it with a warning.
- ``on_overflow(ctx)`` (optional, non-persistent regions) names the entries to drop when the
  region must make room; oldest-first eviction still covers any shortfall.

Scripts are compiled once per distinct path before the run starts (:mod:`lev_nb.engine.prepare`).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from lev_nb.engine.context.regions import Entry, Region, RegionConfig
from lev_nb.text import estimate_tokens
from lev_nb.messages import Block, Message, TextBlock, ToolResultBlock, ToolUseBlock
from lev_nb.scripting import RegionScript, ScriptError

if TYPE_CHECKING:
    from lev_nb.engine.state import RunState

__all__ = [
    "RegionHost",
    "RenderShapeError",
    "ScriptedRegion",
    "parse_render",
]


class RenderShapeError(ValueError):
    """A render answer that is neither a string nor a valid ``{system, messages}`` map."""


def _type_name(value: Any) -> str:
    names = {bool: "bool", int: "integer", float: "float", str: "string", list: "array", dict: "map"}
    return "()" if value is None else names.get(type(value), type(value).__name__)


def _message(index: int, raw: Any) -> Message:
    """One message of a render answer (the three shapes docs/rhai.md#custom-context-regions allows)."""
    where = f"messages[{index}]"
    if not isinstance(raw, dict):
        raise RenderShapeError(f"{where} must be a map, got {_type_name(raw)}")
    role = raw.get("role")
    if role not in ("user", "assistant"):
        raise RenderShapeError(f"{where}.role must be \"user\" or \"assistant\", got {role!r}")
    content = raw.get("content")
    if content is not None and not isinstance(content, str):
        raise RenderShapeError(f"{where}.content must be a string, got {_type_name(content)}")
    if "tool_calls" in raw:
        if role != "assistant":
            raise RenderShapeError(f"{where}: only an assistant message may carry tool_calls")
        calls = raw["tool_calls"]
        if not isinstance(calls, list):
            raise RenderShapeError(f"{where}.tool_calls must be an array, got {_type_name(calls)}")
        blocks: list[Block] = [TextBlock(content)] if content else []
        for n, call in enumerate(calls):
            if not (isinstance(call, dict) and isinstance(call.get("id"), str) and isinstance(call.get("name"), str)):
                raise RenderShapeError(f"{where}.tool_calls[{n}] must be a map with string 'id' and 'name'")
            arguments = call.get("arguments") or {}
            if not isinstance(arguments, dict):
                raise RenderShapeError(f"{where}.tool_calls[{n}].arguments must be a map")
            blocks.append(ToolUseBlock(id=call["id"], name=call["name"], input=dict(arguments)))
        return Message(role="assistant", content=blocks)
    if "tool_results" in raw:
        if role != "user":
            raise RenderShapeError(f"{where}: only a user message may carry tool_results")
        results = raw["tool_results"]
        if not isinstance(results, list):
            raise RenderShapeError(f"{where}.tool_results must be an array, got {_type_name(results)}")
        blocks = []
        for n, result in enumerate(results):
            ok = (
                isinstance(result, dict)
                and isinstance(result.get("tool_call_id"), str)
                and isinstance(result.get("content"), str)
                and isinstance(result.get("is_error", False), bool)
            )
            if not ok:
                raise RenderShapeError(
                    f"{where}.tool_results[{n}] must be a map with string 'tool_call_id' and "
                    "'content' (and an optional bool 'is_error')"
                )
            blocks.append(
                ToolResultBlock(result["tool_call_id"], result["content"], bool(result.get("is_error", False)))
            )
        return Message(role="user", content=blocks)
    if content is None:
        raise RenderShapeError(f"{where} needs a string 'content'")
    return Message(role=role, content=content)


def parse_render(value: Any) -> tuple[list[str], list[Message]]:
    """Read a render answer into (system blocks, messages). Raises RenderShapeError.

    A string is one system block (``""`` is none); a map may hold ``system`` (a string or an
    array of strings, empty ones skipped) and ``messages`` (an array of message maps).
    """
    if isinstance(value, str):
        return ([value] if value else []), []
    if not isinstance(value, dict):
        raise RenderShapeError(f"render must return a string or a map, got {_type_name(value)}")
    if "system" not in value and "messages" not in value:
        raise RenderShapeError("the map render returned has neither 'system' nor 'messages'")
    system_raw = value.get("system")
    if system_raw is None:
        system: list[str] = []
    elif isinstance(system_raw, str):
        system = [system_raw] if system_raw else []
    elif isinstance(system_raw, list) and all(isinstance(s, str) for s in system_raw):
        system = [s for s in system_raw if s]
    else:
        raise RenderShapeError("'system' must be a string or an array of strings")
    raw_messages = value.get("messages")
    if raw_messages is None:
        raw_messages = []
    if not isinstance(raw_messages, list):
        raise RenderShapeError(f"'messages' must be an array, got {_type_name(raw_messages)}")
    return system, [_message(i, m) for i, m in enumerate(raw_messages)]


def _iso(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts, _dt.UTC).isoformat().replace("+00:00", "Z")


class RegionHost:
    """What scripted regions need from their run: the compiled scripts, facts, a warning sink.

    ``facts()`` returns ``stage_name``, ``stage_iterations``, ``model`` and ``window``
    (``{total_tokens, max_tokens}``); ``warn(region, message)`` reports a survivable problem.
    Both have harmless defaults until :meth:`bind` connects a run.
    """

    def __init__(self, scripts: Mapping[str, RegionScript], names: set[str]) -> None:
        self.scripts = dict(scripts)
        self.names = set(names)
        self.facts: Callable[[], dict[str, Any]] = lambda: {
            "stage_name": "", "stage_iterations": 0, "model": "", "window": {"total_tokens": 0, "max_tokens": 0},
        }
        self.warn: Callable[[str, str], None] = lambda region, message: None
        self._warned: set[tuple[str, str]] = set()

    def bind(self, state: RunState, model_label: Callable[[], str]) -> None:
        """Take facts from the run ``state`` (``model_label`` names the current stage's model) and
        report warnings as the run's ``warning`` events."""

        def facts() -> dict[str, Any]:
            return {
                "stage_name": state.stage.name,
                "stage_iterations": state.progress.iterations,
                "model": model_label(),
                "window": {"total_tokens": state.ctx.total_tokens(), "max_tokens": state.ctx.window_tokens},
            }

        from lev_nb.engine.loop import engine_loop

        def warn(region: str, message: str) -> None:
            text = f"region '{region}': {message}"
            loop = engine_loop()
            if loop.in_engine_thread():
                state.warn(text, "script-failed")
            else:  # rendering runs off the engine thread; events are emitted on it, in order
                loop.call_soon(state.warn, text, "script-failed")

        self.facts, self.warn = facts, warn

    def warn_once(self, region: str, message: str) -> None:
        """Warn, unless this region already reported this exact problem (render runs often)."""
        key = (region, message)
        if key not in self._warned:
            self._warned.add(key)
            self.warn(region, message)


class ScriptedRegion(Region):
    """A region whose rendering, writes and eviction a custom-region script may shape.

    While its current declaration is not a scripted custom region (a stage may redeclare the
    name), it behaves exactly like a plain :class:`Region`.
    """

    def __init__(self, config: RegionConfig, host: RegionHost) -> None:
        super().__init__(config)
        self.host = host
        self._stamps: dict[int, float] = {}

    @property
    def script(self) -> RegionScript | None:
        """The compiled script of the current declaration, if it is a scripted custom region."""
        if self.kind != "custom" or not self.config.script:
            return None
        return self.host.scripts.get(self.config.script)

    # -- ctx pieces --------------------------------------------------------------------------
    def _info(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "budget": self.max_tokens,
            "current_tokens": self.tokens,
            "entry_count": len(self.entries),
        }

    def _stamp(self, entry: Entry) -> str:
        import time

        return _iso(self._stamps.setdefault(id(entry), time.time()))

    def _entry_ctx(self, entry: Entry) -> dict[str, Any]:
        data: dict[str, Any] = {
            "content": entry.content,
            "tokens": entry.tokens,
            "timestamp": self._stamp(entry),
            "key": entry.key,
            "kind": entry.kind,
        }
        if entry.kind == "assistant_turn":
            data["tool_calls"] = [
                {"id": c.get("id", ""), "name": c.get("name", ""), "arguments": c.get("input") or {}}
                for c in entry.tool_calls
            ]
        if entry.kind == "tool_result":
            data.update(tool_call_id=entry.tool_call_id or "", tool_name=entry.tool_name or "", is_error=entry.is_error)
        return data

    def _forget_stamps(self) -> None:
        live = {id(e) for e in self.entries}
        self._stamps = {k: v for k, v in self._stamps.items() if k in live}

    # -- render ------------------------------------------------------------------------------
    def fallback_block(self) -> str | None:
        """The default block: ``[<name>]:`` and the entries, or None when the region is empty."""
        if self.is_empty():
            return None
        return f"[{self.name}]:\n" + "\n\n".join(e.content for e in self.entries)

    def render_parts(self) -> tuple[list[str], list[Message]] | None:
        """(system blocks, messages) for the request; None when no script applies."""
        script = self.script
        if script is None:
            return None
        self._forget_stamps()
        ctx = {
            "region": self._info(),
            "entries": [self._entry_ctx(e) for e in self.entries],
            **self.host.facts(),
        }
        try:
            system, messages = parse_render(script.render(ctx))
        except (ScriptError, RenderShapeError) as exc:
            detail = exc.message if isinstance(exc, ScriptError) else f"render returned an unusable value: {exc}"
            self.host.warn_once(self.name, f"{detail}; showing the default block instead")
            block = self.fallback_block()
            return ([block] if block else []), []
        rendered = sum(estimate_tokens(s) for s in system) + sum(
            estimate_tokens(m.text()) for m in messages
        )
        if rendered > self.max_tokens:
            self.host.warn_once(
                self.name, f"render produced ~{rendered} tokens, more than the region's budget of {self.max_tokens}"
            )
        return system, messages

    # -- writes ------------------------------------------------------------------------------
    def add(self, entry: Entry) -> list[Entry]:
        """Ask ``on_write`` first (replace, accept or drop), then store as a plain region would."""
        script = self.script
        if script is not None and script.has_on_write:
            ctx = {"region": self._info(), "entry": {"content": entry.content, "kind": entry.kind, "tokens": entry.tokens}}
            try:
                answer = script.on_write(ctx)
            except ScriptError as exc:
                self.host.warn_once(self.name, f"{exc.message}; the entry was stored as written")
                answer = True
            if answer is False:
                return []
            if isinstance(answer, str):
                entry.content, entry.tokens = answer, estimate_tokens(answer)
            elif answer is not True and answer is not None:
                self.host.warn_once(
                    self.name,
                    f"on_write returned {_type_name(answer)} (expected a string, true, false or ()); "
                    "the entry was stored as written",
                )
        return super().add(entry)

    def _make_room(self, candidate: list[Entry], newcomer: Entry, total: int) -> tuple[list[Entry], int]:
        """Let ``on_overflow`` pick entries to drop, then evict oldest-first for what is left."""
        script = self.script
        dropped: list[Entry] = []
        if script is not None and script.has_on_overflow:
            others = [e for e in candidate if e is not newcomer]
            needed = total - self.max_tokens
            ctx = {
                "region": self._info(),
                "entries": [self._entry_ctx(e) for e in others],
                "needed_tokens": max(0, needed),
            }
            chosen = self._overflow_choice(script, ctx, len(others))
            if chosen:
                dropped = [others[i] for i in chosen]
                candidate[:] = [e for e in candidate if not any(e is d for d in dropped)]
                total -= sum(e.tokens for e in dropped)
        evicted, total = super()._make_room(candidate, newcomer, total)
        return dropped + evicted, total

    def _overflow_choice(self, script: RegionScript, ctx: dict[str, Any], count: int) -> list[int]:
        """The sorted, distinct indices on_overflow named; [] when its answer is unusable."""
        try:
            answer = script.on_overflow(ctx)
        except ScriptError as exc:
            self.host.warn_once(self.name, f"{exc.message}; evicting the oldest entries instead")
            return []
        valid = isinstance(answer, list) and all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < count for i in answer
        )
        if not valid:
            self.host.warn_once(
                self.name,
                f"on_overflow must return an array of entry indices below {count}, got {answer!r}; "
                "evicting the oldest entries instead",
            )
            return []
        return sorted(set(answer))
