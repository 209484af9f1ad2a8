"""The typed settings: every key ``config.toml`` accepts, its type, default and environment variable.

The dataclasses here are the one definition of the format. Field names are the TOML keys; a
dataclass is a ``[table]``; ``Mapping[str, X]`` is a table of user-named entries
(``[model_providers.<name>]``, ``[agent_read_paths.<agent>]``, ``[tool_permissions]``...). Each
field's metadata (see :func:`setting`) carries its environment variable, lower bound and a one-line
description; :mod:`lev_nb.settings.schema` reads them, so the loader, ``lev config`` and the docs
cannot drift from the types. Keys the upstream reads the same way (spec/blueprint.md §3,
spec/runtime.md) keep its names and defaults.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from lev_nb.blueprint.constants import DEFAULT_MAX_CHILD_DEPTH, DEFAULT_SAFE_SHELL
from lev_nb.records import record

__all__ = [
    "BUILTIN_PROVIDERS",
    "POLICIES",
    "AgentSafeCommands",
    "Limits",
    "ModelPrice",
    "NotebookDefaults",
    "NudgeDefaults",
    "Policy",
    "ProviderSettings",
    "Providers",
    "ReadPathGrants",
    "SafeCommands",
    "Security",
    "Settings",
    "SCRIPT_PERMISSIONS",
    "ScriptPermission",
    "Source",
    "ToolScriptPermissions",
    "setting",
]

Policy = Literal["allow", "ask", "deny"]
POLICIES: tuple[str, ...] = ("allow", "ask", "deny")

# Provider names the runtime knows without a script (spec/blueprint.md §3 `[providers]`).
BUILTIN_PROVIDERS: tuple[str, ...] = ("anthropic", "openai", "google", "openrouter", "ollama", "claude-code", "mock")

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def setting(default: Any = None, *, env: str | None = None, minimum: int | None = None, doc: str = "") -> Any:
    """A dataclass field that is a configuration key: its default, environment variable, lower bound, doc."""
    meta = {"env": env, "minimum": minimum, "doc": doc}
    if isinstance(default, (dict, Mapping)):
        return field(default_factory=lambda: _EMPTY, metadata=meta)
    return field(default=default, metadata=meta)


@record
class Source:
    """Where an effective value came from.

    ``kind``: "default" (built in), "file" (``path``:``line``), "env" (``env`` names the variable),
    "session" (``lev_nb.configure``) or "launch" (a ``lev -c KEY=VALUE`` option).
    """

    kind: Literal["default", "file", "env", "session", "launch"]
    path: Path | None = None
    line: int | None = None
    env: str | None = None

    def __str__(self) -> str:
        if self.kind == "file":
            return f"{self.path}:{self.line}" if self.line is not None else str(self.path)
        if self.kind == "env":
            return f"env {self.env}"
        if self.kind == "session":
            return "session (lev_nb.configure)"
        if self.kind == "launch":
            return "launch option (-c)"
        return "default"

    def to_dict(self) -> dict[str, Any]:
        """The JSON form ``lev config --json`` prints."""
        out: dict[str, Any] = {"kind": self.kind, "label": str(self)}
        if self.path is not None:
            out["path"] = str(self.path)
        if self.line is not None:
            out["line"] = self.line
        if self.env is not None:
            out["env"] = self.env
        return out


@record
class ModelPrice:
    """``[model_providers.<name>.prices.<model>]``: what one model charges, in USD per million tokens.

    Over the package's own dated table (lev_nb.providers.pricing); a cache rate left out bills
    like fresh input.
    """

    input_per_mtok: float = setting(0.0, doc="fresh input tokens")
    output_per_mtok: float = setting(0.0, doc="output tokens")
    cached_input_per_mtok: float | None = setting(doc="input read from the prompt cache (default: the input rate)")
    cache_write_per_mtok: float | None = setting(doc="input written to the prompt cache (default: the input rate)")


@record
class ProviderSettings:
    """``[model_providers.<name>]``: options of a built-in provider, or a Rhai provider script by name."""

    base_url: str | None = setting(doc="the API endpoint (a local proxy, a compatible server)")
    api_key_env: str | None = setting(doc="the environment variable that holds the API key")
    request_timeout_secs: int | None = setting(minimum=1, doc="per-request timeout for this provider")
    script: str | None = setting(doc="Rhai provider script (default $LEV_HOME/providers/<name>.rhai); not for built-ins")
    options: Mapping[str, Any] = setting({}, doc="extra settings handed to the provider script's initialize()")
    prices: Mapping[str, ModelPrice] = setting({}, doc="model id -> its rates, over the built-in price table")


@record
class Providers:
    """``[providers]``: choices across providers (spec/runtime.md §13.3)."""

    fallback_order: tuple[str, ...] = setting(
        (), doc="provider/model entries every stage may fall back to, in order, after its own list and the default")
    provider_failures_before_open: int = setting(
        3, minimum=1, doc="unusable failures in a row after which a model's calls fail fast (its circuit opens)")
    provider_circuit_cooldown_secs: int = setting(
        300, minimum=0, doc="how long an open circuit fails calls fast before one probe call is let through")


@record
class Limits:
    """``[limits]``: the ceilings every run is bounded by."""

    max_concurrent_inferences: int = setting(
        8, env="LEV_MAX_CONCURRENT_INFERENCES", minimum=1, doc="model calls in flight at once (the inference pool)")
    max_concurrent_tools: int = setting(
        8, env="LEV_MAX_CONCURRENT_TOOLS", minimum=1, doc="tool calls running at once (the tool pool)")
    default_max_iterations: int = setting(
        50, env="LEV_DEFAULT_MAX_ITERATIONS", minimum=0,
        doc="max_iterations of a stage that sets none (0 = unlimited)")
    interaction_timeout_secs: int = setting(
        3600, env="LEV_INTERACTION_TIMEOUT_SECS", minimum=0,
        doc="how long a question to a person may go unanswered (0 = forever)")
    request_timeout_secs: int = setting(
        900, env="LEV_REQUEST_TIMEOUT_SECS", minimum=1,
        doc="per-request model timeout; a stage's model.request_timeout_secs wins")
    stall_timeout_secs: int = setting(
        60, minimum=0, doc="how long a run whose every model fails fast (open circuits) waits for one before it pauses (0 = pause at once)")
    inference_retry_attempts: int = setting(
        4, env="LEV_INFERENCE_RETRY_ATTEMPTS", minimum=1,
        doc="tries of a model call, the first included, on transient errors")
    inference_retry_base_ms: int = setting(1000, minimum=0, doc="first retry delay in ms, doubling each retry")
    max_child_depth: int = setting(
        DEFAULT_MAX_CHILD_DEPTH, minimum=0,
        doc="how deep sub-agents may nest when neither the blueprint nor the launch says (0 = none)")
    script_http_timeout_secs: int = setting(
        30, minimum=0, doc="timeout of one HTTP call made by a provider script when the stage sets none (0 = none)")


@record
class Security:
    """``[security]``: what a downloaded blueprint may do on this machine (declaring is not granting)."""

    allow_seed_commands: bool = setting(True, doc="let `seed = { command = ... }` regions run at spawn")
    allow_blueprint_read_paths: bool = setting(False, doc="honour every blueprint's [read_paths] as declared")
    allow_blueprint_safe_commands: bool = setting(False, doc="honour every blueprint's [safe_commands]")
    allow_blueprint_permissions: bool = setting(
        False, doc="let a blueprint's [tool_permissions] go above the built-in defaults")
    read_paths: tuple[str, ...] = setting((), doc="read grants for any agent that declares them")
    allow_env_vars: tuple[str, ...] = setting(
        (), doc="credential-shaped environment variables scripts may read (exact names, any case)")
    allow_local_network: bool = setting(
        False, doc="let script HTTP reach loopback, private and link-local addresses (off: public only)")


@record
class SafeCommands:
    """``[safe_commands]``: calls that never need approval, for every agent."""

    defaults: bool = setting(True, doc="include the built-in read-only shell commands")
    tools: tuple[str, ...] = setting((), doc="tool names approved without a prompt")
    shell: tuple[str, ...] = setting((), doc="shell prefixes approved without a prompt ('cargo test', 'rg')")


ScriptPermission = Literal["allow", "deny", "inherit"]
SCRIPT_PERMISSIONS: tuple[str, ...] = ("allow", "deny", "inherit")


@record
class ToolScriptPermissions:
    """``[tool_script_permissions]``: what a Rhai tool script may do inside, per host function.

    ``inherit`` defers ``shell`` and ``read_file`` to the agent's own policy for that built-in tool
    (permitted only when it resolves to ``allow``) and permits ``write_file`` (confined to the
    workdir), ``http_get``, ``http_post`` and ``env_var``; ``allow`` and ``deny`` decide outright.
    """

    http_get: ScriptPermission = setting("inherit", doc="a tool script's http_get: allow | deny | inherit")
    http_post: ScriptPermission = setting("inherit", doc="a tool script's http_post: allow | deny | inherit")
    shell: ScriptPermission = setting("inherit", doc="a tool script's shell(): inherit = the shell tool is allowed")
    read_file: ScriptPermission = setting("inherit", doc="a tool script's read_file(): inherit = read_file is allowed")
    write_file: ScriptPermission = setting("inherit", doc="a tool script's write_file(): allow | deny | inherit (permitted, in the workdir)")
    env_var: ScriptPermission = setting("inherit", doc="a tool script's env_var(): allow | deny | inherit")


@record
class AgentSafeCommands:
    """``[agent_safe_commands.<agent>]``: safe commands for one agent."""

    tools: tuple[str, ...] = setting(())
    shell: tuple[str, ...] = setting(())
    allow_blueprint: bool = setting(False, doc="honour this agent's own [safe_commands]")


@record
class ReadPathGrants:
    """``[agent_read_paths.<agent>]``: read grants for one agent."""

    allow: tuple[str, ...] = setting((), doc="exact paths, 'glob:' or 'regex:' entries")


@record
class NudgeDefaults:
    """``[nudge]``: machine-wide defaults of the empty-response nudge (stage > agent > this > built-in)."""

    enabled: bool | None = setting()
    max: int | None = setting(minimum=0)
    text: str | None = setting()


@record
class NotebookDefaults:
    """``[notebook]``: defaults of runs started from a notebook."""

    model: str | None = setting(
        env="LEV_NOTEBOOK_MODEL", doc="model spec of a run that names none: mock, scripted:FILE or provider/model")


@record
class Settings:
    """The effective configuration: ``config.toml`` under environment variables and overrides.

    Read a value as an attribute (``settings.limits.max_concurrent_inferences``) and where it came
    from with :meth:`source` (``settings.source("limits.max_concurrent_inferences")``).
    """

    default_provider: str = setting(
        "anthropic", env="LEV_DEFAULT_PROVIDER", doc="provider of a stage that names no model")
    default_model: str | None = setting(
        env="LEV_DEFAULT_MODEL", doc="model id on default_provider, tried first where a stage allows it")
    model_providers: Mapping[str, ProviderSettings] = setting({}, doc="provider options and Rhai provider scripts")
    providers: Providers = field(default_factory=Providers)
    limits: Limits = field(default_factory=Limits)
    tool_permissions: Mapping[str, Policy] = setting({}, doc="tool -> allow|ask|deny: a ceiling blueprints may only tighten")
    agent_tool_permissions: Mapping[str, Mapping[str, Policy]] = setting(
        {}, doc="per-agent ceilings, replacing [tool_permissions] entries for that agent")
    security: Security = field(default_factory=Security)
    safe_commands: SafeCommands = field(default_factory=SafeCommands)
    tool_script_permissions: ToolScriptPermissions = field(default_factory=ToolScriptPermissions)
    agent_safe_commands: Mapping[str, AgentSafeCommands] = setting({})
    agent_read_paths: Mapping[str, ReadPathGrants] = setting({})
    nudge: NudgeDefaults = field(default_factory=NudgeDefaults)
    notebook: NotebookDefaults = field(default_factory=NotebookDefaults)

    path: Path | None = field(default=None, compare=False, repr=False, metadata={"internal": True})
    file_exists: bool = field(default=False, compare=False, repr=False, metadata={"internal": True})
    sources: Mapping[str, Source] = field(default_factory=lambda: _EMPTY, compare=False, repr=False,
                                          metadata={"internal": True})

    # -- provenance ----------------------------------------------------------------------------
    def source(self, key: str) -> Source:
        """Where the value of dotted ``key`` came from (``"default"`` for a key nobody set)."""
        return self.sources.get(key, Source("default"))

    # -- what the runtime asks -----------------------------------------------------------------
    def tool_ceiling(self, agent: str) -> dict[str, str]:
        """The permission ceiling for ``agent``: ``[tool_permissions]`` with its per-agent entries over it."""
        merged: dict[str, str] = dict(self.tool_permissions)
        merged.update(self.agent_tool_permissions.get(agent, {}))
        return merged

    def read_path_grants(self, agent: str) -> list[str]:
        """Every read grant that applies to ``agent``: ``[security] read_paths`` then its own entries."""
        grants = list(self.security.read_paths)
        own = self.agent_read_paths.get(agent)
        if own is not None:
            grants.extend(own.allow)
        return grants

    def safe_commands_honoured(self, agent: str) -> bool:
        """Whether ``agent``'s own ``[safe_commands]`` counts on this machine."""
        own = self.agent_safe_commands.get(agent)
        return self.security.allow_blueprint_safe_commands or (own is not None and own.allow_blueprint)

    def safe_command_entries(self, agent: str, declared_tools: Sequence[str] = (),
                             declared_shell: Sequence[str] = ()) -> tuple[frozenset[str], frozenset[str]]:
        """What runs unasked for ``agent``: (tool names, shell entries). The built-in read-only
        list when ``[safe_commands] defaults``, ``[safe_commands]`` and
        ``[agent_safe_commands.<agent>]``, and the blueprint's own ``declared_*`` entries where
        :meth:`safe_commands_honoured` says they count."""
        tools = {t.lower() for t in self.safe_commands.tools}
        shell = set(DEFAULT_SAFE_SHELL) if self.safe_commands.defaults else set()
        shell.update(self.safe_commands.shell)
        own = self.agent_safe_commands.get(agent)
        if own is not None:
            tools.update(t.lower() for t in own.tools)
            shell.update(own.shell)
        if self.safe_commands_honoured(agent):
            tools.update(t.lower() for t in declared_tools)
            shell.update(e for e in declared_shell if not e.startswith(">"))
        return frozenset(tools), frozenset(shell)

    def provider(self, name: str) -> ProviderSettings:
        """The options of provider ``name`` (all defaults when the config says nothing about it)."""
        return self.model_providers.get(name) or ProviderSettings()

    # -- plain forms ---------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The settings as plain JSON-able data (nested like the TOML file)."""
        return _plain(self)


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _plain(getattr(value, f.name))
            for f in dataclasses.fields(value) if not f.metadata.get("internal")
        }
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value
