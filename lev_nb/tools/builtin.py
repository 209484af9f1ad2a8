"""The built-in tools: files, directory listing, shell, time, context regions, and the inline tools.

Handlers are ``async def handler(ctx, args) -> str``. They report ordinary failures as result
strings (``[error] ...``, ``[timed out] ...``, ``[exit code N] ...``); anything they raise is turned
into an ``[error]`` result by the executor. Blocking file I/O runs in worker threads, at most
``BLOCKING_PER_RUN`` at a time per run (``ToolContext.blocking``); commands (the shell tool) run in the
stage's sandbox (:func:`command_line`, :mod:`lev_nb.sandbox`).
"""

from __future__ import annotations

import asyncio
import inspect
import os
import shutil
import signal
import stat
import threading
import time
from pathlib import Path
from typing import Any

from lev_nb.sandbox import Sandbox
from lev_nb.secrets import child_environment
from lev_nb.tools import reaper
from lev_nb.tools.context import ToolContext
from lev_nb.tools.environment import environment_tools
from lev_nb.tools.redirects import confine_writes
from lev_nb.tools.registry import ToolDef, ToolRegistry
from lev_nb.workspace import WorkspaceError
from lev_nb.text import cut_bytes

__all__ = ["builtin_tools", "default_registry", "READ_FILE_CAP", "SHELL_STREAM_CAP"]

READ_FILE_CAP = 256 * 1024
# read_files shows at most this much in all (each file still at most READ_FILE_CAP).
READ_FILES_TOTAL_CAP = 1024 * 1024
SHELL_STREAM_CAP = 1024 * 1024

# --------------------------------------------------------------------------------------------------
# helpers


def _obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    """A JSON Schema for an object with these properties."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _str(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _int(description: str) -> dict[str, Any]:
    return {"type": "integer", "description": description}


_path_locks: dict[str, threading.Lock] = {}
_path_locks_guard = threading.Lock()


def _lock_for(path: Path) -> threading.Lock:
    """One lock per real path, so concurrent writes to the same file never interleave."""
    key = str(path)
    with _path_locks_guard:
        lock = _path_locks.get(key)
        if lock is None:
            lock = _path_locks[key] = threading.Lock()
        return lock


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


# --------------------------------------------------------------------------------------------------
# files


def _read_one(ctx: ToolContext, path: str, cap: int) -> str:
    """Read one file for read_file / read_files (blocking)."""
    try:
        real = ctx.workspace.resolve(path, for_write=False)
    except WorkspaceError as exc:
        return f"[error] {exc}"
    if real.is_dir():
        return f"[error] '{path}' is a directory, not a file. Call list_dir to see what it holds."
    if not real.exists():
        return f"[error] '{path}' does not exist. Call list_dir to see which files there are."
    try:
        # A few bytes past the cap show whether a character straddles it.
        data, size = read_capped(real, cap + 4)
    except OSError as exc:
        return f"[error] cannot read '{path}': {exc.strerror or exc}"
    if size > cap:
        shown = cut_bytes(data, cap)
        return (
            _decode(shown)
            + f"\n[truncated] '{path}' holds {size} bytes and only the first {len(shown)} are shown here. "
            "Rather than reading it whole again, look at a part of it (for example with a search)."
        )
    return _decode(data)


def read_capped(real: Path, cap: int) -> tuple[bytes, int]:
    """The first ``cap`` bytes of the regular file ``real`` and its size; reads no further.

    Opened without blocking and checked once open, so a FIFO swapped in after the workspace check
    is refused rather than waited on (OSError)."""
    fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"'{real.name}' is not a regular file")
        data = handle.read(cap)
    return data, max(info.st_size, len(data))


async def read_file(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Return a file's text (the first 256 KiB of a larger file, with a note)."""
    return await ctx.blocking(_read_one, ctx, str(args.get("path", "")), READ_FILE_CAP)


async def read_files(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Return several files, each under a ``### [path]`` heading; errors appear inline."""
    paths = [str(p) for p in args.get("paths", [])]

    def work() -> str:
        parts, left = [], READ_FILES_TOTAL_CAP
        for p in paths:
            if left <= 0:
                parts.append(f"### [{p}]\n[not read] read_files shows at most {READ_FILES_TOTAL_CAP} bytes in all; read it on its own")
                continue
            text = _read_one(ctx, p, min(READ_FILE_CAP, left))
            left -= len(text.encode("utf-8", "replace"))
            parts.append(f"### [{p}]\n{text}")
        return "\n\n".join(parts)

    if not paths:
        return "[error] read_files needs at least one path in 'paths'."
    return await ctx.blocking(work)


async def write_file(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Create or overwrite a file (parents included) inside the workspace."""
    path = str(args.get("path", ""))
    content = args.get("content", "")
    if not isinstance(content, str):
        return "[error] write_file: 'content' must be a string."
    real = ctx.workspace.resolve(path, for_write=True)
    if real.is_dir():
        return f"[error] '{path}' is a directory; write_file needs a file path."
    data = content.encode("utf-8")
    refused = ctx.writes.admit("write_file", path, real, len(data))  # write caps, free disk
    if refused is not None:
        return refused

    def work() -> None:
        with _lock_for(real):
            real.parent.mkdir(parents=True, exist_ok=True)
            real.write_bytes(data)

    await ctx.blocking(work)
    return f"Wrote {len(data)} bytes to '{path}'."


async def edit_file(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Replace the one occurrence of ``old_str`` with ``new_str``."""
    path = str(args.get("path", ""))
    old = args.get("old_str", "")
    new = args.get("new_str", "")
    if not isinstance(old, str) or not isinstance(new, str):
        return "[error] edit_file: 'old_str' and 'new_str' must be strings."
    if old == "":
        return "[error] edit_file: 'old_str' is empty; give the exact text to replace."
    real = ctx.workspace.resolve(path, for_write=True)
    if real.is_dir():
        return f"[error] '{path}' is a directory, not a file."
    if not real.exists():
        return f"[error] '{path}' does not exist; create it with write_file first."

    def work() -> str:
        with _lock_for(real):
            text = real.read_text(encoding="utf-8")
            count = text.count(old)
            if count == 0:
                return (
                    f"[error] edit_file: the text to replace was not found in '{path}'. "
                    "Copy it from the file exactly, whitespace and indentation included."
                )
            if count > 1:
                return (
                    f"[error] edit_file: the text to replace occurs {count} times in '{path}'. "
                    "Include more of the surrounding lines so that it matches exactly once."
                )
            data = text.replace(old, new, 1).encode("utf-8")
            refused = ctx.writes.admit("edit_file", path, real, len(data))  # the file is rewritten whole
            if refused is not None:
                return refused
            real.write_bytes(data)
            return f"Edited '{path}': replaced 1 occurrence."

    return await ctx.blocking(work)


async def list_dir(ctx: ToolContext, args: dict[str, Any]) -> str:
    """List a directory, sorted: folders as ``name/``, files as ``name (NB)``."""
    path = str(args.get("path") or ".")
    real = ctx.workspace.resolve(path, for_write=False)

    def work() -> str:
        if not real.exists():
            return f"[error] '{path}' does not exist."
        if not real.is_dir():
            return f"[error] '{path}' is a file, not a directory. Call read_file to read it."
        lines = []
        for entry in sorted(os.scandir(real), key=lambda e: e.name):
            try:
                if entry.is_dir():
                    lines.append(f"{entry.name}/")
                else:
                    lines.append(f"{entry.name} ({entry.stat().st_size}B)")
            except OSError:
                lines.append(f"{entry.name} (unreadable link)")
        if not lines:
            return f"(empty directory: {path})"
        return "\n".join(lines)

    return await ctx.blocking(work)


# --------------------------------------------------------------------------------------------------
# shell


def _shell_program() -> str:
    """$SHELL when it is sh, bash or zsh; otherwise the first of bash, zsh, sh on PATH."""
    preferred = os.environ.get("SHELL", "")
    if os.path.basename(preferred) in ("sh", "bash", "zsh") and os.access(preferred, os.X_OK):
        return preferred
    for name in ("bash", "zsh", "sh"):
        found = shutil.which(name)
        if found:
            return found
    return "/bin/sh"


async def _read_capped(stream: asyncio.StreamReader | None, cap: int) -> tuple[bytes, int]:
    """Drain ``stream`` keeping at most ``cap`` bytes; return them and the total byte count."""
    if stream is None:
        return b"", 0
    kept = bytearray()
    total = 0
    while True:
        chunk = await stream.read(65536)
        if not chunk:
            break
        total += len(chunk)
        if len(kept) < cap:
            kept.extend(chunk[: cap - len(kept)])
    return bytes(kept), total


def command_line(sandbox: Sandbox | None, command: str) -> list[str]:
    """The argv that runs one shell command line for an agent (the shell tool, a seed command, a
    script's ``shell()``): on the host, or inside ``sandbox`` (:mod:`lev_nb.sandbox`)."""
    program = _shell_program()
    if sandbox is None or not sandbox.isolated:
        return [program, "-c", command]
    if not program.startswith(("/usr/", "/bin/")):
        program = "/bin/sh"  # a shell outside the system folders is not visible inside
    return sandbox.wrap([program, "-c", command])


def kill_group(pid: int) -> None:
    """Kill the whole process group the command runs in (its children too)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def start_in_group(argv: list[str], **kwargs: Any) -> asyncio.subprocess.Process:
    """Start a command in a process group of its own, with no standard input.

    It starts behind a :class:`~lev_nb.tools.reaper.Gate`: it runs only once its group is on the
    watcher's list, so the group is killed if this process dies at any moment after (the caller
    calls ``reaper.release(proc.pid)`` once the command has ended). A cancellation that lands while
    the process is being created still lets the creation finish, then kills the whole group and
    re-raises: asyncio would otherwise kill only the direct child and wait until whatever it
    spawned exits and closes the pipes (a cancelled run would hang).
    """
    gate = reaper.Gate()
    creating = asyncio.ensure_future(
        asyncio.create_subprocess_exec(*gate.argv(argv), stdin=gate.stdin, start_new_session=True, **kwargs))
    try:
        proc = await asyncio.shield(creating)
    except asyncio.CancelledError:
        try:
            proc = await creating
        except Exception:
            gate.close()
            raise asyncio.CancelledError from None
        gate.close()  # it never runs
        kill_group(proc.pid)
        raise
    except BaseException:
        gate.close()
        raise
    gate.open(proc.pid)
    return proc


def _stream_text(name: str, data: bytes, total: int) -> str:
    """Decoded stream output with a note when it was cut."""
    text = _decode(data)
    if total > len(data):
        text += f"\n[truncated] {name} was {total} bytes; only the first {len(data)} are shown."
    return text


async def _collect(proc: asyncio.subprocess.Process) -> tuple[tuple[bytes, int], tuple[bytes, int], int]:
    """The command's capped stdout and stderr, and its exit code. A coroutine of its own, so that a
    cancelled run retrieves the gather's cancellation instead of leaving it to be logged."""
    out, err, code = await asyncio.gather(
        _read_capped(proc.stdout, SHELL_STREAM_CAP),
        _read_capped(proc.stderr, SHELL_STREAM_CAP),
        proc.wait(),
    )
    return out, err, code


async def shell(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Run a command in the working directory with a time limit and capped output."""
    command = args.get("command", "")
    if not isinstance(command, str) or not command.strip():
        return "[error] shell: 'command' is empty."
    if not ctx.workspace.exists():
        return f"[error] the working directory '{ctx.workspace.root}' no longer exists."
    refused = confine_writes(ctx.workspace, command)  # a redirect is a write_file, yolo or not
    if refused is not None:
        return refused
    refused, sizes = ctx.writes.before_shell("shell", ctx.workspace, command)  # write caps, free disk
    if refused is not None:
        return refused
    try:
        text = await _run_command(ctx, command)
    finally:  # counted however the command ended (a timeout is how the big writes end)
        note = ctx.writes.after_shell("shell", sizes)
    return text if note is None else f"{text}\n{note}"


async def _run_command(ctx: ToolContext, command: str) -> str:
    """Run one checked command line; its output (or how it failed) as the tool result."""
    timeout = ctx.shell_timeout_s
    proc = await start_in_group(  # its own process group, so a timeout can kill what it spawned
        command_line(ctx.sandbox, command),
        cwd=str(ctx.workspace.root),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=child_environment(policy=ctx.extra.get("shell_env")),  # [security] shell_env (lev_nb.secrets)
    )
    try:
        (out, out_total), (err, err_total), code = await asyncio.wait_for(_collect(proc), timeout=timeout)
    except asyncio.TimeoutError:
        kill_group(proc.pid)
        await proc.wait()
        shown = f"{timeout:g}"
        return f"[timed out] The command ran past its {shown}s limit and was stopped: {command}"
    except asyncio.CancelledError:
        kill_group(proc.pid)
        raise
    finally:
        reaper.release(proc.pid)
    stdout = _stream_text("stdout", out, out_total)
    stderr = _stream_text("stderr", err, err_total)
    if code != 0:
        return f"[exit code {code}]\nstdout:\n{stdout}\nstderr:\n{stderr}"
    if not stdout and not stderr:
        return "(the command succeeded and printed nothing)"
    if stderr:
        sep = "" if not stdout or stdout.endswith("\n") else "\n"
        return f"{stdout}{sep}stderr:\n{stderr}"
    return stdout


# --------------------------------------------------------------------------------------------------
# facts


async def current_time(ctx: ToolContext, args: dict[str, Any]) -> str:
    """The current local time, UTC time and unix seconds."""
    # What datetime's isoformat writes, from time's own structs: a third of the time (tested
    # against datetime across zones, historic offsets with seconds included).
    now = time.time()
    local = time.localtime(now)
    return (
        time.strftime("%A %Y-%m-%dT%H:%M:%S", local) + _utc_offset(local.tm_gmtoff) + " local; "
        + time.strftime("%Y-%m-%dT%H:%M:%SZ UTC; unix ", time.gmtime(now)) + str(int(now))
    )


def _utc_offset(seconds: int) -> str:
    """``+HH:MM`` (``+HH:MM:SS`` for an offset with seconds), as datetime.isoformat writes it."""
    hours, rest = divmod(abs(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{'-' if seconds < 0 else '+'}{hours:02d}:{minutes:02d}" + (f":{secs:02d}" if secs else "")


# --------------------------------------------------------------------------------------------------
# context regions and checklists: the engine owns the regions, so these delegate to ctx.context


def _delegate(method: str, params: tuple[str, ...]):
    """A handler that forwards the named arguments to ``ctx.context.<method>``."""

    async def handler(ctx: ToolContext, args: dict[str, Any]) -> str:
        if ctx.context is None:
            return "[unavailable] Context regions are not available in this run."
        kwargs = {p: args[p] for p in params if p in args and args[p] is not None}
        result = getattr(ctx.context, method)(**kwargs)
        if inspect.isawaitable(result):
            result = await result
        return str(result)

    handler.__name__ = f"context_{method}"
    handler.__doc__ = f"Forward to the engine's ContextAccess.{method}."
    return handler


_REGION = _str("The context region's name.")

# --------------------------------------------------------------------------------------------------
# inline tools (answered by the engine)

SUBMIT_OUTPUT_DESCRIPTION = (
    "Hand in your final answer for this run: the one thing the caller gets back. Put all of it in "
    "`content`. Calling the tool again replaces the earlier submission. If you produced files the "
    "caller should fetch, list them in `artifacts`."
)
SUBMIT_OUTPUT_PARAMETERS = {
    "type": "object",
    "required": ["content"],
    "properties": {
        "content": {"type": "string", "description": "The complete final answer."},
        "artifacts": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Files you produced for the caller, as paths relative to the working directory.",
        },
    },
}
FAN_OUT_PARAMETERS = {
    "type": "object",
    "required": ["items"],
    "properties": {
        "items": {
            "type": "array",
            "description": "One entry per piece of work; each runs in its own worker.",
            "items": {
                "type": "object",
                "required": ["id", "context"],
                "properties": {
                    "id": {"type": "string", "description": "A short unique name for the item."},
                    "context": {"type": "object", "description": "What the worker needs to know about its item."},
                },
            },
        },
        "agent": {"type": "string", "description": "Run the items with this agent instead of the stage's worker."},
        "max_workers": {"type": "integer", "minimum": 0, "description": "How many workers may run at once (0: no limit)."},
    },
}

_AGENT_ID = _str("The sub-agent's id, as spawn_agent returned it.")
SUBAGENT_TOOL_DEFS = (
    (
        "spawn_agent",
        "Start a sub-agent on a task of its own: another agent (by name, or by a path inside this agent's "
        "folder) that runs beside you with its own record. You get its id back; collect its answer with "
        "wait_for_agent, or pass wait=true to wait here.",
        _obj(
            {
                "blueprint": _str("The agent to run: its name, or a path to its folder inside this agent's folder."),
                "task": _str("What the sub-agent should do."),
                "wait": {"type": "boolean", "description": "Wait for it to finish and return its answer (default false)."},
                "seed_context": _str("Extra context appended to its task."),
                "max_child_depth": _int("How many levels of agents it may start below itself (can only lower the limit)."),
                "output_format": _str("The format its final answer should have (json, csv, markdown, ...)."),
                "output_instructions": _str("What its final answer should contain."),
            },
            ["blueprint", "task"],
        ),
    ),
    ("check_agent", "Look at a sub-agent: its status, and its answer once it has finished.", _obj({"agent_id": _AGENT_ID}, ["agent_id"])),
    ("wait_for_agent", "Wait until a sub-agent finishes; returns its status and its final answer.", _obj({"agent_id": _AGENT_ID}, ["agent_id"])),
    (
        "send_to_agent",
        "Send a message to a running sub-agent; it reads it before its next turn.",
        _obj(
            {"agent_id": _AGENT_ID, "message": _str("The message."),
             "target_region": _str("Put it into this context region of the sub-agent instead of its conversation.")},
            ["agent_id", "message"],
        ),
    ),
    ("kill_agent", "Stop a running sub-agent (and any agents it started).", _obj({"agent_id": _AGENT_ID}, ["agent_id"])),
)


def builtin_tools() -> list[ToolDef]:
    """Every built-in ToolDef, freshly built."""
    ctx_tools = [
        ToolDef(
            "context_write",
            "Put an entry into a context region, replacing the entry with the same key if there is one.",
            _obj({"region": _REGION, "content": _str("What to store."), "key": _str("Optional key to upsert by.")}, ["region", "content"]),
            _delegate("write", ("region", "content", "key")),
            default_policy="allow",
            run_state=True,
        ),
        ToolDef(
            "context_append",
            "Add an entry to the end of a context region.",
            _obj({"region": _REGION, "content": _str("What to add."), "key": _str("Optional key for the entry.")}, ["region", "content"]),
            _delegate("append", ("region", "content", "key")),
            default_policy="allow",
            run_state=True,
        ),
        ToolDef(
            "context_read",
            "Read a context region, or one entry of it by key.",
            _obj({"region": _REGION, "key": _str("Optional key of one entry.")}, ["region"]),
            _delegate("read", ("region", "key")),
            readonly=True,
            default_policy="allow",
            run_state=True,
        ),
        ToolDef(
            "context_delete",
            "Remove entries from a context region: by key, by index, or the oldest N.",
            _obj(
                {"region": _REGION, "key": _str("Key of the entry to remove."), "index": _int("Position of the entry to remove."),
                 "oldest": _int("Remove this many of the oldest entries.")},
                ["region"],
            ),
            _delegate("delete", ("region", "key", "index", "oldest")),
            default_policy="allow",
            run_state=True,
        ),
        ToolDef(
            "context_list",
            "Show the context regions and how full each is (or just one region).",
            _obj({"region": _str("Optional region to describe.")}),
            _delegate("list", ("region",)),
            readonly=True,
            default_policy="allow",
            run_state=True,
        ),
        ToolDef(
            "todo_add",
            "Add an open item to a checklist region.",
            _obj({"region": _REGION, "item": _str("The item's text.")}, ["region", "item"]),
            _delegate("todo_add", ("region", "item")),
            default_policy="allow",
            run_state=True,
        ),
        ToolDef(
            "todo_done",
            "Mark a checklist item as done.",
            _obj({"region": _REGION, "id": _int("The item's number.")}, ["region", "id"]),
            _delegate("todo_done", ("region", "id")),
            default_policy="allow",
            run_state=True,
        ),
        ToolDef(
            "todo_note",
            "Attach a note to a checklist item.",
            _obj({"region": _REGION, "id": _int("The item's number."), "note": _str("The note.")}, ["region", "id", "note"]),
            _delegate("todo_note", ("region", "id", "note")),
            default_policy="allow",
            run_state=True,
        ),
    ]
    return [
        ToolDef(
            "read_file",
            "Read a text file from the working directory. Files over 256 KiB are cut, with a note.",
            _obj({"path": _str("Path relative to the working directory.")}, ["path"]),
            read_file,
            readonly=True,
            default_policy="allow",
        ),
        ToolDef(
            "read_files",
            "Read several files at once; each appears under a '### [path]' heading.",
            _obj({"paths": {"type": "array", "items": {"type": "string"}, "description": "Paths relative to the working directory."}}, ["paths"]),
            read_files,
            readonly=True,
            default_policy="allow",
        ),
        ToolDef(
            "write_file",
            "Create or overwrite a file in the working directory; missing folders are created.",
            _obj({"path": _str("Path relative to the working directory."), "content": _str("The whole new content.")}, ["path", "content"]),
            write_file,
            modifying=True,
        ),
        ToolDef(
            "edit_file",
            "Replace one exact piece of text in a file. `old_str` must occur exactly once.",
            _obj(
                {"path": _str("Path relative to the working directory."), "old_str": _str("The exact text to replace."),
                 "new_str": _str("The replacement text.")},
                ["path", "old_str", "new_str"],
            ),
            edit_file,
            modifying=True,
        ),
        ToolDef(
            "list_dir",
            "List a directory: folders end in '/', files show their size.",
            _obj({"path": _str("Directory relative to the working directory (default '.').")}),
            list_dir,
            readonly=True,
            default_policy="allow",
        ),
        ToolDef(
            "shell",
            "Run a shell command in the working directory. It is stopped after 60 seconds; each output stream is cut at 1 MiB.",
            _obj({"command": _str("The command line to run.")}, ["command"]),
            shell,
        ),
        ToolDef(
            "current_time",
            "The current date and time (local and UTC).",
            _obj({}),
            current_time,
            readonly=True,
            default_policy="allow",
        ),
        *environment_tools(),
        *ctx_tools,
        ToolDef("submit_output", SUBMIT_OUTPUT_DESCRIPTION, SUBMIT_OUTPUT_PARAMETERS, default_policy="allow", inline=True),
        ToolDef(
            "fan_out",
            "Split the work into items and run each in its own worker; you get one combined report back.",
            FAN_OUT_PARAMETERS,
            default_policy="allow",
            inline=True,
        ),
        *blocking_tools(),
        ToolDef(
            "runtime_info",
            "Facts about this run: its id, stage, iteration and limits.",
            _obj({}),
            readonly=True,
            default_policy="allow",
            inline=True,
        ),
        *(ToolDef(name, text, params, default_policy="allow", inline=True) for name, text, params in SUBAGENT_TOOL_DEFS),
    ]


def blocking_tools() -> list[ToolDef]:
    """The tools that wait for a person (docs/concepts.md#tools). The engine answers them
    (lev_nb.engine.interaction), so they have no handler here."""
    prompt = _str("What to ask the person.")
    return [
        ToolDef(
            "ask_user_text",
            "Ask the person running this agent a question and wait for their written answer.",
            _obj({"prompt": prompt}, ["prompt"]),
            default_policy="allow",
            inline=True,
        ),
        ToolDef(
            "ask_user_choice",
            "Ask the person to pick one of several options (at least 2) and wait for their choice.",
            _obj(
                {"prompt": prompt,
                 "options": {"type": "array", "items": {"type": "string"}, "description": "The options, at least 2."}},
                ["prompt", "options"],
            ),
            default_policy="allow",
            inline=True,
        ),
        ToolDef(
            "ask_user_confirm",
            "Ask the person a yes/no question and wait for their answer.",
            _obj({"prompt": prompt}, ["prompt"]),
            default_policy="allow",
            inline=True,
        ),
        ToolDef(
            "present_for_review",
            "Show the person a Markdown document and wait until they acknowledge it or give feedback.",
            _obj({"title": _str("A short title for the document."), "markdown": _str("The document, in Markdown.")},
                 ["title", "markdown"]),
            default_policy="allow",
            inline=True,
        ),
        ToolDef(
            "edit_document",
            "Give the person a document to edit and wait for the edited version.",
            _obj({"content": _str("The document to edit."), "prompt": _str("What to tell the person (optional).")},
                 ["content"]),
            default_policy="allow",
            inline=True,
        ),
    ]


_BUILTINS: ToolRegistry | None = None


def default_registry() -> ToolRegistry:
    """A new registry holding every built-in tool (with the ``bash`` alias for ``shell``).

    The definitions are built once per process; each caller gets its own copy to extend.
    """
    global _BUILTINS
    if _BUILTINS is None:
        _BUILTINS = ToolRegistry(builtin_tools())
    return _BUILTINS.copy()
