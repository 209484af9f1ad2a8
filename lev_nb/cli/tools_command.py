"""``lev tools``: the global tool inventory, ``$LEV_HOME/tools/*.rhai``, without starting a run.

Each compiled tool shows its description, parameters and required capabilities; a file that did
not compile (or whose name a built-in takes) is listed with its reason, since it is never offered.
A tool needing a capability this machine lacks (``search``: no readable search key; network,
shell and filesystem are always there) is flagged unavailable, with the reason and the fix
(:mod:`lev_nb.settings.capabilities`).
"""

from __future__ import annotations

import argparse
import json
from typing import Any


def add_tools(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``lev tools``."""
    p = subparsers.add_parser(
        "tools", help="list the global Rhai tools ($LEV_HOME/tools/*.rhai)",
        description=("List the Rhai tools in $LEV_HOME/tools, which every agent may use by naming them in "
                     "a stage's available_tools (an agent's own tools/ folder shadows a tool of the same name), "
                     "and the files that were skipped, with the reason."),
    )
    p.add_argument("--json", action="store_true", help="print one JSON object, parameter schemas included")
    p.set_defaults(func=run_tools)


def inventory() -> dict[str, Any]:
    """The global tools folder, its tools and its skipped files, as plain data."""
    from lev_nb.scripting import discover_tools
    from lev_nb.tools.builtin import default_registry
    from lev_nb.tools.scripts import global_tools_dir

    from lev_nb.settings import current
    from lev_nb.settings.capabilities import capability_missing

    folder = global_tools_dir()
    found, skipped = discover_tools([folder], reserved=tuple(default_registry().names()))
    settings = current()
    tools = []
    for tool in sorted(found.values(), key=lambda t: t.name):
        missing = capability_missing(tool.requires, settings)
        tools.append({"name": tool.name, "description": tool.description, "path": str(tool.path),
                      "requires": list(tool.requires), "parameters": tool.parameters_schema,
                      "available": missing is None, "unavailable_reason": missing})
    return {
        "folder": str(folder),
        "tools": tools,
        "skipped": [{"path": str(s.path), "reason": s.reason} for s in skipped],
    }


def run_tools(args: argparse.Namespace) -> int:
    """Print the inventory (text, or JSON with ``--json``)."""
    data = inventory()
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    if not data["tools"] and not data["skipped"]:
        print(f"no global tools: put Rhai tool scripts (*.rhai) in {data['folder']}")
        return 0
    print(f"global tools in {data['folder']}:")
    for tool in data["tools"]:
        params = ", ".join(
            f"{name}{'' if name in tool['parameters'].get('required', []) else '?'}"
            for name in tool["parameters"].get("properties", {})
        )
        requires = f"  [requires {', '.join(tool['requires'])}]" if tool["requires"] else ""
        print(f"  {tool['name']}({params}){requires}: {tool['description']}")
        if not tool["available"]:
            print(f"    unavailable, not offered to any agent: {tool['unavailable_reason']}")
    for skipped in data["skipped"]:
        print(f"  skipped {skipped['path']}: {skipped['reason']}")
    return 0
