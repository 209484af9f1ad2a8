"""The behaviour of the ``context_*`` and ``todo_*`` tools over a run's context window.

The tool layer declares these tools and calls them through its ``ContextAccess`` protocol
(:mod:`lev_nb.tools.context`); :class:`ContextTools` answers those calls on a
:class:`~lev_nb.engine.context.window.ContextWindow` (docs/concepts.md#tools, the context tools).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from lev_nb.engine.context.regions import Entry, Region, RegionFullError
from lev_nb.engine.context.window import ContextWindow
from lev_nb.text import squeezed

RUNTIME_REGIONS = frozenset({"conversation", "final_output", "stage_instructions"})


def _as_int(value: Any) -> int | None:
    """Read an integer argument that may arrive as a number or a numeric string."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return None


def _looks_like_path(name: str) -> bool:
    tail = name.rsplit("/", 1)[-1]
    return "/" in name or "\\" in name or ("." in tail and not tail.startswith("."))


class ContextTools:
    """The behaviour of the ``context_*`` and ``todo_*`` tools over one :class:`ContextWindow`.

    Method names and keyword arguments match the tools' parameters (the tool layer's
    ``ContextAccess`` protocol). Every method returns the result text the model sees; failures
    start with ``[error]`` and change nothing. Only regions the current stage sees are reachable.
    """

    def __init__(self, window: ContextWindow, *, scripts_off_loop: bool = False) -> None:
        self.window = window
        # In a run: a write a custom-region script shapes (on_write, on_overflow) runs on a worker
        # thread, one at a time, and the tool awaits it, so a slow script stalls no other run.
        self.scripts_off_loop = scripts_off_loop
        self._script_lock: asyncio.Lock | None = None

    def _scripted(self, region: str | None) -> bool:
        if not self.scripts_off_loop or not region or not self.window.is_visible(region):
            return False
        script = getattr(self.window.region(region), "script", None)
        return script is not None and (script.has_on_write or script.has_on_overflow)

    async def _in_thread(self, fn: Callable[..., str], *args: Any) -> str:
        if self._script_lock is None:
            self._script_lock = asyncio.Lock()
        async with self._script_lock:
            return await asyncio.to_thread(fn, *args)

    # -- shared checks --------------------------------------------------------------------------
    def _lookup(self, region: str | None, *, writing: bool = False) -> Region | str:
        """The visible region called ``region``, or an ``[error]`` text saying what went wrong."""
        if not region:
            return "[error] missing 'region' argument"
        if not self.window.is_visible(region):
            names = ", ".join(r.name for r in self.window.visible_regions())
            message = (f"[error] there is no context region '{region}' in this stage. "
                       f"Regions: {names}.")
            if _looks_like_path(region):
                message += (
                    f" '{region}' looks like a file path: context regions are named sections of "
                    "your prompt, not files. Use read_file or write_file for files."
                )
            return message
        target = self.window.region(region)
        if writing and region in RUNTIME_REGIONS:
            return (
                f"[error] region '{region}' is kept by the runtime and cannot be edited with "
                "context tools"
                + (" (submit your answer with submit_output)." if region == "final_output" else ".")
            )
        return target

    @staticmethod
    def _not_for_checklist(target: Region) -> str | None:
        if target.kind == "checklist":
            return (f"[error] region '{target.name}' is a checklist: use todo_add, todo_done and "
                    "todo_note to change it.")
        return None

    @staticmethod
    def _usage(target: Region) -> str:
        return f"{target.tokens}/{target.max_tokens} tokens used"

    def _store(self, target: Region, entry: Entry, replace_all: bool) -> str | None:
        """Add ``entry`` (optionally replacing the region's content); an error text if refused."""
        saved = list(target.entries)
        if replace_all:
            target.clear()
        try:
            target.add(entry)
        except RegionFullError as err:
            target.entries = saved
            return f"[error] {err}"
        return None

    # -- context_* ------------------------------------------------------------------------------
    def _writable(self, region: str | None, content: str | None, key: str | None) -> Region | str:
        """The region a write/append goes to, or the ``[error]`` text saying why it cannot."""
        target = self._lookup(region, writing=True)
        if isinstance(target, str):
            return target
        refusal = self._not_for_checklist(target)
        if refusal:
            return refusal
        if content is None:
            return "[error] missing 'content' argument"
        if target.kind == "hashmap" and not key:
            return f"[error] region '{target.name}' is a hashmap: pass a 'key' for the entry."
        return target

    def write(self, region: str | None = None, content: str | None = None,
              key: str | None = None) -> str | Awaitable[str]:
        """``context_write``: store ``content`` under ``key`` (replacing that entry), or replace
        the whole region when no key is given. Hashmap regions need a key."""
        if self._scripted(region):
            return self._in_thread(self._write, region, content, key)
        return self._write(region, content, key)

    def _write(self, region: str | None, content: str | None, key: str | None) -> str:
        target = self._writable(region, content, key)
        if isinstance(target, str):
            return target
        entry = Entry.make(str(content), key=str(key) if key else None)
        error = self._store(target, entry, replace_all=not key)
        if error:
            return error
        where = f"under key '{key}' " if key else ""
        return f"Stored {where}in region '{target.name}' ({self._usage(target)})."

    def append(self, region: str | None = None, content: str | None = None,
               key: str | None = None) -> str | Awaitable[str]:
        """``context_append``: add an entry (or extend the entry under ``key``)."""
        if self._scripted(region):
            return self._in_thread(self._append, region, content, key)
        return self._append(region, content, key)

    def _append(self, region: str | None, content: str | None, key: str | None) -> str:
        target = self._writable(region, content, key)
        if isinstance(target, str):
            return target
        text = str(content)
        position = target.find_key(str(key)) if key else None
        if position is not None:
            text = target.entries[position].content + "\n" + text
        error = self._store(target, Entry.make(text, key=str(key) if key else None), False)
        if error:
            return error
        verb = "Extended the entry under key" if position is not None else "Appended"
        where = f" '{key}'" if position is not None else (f" under key '{key}'" if key else "")
        return f"{verb}{where} in region '{target.name}' ({self._usage(target)})."

    def read(self, region: str | None = None, key: str | None = None) -> str:
        """``context_read``: the whole region, or the one entry under ``key``."""
        target = self._lookup(region)
        if isinstance(target, str):
            return target
        if key:
            position = target.find_key(str(key))
            if position is None:
                keys = ", ".join(e.key for e in target.entries if e.key) or "none"
                return (f"[error] region '{target.name}' has no entry under key '{key}'. "
                        f"Keys: {keys}.")
            return target.entries[position].content
        text = target.text()
        return text if text.strip() else f"Region '{target.name}' is empty."

    def delete(self, region: str | None = None, key: str | None = None,
               index: int | None = None, oldest: int | None = None) -> str:
        """``context_delete``: release the entry under ``key``, the entry at ``index`` (0 is
        the oldest), or the ``oldest`` N entries. Exactly one of the three is expected."""
        target = self._lookup(region, writing=True)
        if isinstance(target, str):
            return target
        chosen = [name for name, value in (("key", key), ("index", index), ("oldest", oldest))
                  if value is not None]
        if len(chosen) != 1:
            return "[error] pass exactly one of 'key', 'index' or 'oldest'"
        if key is not None:
            if not target.remove_key(str(key)):
                return f"[error] region '{target.name}' has no entry under key '{key}'."
            removed = 1
        elif index is not None:
            position = _as_int(index)
            if position is None or not 0 <= position < len(target.entries):
                return (f"[error] index {index!r} is out of range: region '{target.name}' holds "
                        f"{len(target.entries)} entries (0 is the oldest).")
            del target.entries[position]
            removed = 1
        else:
            count = 1 if oldest is True else _as_int(oldest)
            if count is None or count < 1:
                return "[error] 'oldest' must be a positive number of entries"
            removed = min(count, len(target.entries))
            del target.entries[:removed]
        plural = "entry" if removed == 1 else "entries"
        return f"Removed {removed} {plural} from region '{target.name}' ({self._usage(target)})."

    def list(self, region: str | None = None) -> str:
        """``context_list``: usage of every visible region, or the entries of one."""
        if region:
            target = self._lookup(region)
            if isinstance(target, str):
                return target
            if not target.entries:
                return f"Region '{target.name}' is empty ({self._usage(target)})."
            lines = [f"Region '{target.name}' ({target.kind}, {len(target.entries)} entries, "
                     f"{self._usage(target)}):"]
            for position, entry in enumerate(target.entries):
                label = f"key '{entry.key}'" if entry.key else entry.kind
                preview = squeezed(entry.content, 60)
                lines.append(f"  [{position}] {label}, {entry.tokens} tokens: {preview}")
            return "\n".join(lines)
        lines = ["Context regions in this stage:"]
        for target in self.window.visible_regions():
            lines.append(f"  {target.name} ({target.kind}): {len(target.entries)} entries, "
                         f"{target.tokens}/{target.max_tokens} tokens")
        return "\n".join(lines)

    # -- todo_* ---------------------------------------------------------------------------------
    def _checklist(self, region: str | None) -> Region | str:
        target = self._lookup(region)
        if isinstance(target, str):
            return target
        if target.kind != "checklist":
            return (f"[error] region '{target.name}' is a {target.kind} region, not a checklist; "
                    "todo tools work on checklist regions only.")
        return target

    def todo_add(self, region: str | None = None, item: str | None = None) -> str:
        """``todo_add``: add an open item and report its id."""
        target = self._checklist(region)
        if isinstance(target, str):
            return target
        if not item or not str(item).strip():
            return "[error] missing 'item' argument"
        try:
            item_id = target.add_checklist_item(str(item).strip())
        except RegionFullError as err:
            return f"[error] {err}"
        still_open = len(self.window.open_items(target.name))
        return f"Added item {item_id} to '{target.name}' ({still_open} open)."

    def _item_id(self, target: Region, id: Any) -> int | str:
        item_id = _as_int(id)
        if item_id is None:
            return "[error] 'id' must be an item number"
        if target.checklist_item(item_id) is None:
            ids = ", ".join(str(i) for i, _ in self.window.open_items(target.name)) or "none"
            return f"[error] checklist '{target.name}' has no item {item_id}. Open items: {ids}."
        return item_id

    def todo_done(self, region: str | None = None, id: Any = None) -> str:
        """``todo_done``: mark an item done."""
        target = self._checklist(region)
        if isinstance(target, str):
            return target
        item_id = self._item_id(target, id)
        if isinstance(item_id, str):
            return item_id
        item = target.checklist_item(item_id)
        if item is not None and item.metadata.get("done"):
            return f"Item {item_id} in '{target.name}' was already done."
        try:
            target.update_checklist_item(item_id, done=True)
        except RegionFullError as err:
            return f"[error] {err}"
        remaining = len(self.window.open_items(target.name))
        return f"Marked item {item_id} done in '{target.name}' ({remaining} open)."

    def todo_note(self, region: str | None = None, id: Any = None, note: str | None = None) -> str:
        """``todo_note``: attach a note to an item (replacing an earlier note)."""
        target = self._checklist(region)
        if isinstance(target, str):
            return target
        if not note or not str(note).strip():
            return "[error] missing 'note' argument"
        item_id = self._item_id(target, id)
        if isinstance(item_id, str):
            return item_id
        try:
            target.update_checklist_item(item_id, note=str(note).strip())
        except RegionFullError as err:
            return f"[error] {err}"
        return f"Noted on item {item_id} in '{target.name}'."

    def call(self, tool: str, arguments: dict[str, Any]) -> str:
        """Dispatch a tool call by its tool name (``context_write``, ``todo_add``, ...)."""
        method = tool.removeprefix("context_")
        allowed = {"write", "append", "read", "delete", "list",
                   "todo_add", "todo_done", "todo_note"}
        if method not in allowed:
            return f"[error] unknown context tool '{tool}'"
        handler = getattr(self, method)
        accepted = set(inspect.signature(handler).parameters)
        unexpected = sorted(set(arguments) - accepted)
        if unexpected:
            return f"[error] unexpected arguments for '{tool}': {', '.join(unexpected)}"
        return handler(**arguments)
