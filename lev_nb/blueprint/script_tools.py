"""What an agent's script tools (``<agent>/tools/*.rhai``) declare, read without compiling them
(docs/rhai.md#tool-scripts).

The one reader of a tool's metadata: the sibling ``<stem>.toml`` manifest when there is one (it
replaces the annotations entirely), else the ``// @tool``, ``@description``, ``@param`` and
``@requires`` comment lines; and the discovery order of ``tools/*.rhai``. The lints use it for
the agent's tool names (:func:`script_tool_names`); :mod:`lev_nb.scripting.tools` builds on it to
compile, check and run the scripts.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from dataclasses import field
from pathlib import Path
from typing import Any

from lev_nb.records import record

# Canonical capability names and their accepted aliases.
CAPABILITIES: dict[str, str] = {
    "network": "network",
    "net": "network",
    "http": "network",
    "shell": "shell",
    "process": "shell",
    "process_spawn": "shell",
    "filesystem": "filesystem",
    "file": "filesystem",
    "fs": "filesystem",
    # lev_nb's own: a web search engine (a search provider key the user made readable)
    "search": "search",
}


class ToolSpecError(ValueError):
    """A tool's metadata cannot be read. ``str(exc)`` is the detail (without a file prefix);
    ``path`` is the manifest or script file it is in, when known; ``line`` the 1-based line."""

    def __init__(self, detail: str, path: Path | None = None, line: int | None = None) -> None:
        super().__init__(detail)
        self.path = path
        self.line = line


@record
class ToolParam:
    """One parameter a tool advertises to the model."""

    name: str
    type: str = ""
    required: bool = False
    description: str = ""
    schema: dict[str, Any] | None = None  # a raw JSON-Schema fragment, used verbatim when given

    def property_schema(self) -> dict[str, Any]:
        """The JSON-Schema property for this parameter."""
        if self.schema is not None:
            return dict(self.schema)
        return {"type": self.type, "description": self.description}


@record
class ToolSpec:
    """A tool's declared metadata. ``requires`` has capability aliases normalised (``net`` ->
    ``network`` ...), unknown ones kept as written; ``manifest`` is the ``<stem>.toml`` it came
    from, or None when it came from the annotations."""

    name: str
    description: str
    params: tuple[ToolParam, ...]
    requires: tuple[str, ...]
    manifest: Path | None = None


def _canonical(requires: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(CAPABILITIES.get(r.lower(), r) for r in requires))


_DIRECTIVE = re.compile(r"(\S+)\s*(.*)", re.DOTALL)


def parse_annotations(source: str) -> ToolSpec:
    """Read the ``// @tool`` (last one wins), ``@description``, ``@param`` and ``@requires``
    comment directives of a script. Raises ToolSpecError."""
    name: str | None = None
    description = ""
    params: list[ToolParam] = []
    requires: list[str] = []
    for number, raw in enumerate(source.splitlines(), start=1):
        line = raw.strip()
        if not line.startswith("//"):
            continue
        rest = line[2:].lstrip()
        if not rest.startswith("@"):
            continue
        match = _DIRECTIVE.match(rest[1:])
        if not match:
            continue
        keyword, argument = match.group(1), match.group(2).strip()
        if keyword == "tool":
            if not argument:
                raise ToolSpecError("the @tool directive requires a tool name (`// @tool <name>`)", line=number)
            name = argument
        elif keyword == "description":
            description = argument
        elif keyword == "param":
            parts = argument.split(None, 3)
            if len(parts) < 3:
                raise ToolSpecError(
                    f"line {number}: @param requires `<name> <type> <required|optional>`, got: {argument!r}",
                    line=number,
                )
            if parts[2] not in ("required", "optional"):
                raise ToolSpecError(
                    f"line {number}: @param requiredness must be `required` or `optional`, got: {parts[2]!r}",
                    line=number,
                )
            text = parts[3].strip().strip('"') if len(parts) == 4 else ""
            params.append(ToolParam(parts[0], parts[1], parts[2] == "required", text))
        elif keyword == "requires":
            requires.extend(token for token in re.split(r"[\s,]+", argument) if token)
    if name is None:
        raise ToolSpecError("script tool is missing a `// @tool <name>` directive")
    return ToolSpec(name, description, tuple(params), _canonical(requires))


def read_manifest(file: Path) -> ToolSpec:
    """Read a tool manifest (``[tool]`` name, description, requires, ``[[tool.params]]``).
    Raises ToolSpecError naming ``file``."""
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ToolSpecError(f"invalid tool.toml {file.name}: {exc}", file) from exc
    tool = data.get("tool")
    if not isinstance(tool, dict):
        raise ToolSpecError(f"invalid tool.toml {file.name}: missing the [tool] table", file)
    name = tool.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ToolSpecError(f"tool.toml `[tool] name` must not be empty ({file.name})", file)
    params: list[ToolParam] = []
    for index, entry in enumerate(tool.get("params", [])):
        where = f"tool.toml {file.name}: tool.params[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ToolSpecError(f"invalid {where}: each param needs a string `name`", file)
        schema = entry.get("schema")
        if schema is not None and not isinstance(schema, dict):
            raise ToolSpecError(f"invalid {where}.schema: expected a table", file)
        params.append(
            ToolParam(
                name=entry["name"],
                type=str(entry.get("type", "")),
                required=bool(entry.get("required", False)),
                description=str(entry.get("description", "")),
                schema=schema,
            )
        )
    requires = tool.get("requires", [])
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        raise ToolSpecError(f"invalid tool.toml {file.name}: `requires` must be a list of strings", file)
    return ToolSpec(name.strip(), str(tool.get("description", "")), tuple(params), _canonical(requires), file)


def tool_spec(script: Path | None, source: str | None = None) -> ToolSpec:
    """The metadata of a tool script: its sibling ``<stem>.toml`` when one exists beside
    ``script``, else the annotations of ``source`` (read from ``script`` when not given).
    Raises ToolSpecError."""
    manifest = script.with_suffix(".toml") if script is not None else None
    if manifest is not None and manifest.is_file():
        return read_manifest(manifest)
    if source is None:
        if script is None:
            raise ValueError("give the script as a path or as source text")
        try:
            source = script.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ToolSpecError(f"cannot read the script: {exc}", script) from exc
    return parse_annotations(source)


def tool_files(dirs: Iterable[str | Path]) -> list[Path]:
    """The discovery order: each directory in turn (a missing one is fine), its ``*.rhai`` files
    sorted by path. Where two files declare the same name, the earlier one wins."""
    files: list[Path] = []
    for directory in dirs:
        folder = Path(directory)
        if folder.is_dir():
            files.extend(sorted(p for p in folder.glob("*.rhai") if p.is_file()))
    return files


@record
class ToolScan:
    """What ``tools/`` declares: tool names in load order, and the files skipped with a reason."""

    names: list[str] = field(default_factory=list)
    files: dict[str, Path] = field(default_factory=dict)
    skipped: list[tuple[Path, str]] = field(default_factory=list)


def scan_tools(agent_dir: str | Path | None) -> ToolScan:
    """Read the metadata of ``<agent_dir>/tools/*.rhai`` in discovery order, without compiling.

    A file whose metadata cannot be read is skipped with the reason; the first file to declare a
    name keeps it. (Compiling, and the rules about built-in names and capabilities, are
    :func:`lev_nb.scripting.discover_tools`'s.)
    """
    scan = ToolScan()
    if agent_dir is None:
        return scan
    for path in tool_files([Path(agent_dir) / "tools"]):
        try:
            name = tool_spec(path).name
        except ToolSpecError as exc:
            scan.skipped.append((path, str(exc)))
            continue
        if name not in scan.files:
            scan.names.append(name)
            scan.files[name] = path
    return scan


def script_tool_names(agent_dir: str | Path | None) -> list[str]:
    """Names of the agent's own script tools, in load order."""
    return scan_tools(agent_dir).names
