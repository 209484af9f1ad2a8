"""Reading ``agent.leviath``: TOML -> :class:`Blueprint`, with the upstream parse rules
(docs/blueprint.md#how-the-toml-is-read).

The loader walks the parsed TOML in the order upstream evaluates it, so that when a file has several
problems the first one reported is the same. Values of the wrong type are treated as absent except
where the format makes them an error; that includes a non-table where a table belongs, even for
``agent`` (``agent = 3`` is an agent with every default) and a stage (``[stages] work = 5`` is a
default stage, which the lints then flag as declaring no mode, model or max_iterations). Every
error is a :class:`BlueprintError` that names the key path and, where the scanner can find it, the
line and column.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Container
from pathlib import Path
from typing import Any


from . import constants as C
from .errors import BlueprintError, did_you_mean, locate_key
from .model import (
    AgentInfo,
    Blueprint,
    Compaction,
    ContextConfig,
    Edge,
    FileTracking,
    Gate,
    Hooks,
    InteractionPoint,
    ModelRef,
    ModelSpec,
    Nudge,
    OutputSpec,
    ReadPaths,
    Region,
    RegionMapping,
    RepetitionDetection,
    RoutingOverride,
    SafeCommands,
    Sandbox,
    Security,
    Seed,
    SeedTool,
    Stage,
    StageContext,
    ToolRouting,
    TransformConfig,
    TransformSpec,
    construct,
    parse_percent,
)
from .read_paths import ReadPathError, compile_entry

_U64 = (1 << 64) - 1


# ------------------------------------------------------------------------------------------------
# Lenient value readers: a wrong type reads as absent (None)
# ------------------------------------------------------------------------------------------------
def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _trimmed(v: Any) -> str | None:
    return v.strip() if isinstance(v, str) else None


def _bool(v: Any) -> bool | None:
    return v if isinstance(v, bool) else None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _uint(v: Any) -> int | None:
    """An unsigned count: negative numbers wrap as upstream's unchecked cast does."""
    i = _int(v)
    return None if i is None else i & _U64


def _str_list(v: Any) -> list[str] | None:
    return [x for x in v if isinstance(x, str)] if isinstance(v, list) else None


def _table(v: Any) -> dict[str, Any] | None:
    return v if isinstance(v, dict) else None


def _put(out: dict[str, Any], key: str, value: Any) -> None:
    """Record a key only when it was written with a usable value (keeps ``model_fields_set`` honest)."""
    if value is not None:
        out[key] = value


def _extras(table: dict[str, Any], known: Container[str]) -> dict[str, Any]:
    # KNOWN is any container of key names: a set, a tuple or a model's ``model_fields`` dict.
    return {k: v for k, v in table.items() if k not in known}


def _choices(values: tuple[str, ...]) -> str:
    return ", ".join(values)


# ------------------------------------------------------------------------------------------------
# Entry points
# ------------------------------------------------------------------------------------------------
def resolve_manifest(path: str | os.PathLike[str]) -> Path:
    """The agent.leviath for PATH: PATH itself if it is a file or already names an agent.leviath,
    else PATH/agent.leviath."""
    p = Path(path)
    return p if p.is_file() or p.name == C.MANIFEST_NAME else p / C.MANIFEST_NAME


def _missing_manifest(source: Path, manifest: Path) -> BlueprintError:
    """The one-line error for a path that holds no blueprint, naming the path once and why."""
    folder = manifest.parent
    if source.name == C.MANIFEST_NAME:
        shown, reason = manifest, ("no such file" if folder.is_dir() else f"there is no folder {folder}")
    elif source.exists():
        shown, reason = source, "the folder has no agent.leviath in it"
    else:
        shown, reason = source, "no such file or folder"
    return BlueprintError(
        f"No agent.leviath found at {shown}: {reason}", path=manifest, kind="read",
        hint="pass an agent folder or its agent.leviath file",
    )


def load(source: str | os.PathLike[str] | Blueprint) -> Blueprint:
    """Load a blueprint from an agent folder, its agent.leviath, or TOML text; a Blueprint is
    returned as it is (so every entry point that takes either calls this once).

    A ``str`` is taken as TOML text when it is not an existing path and looks like TOML
    (it has a newline, ``=`` or ``[``). Raises :class:`BlueprintError` on any problem.
    """
    if isinstance(source, Blueprint):
        return source
    if isinstance(source, str) and looks_like_text(source):
        return load_text(source)
    manifest = resolve_manifest(source)
    if not manifest.is_file():
        raise _missing_manifest(Path(source), manifest)
    try:
        text = manifest.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BlueprintError(f"Failed to read {manifest}: {exc}", path=manifest, kind="read") from None
    return load_text(text, path=manifest)


def looks_like_text(source: str) -> bool:
    """Whether ``source`` is blueprint TOML text rather than a path: it has a newline, ``=`` or
    ``[`` and is not an existing path."""
    if "\n" in source or "=" in source or "[" in source:
        try:
            return not Path(source).exists()
        except (OSError, ValueError):
            return True
    return False


def load_text(text: str, *, path: str | os.PathLike[str] | None = None,
              base_dir: str | os.PathLike[str] | None = None) -> Blueprint:
    """Parse blueprint TOML text; ``path`` (optional) is used in messages and as the base folder.
    ``base_dir`` gives text with no file (a notebook cell) a folder its scripts resolve against."""
    file = Path(path) if path is not None else None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        raise BlueprintError(
            f"Failed to parse agent.leviath: {msg}", path=file,
            line=int(m.group(1)) if m else None, column=int(m.group(2)) if m else None,
        ) from None
    except RecursionError:  # tomllib parses nested arrays and tables recursively
        raise BlueprintError(
            "Failed to parse agent.leviath: arrays or tables are nested too deeply", path=file,
            hint="a blueprint never needs more than a few levels of nesting",
        ) from None
    try:
        bp = _Loader(text, file).build(raw)
    except RecursionError:
        raise BlueprintError("blueprint is nested too deeply", path=file) from None
    bp.set_private(
        _raw=raw, _source_path=file.resolve() if file is not None else None, _source_text=text,
        _base_dir=Path(base_dir).resolve() if base_dir is not None else None,
    )
    return bp


# ------------------------------------------------------------------------------------------------
# The loader proper
# ------------------------------------------------------------------------------------------------
class _Loader:
    """Turns the parsed TOML dict into models, raising at the first rule it breaks."""

    def __init__(self, text: str, path: Path | None) -> None:
        self.text = text
        self.path = path

    def fail(self, message: str, key_path: list[str], hint: str | None = None) -> BlueprintError:
        """Build a parse error located at ``key_path``."""
        loc = locate_key(self.text, key_path)
        return BlueprintError(
            message, path=self.path, key_path=".".join(key_path) or None,
            line=loc[0] if loc else None, column=loc[1] if loc else None, hint=hint, kind="parse",
        )

    # -- top level -----------------------------------------------------------------------------
    def build(self, raw: dict[str, Any]) -> Blueprint:
        if "agent" not in raw:
            raise self.fail("Missing [agent] section", ["agent"],
                            hint="add an [agent] table with at least name = \"...\"")
        # Upstream only asks that the key exists: `agent = 3` is an agent with every default.
        agent = self.agent(_table(raw["agent"]) or {})

        stages: dict[str, Stage] = {}
        stages_raw = _table(raw.get("stages"))
        if stages_raw:
            for name, table in stages_raw.items():
                # A non-table stage (`work = 5`) reads as a stage with every default, as upstream.
                stages[name] = self.stage(name, _table(table) or {})
        else:
            stages[C.IMPLICIT_STAGE_NAME] = construct(Stage, name=C.IMPLICIT_STAGE_NAME)

        kwargs: dict[str, Any] = {"agent": agent, "stages": stages}
        ctx_raw = _table(raw.get("context"))
        if ctx_raw is not None:
            kwargs["context"] = self.context(ctx_raw)
        if "sandbox" in raw and _table(raw["sandbox"]) is not None:
            kwargs["sandbox"] = self.sandbox(raw["sandbox"], ["sandbox"], "[sandbox]")
        if _table(raw.get("read_paths")) is not None:
            kwargs["read_paths"] = self.read_paths(raw["read_paths"])
        if _table(raw.get("safe_commands")) is not None:
            kwargs["safe_commands"] = self.safe_commands(raw["safe_commands"])
        if _table(raw.get("tool_permissions")) is not None:
            kwargs["tool_permissions"] = self.top_permissions(raw["tool_permissions"])
        if _table(raw.get("security")) is not None:
            kwargs["security"] = self.security(raw["security"])
        if _table(raw.get("compaction")) is not None:
            kwargs["compaction"] = self.compaction(raw["compaction"])
        if _table(raw.get("repetition_detection")) is not None:
            kwargs["repetition_detection"] = self.repetition(raw["repetition_detection"])
        if isinstance(raw.get("transforms"), list):
            kwargs["transforms"] = [self.transform_spec(t) for t in raw["transforms"] if isinstance(t, dict)]
        known = set(Blueprint.model_fields)
        kwargs.update(_extras(raw, known))
        return construct(Blueprint, **kwargs)

    def agent(self, t: dict[str, Any]) -> AgentInfo:
        out: dict[str, Any] = {}
        for key in ("name", "version", "entry_stage"):
            _put(out, key, _str(t.get(key)))
        _put(out, "description", _str(t.get("description")))
        _put(out, "max_child_depth", _uint(t.get("max_child_depth")))
        for key in ("dynamic_tools", "batch_tool_hint", "shell_hint"):
            _put(out, key, _bool(t.get(key)))
        if _table(t.get("nudge")) is not None:
            out["nudge"] = self.nudge(t["nudge"])
        if _table(t.get("output")) is not None:
            out["output"] = self.output(t["output"])
        out.update(_extras(t, AgentInfo.model_fields))
        return construct(AgentInfo, **out)

    def nudge(self, t: dict[str, Any]) -> Nudge:
        out: dict[str, Any] = {}
        _put(out, "enabled", _bool(t.get("enabled")))
        n = _int(t.get("max"))
        _put(out, "max", n if n is not None and n >= 0 else None)
        _put(out, "text", _trimmed(t.get("text")))
        out.update(_extras(t, Nudge.model_fields))
        return construct(Nudge, **out)

    def output(self, t: dict[str, Any]) -> OutputSpec:
        out: dict[str, Any] = {}
        for key in ("format", "instructions", "example", "validator"):
            _put(out, key, _trimmed(t.get(key)))
        _put(out, "schema", _table(t.get("schema")))
        out.update(_extras(t, ("format", "instructions", "example", "validator", "schema")))
        return construct(OutputSpec, **out)

    # -- stages --------------------------------------------------------------------------------
    def stage(self, name: str, t: dict[str, Any]) -> Stage:
        kp = ["stages", name]
        for key in t:
            if key not in C.STAGE_KEYS:
                raise self.fail(
                    f"stage '{name}' has unknown key '{key}' (valid: {' '.join(C.STAGE_KEYS)})",
                    kp + [key], hint=did_you_mean(key, C.STAGE_KEYS),
                )
        out: dict[str, Any] = {"name": name}

        # mode and the mode-specific keys
        mode = _str(t.get("mode"))
        if mode is not None and mode not in C.MODES:
            raise self.fail(
                f"stage '{name}': unknown mode \"{mode}\" (valid modes: {_choices(C.MODES_IN_MESSAGE)})",
                kp + ["mode"], hint=did_you_mean(mode, C.MODES),
            )
        _put(out, "mode", mode)
        effective_mode = mode or "autonomous"
        if effective_mode == "interactive_points" and isinstance(t.get("interaction_points"), list):
            out["interaction_points"] = [
                self.interaction_point(name, i, p)
                for i, p in enumerate(t["interaction_points"]) if isinstance(p, dict)
            ]
        if effective_mode == "fan_out":
            self.fan_out_keys(name, t, out)

        # plain keys
        for key in ("system_prompt", "description", "transition_prompt"):
            _put(out, key, _trimmed(t.get(key)))
        for key in ("available_tools", "available_connectors", "required_tools"):
            _put(out, key, _str_list(t.get(key)))
        for key in ("max_iterations", "max_revisits"):
            _put(out, key, _uint(t.get(key)))
        for key in ("allow_complete", "requires_children", "allow_as_worker", "accepts_messages",
                    "allow_blocking_tools", "require_output", "batch_tool_hint", "shell_hint"):
            _put(out, key, _bool(t.get(key)))
        if "model" in t:
            out["model"] = self.model_spec(t["model"]) if isinstance(t["model"], dict) else construct(ModelSpec)
        if _table(t.get("output")) is not None:
            out["output"] = self.output(t["output"])
        if _table(t.get("nudge")) is not None:
            out["nudge"] = self.nudge(t["nudge"])
        if _table(t.get("security")) is not None:
            out["security"] = self.security(t["security"])

        # checked sub-tables, in upstream order
        if _table(t.get("tool_routing")) is not None:
            out["tool_routing"] = self.tool_routing(name, t["tool_routing"])
        if _table(t.get("sandbox")) is not None:
            out["sandbox"] = self.sandbox(t["sandbox"], kp + ["sandbox"], f"stage '{name}': sandbox")
        if _table(t.get("hooks")) is not None:
            out["hooks"] = self.hooks(name, t["hooks"])
        if _table(t.get("tool_permissions")) is not None:
            out["tool_permissions"] = self.stage_permissions(name, t["tool_permissions"])
        if _table(t.get("context")) is not None:
            out["context"] = self.stage_context(name, t["context"])
        if _table(t.get("transitions")) is not None:  # a non-table reads as absent: a linear stage
            out["transitions"] = self.transitions(name, t["transitions"])

        # mode sugar
        if effective_mode in ("output", "fan_out"):
            tool = "submit_output" if effective_mode == "output" else "fan_out"
            tools = list(out.get("available_tools", []))
            if tool not in tools:
                tools.append(tool)
            out["available_tools"] = tools
        if effective_mode == "output":
            out["require_output"] = True
            if "allow_complete" not in out:
                out["allow_complete"] = True
        return construct(Stage, **out)

    def interaction_point(self, stage: str, index: int, p: dict[str, Any]) -> InteractionPoint:
        out: dict[str, Any] = {}
        _put(out, "name", _str(p.get("name")))
        _put(out, "prompt", _str(p.get("prompt")))
        _put(out, "required", _bool(p.get("required")))
        label = out.get("name", "")
        kp = ["stages", stage, "interaction_points"]
        unattended = _str(p.get("unattended"))
        if unattended is not None:
            if unattended not in C.UNATTENDED_CHOICES:
                raise self.fail(
                    f"stage '{stage}': interaction point '{label}' has unattended = \"{unattended}\" "
                    "- expected \"ask\" or \"auto_approve\"", kp + ["unattended"],
                    hint=did_you_mean(unattended, C.UNATTENDED_CHOICES),
                )
            out["unattended"] = unattended
        style = _str(p.get("style"))
        if style is not None:
            if style not in C.INTERACTION_STYLES:
                raise self.fail(
                    f"stage '{stage}': interaction point '{label}' has style = \"{style}\" "
                    f"- expected one of {_choices(C.INTERACTION_STYLES)}", kp + ["style"],
                    hint=did_you_mean(style, C.INTERACTION_STYLES),
                )
            out["style"] = style
        options = _str_list(p.get("options"))
        if options is None:
            options = _str_list(p.get("choices"))
        _put(out, "options", options)
        directives = _table(p.get("directives"))
        if directives is None:
            directives = _table(p.get("followups"))
        if directives is not None:
            out["directives"] = {k: v for k, v in directives.items() if isinstance(v, str)}
        _put(out, "abort_options", _str_list(p.get("abort_options")))
        _put(out, "edit_options", _str_list(p.get("edit_options")))
        _put(out, "document_region", _str(p.get("document_region")))
        out.update(_extras(p, set(InteractionPoint.model_fields) | {"choices", "followups"}))
        return construct(InteractionPoint, **out)

    def fan_out_keys(self, stage: str, t: dict[str, Any], out: dict[str, Any]) -> None:
        kp = ["stages", stage]
        for key in ("worker_agent", "worker_stage", "worker_query", "merge_stage", "results_region"):
            _put(out, key, _str(t.get(key)))
        _put(out, "split_prompt", _str(t.get("split_prompt")))
        policy = _str(t.get("on_worker_failure"))
        if policy is not None:
            if policy not in C.WORKER_FAILURE_POLICIES:
                raise self.fail(
                    f"stage '{stage}': on_worker_failure = \"{policy}\" is not a policy "
                    f"(valid: {_choices(C.WORKER_FAILURE_POLICIES)})", kp + ["on_worker_failure"],
                    hint=did_you_mean(policy, C.WORKER_FAILURE_POLICIES),
                )
            out["on_worker_failure"] = policy
        meaning = {"max_workers": "0 means unlimited", "max_items": "0 means no cap",
                   "max_attempts": "how many times to re-ask the stage"}
        for key in ("max_workers", "max_items", "max_attempts"):
            if key not in t:
                continue
            value = _int(t[key])
            if value is None:
                raise self.fail(f"stage '{stage}': {key} must be a whole number ({meaning[key]})", kp + [key])
            if value < 0:
                raise self.fail(f"stage '{stage}': {key} must not be negative (got {value}; {meaning[key]})",
                                kp + [key])
            out[key] = value

    def model_spec(self, t: dict[str, Any]) -> ModelSpec:
        out: dict[str, Any] = {}

        def ref(entry: dict[str, Any]) -> ModelRef:
            r: dict[str, Any] = {}
            _put(r, "provider", _str(entry.get("provider")))
            _put(r, "model", _str(entry.get("model")))
            r.update(_extras(entry, ("provider", "model")))
            return construct(ModelRef, **r)

        models = [ref(e) for e in t["models"] if isinstance(e, dict)] if isinstance(t.get("models"), list) else []
        provider, model = _str(t.get("provider")), _str(t.get("model"))
        fallbacks = ([ref(e) for e in t["fallbacks"] if isinstance(e, dict)]
                     if isinstance(t.get("fallbacks"), list) else None)
        _put(out, "provider", provider)
        _put(out, "model", model)
        _put(out, "fallbacks", fallbacks)
        if not models:
            if provider is not None or model is not None:
                legacy = {k: v for k, v in (("provider", provider), ("model", model)) if v is not None}
                models.append(construct(ModelRef, **legacy))
            models.extend(fallbacks or [])
        out["models"] = models or [construct(ModelRef)]
        _put(out, "allow_user_default", _bool(t.get("allow_user_default")))
        timeout = _int(t.get("request_timeout_secs"))
        _put(out, "request_timeout_secs", timeout if timeout is not None and timeout >= 0 else None)
        _put(out, "parameters", _table(t.get("parameters")))
        out.update(_extras(t, ModelSpec.model_fields))
        return construct(ModelSpec, **out)

    def tool_routing(self, stage: str, t: dict[str, Any]) -> ToolRouting:
        kp = ["stages", stage, "tool_routing"]
        for key in t:
            if key not in C.TOOL_ROUTING_KEYS:
                raise self.fail(
                    f"stage '{stage}': tool_routing has unknown key '{key}' (valid: {_choices(C.TOOL_ROUTING_KEYS)})",
                    kp + [key], hint=did_you_mean(key, C.TOOL_ROUTING_KEYS),
                )
        out: dict[str, Any] = {}
        _put(out, "default_region", _str(t.get("default_region")))
        _put(out, "persist", _bool(t.get("persist")))
        _put(out, "max_result_tokens", _uint(t.get("max_result_tokens")))
        overrides_raw = _table(t.get("overrides"))
        if overrides_raw is not None:
            overrides: dict[str, RoutingOverride] = {}
            for tool, value in overrides_raw.items():
                okp = kp + ["overrides", tool]
                if isinstance(value, str):
                    overrides[tool] = construct(RoutingOverride, region=value)
                    continue
                if not isinstance(value, dict):
                    raise self.fail(
                        f"stage '{stage}': tool_routing.overrides.{tool} must be a region name or "
                        "{ region = \"...\", max_result_tokens = N }", okp,
                    )
                if not value:
                    raise self.fail(f"stage '{stage}': tool_routing.overrides.{tool} is an empty table", okp,
                                    hint="set region and/or max_result_tokens")
                ov: dict[str, Any] = {}
                for key, v in value.items():
                    if key not in C.ROUTING_OVERRIDE_KEYS:
                        raise self.fail(
                            f"stage '{stage}': tool_routing.overrides.{tool} has unknown key '{key}' "
                            f"(valid: {_choices(C.ROUTING_OVERRIDE_KEYS)})", okp + [key],
                            hint=did_you_mean(key, C.ROUTING_OVERRIDE_KEYS),
                        )
                    if key == "region":
                        if not isinstance(v, str):
                            raise self.fail(
                                f"stage '{stage}': tool_routing.overrides.{tool}.region must be a string", okp + [key])
                        ov["region"] = v
                    else:
                        n = _int(v)
                        if n is None or n < 0:
                            raise self.fail(
                                f"stage '{stage}': tool_routing.overrides.{tool}.max_result_tokens must be a "
                                "non-negative whole number", okp + [key])
                        ov["max_result_tokens"] = n
                overrides[tool] = construct(RoutingOverride, **ov)
            out["overrides"] = overrides
        caps_raw = _table(t.get("max_result_tokens_per_tool"))
        if caps_raw is not None:
            caps: dict[str, int] = {}
            for tool, v in caps_raw.items():
                n = _int(v)
                if n is None or n < 0:
                    raise self.fail(
                        f"stage '{stage}': tool_routing.max_result_tokens_per_tool.{tool} must be a "
                        "non-negative whole number", kp + ["max_result_tokens_per_tool", tool])
                caps[tool] = n
            out["max_result_tokens_per_tool"] = caps
        return construct(ToolRouting, **out)

    def sandbox(self, t: dict[str, Any], kp: list[str], label: str) -> Sandbox:
        out: dict[str, Any] = {}
        kind = _str(t.get("kind"))
        if kind is not None:
            if kind not in C.SANDBOX_KINDS:
                raise self.fail(f"{label}: unknown kind \"{kind}\" (valid: {_choices(C.SANDBOX_KINDS)})",
                                kp + ["kind"], hint=did_you_mean(kind, C.SANDBOX_KINDS))
            out["kind"] = kind
        when = _str(t.get("on_unavailable"))
        if when is not None:
            if when not in C.SANDBOX_ON_UNAVAILABLE:
                raise self.fail(
                    f"{label}: on_unavailable = \"{when}\" is not valid (valid: {_choices(C.SANDBOX_ON_UNAVAILABLE)})",
                    kp + ["on_unavailable"], hint=did_you_mean(when, C.SANDBOX_ON_UNAVAILABLE))
            out["on_unavailable"] = when
        _put(out, "image", _str(t.get("image")))
        _put(out, "engine", _str(t.get("engine")))
        _put(out, "network", _bool(t.get("network")))
        _put(out, "mount", _str_list(t.get("mount")))
        _put(out, "persist", _bool(t.get("persist")))
        out.update(_extras(t, Sandbox.model_fields))
        return construct(Sandbox, **out)

    def security(self, t: dict[str, Any]) -> Security:
        out: dict[str, Any] = {}
        _put(out, "taint_tracking", _bool(t.get("taint_tracking")))
        out.update(_extras(t, Security.model_fields))
        return construct(Security, **out)

    def hooks(self, stage: str, t: dict[str, Any]) -> Hooks:
        out: dict[str, Any] = {}
        for key, value in t.items():
            kp = ["stages", stage, "hooks", key]
            if key not in C.HOOK_KEYS:
                raise self.fail(
                    f"stage '{stage}': unknown hook '{key}' (this build implements: {_choices(C.HOOK_KEYS)})",
                    kp, hint=did_you_mean(key, C.HOOK_KEYS))
            if not isinstance(value, str):
                raise self.fail(f"stage '{stage}': hooks.{key} must be a path to a .rhai script", kp)
            out[key] = value
        return construct(Hooks, **out)

    def stage_permissions(self, stage: str, t: dict[str, Any]) -> dict[str, str]:
        out: dict[str, str] = {}
        for tool, value in t.items():
            kp = ["stages", stage, "tool_permissions", tool]
            if not isinstance(value, str):
                raise self.fail(f"stage '{stage}': tool_permissions.{tool} must be one of allow, ask, deny", kp)
            policy = value.lower()
            if policy not in C.POLICIES:
                raise self.fail(
                    f"stage '{stage}': tool_permissions.{tool} = \"{value}\" is not a policy (valid: allow, ask, deny)",
                    kp, hint=did_you_mean(policy, C.POLICIES))
            out[tool] = policy
        return out

    def stage_context(self, stage: str, t: dict[str, Any]) -> StageContext:
        for key in t:
            if key not in C.STAGE_CONTEXT_KEYS:
                raise self.fail(
                    f"stage '{stage}': context has unknown key '{key}' (only 'regions' is allowed here)",
                    ["stages", stage, "context", key], hint=did_you_mean(key, C.STAGE_CONTEXT_KEYS))
        regions_raw = _table(t.get("regions"))
        if regions_raw is None:
            return construct(StageContext)
        return construct(StageContext, regions=self.regions(regions_raw, ["stages", stage, "context", "regions"]))

    # -- transitions ---------------------------------------------------------------------------
    def transitions(self, stage: str, value: Any) -> dict[str, Edge]:
        table = _table(value)
        if table is None:
            return {}
        return {target: self.edge(stage, target, v) for target, v in table.items()}

    def edge(self, stage: str, target: str, t: Any) -> Edge:
        if not isinstance(t, dict):
            return construct(Edge, target=target)
        kp = ["stages", stage, "transitions", target]
        for key in t:
            if key not in C.EDGE_KEYS:
                raise self.fail(
                    f"transition to '{target}' has unknown key '{key}' (valid: {' '.join(C.EDGE_KEYS)})",
                    kp + [key], hint=did_you_mean(key, C.EDGE_KEYS))
        gate_raw = _table(t.get("gate"))
        if gate_raw is not None:
            for key in gate_raw:
                if key not in C.GATE_KEYS:
                    raise self.fail(
                        f"transition to '{target}': gate has unknown key '{key}' (valid: {' '.join(C.GATE_KEYS)})",
                        kp + ["gate", key], hint=did_you_mean(key, C.GATE_KEYS))
        out: dict[str, Any] = {"target": target}
        condition = _str(t.get("condition"))
        if condition is not None:
            if condition not in C.CONDITIONS:
                raise self.fail(
                    f"transition from '{stage}' to '{target}': unknown condition \"{condition}\" "
                    f"(valid: {_choices(C.CONDITIONS)})", kp + ["condition"],
                    hint=did_you_mean(condition, C.CONDITIONS))
            out["condition"] = condition
        thresholds: dict[str, int] = {}
        for key in C.STUCK_KEYS:
            n = _int(t.get(key))
            if n is not None and n > 0:
                thresholds[key] = n
        if condition == "stuck" and not thresholds:
            raise self.fail(
                f"transition from '{stage}' to '{target}' has condition 'stuck' but no threshold "
                f"(set at least one of {', '.join(C.STUCK_KEYS)})", kp + ["condition"])
        if condition != "stuck" and thresholds:
            first = next(iter(thresholds))
            raise self.fail(
                f"transition from '{stage}' to '{target}' sets stuck_after_* thresholds but its condition "
                "is not 'stuck'", kp + [first], hint="add condition = \"stuck\" or remove the thresholds")
        out.update(thresholds)
        transform = _str(t.get("transform"))
        if transform is not None:
            if transform not in C.TRANSFORMS:
                raise self.fail(
                    f"transition from '{stage}' to '{target}': unknown transform \"{transform}\" "
                    f"(valid: {_choices(C.TRANSFORMS)})", kp + ["transform"],
                    hint=did_you_mean(transform, C.TRANSFORMS))
            out["transform"] = transform
        _put(out, "hint", _str(t.get("hint")))
        cfg = _table(t.get("transform_config"))
        if cfg is not None:
            c: dict[str, Any] = {}
            for key in ("carry", "compact", "clear"):
                _put(c, key, _str_list(cfg.get(key)))
            _put(c, "compact_prompt", _str(cfg.get("compact_prompt")))
            c.update(_extras(cfg, TransformConfig.model_fields))
            out["transform_config"] = construct(TransformConfig, **c)
        if gate_raw is not None:
            g: dict[str, Any] = {}
            _put(g, "require_modifications", _bool(gate_raw.get("require_modifications")))
            _put(g, "require_regions", _str_list(gate_raw.get("require_regions")))
            for key in ("require_region_updated", "require_no_open_items", "region"):
                _put(g, key, _str(gate_raw.get(key)))
            _put(g, "message", _trimmed(gate_raw.get("message")))
            _put(g, "tools", _str_list(gate_raw.get("tools")))
            n = _int(gate_raw.get("max_attempts"))
            _put(g, "max_attempts", n if n is not None and n >= 0 else None)
            out["gate"] = construct(Gate, **g)
        return construct(Edge, **out)

    # -- regions -------------------------------------------------------------------------------
    def context(self, t: dict[str, Any]) -> ContextConfig:
        out: dict[str, Any] = {}
        regions_raw = _table(t.get("regions"))
        if regions_raw is not None:
            out["regions"] = self.regions(regions_raw, ["context", "regions"])
        ft = _table(t.get("file_tracking"))
        if ft is not None:
            f: dict[str, Any] = {}
            _put(f, "region", _str(ft.get("region")))
            _put(f, "track_reads", _bool(ft.get("track_reads")))
            _put(f, "track_writes", _bool(ft.get("track_writes")))
            _put(f, "max_file_tokens", _uint(ft.get("max_file_tokens")))
            f.update(_extras(ft, FileTracking.model_fields))
            out["file_tracking"] = construct(FileTracking, **f)
        out.update(_extras(t, ContextConfig.model_fields))
        return construct(ContextConfig, **out)

    def regions(self, table: dict[str, Any], kp: list[str]) -> dict[str, Region]:
        return {name: self.region(name, value, kp + [name])
                for name, value in table.items() if isinstance(value, dict)}

    def _percent(self, region: str, key: str, value: Any, kp: list[str]) -> str | None:
        text = _str(value)
        if text is None:
            return None
        parsed = parse_percent(text)
        if isinstance(parsed, str):
            raise self.fail(f"region '{region}': {key} '{text}' {parsed}", kp + [key])
        return text

    def _enum(self, region: str, key: str, t: dict[str, Any], values: tuple[str, ...], kp: list[str],
              validation_prefix: bool = False) -> str | None:
        v = _str(t.get(key))
        if v is None or v in values:
            return v
        prefix = "Region validation failed: " if validation_prefix else ""
        raise self.fail(f"{prefix}region '{region}' has {key} = \"{v}\" (valid: {_choices(values)})",
                        kp + [key], hint=did_you_mean(v, values))

    def region(self, name: str, t: dict[str, Any], kp: list[str]) -> Region:
        out: dict[str, Any] = {"name": name}
        _put(out, "budget", self._percent(name, "budget", t.get("budget"), kp))
        _put(out, "compact_at", self._percent(name, "compact_at", t.get("compact_at"), kp))
        kind = _str(t.get("kind"))
        if kind is not None:
            kind = C.REGION_KIND_ALIASES.get(kind, kind)
            if kind not in C.REGION_KINDS:
                raise self.fail(
                    f"region '{name}': unknown kind \"{t['kind']}\" (valid kinds: {_choices(C.REGION_KINDS)})",
                    kp + ["kind"], hint=did_you_mean(kind, C.REGION_KINDS))
            out["kind"] = kind
        strategy = _str(t.get("strategy"))
        if strategy is not None:
            if strategy not in C.WINDOW_STRATEGIES:
                raise self.fail(
                    f"region '{name}': unknown strategy \"{strategy}\" (valid: {_choices(C.WINDOW_STRATEGIES)})",
                    kp + ["strategy"], hint=did_you_mean(strategy, C.WINDOW_STRATEGIES))
            out["strategy"] = strategy
        script = _str(t.get("script"))
        if out.get("kind") == "custom" and not (script and script.strip()):
            raise self.fail(f"region '{name}': kind = \"custom\" requires script = \"<path>.rhai\"", kp + ["script"])
        _put(out, "script", script)
        _put(out, "admission", self._enum(name, "admission", t, C.ADMISSIONS, kp, validation_prefix=True))
        _put(out, "volatility", self._enum(name, "volatility", t, C.VOLATILITIES, kp, validation_prefix=True))
        for key in ("max_tokens", "min_tokens", "max_items", "overflow", "compact_count",
                    "threshold_tokens", "max_entries"):
            _put(out, key, _uint(t.get(key)))
        for key in ("required", "summarizable", "describe_in_prompt", "persistent"):
            _put(out, key, _bool(t.get(key)))
        for key in ("required_message", "description", "source_region"):
            _put(out, key, _str(t.get(key)))
        seed = parse_seed(name, t["seed"]) if "seed" in t else None
        if seed is None and name == "task":
            seed = construct(Seed, kind="caller", key="task")  # the implicit task seed
        _put(out, "seed", seed)
        out.update(_extras(t, set(Region.model_fields) - {"name"}))
        return construct(Region, **out)

    # -- top-level policy tables ---------------------------------------------------------------
    def read_paths(self, t: dict[str, Any]) -> ReadPaths:
        out: dict[str, Any] = {}
        if isinstance(t.get("allow"), list):  # another type reads as no entries
            entries = t["allow"]
            for entry in entries:
                problem = read_path_problem(entry)
                if problem:
                    raise self.fail(f"[read_paths]: {problem}", ["read_paths", "allow"])
            out["allow"] = list(entries)
        out.update(_extras(t, ReadPaths.model_fields))
        return construct(ReadPaths, **out)

    def safe_commands(self, t: dict[str, Any]) -> SafeCommands:
        out: dict[str, Any] = {}
        for key in ("tools", "shell"):
            if key not in t:
                continue
            values = t[key]
            if not isinstance(values, list):
                continue  # another type reads as no entries
            if any(not isinstance(v, str) for v in values):
                raise self.fail(f"[safe_commands]: {key} entries must be strings", ["safe_commands", key])
            out[key] = list(values)
        out.update(_extras(t, SafeCommands.model_fields))
        return construct(SafeCommands, **out)

    def top_permissions(self, t: dict[str, Any]) -> dict[str, str]:
        out: dict[str, str] = {}
        for tool, value in t.items():
            kp = ["tool_permissions", tool]
            if not isinstance(value, str):
                raise self.fail(f"[tool_permissions]: {tool} must be one of allow, ask, deny", kp)
            policy = value.lower()
            if policy not in C.POLICIES:
                raise self.fail(
                    f"[tool_permissions]: tool_permissions.{tool} = \"{value}\" is not a policy "
                    "(valid: allow, ask, deny)",
                    kp, hint=did_you_mean(policy, C.POLICIES))
            out[tool] = policy
        return out

    def compaction(self, t: dict[str, Any]) -> Compaction:
        out: dict[str, Any] = {}
        for key in ("provider", "model", "system_prompt"):
            _put(out, key, _str(t.get(key)))
        _put(out, "max_summary_tokens", _uint(t.get("max_summary_tokens")))
        temp = t.get("temperature")
        if isinstance(temp, (int, float)) and not isinstance(temp, bool):
            out["temperature"] = float(temp)
        out.update(_extras(t, Compaction.model_fields))
        return construct(Compaction, **out)

    def repetition(self, t: dict[str, Any]) -> RepetitionDetection:
        out: dict[str, Any] = {}
        _put(out, "enabled", _bool(t.get("enabled")))
        _put(out, "max_repeat_calls", _uint(t.get("max_repeat_calls")))
        _put(out, "max_readonly_streak", _uint(t.get("max_readonly_streak")))
        out.update(_extras(t, RepetitionDetection.model_fields))
        return construct(RepetitionDetection, **out)

    def transform_spec(self, t: dict[str, Any]) -> TransformSpec:
        out: dict[str, Any] = {}
        _put(out, "from_blueprint", _str(t.get("from_blueprint")))
        _put(out, "to_blueprint", _str(t.get("to_blueprint")))
        if isinstance(t.get("mappings"), list):
            maps = []
            for m in t["mappings"]:
                if not isinstance(m, dict):
                    continue
                mo: dict[str, Any] = {}
                _put(mo, "from_region", _str(m.get("from_region")))
                _put(mo, "to_region", _str(m.get("to_region")))
                transform = _str(m.get("transform"))
                if transform is not None and transform in C.MAPPING_TRANSFORMS:
                    mo["transform"] = transform
                _put(mo, "fields", _str_list(m.get("fields")))
                mo.update(_extras(m, RegionMapping.model_fields))
                maps.append(construct(RegionMapping, **mo))
            out["mappings"] = maps
        out.update(_extras(t, TransformSpec.model_fields))
        return construct(TransformSpec, **out)


# ------------------------------------------------------------------------------------------------
# Seeds and read paths
# ------------------------------------------------------------------------------------------------
def parse_seed(region: str, value: Any) -> Seed | None:
    """Read a region's ``seed`` (docs/blueprint.md#seeds); None when the form is not recognized (it is then
    dropped)."""
    if isinstance(value, str):
        if value == "task_input":
            return construct(Seed, kind="caller", key="task")
        if value == "input":
            return construct(Seed, kind="caller", key=region)
        return construct(Seed, kind="caller", key=value)
    if not isinstance(value, dict):
        return None
    for key in C.SEED_TABLE_KEYS:
        if key not in value:
            continue
        v = value[key]
        if key in ("glob", "literal", "rhai", "command"):
            return construct(Seed, kind=key, value=v) if isinstance(v, str) else None
        if key == "files":
            files = _str_list(v)
            return construct(Seed, kind="files", files=files) if files is not None else None
        if key == "caller":
            return construct(Seed, kind="caller", key=v) if isinstance(v, str) else None
        refresh = _str(value.get("refresh"))
        each = refresh is not None and refresh.lower() in C.SEED_REFRESH_EACH_STAGE
        mode = "each_stage" if each else "once"
        if key == "tool":
            if not isinstance(v, str):
                return None
            args = _table(value.get("args")) or {}
            return construct(Seed, kind="tools", tools=[construct(SeedTool, name=v, args=args)], refresh=mode)
        calls = _seed_tools(v)
        return construct(Seed, kind="tools", tools=calls, refresh=mode) if calls else None
    return None


def _seed_tools(v: Any) -> list[SeedTool] | None:
    if not isinstance(v, list):
        return None
    calls: list[SeedTool] = []
    for item in v:
        if isinstance(item, str):
            calls.append(construct(SeedTool, name=item))
        elif isinstance(item, dict) and isinstance(item.get("name"), str):
            calls.append(construct(SeedTool, name=item["name"], args=_table(item.get("args")) or {}))
        else:
            return None
    return calls


def read_path_problem(entry: Any) -> str | None:
    """Why a ``[read_paths].allow`` entry is unusable, or None when it is fine.

    The entry's syntax is checked by compiling it as a run would (:mod:`.read_paths`), against a
    stand-in workdir deep enough for a reasonable ``../`` and a stand-in home, as upstream does; what
    depends on the real machine (no home folder, say) is only known when a run starts.
    """
    if not isinstance(entry, str):
        return f"allow entry {entry!r} must be a string"
    if not entry.strip():
        return "allow entries must not be empty"
    try:
        compile_entry(entry, "/validate/a/b/c/d/e/f/g/h", "/validate-home")
    except ReadPathError as exc:
        return str(exc)
    return None