"""Finding the names of an agent's own script tools (``<agent>/tools/*.rhai``) without running them.

A deliberately small reader: the name comes from a sibling ``<stem>.toml`` (``[tool] name``) when
there is one, otherwise from the last ``// @tool <name>`` comment line. Compiling the scripts is
the scripting module's job; ``lev validate`` reports what this reader could not name.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class ToolScan:
    """What ``tools/`` holds: tool names in load order, and the files skipped with a reason."""

    names: list[str] = field(default_factory=list)
    files: dict[str, Path] = field(default_factory=dict)
    skipped: list[tuple[Path, str]] = field(default_factory=list)


def annotated_tool_name(source: str) -> str | None:
    """The name from the last ``// @tool <name>`` line; "" when the directive has no name."""
    name: str | None = None
    for line in source.splitlines():
        text = line.strip()
        if not text.startswith("//"):
            continue
        text = text[2:].strip()
        if not text.startswith("@"):
            continue
        keyword, _, rest = text[1:].partition(" ")
        keyword, _, rest2 = keyword.partition("\t")
        if keyword == "tool":
            name = (rest or rest2).strip()
    return name


def _manifest_name(toml_path: Path) -> str:
    data = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    tool = data.get("tool")
    name = tool.get("name") if isinstance(tool, dict) else None
    if not isinstance(name, str) or not name.strip():
        raise ValueError("tool.toml `[tool] name` must not be empty")
    return name


def scan_tools(agent_dir: str | Path | None) -> ToolScan:
    """Read ``<agent_dir>/tools``: sorted by path, the first definition of a name wins."""
    scan = ToolScan()
    if agent_dir is None:
        return scan
    folder = Path(agent_dir) / "tools"
    if not folder.is_dir():
        return scan
    for path in sorted(folder.glob("*.rhai")):
        try:
            sibling = path.with_suffix(".toml")
            if sibling.is_file():
                try:
                    name = _manifest_name(sibling)
                except tomllib.TOMLDecodeError as exc:
                    raise ValueError(f"invalid tool.toml: {exc}") from None
            else:
                found = annotated_tool_name(path.read_text(encoding="utf-8"))
                if found is None:
                    raise ValueError("script tool is missing a `// @tool <name>` directive")
                if not found:
                    raise ValueError("@tool directive requires a tool name")
                name = found
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            scan.skipped.append((path, str(exc)))
            continue
        if name not in scan.files:
            scan.names.append(name)
            scan.files[name] = path
    return scan


def script_tool_names(agent_dir: str | Path | None) -> list[str]:
    """Names of the agent's own script tools, in load order."""
    return scan_tools(agent_dir).names
