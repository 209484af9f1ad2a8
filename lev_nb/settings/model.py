"""The typed settings: every key ``config.toml`` accepts, its type, default and environment variable.

The dataclasses here are the one definition of the format. Field names are the TOML keys; a
dataclass is a ``[table]``; ``Mapping[str, X]`` is a table of user-named entries
(``[model_providers.<name>]``, ``[agent_read_paths.<agent>]``, ``[tool_permissions]``...). Each
field's metadata (see :func:`setting`) carries its environment variable, lower bound and a one-line
description; :mod:`lev_nb.settings.schema` reads them, so the loader, ``lev config`` and the docs
cannot drift from the types. Keys the upstream reads the same way (docs/reference/configuration.md)
keep its names and defaults.
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
from lev_nb.secrets import ShellEnv

from .mcp_servers import McpServer

__all__ = [
    "BUILTIN_PROVIDERS",
    "POLICIES",
    "AgentSafeCommands",
    "Limits",
    "ModelCapabilities",
    "McpServer",
    "ModelPrice",
    "EXPORTERS",
    "RateLimit",
    "NotebookDefaults",
    "NudgeDefaults",
    "Observability",
    "Policy",
    "ProviderSettings",
    "Providers",
    "ReadPathGrants",
    "SafeCommands",
    "Security",
    "Settings",
    "SCRIPT_PERMISSIONS",
    "SHELL_KEY",
    "ScriptPermission",
    "Source",
    "ToolScriptPermissions",
    "setting",
]

Policy = Literal["allow", "ask", "deny"]
POLICIES: tuple[str, ...] = ("allow", "ask", "deny")

# Provider names the runtime knows without a script (docs/providers.md).
BUILTIN_PROVIDERS: tuple[str, ...] = ("anthropic", "openai", "google", "openrouter", "ollama", "claude-code", "mock")

_EMPTY: Mapping[str, Any] = MappingProxyType({})

# How a shell entry is keyed among the safe commands (beside the bare tool names).
SHELL_KEY = "shell:"


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
    api_key: str | None = setting(doc="the API key itself (prefer api_key_env: a key in a file is easy to leak)")
    rate_limit: RateLimit = field(default_factory=lambda: RateLimit(), metadata={"doc": "client-side rate limit of this provider"})
    options: Mapping[str, Any] = setting({}, doc="extra settings handed to the provider script's initialize()")
    prices: Mapping[str, ModelPrice] = setting({}, doc="model id -> its rates, over the built-in price table")


@record
class RateLimit:
    """``[rate_limits.<provider>]`` (and ``[model_providers.<name>.rate_limit]``): a client-side
    ceiling on how fast this process calls one provider, enforced before each call."""

    requests_per_minute: int | None = setting(minimum=1, doc="model calls started per minute")
    tokens_per_minute: int | None = setting(minimum=1, doc="estimated prompt + output tokens per minute")


@record
class ModelCapabilities:
    """``[model_capabilities.<model_id>]``: corrections to what the built-in table says of a model;
    a key left out keeps the provider's own value."""

    supports_temperature: bool | None = setting(doc="the model accepts a temperature")
    supports_streaming: bool | None = setting(doc="the model can stream its answer")
    supports_tools: bool | None = setting(doc="the model can call tools (a stage with tools is refused otherwise)")
    supports_system_prompt: bool | None = setting(doc="the model takes a system prompt")
    max_context_tokens: int | None = setting(minimum=1, doc="the context window, in tokens")
    max_output_tokens: int | None = setting(minimum=1, doc="the longest answer, in tokens")


@record
class Providers:
    """``[providers]``: credentials and gateways of the built-in providers (each falls back to its
    environment variable when the provider reads it), and choices across providers
    (docs/providers.md#fallback-and-circuit-breakers)."""

    anthropic_api_key: str | None = setting(doc="Anthropic API key (else ANTHROPIC_API_KEY)")
    openai_api_key: str | None = setting(doc="OpenAI API key (else OPENAI_API_KEY)")
    google_api_key: str | None = setting(doc="Google API key (else GOOGLE_API_KEY); lev_nb has no Google provider yet")
    anthropic_base_url: str | None = setting(doc="Anthropic gateway (else ANTHROPIC_BASE_URL)")
    openai_base_url: str | None = setting(doc="OpenAI gateway (else OPENAI_BASE_URL)")
    google_base_url: str | None = setting(doc="Google gateway (else GOOGLE_BASE_URL)")
    openrouter_base_url: str | None = setting(doc="OpenRouter gateway (else OPENROUTER_BASE_URL)")
    fallback_order: tuple[str, ...] = setting(
        (), doc="provider/model entries every stage may fall back to, in order, after its own list and the default")
    provider_failures_before_open: int = setting(
        3, minimum=0, doc="unusable failures in a row after which a model's calls fail fast (its circuit opens; 0 = never)")
    provider_circuit_cooldown_secs: int = setting(
        300, minimum=0, doc="how long an open circuit fails calls fast before one probe call is let through")


@record
class Limits:
    """``[limits]``: the ceilings every run is bounded by."""

    max_concurrent_inferences: int = setting(
        8, env="LEV_MAX_CONCURRENT_INFERENCES", minimum=1, doc="model calls in flight at once (the inference pool)")
    max_concurrent_inferences_by_model: Mapping[str, int] = setting(
        {}, doc="model id (or provider/model) -> its own pool, in place of max_concurrent_inferences")
    max_concurrent_inferences_by_provider: Mapping[str, int] = setting(
        {}, doc="provider -> a pool shared by every model it serves, held as well as the model's")
    max_tool_call_write_bytes: int | None = setting(
        minimum=1, doc="most bytes one tool call may write (unset: no cap; the free-disk guard always applies)")
    max_run_write_bytes: int | None = setting(
        minimum=1, doc="most bytes a whole run may write (unset: no cap)")
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
    max_agents_per_tree: int = setting(
        100, minimum=0,
        doc="how many sub-agents (spawn_agent) one run and all its descendants may start in all (0 = none)")
    script_http_timeout_secs: int = setting(
        30, minimum=0, doc="timeout of one HTTP call made by a provider script when the stage sets none (0 = none)")
    mcp_call_timeout_secs: int = setting(
        120, minimum=1, doc="how long one MCP tool call may take before it is answered as timed out")
    mcp_connect_timeout_secs: int = setting(
        30, minimum=1, doc="how long an MCP server may take to start and list its tools")
    mcp_max_restarts: int = setting(
        3, minimum=0, doc="how many times a crashed MCP server is started again in one process")


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
    shell_env: str = setting(
        "filtered", doc="what a command an agent runs inherits of this environment: filtered (no "
                        "credential-shaped variable but SSH_AUTH_SOCK), strict, custom or inherit")
    shell_env_withhold: tuple[str, ...] = setting(
        (), doc='the variables shell_env = "custom" withholds (exact names, any case)')
    allowed_workdirs: tuple[str, ...] = setting(
        (), doc="folders a run may work in even when one is your home folder or a filesystem root")
    sandbox_mounts: tuple[str, ...] = setting(
        (), doc="host paths outside the workdir a blueprint's [sandbox] mount may show (read-only; "
                "an entry ending in ':rw' lets it be written too)")


@record
class WebhookDelivery:
    """``[webhook]``: how a completion webhook is delivered (upstream ``configuration.md``)."""

    max_retries: int = setting(3, minimum=0, doc="retries after the first attempt (0: none)")
    base_delay_ms: int = setting(500, minimum=0, doc="the first retry's delay, doubling per retry")
    max_delay_ms: int = setting(30000, minimum=0, doc="the longest delay between two attempts")
    timeout_secs: int = setting(10, minimum=1, doc="one attempt's deadline (connect, send, reply)")


@record
class RunTitles:
    """``[title]``: a short title for each run, made after it starts (upstream ``configuration.md``)."""

    enabled: bool = setting(True, env="LEV_TITLE_ENABLED",
                            doc="give each run a short title (lev ps, lev show, the run view)")
    provider: str | None = setting(doc="the provider that writes titles (unset: the run's first stage's)")
    model: str | None = setting(doc="the model that writes titles (unset: the run's first stage's)")


@record
class MachineSandbox:
    """``[sandbox]``: the machine-wide sandbox every agent's commands run in at least (a blueprint's
    own may be stronger, never weaker; upstream ``configuration.md`` ``[sandbox]``)."""

    kind: str = setting("none", doc="none | namespace | container")
    image: str | None = setting(doc="the container image (kind = \"container\")")
    engine: str | None = setting(doc="podman or docker; found on PATH when unset")
    network: bool = setting(True, doc="let sandboxed commands reach the network")
    mounts: tuple[str, ...] = setting((), doc="host paths shown inside (read-only unless ':rw'); yours, so granted")
    persist: bool = setting(False, doc="keep /tmp between the commands of a run")
    on_unavailable: str = setting("error", doc="error: refuse runs when this machine has no such sandbox; warn: run with less")


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

    tools: tuple[str, ...] = setting((), doc="tools this agent may run without asking")
    shell: tuple[str, ...] = setting((), doc="shell command prefixes this agent may run without asking")
    allow_blueprint: bool = setting(False, doc="honour this agent's own [safe_commands]")


@record
class ReadPathGrants:
    """``[agent_read_paths.<agent>]``: read grants for one agent."""

    allow: tuple[str, ...] = setting((), doc="exact paths, 'glob:' or 'regex:' entries")


@record
class NudgeDefaults:
    """``[nudge]``: machine-wide defaults of the empty-response nudge (stage > agent > this > built-in)."""

    enabled: bool | None = setting(doc="nudge a model that answers with text only (default: on, off for checkpoints)")
    max: int | None = setting(minimum=0, doc="nudges per stage visit (default 3)")
    text: str | None = setting(doc="the nudge's wording; {stage} and {regions} are filled in")


@record
class NotebookDefaults:
    """``[notebook]``: defaults of runs started from a notebook."""

    model: str | None = setting(
        env="LEV_NOTEBOOK_MODEL", doc="model spec of a run that names none: mock, scripted:FILE or provider/model")


# Where `[observability]` sends spans (the upstream's names): OTLP over HTTP/protobuf, one line per
# span on stderr, or nowhere.
EXPORTERS: tuple[str, ...] = ("otlp", "stdout", "none")


@record
class Observability:
    """``[observability]``: every run as an OpenTelemetry trace (the ``lev_nb[otel]`` extra). The
    standard ``OTEL_*`` environment variables fill in what this table leaves out, and a value
    written here beats them (lev_nb.observability.config reads both)."""

    enabled: bool | None = setting(
        doc="trace every run (default: on when this table names an exporter or endpoint, or "
            "OTEL_TRACES_EXPORTER names an exporter; else off)")
    exporter: str | None = setting(
        doc="otlp (OTLP over HTTP/protobuf) | stdout (one line per span on stderr) | none "
            "(default: OTEL_TRACES_EXPORTER, then otlp)")
    endpoint: str | None = setting(
        doc="the collector's OTLP/HTTP address, port 4318 (default: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, "
            "then OTEL_EXPORTER_OTLP_ENDPOINT, then http://localhost:4318)")
    service_name: str | None = setting(doc="service.name of the traces (default: OTEL_SERVICE_NAME, then lev_nb)")


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
    openrouter_api_key: str | None = setting(doc="OpenRouter API key (else OPENROUTER_API_KEY)")
    ollama_base_url: str | None = setting(doc="Ollama server (else OLLAMA_HOST, else http://localhost:11434)")
    model_providers: Mapping[str, ProviderSettings] = setting(
        {}, doc="provider options, OpenAI-compatible servers (base_url) and Rhai provider scripts")
    rate_limits: Mapping[str, RateLimit] = setting({}, doc="provider -> client-side rate limit")
    model_capabilities: Mapping[str, ModelCapabilities] = setting({}, doc="model id -> corrections to its capabilities")
    taint_tracking: bool = setting(
        False, doc="put every run behind the taint gate (a blueprint's [security] can also turn it on)")
    batch_tool_hint: bool = setting(
        True, doc="tell each stage's model it may batch independent tool calls (a stage, then the agent, wins)")
    shell_hint: bool = setting(
        True, doc="describe the shell to a stage offered `shell` where the platform's shell needs it (none does on "
                  "the platforms lev_nb runs on)")
    agent_paths: tuple[str, ...] = setting(
        (), doc="more folders of agents, found by name after $LEV_HOME/agents (`lev list` shows them)")
    providers: Providers = field(default_factory=Providers)
    limits: Limits = field(default_factory=Limits)
    tool_permissions: Mapping[str, Policy] = setting({}, doc="tool -> allow|ask|deny: a ceiling blueprints may only tighten")
    agent_tool_permissions: Mapping[str, Mapping[str, Policy]] = setting(
        {}, doc="per-agent ceilings, replacing [tool_permissions] entries for that agent")
    security: Security = field(default_factory=Security)
    sandbox: MachineSandbox = field(default_factory=MachineSandbox)
    webhook: WebhookDelivery = field(default_factory=WebhookDelivery)
    title: RunTitles = field(default_factory=RunTitles)
    safe_commands: SafeCommands = field(default_factory=SafeCommands)
    tool_script_permissions: ToolScriptPermissions = field(default_factory=ToolScriptPermissions)
    agent_safe_commands: Mapping[str, AgentSafeCommands] = setting({}, doc="per-agent no-prompt commands")
    agent_read_paths: Mapping[str, ReadPathGrants] = setting({}, doc="per-agent read grants outside the workdir")
    nudge: NudgeDefaults = field(default_factory=NudgeDefaults)
    notebook: NotebookDefaults = field(default_factory=NotebookDefaults)
    observability: Observability = field(default_factory=Observability)
    mcp_servers: tuple[McpServer, ...] = setting(
        (), doc="MCP tool servers ([[mcp_servers]] entries: name, transport, command, args, env, url, headers)")

    path: Path | None = field(default=None, compare=False, repr=False, metadata={"internal": True})
    file_exists: bool = field(default=False, compare=False, repr=False, metadata={"internal": True})
    # What the file sets that nothing reads (unknown and upstream-only keys), one sentence each.
    warnings: tuple[str, ...] = field(default=(), compare=False, repr=False, metadata={"internal": True})
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

    def mcp_server(self, name: str) -> McpServer | None:
        """The ``[[mcp_servers]]`` entry called ``name``, or None."""
        return next((s for s in self.mcp_servers if s.name == name), None)

    def shell_env(self) -> ShellEnv:
        """What a command an agent runs inherits (``[security] shell_env``, ``shell_env_withhold``
        and ``allow_env_vars``), for :func:`lev_nb.secrets.child_environment`."""
        sec = self.security
        return ShellEnv(sec.shell_env, tuple(sec.shell_env_withhold), tuple(sec.allow_env_vars))

    def safe_command_entries(self, agent: str, declared_tools: Sequence[str] = (),
                             declared_shell: Sequence[str] = ()) -> tuple[frozenset[str], frozenset[str]]:
        """What runs unasked for ``agent``: (tool names, shell entries). The built-in read-only
        list when ``[safe_commands] defaults``, ``[safe_commands]`` and
        ``[agent_safe_commands.<agent>]``, and the blueprint's own ``declared_*`` entries where
        :meth:`safe_commands_honoured` says they count."""
        memo = self.memo()
        key = ("safe_command_entries", agent, tuple(declared_tools), tuple(declared_shell))
        known = memo.get(key)
        if known is not None:  # every run of an agent asks, and the answer is the configuration's
            return known
        keys = self.safe_command_origins(agent)
        tools = {k for k in keys if not k.startswith(SHELL_KEY)}
        shell = {k[len(SHELL_KEY):] for k in keys if k.startswith(SHELL_KEY)}
        if self.safe_commands_honoured(agent):
            tools.update(t.lower() for t in declared_tools)
            shell.update(e for e in declared_shell if not e.startswith(">"))
        memo[key] = found = (frozenset(tools), frozenset(shell))
        return found

    def safe_command_origins(self, agent: str = "") -> dict[str, tuple[str, Source]]:
        """What runs unasked for ``agent`` by this configuration alone (a blueprint's own block is
        left out: it depends on the blueprint), each key with the layer that put it there and where
        that layer is written: ``"default"`` (the built-in read-only list), ``"config"``
        (``[safe_commands]``) or ``"agent"`` (``[agent_safe_commands.<agent>]``); a narrower layer
        names a key both list. Shell entries are keyed ``shell:<prefix>``, tools by their name."""
        keys: dict[str, tuple[str, Source]] = {}
        if self.safe_commands.defaults:
            origin = ("default", self.source("safe_commands.defaults"))
            keys.update((SHELL_KEY + entry, origin) for entry in sorted(DEFAULT_SAFE_SHELL))
        layers: list[tuple[str, str, SafeCommands | AgentSafeCommands]] = [("config", "safe_commands", self.safe_commands)]
        own = self.agent_safe_commands.get(agent)
        if own is not None:
            layers.append(("agent", f"agent_safe_commands.{agent}", own))
        for layer, table, entries in layers:
            for tool in entries.tools:
                if not tool.lower().startswith(SHELL_KEY):  # a shell entry belongs in `shell`, where it is checked
                    keys[tool.lower()] = (layer, self.source(f"{table}.tools"))
            for entry in entries.shell:
                keys[SHELL_KEY + entry] = (layer, self.source(f"{table}.shell"))
        return keys

    def provider(self, name: str) -> ProviderSettings:
        """The options of provider ``name`` (all defaults when the config says nothing about it)."""
        return self.model_providers.get(name) or _NO_OPTIONS

    def memo(self) -> dict[Any, Any]:
        """Answers worked out from these settings alone, kept with them: settings never change,
        and every run asks the same questions of them (a changed configuration is a new object)."""
        memo: dict[Any, Any] | None = self.__dict__.get("_memo")
        if memo is None:
            memo = {}
            object.__setattr__(self, "_memo", memo)
        return memo

    # -- plain forms ---------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The settings as plain JSON-able data (nested like the TOML file)."""
        return _plain(self)


# What provider() answers for a provider the configuration says nothing about (immutable, so shared).
_NO_OPTIONS = ProviderSettings()


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
