"""Starting runs: the function behind ``bp.run(...)`` and ``lev run``."""

from __future__ import annotations

import os
import weakref
from pathlib import Path
from typing import Any, Callable

from lev_nb.engine.handle import Run
from lev_nb.engine.loop import engine_loop
from lev_nb.engine.plan.types import OutputSpec
from lev_nb.engine.plan.build import plan_from_blueprint
from lev_nb.engine.runner import RetryPolicy, Runner
from lev_nb.providers.base import Provider
from lev_nb.workspace import PathEscape, confine


def start_run(
    blueprint: Any,
    task: str = "",
    model: str | Provider | None = None,
    workdir: str | os.PathLike[str] | None = None,
    *,
    output_format: str | None = None,
    output_instructions: str | None = None,
    output_schema: dict[str, Any] | None = None,
    on_complete: Callable[[Run], None] | None = None,
    home: str | os.PathLike[str] | None = None,
    retry: RetryPolicy | None = None,
    approver: Callable[..., Any] | None = None,
    output_validator: Any = None,
    webhook: str | None = None,
    **inputs: str,
) -> Run:
    """Start ``blueprint`` on the engine thread and return its :class:`Run` at once.

    ``model`` is ``None`` (each stage uses its own model block), ``"mock"``, ``"scripted:FILE"``,
    ``"provider/model"`` (overrides every stage) or a Provider object such as ``ScriptedModel``.
    Extra keyword arguments fill caller-seeded context regions by their input name.

    The final output can be shaped at launch with ``output_format``, ``output_instructions``,
    ``output_schema`` (a JSON Schema dict) and ``output_validator`` (Rhai source defining
    ``fn validate(content)``, or a compiled ``lev_nb.scripting.Validator``). ``on_complete`` is
    called with the Run when it ends; ``webhook`` is a URL that receives the result as a JSON POST.
    """
    from lev_nb.providers.resolve import resolve_model

    provider = resolve_model(model)
    request = None
    if output_format or output_instructions or output_schema or output_validator is not None:
        request = OutputSpec(
            format=output_format,
            instructions=output_instructions,
            schema=output_schema,
            validator=LAUNCH_VALIDATOR if output_validator is not None else None,
        )
    plan = cached_plan(blueprint)
    validators = compile_validators(blueprint, plan, request, output_validator)
    hook_scripts, region_scripts = compile_run_scripts(plan)
    runner = Runner(
        plan,
        task=task,
        provider=provider,
        workdir=workdir,
        inputs=inputs,
        output_request=request,
        on_complete=on_complete,
        home=home,
        retry=retry,
        approver=approver,
        validators=validators,
        webhook=webhook,
        hook_scripts=hook_scripts,
        region_scripts=region_scripts,
    )
    run = Run(runner, None)
    runner.handle = run  # before the run starts, so on_complete always receives it
    run._future = engine_loop().submit(runner.main())
    return run


_PLANS: "weakref.WeakKeyDictionary[Any, Any] | dict[int, tuple[Any, Any]]" = {}


def cached_plan(blueprint: Any) -> Any:
    """The engine plan of ``blueprint``, computed once per blueprint object (blueprints are frozen)."""
    key = id(blueprint)
    hit = _PLANS.get(key)
    if hit is not None and hit[0]() is blueprint:
        return hit[1]
    plan = plan_from_blueprint(blueprint)
    _PLANS[key] = (weakref.ref(blueprint, lambda _ref, key=key: _PLANS.pop(key, None)), plan)
    return plan


LAUNCH_VALIDATOR = "<launch request>"


def compile_validators(
    blueprint: Any, plan: Any, request: OutputSpec | None, launch_validator: Any = None
) -> dict[str, Any]:
    """Compile every output validator the run may use, so a broken one fails before any model call.

    Keys are the ``validator`` values of the output specs (paths relative to the agent folder);
    a validator given at launch (source text or a compiled Validator) is keyed LAUNCH_VALIDATOR.
    Raises ScriptError naming the file and line of the first one that does not compile, or a
    path that leaves the agent folder.
    """
    from lev_nb.scripting import ScriptError, Validator, compile_validator

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


def compile_run_scripts(plan: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Compile the stage hooks and custom-region scripts of ``plan`` (each file once), so a
    broken one fails before any model call. Returns (hook scripts, region scripts) keyed by the
    paths the blueprint writes; raises ScriptError naming the stage or region and the file."""
    from lev_nb.engine.context.custom import compile_region_scripts
    from lev_nb.engine.pipeline.hooks import compile_stage_hooks

    return compile_stage_hooks(plan), compile_region_scripts(plan)


def run(blueprint: Any, task: str = "", model: str | Provider | None = None, **kwargs: Any) -> Run:
    """``lev_nb.run(path_or_blueprint, task=..., ...)``: load the blueprint if needed, then start it."""
    if not hasattr(blueprint, "stages"):
        from lev_nb.blueprint import load

        blueprint = load(blueprint)
    return start_run(blueprint, task=task, model=model, **kwargs)
