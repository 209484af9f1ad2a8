"""The environment tools: ``system_info``, ``locale_info``, ``environment_info`` and
``which_command`` (``current_time`` lives with the other built-ins; ``runtime_info`` is answered by
the engine, which knows the run).

A model cannot know what machine it runs on nor what the date is; these read the host and change
nothing, so each defaults to ``allow`` and may seed a region (``seed = { tools = [...] }``). Every
answer is a JSON object whose fields are always present (``null`` when the platform cannot say).
``environment_info`` shows environment variables through the same gate a script's ``env_var``
answers to (:func:`lev_nb.secrets.env_var_allowed`): a credential-shaped name is listed under
``withheld_variables`` without its value unless ``[security] allow_env_vars`` names it
(``ToolContext.extra["allow_env_vars"]``), and any known secret value is redacted wherever it shows.
"""

from __future__ import annotations

import json
import locale
import os
import shutil
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

from lev_nb.secrets import child_environment, configured_secrets, env_var_allowed, looks_like_credential, redact
from lev_nb.tools.context import ToolContext
from lev_nb.tools.registry import ToolDef

__all__ = ["environment_tools"]

_OS_NAMES = {"linux": "linux", "darwin": "macos", "win32": "windows", "cygwin": "windows"}
_ARCH_NAMES = {"amd64": "x86_64", "x86_64": "x86_64", "arm64": "aarch64", "aarch64": "aarch64", "i386": "x86", "i686": "x86"}


def _json(value: dict[str, Any]) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def _os_version() -> str | None:
    """The release from /etc/os-release (Linux) or SystemVersion.plist (macOS); None elsewhere."""
    if sys.platform == "darwin":
        import platform  # only here: a first run need not import it

        version = platform.mac_ver()[0]
        return version or None
    try:
        text = Path("/etc/os-release").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    fields = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    value = fields.get("VERSION_ID") or fields.get("PRETTY_NAME") or fields.get("VERSION")
    return value.strip().strip('"') if value else None


async def system_info(ctx: ToolContext, args: dict[str, Any]) -> str:
    """The operating system and its version, architecture, CPUs, hostname, path separator, line
    ending and the free disk space where the run works."""

    def work() -> str:
        try:
            free: int | None = shutil.disk_usage(ctx.workspace.root).free
        except OSError:
            free = None
        return _json({
            "os": _OS_NAMES.get(sys.platform, sys.platform),
            "os_version": _os_version(),
            "arch": _ARCH_NAMES.get(os.uname().machine.lower(), os.uname().machine or None),
            "cpu_count": os.cpu_count(),
            "hostname": socket.gethostname() or None,
            "path_separator": os.sep,
            "line_ending": os.linesep,
            "free_disk_bytes": free,
        })

    return await ctx.blocking(work)


def _bcp47(raw: str | None) -> str | None:
    """``en_US.UTF-8`` -> ``en-US``; None for no locale or the C/POSIX one."""
    if not raw:
        return None
    tag = raw.split(".", 1)[0].split("@", 1)[0]
    if tag in ("C", "POSIX", ""):
        return None
    return tag.replace("_", "-")


async def locale_info(ctx: ToolContext, args: dict[str, Any]) -> str:
    """The user's language and region as a BCP-47 tag (``en-US``)."""
    raw = next((os.environ[name] for name in ("LC_ALL", "LC_MESSAGES", "LANG") if os.environ.get(name)), None)
    if raw is None:
        raw = locale.getlocale()[0]
    tag = _bcp47(raw)
    parts = tag.split("-") if tag else []
    return _json({
        "locale": tag,
        "language": parts[0].lower() if parts else None,
        "region": parts[1].upper() if len(parts) > 1 else None,
    })


def _config_and_data_dirs(home: Path | None) -> tuple[str | None, str | None]:
    if sys.platform == "darwin" and home is not None:
        support = str(home / "Library" / "Application Support")
        return support, support
    if sys.platform == "win32":
        return os.environ.get("APPDATA"), os.environ.get("LOCALAPPDATA")
    config = os.environ.get("XDG_CONFIG_HOME") or (str(home / ".config") if home is not None else None)
    data = os.environ.get("XDG_DATA_HOME") or (str(home / ".local" / "share") if home is not None else None)
    return config, data


async def environment_info(ctx: ToolContext, args: dict[str, Any]) -> str:
    """The working, home, temporary, config and data directories, the ``PATH`` entries, and the
    environment variables this agent may see (credential-shaped ones withheld by name)."""
    allowed = tuple(ctx.extra.get("allow_env_vars") or ())
    try:
        home: Path | None = Path.home()
    except (RuntimeError, KeyError):
        home = None
    config, data = _config_and_data_dirs(home)
    visible: dict[str, str] = {}
    withheld: list[str] = []
    # The values the user handed over (allow_env_vars) show; every other secret is redacted.
    handed = {os.environ[name] for name in os.environ if looks_like_credential(name) and env_var_allowed(name, allowed)}
    secrets = tuple(secret for secret in configured_secrets() if secret not in handed)
    for name in sorted(os.environ):
        if env_var_allowed(name, allowed):
            visible[name] = redact(os.environ[name], secrets)
        else:
            withheld.append(name)
    path = child_environment().get("PATH", "")
    return _json({
        "working_directory": str(ctx.workspace.root),
        "home_dir": str(home) if home is not None else None,
        "temp_dir": tempfile.gettempdir(),
        "config_dir": config,
        "data_dir": data,
        "path": [entry for entry in path.split(os.pathsep) if entry],
        "variables": visible,
        "withheld_variables": withheld,
    })


async def which_command(ctx: ToolContext, args: dict[str, Any]) -> str:
    """Whether a program is installed and where, looked up on ``PATH`` without running it."""
    name = str(args.get("command", "")).strip()
    if not name or os.sep in name or (os.altsep and os.altsep in name):
        return "[error] which_command: 'command' must be a program name (no path), such as git."
    found = await ctx.blocking(shutil.which, name, os.X_OK, child_environment().get("PATH", ""))
    return _json({"command": name, "found": found is not None, "path": found})


def _no_args() -> dict[str, Any]:
    return {"type": "object", "properties": {}}


def environment_tools() -> list[ToolDef]:
    """The environment ToolDefs (read-only, allowed by default)."""
    return [
        ToolDef("system_info", "The operating system and its version, CPU architecture and count, hostname, "
                "path separator, line ending, and free disk space in the working directory (JSON).",
                _no_args(), system_info, readonly=True, default_policy="allow"),
        ToolDef("locale_info", "The user's language and region as a BCP-47 tag such as en-US (JSON).",
                _no_args(), locale_info, readonly=True, default_policy="allow"),
        ToolDef("environment_info", "The working, home, temporary, config and data directories, the PATH "
                "entries, and the environment variables you may see; credential-shaped ones are listed under "
                "withheld_variables without their values (JSON).",
                _no_args(), environment_info, readonly=True, default_policy="allow"),
        ToolDef("which_command", "Whether a program is installed and where, looked up on PATH without "
                "running it, as `which` would (JSON).",
                {"type": "object", "properties": {"command": {"type": "string", "description": "The program's name, such as git."}},
                 "required": ["command"]},
                which_command, readonly=True, default_policy="allow"),
    ]
