"""``$LEV_HOME/policy.toml``: the taint gate's static allowlist and its per-tool reclassifications
(upstream configuration.md ``policy.toml``; the upstream keeps it beside its config, lev_nb beside
``config.toml`` in ``$LEV_HOME``). Scripted rules live in ``$LEV_HOME/rules/*.rhai`` (:mod:`.rules`).

The file::

    [[allowlist]]
    tool            = "http_post"
    to              = ["https://hooks.internal/*"]   # or channel = [...]; neither: any target
    max_sensitivity = "internal"                     # public | internal | private

    [mcp_overrides."github.create_issue"]            # a tool's own classification, field by field
    sensitivity = "internal"
    direction   = "outbound"                          # inbound | internal | outbound
    clearance   = "internal"

    [mcp_overrides."my-server".tools]                # the same, grouped by server
    read_customer_data = { sensitivity = "private" }

An override keyed ``server.tool`` applies to lev_nb's MCP tool ``server__tool`` too. A pattern is
``*`` (anything), ``*suffix``, ``prefix*`` or an exact value. Every label and direction is checked:
a wrong one is a :class:`PolicyError` naming the file and the key, never a silent default.
"""

from __future__ import annotations

import json
import os
import tempfile
import tomllib
from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from typing import Any

from lev_nb.errors import CleanError, Problem
from lev_nb.records import record
from lev_nb.settings.paths import lev_home

from .levels import DIRECTIONS, LEVELS, ToolClass, is_level

__all__ = [
    "POLICY_FILE", "RULES_DIR", "AllowRule", "Override", "Policy", "PolicyError",
    "add_rule", "load_policy", "pattern_matches", "policy_path", "rules_dir",
]

POLICY_FILE = "policy.toml"
RULES_DIR = "rules"
MAX_POLICY_BYTES = 1 << 20


def policy_path() -> Path:
    """``$LEV_HOME/policy.toml`` (read at call time)."""
    return lev_home() / POLICY_FILE


def rules_dir() -> Path:
    """``$LEV_HOME/rules``: the scripted rules (read at call time)."""
    return lev_home() / RULES_DIR


class PolicyError(CleanError, ValueError):
    """A policy file lev_nb cannot use: ``where`` is the file and key path."""

    def __init__(self, message: str, where: str, todo: str | None = None) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where
        self.todo = todo or "fix it, or move the file aside; `lev policy list` shows what is read"

    def problem(self) -> Problem:
        return Problem(str(self), None, self.todo)


def pattern_matches(pattern: str, value: str) -> bool:
    """Whether ``value`` fits ``pattern``: ``*``, ``*suffix``, ``prefix*`` or exactly."""
    if pattern == "*":
        return True
    if pattern.startswith("*"):
        return value.endswith(pattern[1:])
    if pattern.endswith("*"):
        return value.startswith(pattern[:-1])
    return pattern == value


@record
class AllowRule:
    """One ``[[allowlist]]`` entry."""

    tool: str
    max_sensitivity: str = "public"
    to: tuple[str, ...] = ()
    channel: tuple[str, ...] = ()

    @property
    def patterns(self) -> tuple[str, ...]:
        """Every target pattern (``to`` then ``channel``)."""
        return self.to + self.channel

    def matches(self, tool: str, destinations: list[tuple[str, ...]], level: str) -> bool:
        """Whether this rule lets ``tool`` carry data at ``level`` to every one of ``destinations``
        (each destination: its spellings, e.g. a URL and its host). A rule with patterns needs at
        least one destination, and each must fit a pattern."""
        from .levels import rank

        if tool != self.tool or rank(level) > rank(self.max_sensitivity):
            return False
        if not self.patterns:
            return True
        return bool(destinations) and all(
            any(pattern_matches(p, spelling) for p in self.patterns for spelling in dest)
            for dest in destinations
        )

    def describe(self) -> str:
        """One line: tool, ceiling and targets."""
        targets = ", ".join(self.patterns) if self.patterns else "(any target)"
        return f"{self.tool} [max: {self.max_sensitivity}] -> {targets}"


@record
class Override:
    """A tool's classification as ``[mcp_overrides]`` sets it (None: keep the built-in value)."""

    sensitivity: str | None = None
    direction: str | None = None
    clearance: str | None = None

    def apply(self, base: ToolClass) -> ToolClass:
        """``base`` with the fields this override sets."""
        return ToolClass(self.sensitivity or base.sensitivity, self.direction or base.direction,
                         self.clearance or base.clearance)

    def describe(self) -> str:
        """``sensitivity=..., direction=...`` for the fields set."""
        parts = [f"{k}={v}" for k, v in self.__dict__.items() if v is not None]
        return ", ".join(parts) or "(nothing set)"


@record
class Policy:
    """The parsed policy file (empty when there is none)."""

    allowlist: tuple[AllowRule, ...] = ()
    overrides: Mapping[str, Override] = field(default_factory=dict)
    path: Path | None = None

    def override_for(self, tool: str) -> Override | None:
        """The override naming ``tool`` (``server.tool`` also names the MCP tool ``server__tool``)."""
        found = self.overrides.get(tool)
        if found is None and "__" in tool:
            server, _, name = tool.partition("__")
            found = self.overrides.get(f"{server}.{name}")
        return found

    def allowing_rule(self, tool: str, destinations: list[tuple[str, ...]], level: str) -> int | None:
        """The index of the first allowlist rule that allows the call, or None."""
        for i, rule in enumerate(self.allowlist):
            if rule.matches(tool, destinations, level):
                return i
        return None


def load_policy(path: Path | None = None) -> Policy:
    """Read ``path`` (default :func:`policy_path`); no file is an empty policy.

    Raises :class:`PolicyError` for a file that cannot be read, is not TOML, or sets a key wrongly."""
    path = path if path is not None else policy_path()
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return Policy(path=path)
    except OSError as exc:
        raise PolicyError(f"cannot read the policy file: {exc.strerror or exc}", str(path)) from exc
    if size > MAX_POLICY_BYTES:
        raise PolicyError(f"the policy file is {size} bytes, more than the {MAX_POLICY_BYTES} a policy may be",
                          str(path))
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError(f"cannot read the policy file: {exc}", str(path)) from exc
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"not valid TOML: {exc}", str(path)) from exc
    except RecursionError as exc:
        raise PolicyError("the TOML nests too deeply to read", str(path)) from exc
    return parse_policy(data, str(path), path)


def parse_policy(data: Mapping[str, Any], where: str, path: Path | None = None) -> Policy:
    """A :class:`Policy` from parsed TOML (``where`` names the file in errors)."""
    for key in data:
        if key not in ("allowlist", "mcp_overrides"):
            raise PolicyError(f"unknown key '{key}' (a policy file has [[allowlist]] and [mcp_overrides])",
                              f"{where}: {key}")
    raw_rules = data.get("allowlist", [])
    if not isinstance(raw_rules, list):
        raise PolicyError("must be an array of tables ([[allowlist]])", f"{where}: allowlist")
    rules = tuple(_rule(raw, f"{where}: allowlist[{i}]") for i, raw in enumerate(raw_rules))
    raw_over = data.get("mcp_overrides", {})
    if not isinstance(raw_over, dict):
        raise PolicyError("must be a table", f"{where}: mcp_overrides")
    overrides: dict[str, Override] = {}
    for key, value in raw_over.items():
        at = f"{where}: mcp_overrides.{key}"
        if not isinstance(value, dict):
            raise PolicyError("must be a table", at)
        if "tools" in value and isinstance(value["tools"], dict):
            extra = [k for k in value if k != "tools"]
            if extra:
                raise PolicyError(f"unknown key '{extra[0]}' beside 'tools'", f"{at}.{extra[0]}")
            for tool, fields in value["tools"].items():
                overrides[f"{key}.{tool}"] = _override(fields, f"{at}.tools.{tool}")
        else:
            overrides[key] = _override(value, at)
    return Policy(rules, overrides, path)


def _labels(value: Any, at: str, allowed: tuple[str, ...], what: str) -> str:
    if not isinstance(value, str) or value.lower() not in allowed:
        raise PolicyError(f"{value!r} is not a {what} (one of {', '.join(allowed)})", at)
    return value.lower()


def _strings(value: Any, at: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PolicyError("must be a list of strings", at)
    return tuple(value)


def _rule(raw: Any, at: str) -> AllowRule:
    if not isinstance(raw, dict):
        raise PolicyError("must be a table", at)
    for key in raw:
        if key not in ("tool", "to", "channel", "max_sensitivity"):
            raise PolicyError(f"unknown key '{key}' (a rule has tool, to, channel, max_sensitivity)", f"{at}.{key}")
    tool = raw.get("tool")
    if not isinstance(tool, str) or not tool:
        raise PolicyError("a rule needs the tool it allows (tool = \"name\")", f"{at}.tool")
    level = _labels(raw.get("max_sensitivity", "public"), f"{at}.max_sensitivity", LEVELS, "sensitivity label")
    return AllowRule(tool, level, _strings(raw.get("to", []), f"{at}.to"),
                     _strings(raw.get("channel", []), f"{at}.channel"))


def _override(raw: Any, at: str) -> Override:
    if not isinstance(raw, dict):
        raise PolicyError("must be a table (sensitivity, direction, clearance)", at)
    for key in raw:
        if key not in ("sensitivity", "direction", "clearance"):
            raise PolicyError(f"unknown key '{key}' (an override has sensitivity, direction, clearance)",
                              f"{at}.{key}")
    out: dict[str, str] = {}
    for key, allowed, what in (("sensitivity", LEVELS, "sensitivity label"), ("direction", DIRECTIONS, "direction"),
                               ("clearance", LEVELS, "sensitivity label")):
        if key in raw:
            out[key] = _labels(raw[key], f"{at}.{key}", allowed, what)
    return Override(**out)


def add_rule(tool: str, max_sensitivity: str = "internal", target: str | None = None,
             path: Path | None = None) -> tuple[AllowRule, Path]:
    """Append an allowlist rule to the policy file (created if missing; comments kept), written
    atomically; the file must read back as a valid policy first. Returns the rule and the file."""
    path = path if path is not None else policy_path()
    if not is_level(max_sensitivity):
        raise PolicyError(f"{max_sensitivity!r} is not a sensitivity label (one of {', '.join(LEVELS)})",
                          "--max-sensitivity")
    if not tool:
        raise PolicyError("say which tool the rule allows", "TOOL")
    load_policy(path)  # a broken file is reported, not appended to
    try:
        old = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        old = ""
    # A TOML basic string takes JSON's escapes; ASCII-only leaves no raw character TOML refuses.
    lines = ["[[allowlist]]", f"tool = {json.dumps(tool)}"]
    if target is not None:
        lines.append(f"to = [{json.dumps(target)}]")
    lines.append(f"max_sensitivity = {json.dumps(max_sensitivity)}")
    block = "\n".join(lines) + "\n"
    text = old + ("\n" if old and not old.endswith("\n") else "") + ("\n" if old.strip() else "") + block
    parse_policy(tomllib.loads(text), str(path), path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".policy-", suffix=".toml", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return AllowRule(tool, max_sensitivity, (target,) if target is not None else ()), path
