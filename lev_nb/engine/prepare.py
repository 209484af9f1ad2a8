"""Everything done to a blueprint before a run of it starts, so a broken part fails at launch
rather than half-way (docs/rhai.md#stage-hooks, docs/concepts.md#final-outputs): the cached
:class:`~lev_nb.engine.plan.types.RunPlan`, and the compiled stage hooks, custom-region scripts and
output validators, each file compiled once.

Every script a blueprint names by path must stay inside the agent folder
(:func:`resolve_agent_script`).
"""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import Any

from lev_nb.engine.plan.build import plan_from_blueprint
from lev_nb.engine.plan.types import RunPlan
from lev_nb.scripting import (
    HookScript,
    RegionScript,
    ScriptError,
    Validator,
    compile_hooks,
    compile_region_script,
    compile_validator,
)
from lev_nb.workspace import PathEscape, confine

LAUNCH_VALIDATOR = "<launch request>"

_PLANS: dict[int, tuple[Any, RunPlan]] = {}


def cached_plan(blueprint: Any) -> RunPlan:
    """The engine plan of ``blueprint``, computed once per blueprint object (blueprints are frozen)."""
    key = id(blueprint)
    hit = _PLANS.get(key)
    if hit is not None and hit[0]() is blueprint:
        return hit[1]
    plan = plan_from_blueprint(blueprint)

    def forget(_ref: weakref.ref[Any]) -> None:
        _PLANS.pop(key, None)

    _PLANS[key] = (weakref.ref(blueprint, forget), plan)
    return plan


def resolve_agent_script(plan: RunPlan, relative: str, what: str) -> Path:
    """The absolute path of a script named relative to the agent folder.

    Raises ScriptError when the blueprint has no folder (it was loaded from text) or when the
    path resolves outside the folder (through ``..`` or a symlink). ``what`` names the script in
    the message, e.g. ``"stage 'a': the on_stage_enter hook script"``.
    """
    if not plan.base_dir:
        raise ScriptError(
            f"{what} '{relative}' is a path, but this blueprint was loaded from text and has no "
            "folder to find it in; load the blueprint from its folder",
            path=relative,
        )
    try:
        return confine(plan.base_dir, relative)
    except PathEscape:
        raise ScriptError(
            f"{what} '{relative}' resolves outside the agent folder; keep scripts inside it",
            path=relative,
        ) from None


def compile_run_scripts(plan: RunPlan) -> tuple[dict[str, HookScript], dict[str, RegionScript]]:
    """Compile the stage hooks and custom-region scripts of ``plan`` (each file once), so a
    broken one fails before any model call. Returns (hook scripts, region scripts) keyed by the
    paths the blueprint writes; raises ScriptError naming the stage or region and the file."""
    return compile_stage_hooks(plan), compile_region_scripts(plan)


def compile_stage_hooks(plan: RunPlan) -> dict[str, HookScript]:
    """Compile every hook file the stages of ``plan`` name, each file once.

    Keys are the paths as written in the blueprint. A file is compiled for the union of the hooks
    any stage names it for, so each of them must be defined. Raises ScriptError (naming the stage,
    the hook and the file) for the first file that is outside the agent folder or does not compile.
    """
    wanted: dict[str, list[str]] = {}
    first_use: dict[str, tuple[str, str]] = {}
    for stage in plan.stages:
        for hook, path in stage.hooks.items():
            names = wanted.setdefault(path, [])
            if hook not in names:
                names.append(hook)
            first_use.setdefault(path, (stage.name, hook))
    compiled: dict[str, HookScript] = {}
    for path, hooks in wanted.items():
        stage_name, hook = first_use[path]
        where = f"stage '{stage_name}' (stages.{stage_name}.hooks.{hook}): the hook script"
        target = resolve_agent_script(plan, path, where)
        try:
            compiled[path] = compile_hooks(target, hooks, label=path)
        except ScriptError as exc:
            raise ScriptError(f"stage '{stage_name}' hooks: {exc.message}", exc.path, exc.line) from exc
    return compiled


def compile_region_scripts(plan: RunPlan) -> dict[str, RegionScript]:
    """Compile every custom-region script of ``plan``, each distinct path once.

    Keys are the paths as the blueprint writes them. Raises ScriptError naming the region and
    the file when a script is outside the agent folder, unreadable, or does not compile.
    """
    compiled: dict[str, RegionScript] = {}
    for stage, config in plan.scripted_regions():
        path = config.script
        assert path is not None
        if path in compiled:
            continue
        prefix = f"stages.{stage}.context.regions" if stage else "context.regions"
        where = f"region '{config.name}' ({prefix}.{config.name}.script): the custom region script"
        target = resolve_agent_script(plan, path, where)
        try:
            compiled[path] = compile_region_script(target, label=path)
        except ScriptError as exc:
            raise ScriptError(f"region '{config.name}': {exc.message}", exc.path, exc.line) from exc
    return compiled


def compile_validators(plan: RunPlan, launch_validator: Any = None) -> dict[str, Any]:
    """Compile every output validator the run may use, so a broken one fails before any model call.

    Keys are the ``validator`` values of the output specs (paths relative to the agent folder);
    a validator given at launch (source text or a compiled Validator) is keyed LAUNCH_VALIDATOR.
    Raises ScriptError naming the file and line of the first one that does not compile, or a
    path that leaves the agent folder.
    """
    compiled: dict[str, Any] = {}
    specs = [plan.agent_output] + [s.output for s in plan.stages]
    for spec in specs:
        path = spec.validator if spec is not None else None
        if not path or path in compiled:
            continue
        base = Path(plan.base_dir) if plan.base_dir else None
        if base is None:
            raise ScriptError(
                f"the output validator '{path}' is a path, but this blueprint was loaded from text; "
                "load it from its folder, or pass the script as output_validator=...",
                path=path,
            )
        try:
            target = confine(base, path)
        except PathEscape:
            target = None
        if target is None or target == base.resolve():
            raise ScriptError(f"the output validator '{path}' is outside the agent folder", path=path)
        compiled[path] = compile_validator(target, label=path)
    if launch_validator is not None:
        if isinstance(launch_validator, Validator):
            compiled[LAUNCH_VALIDATOR] = launch_validator
        else:
            compiled[LAUNCH_VALIDATOR] = compile_validator(
                source=str(launch_validator), label="output_validator"
            )
    return compiled
