"""Tool scripts (docs/rhai.md#tool-scripts): :func:`parse_tool_script`, :func:`discover_tools` and
:func:`run_tool`, with host I/O through a :class:`~lev_nb.scripting.host.ToolHost`.

What a tool declares (name, description, parameters, required capabilities) and the discovery
order of ``tools/*.rhai`` are read by :mod:`lev_nb.blueprint.script_tools`, the one reader the
lints use too; this module compiles the scripts, applies the loading rules (built-in names, name
clashes, unknown capabilities) and runs them. A tool's failures while running come back as
``[error] ...`` text for the model.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import field
from pathlib import Path
from typing import Any

from lev_nb.blueprint.script_tools import (
    CAPABILITIES,
    ToolParam,
    ToolSpecError,
    tool_files,
    tool_spec,
)
from lev_nb.records import record
from lev_nb.rhai import AST, NotPlainDataError, RhaiError
from lev_nb.schemas import compile_schema

from ._common import (
    COMPILE_PREFIX,
    ScriptError,
    compile_script,
    load_script,
    shared_engine,
)
from .budgets import TOOL_MAX_OPERATIONS
from .host import ToolHost, serving, tool_engine


@record
class ToolScript:
    """A compiled tool script and the metadata it advertises."""

    name: str
    description: str
    params: tuple[ToolParam, ...]
    requires: tuple[str, ...]
    path: Path | None
    ast: AST = field(repr=False, compare=False)
    manifest: Path | None = None  # the sibling <stem>.toml, when it supplied the metadata

    @property
    def parameters_schema(self) -> dict[str, Any]:
        """The JSON schema of the tool's arguments, as advertised to the model."""
        return {
            "type": "object",
            "properties": {p.name: p.property_schema() for p in self.params},
            "required": [p.name for p in self.params if p.required],
        }

    @property
    def unknown_capabilities(self) -> tuple[str, ...]:
        """`@requires` entries that name no known capability."""
        return tuple(c for c in self.requires if c not in CAPABILITIES.values())


@record
class SkippedTool:
    """A `.rhai` file that discovery did not load, and why."""

    path: Path
    reason: str


def parse_tool_script(
    path: str | Path | None = None, *, source: str | None = None, label: str | None = None
) -> ToolScript:
    """Read, describe and compile a tool script.

    Metadata comes from a sibling ``<stem>.toml`` when one exists beside ``path``, else from the
    comment directives. Capability aliases are normalised (``net`` -> ``network`` ...); unknown
    ones are kept as written (see ``ToolScript.unknown_capabilities``). Raises ScriptError.
    """
    text, label, file = load_script(path, source, label)
    try:
        spec = tool_spec(file, text)
    except ToolSpecError as exc:
        where = exc.path if exc.path is not None else label
        raise ScriptError(f"{COMPILE_PREFIX}{label}: {exc}", where, exc.line) from exc
    ast = compile_script(shared_engine(TOOL_MAX_OPERATIONS), text, label)
    return ToolScript(spec.name, spec.description, spec.params, spec.requires, file, ast, spec.manifest)


# Each tool file's parse while the file and its sibling .toml are unchanged: every run looks at the
# global tools folder ($LEV_HOME/tools) when it starts, and reading and compiling every script again
# for every run cost more than the rest of the start. A ToolScript is immutable and its compiled
# form is only read, so runs share it. Errors are not kept: a broken file is read again next time.
_parsed: dict[str, tuple[tuple[Any, ...], ToolScript]] = {}
_parsed_lock = threading.Lock()
_PARSED_MAX = 1024


def _file_stamp(file: Path) -> tuple[Any, ...] | None:
    """What says the file (and the manifest beside it) is unchanged; None when it cannot be read."""
    try:
        script = file.stat()
    except OSError:
        return None
    try:
        beside = file.with_suffix(".toml").stat()
        manifest: tuple[int, ...] | None = (beside.st_mtime_ns, beside.st_ctime_ns, beside.st_size, beside.st_ino)
    except OSError:
        manifest = None
    return (script.st_mtime_ns, script.st_ctime_ns, script.st_size, script.st_ino, manifest)


def tool_script_of_file(file: Path) -> ToolScript:
    """:func:`parse_tool_script` of ``file``, kept while the file and its sibling ``.toml`` are
    unchanged (modification and change times, size, inode). Raises ScriptError."""
    key = str(file)
    stamp = _file_stamp(file)
    known = _parsed.get(key)
    if stamp is not None and known is not None and known[0] == stamp:
        return known[1]
    tool = parse_tool_script(file)
    if stamp is not None:
        with _parsed_lock:
            if len(_parsed) >= _PARSED_MAX:
                _parsed.clear()  # a long session that saw many folders starts again
            _parsed[key] = (stamp, tool)
    return tool


def discover_tools(
    dirs: Iterable[str | Path], *, reserved: Iterable[str] = ()
) -> tuple[dict[str, ToolScript], list[SkippedTool]]:
    """Load every ``*.rhai`` of ``dirs`` (in order; an earlier directory wins a name clash).

    Files are taken in sorted order; a missing directory is fine. A file that fails to load, a
    name already taken (or listed in ``reserved``, e.g. built-in tools) and a tool requiring an
    unknown capability are reported in the skipped list instead of stopping discovery.
    """
    taken = set(reserved)
    tools: dict[str, ToolScript] = {}
    skipped: list[SkippedTool] = []
    for file in tool_files(dirs):
        try:
            tool = tool_script_of_file(file)
        except ScriptError as exc:
            skipped.append(SkippedTool(file, str(exc)))
            continue
        if tool.name in taken:
            skipped.append(SkippedTool(file, f"tool name '{tool.name}' is reserved by a built-in tool"))
        elif tool.name in tools:
            first = tools[tool.name].path
            skipped.append(SkippedTool(file, f"tool name '{tool.name}' is already provided by {first}"))
        elif tool.unknown_capabilities:
            unknown = ", ".join(tool.unknown_capabilities)
            skipped.append(SkippedTool(file, f"@requires names unknown capability: {unknown}"))
        else:
            tools[tool.name] = tool
    return tools, skipped


def _argument_error(tool: ToolScript, arguments: object) -> str | None:
    """Check arguments against the advertised schema (skipped when that schema is broken)."""
    validator, _broken = compile_schema(tool.parameters_schema)
    if validator is None:
        return None  # a typo in a declared type: run without validation, as the upstream does
    error = next(iter(validator.iter_errors(arguments)), None)
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"invalid arguments{f' at {where}' if where else ''}: {error.message}"


def run_tool(tool: ToolScript, arguments: Any, host: ToolHost | None = None, *, validate_arguments: bool = True) -> str:
    """Run a tool script with ``params`` = ``arguments``; always returns text for the model.

    A string result passes through, ``()`` becomes ``""``, anything else compact JSON. Any
    failure becomes ``[error] <tool>: <message>`` (or ``[error] cannot serialize result: ...``).
    ``host`` defaults to :class:`DenyAllHost`. With ``validate_arguments`` the arguments are first
    checked against ``tool.parameters_schema``.
    """
    if validate_arguments:
        problem = _argument_error(tool, arguments)
        if problem:
            return f"[error] {tool.name}: {problem}"
    try:
        with serving(host):
            result = tool_engine().run(tool.ast, params=arguments)
    except RhaiError as exc:
        return f"[error] {tool.name}: {exc}"
    except NotPlainDataError as exc:
        return f"[error] cannot serialize result: {exc}"
    except TypeError as exc:  # the arguments themselves could not become Rhai values
        return f"[error] {tool.name}: {exc}"
    if isinstance(result, str):
        return result
    if result is None:
        return ""
    try:
        return json.dumps(result, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        return f"[error] cannot serialize result: {exc}"
