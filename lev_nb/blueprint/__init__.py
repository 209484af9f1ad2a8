"""The blueprint format: model, loading, validation and lints (docs/reference/blueprint.md).

Public API (stable; the run engine and the graph build on it)
-------------------------------------------------------------
Loading
    ``load(path_or_text) -> Blueprint``      agent folder, its agent.leviath, or TOML text
    ``load_text(text, path=None) -> Blueprint``
    ``resolve_manifest(path) -> Path``       PATH itself if a file, else PATH/agent.leviath
    ``BlueprintError(ValueError)``           .message .path .key_path .line .column .hint .kind
                                             (kind: "read" | "parse" | "validation")
Validation (the format's half; :func:`lev_nb.scripting.checks.validate` adds the script compile
checks, and ``lev_nb.validate`` = :func:`lev_nb.verdict.validate` the install's, which is what
``lev validate`` reports)
    ``pipeline.validate_source(path_or_blueprint, *, deny_warnings=False, env=None, checks=())``
    ``pipeline.validate_blueprint(bp, ...)``  -> Report; ``checks`` run after the lints
    ``check(bp)``                            raises BlueprintError(kind="validation")
    ``Report``  .valid .findings .errors .warnings .notes .error ("parse error: ..." /
                "validation failed: ...") .exception (the BlueprintError) .blueprint .codes
                .by_code(code) .to_json() .to_dict() (the --json object) .failure_line()
    ``Finding`` .code .severity ("error"|"warning"|"note") .stage .message .fix
    ``LintEnv`` known_tools, known_models, model_windows, available_providers (None = unknown),
                read_path_granted, read_paths_allow_blueprint, read_paths_grant_error,
                safe_commands_honoured; ``LintEnv.for_blueprint(bp)`` is the environment with the
                user's configuration unknown (see lints.py; ``lev_nb.settings.lint_env`` fills the
                config-dependent fields); ``lints.ALL_CODES`` lists the codes (the upstream's, and
                lev_nb's own such as ``unknown-key`` and ``output-format-typo``)
Read paths (``read_paths``: the ``[read_paths]`` entry forms, shared with the user's grants)
    ``compile_entry(raw, workdir, home)``, ``ReadPathSet.compile(...)``, ``.matches_lexically(path)``,
    ``ReadPathEntry.sample_path()``, ``ReadPathError``
    ``extra_checks``: list of ``Callable[[Blueprint], list[Finding]]`` run by every validation
        after the lints and the given checks (a hook point for users)
Script tools (``script_tools``: the one reader of ``// @tool`` annotations and tool manifests)
    ``script_tool_names(agent_dir)``; ``script_tools.scan_tools(agent_dir)``, ``tool_spec(path)``

Model (immutable tables, lev_nb.blueprint.table; field names are the TOML keys)
    ``Blueprint``: .agent (AgentInfo) .stages (dict name -> Stage, declaration order)
        .context (ContextConfig: .regions dict, .file_tracking) .tool_permissions (dict tool->policy)
        .security .sandbox .read_paths .safe_commands .compaction .repetition_detection
        (each None when absent) .transforms (list[TransformSpec])
        .name .stage_names .entry_stage (effective) .is_graph_mode .terminal_stages
        .is_terminal(name) .next_stage(name) .output_stages .global_layout
        .layout_for(stage) .visible_regions(stage) .known_regions .inputs (list[CallerInput])
        .accepts_task .raw .source_path .source_text .base_dir .to_toml()
    ``AgentInfo``: name version description entry_stage max_child_depth dynamic_tools
        batch_tool_hint shell_hint nudge (Nudge|None) output (OutputSpec|None)
    ``Stage``: .name .mode .description .system_prompt .model (ModelSpec) .models
        .available_tools (mode sugar applied) .effective_tools .available_connectors
        .required_tools .max_iterations .max_revisits .transition_prompt .allow_complete
        .requires_children .allow_as_worker .accepts_messages .allow_blocking_tools
        .require_output .output .nudge .hooks (Hooks|None) .tool_permissions .tool_routing
        .context (StageContext|None) .own_layout .sandbox .security .batch_tool_hint .shell_hint
        .transitions (dict target -> Edge, or None when the key is absent; {} = terminal)
        .has_transitions .is_explicit_terminal .edges .normal_edges .edges_with(cond)
        .interaction_points (list[InteractionPoint]) .worker_agent .worker_stage .worker_query
        .worker_target .merge_stage .split_prompt .results_region .max_workers .max_items
        .max_attempts .on_worker_failure
    ``Edge``: .target .condition .hint .transform .transform_kind .transform_config
        (TransformConfig|None: carry compact clear compact_prompt) .gate (Gate|None)
        .stuck_after_iterations/_minutes/_same_file_edits/_tool_calls .stuck_thresholds .is_normal
    ``Gate``: require_modifications require_regions require_region_updated
        require_no_open_items message region tools max_attempts .attempts
    ``ModelSpec``: .models (list[ModelRef], never empty) .primary provider model fallbacks
        allow_user_default request_timeout_secs parameters; ``ModelRef``: provider model .spec
    ``Region``: .name .kind budget max_tokens min_tokens required required_message summarizable
        description describe_in_prompt volatility admission seed (Seed|None) max_items strategy
        overflow compact_count compact_at threshold_tokens source_region max_entries script
        persistent .budget_fraction .is_percentage .effective_max_tokens .is_fixed
        .is_stage_specific .caller_key .resolve_budget(window)
    ``Seed``: kind ("caller"|"glob"|"files"|"literal"|"rhai"|"command"|"tools") key value files
        tools (list[SeedTool: name args]) refresh ("once"|"each_stage")
    ``OutputSpec`` (format instructions example json_schema[alias "schema"] validator),
    ``Nudge`` (enabled max text), ``Hooks`` (.items()), ``ToolRouting`` (default_region persist
    max_result_tokens overrides[RoutingOverride region max_result_tokens]
    max_result_tokens_per_tool .target_regions()), ``InteractionPoint``, ``Sandbox``,
    ``Security``, ``ReadPaths``, ``SafeCommands``, ``Compaction``, ``RepetitionDetection``,
    ``FileTracking``, ``TransformSpec``/``RegionMapping``, ``CallerInput`` (key region required).
    Lenient tables keep unknown keys in ``.extra``. ``default_layout()`` is the built-in layout.
"""

from __future__ import annotations

from typing import Any

from . import model as _model
from .errors import BlueprintError
from .loader import load, load_text, resolve_manifest
from .model import *  # noqa: F403  (the public models: model.__all__)

__all__ = [
    "BlueprintError", "Finding", "LintEnv", "Report", "check", "extra_checks", "load", "load_text",
    "resolve_manifest", "script_tool_names", "json_schema",
]
__all__ += _model.__all__

_LAZY = {
    "check": ("checks", "check"),
    "Report": ("report", "Report"),
    "Finding": ("report", "Finding"),
    "LintEnv": ("lints", "LintEnv"),
    "extra_checks": ("pipeline", "extra_checks"),
    "script_tool_names": ("script_tools", "script_tool_names"),
    "json_schema": ("schema", "json_schema"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(f"{__name__}.{module}"), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
