"""``lev config``: the effective settings and where each came from; ``lev -c KEY=VALUE`` launch options.

The settings themselves live in :mod:`lev_nb.settings`; this module turns them into terminal text.
``lev config`` lists every key with its value and its source (the file and line, the environment
variable, a session or launch override, or the built-in default); ``--json`` prints the same as one
object; ``lev config path`` (or ``--path``) prints where the file is, whether or not it exists.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

from lev_nb.cli.dispatch import settings_or_none


def add_config(subparsers: argparse._SubParsersAction) -> None:
    """Register ``lev config``."""
    p = subparsers.add_parser(
        "config", help="show the effective settings and where each came from",
        description="Show the effective settings: $LEV_HOME/config.toml under environment variables and "
                    "launch options (lev -c KEY=VALUE), with the source of every value.")
    p.add_argument("action", nargs="?", choices=["show", "path"], default="show",
                   help="show (default): every setting; path: print the configuration file's path")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument("--path", action="store_true", help="print the configuration file's path and stop")
    p.set_defaults(func=run_config)


def run_config(args: argparse.Namespace) -> int:
    """``lev config [path] [--json] [--path]``; returns the exit status."""
    from lev_nb.settings import config_path, rows

    if args.path or args.action == "path":
        print(config_path())
        return 0
    settings = settings_or_none()
    if settings is None:
        return 1
    if args.json:
        data = {
            "path": str(settings.path),
            "exists": settings.file_exists,
            "settings": _hide_keys(settings.to_dict()),
            "sources": {row.key: row.source.to_dict() for row in rows(settings)},
        }
        print(json.dumps(data, indent=2))
        return 0
    state = "" if settings.file_exists else " (not found: built-in defaults apply)"
    print(f"# configuration file: {settings.path}{state}")
    print("# precedence: launch option (-c) > session (lev_nb.configure) > environment > config.toml > default")
    for warning in settings.warnings:  # keys nothing reads, each with why
        print(f"# ignored: {warning}")
    table = [(row.key, _HIDDEN if _is_secret(row.key, row.value) else _render(row.value), str(row.source))
             for row in rows(settings)]
    width = max(len(k) + len(v) for k, v, _ in table) + 3
    for key, value, source in table:
        print(f"{key} = {value}".ljust(width) + f"  # {source}")
    if getattr(args, "verbose", False):
        print(_environment_lines(settings))
    return 0


def _environment_lines(settings: Any) -> str:
    """What ``lev config -v`` adds: each environment variable that sets a key, whether it is set in
    this process, and, when it is, whether its value is the one in effect."""
    import os

    from lev_nb.settings.schema import ENVIRONMENT

    lines = ["# environment variables that set a key (a value is never printed):"]
    for name, key in ENVIRONMENT:
        dotted = ".".join(key)
        if name not in os.environ:
            state = "not set"
        else:
            source = settings.source(dotted)
            state = "set, in effect" if source.kind == "env" and source.env == name else f"set, overridden by {source}"
        lines.append(f"#   {name:<32} -> {dotted}: {state}")
    return "\n".join(lines)


# An API key written into config.toml is never printed: only that one is set.
_HIDDEN = '"(set; hidden)"'


def _is_secret(key: str, value: Any) -> bool:
    return isinstance(value, str) and bool(value) and key.rsplit(".", 1)[-1] == "api_key" or (
        isinstance(value, str) and bool(value) and key.endswith("_api_key"))


def _hide_keys(data: Any, key: str = "") -> Any:
    """``data`` (nested settings) with every API key's value replaced by a marker."""
    if isinstance(data, Mapping):
        return {k: _hide_keys(v, f"{key}.{k}" if key else k) for k, v in data.items()}
    return "(set; hidden)" if _is_secret(key, data) else data


def _render(value: Any) -> str:
    """A value as TOML writes it (unset values show as a comment-friendly ``(unset)``)."""
    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if hasattr(value, "to_table"):  # an [[mcp_servers]] entry
        return _render(value.to_table())
    if isinstance(value, Mapping):
        inner = ", ".join(f"{k} = {_render(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_render(v) for v in value) + "]"
    return repr(value)


def launch_overrides(items: list[str]) -> Any:
    """Parse and check ``-c`` options (a nested override table); raises ConfigError on a bad one."""
    from lev_nb.settings.loader import check_launch, parse_assignments

    overrides = parse_assignments(items)
    check_launch(overrides)
    return overrides
