"""Starting runs: the functions behind ``bp.run(...)``, ``lev_nb.run(...)`` and ``lev run``
(docs/runs.md#starting-a-run)."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, Iterable

from lev_nb.engine import views
from lev_nb.engine.handle import Run
from lev_nb.engine.pipeline.inference import RetryPolicy
from lev_nb.engine.plan.types import OutputSpec
from lev_nb.engine.prepare import LAUNCH_VALIDATOR, cached_plan, compile_run_scripts, compile_validators
from lev_nb.engine.resume import launch_record
from lev_nb.engine.runner import Runner
from lev_nb.providers.base import Provider


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
    yolo: bool = False,
    allow: Iterable[str] | None = None,
    interactive: bool | None = None,
    max_depth: int | None = None,
    seed_commands: bool = True,
    **inputs: str,
) -> Run:
    """Start ``blueprint`` on the engine thread and return its :class:`Run` at once.

    ``model`` is ``None`` (each stage uses its own model block), ``"mock"``, ``"scripted:FILE"``,
    ``"provider/model"`` (overrides every stage) or a Provider object such as ``ScriptedModel``.
    Extra keyword arguments fill caller-seeded context regions by their input name.

    Before the run exists, :func:`lev_nb.engine.launch.check_launch` judges the request (inputs,
    task, model and API key, output format, webhook, workdir) and raises
    :class:`~lev_nb.engine.launch.LaunchError` for the first problem; a script that does not
    compile raises ScriptError. A ``workdir`` that does not exist yet is created by the run.

    The final output can be shaped at launch with ``output_format``, ``output_instructions``,
    ``output_schema`` (a JSON Schema dict) and ``output_validator`` (Rhai source defining
    ``fn validate(content)``, or a compiled ``lev_nb.scripting.Validator``). ``on_complete`` is
    called with the Run when it ends; ``webhook`` is a URL that receives the result as a JSON POST.

    Permissions (docs/security.md#permissions): ``allow`` names tools that run without asking (``--allow``),
    above the blueprint's and the configuration's word; ``yolo=True`` turns every remaining ``ask``
    into ``allow`` (a ``deny`` stays) and leaves out the tools that wait for a person unless a stage
    requires them. Both are recorded in meta.json and inherited by child runs. ``interactive`` says
    whether somebody can answer the run's requests (``run.pending`` / ``run.respond``): True asks,
    False never asks (an ``ask`` tool is denied with a message that says how to allow it), and the
    default None asks when the run is started in a notebook kernel (its view, ``run.wait()`` and
    ``%%lev`` show the forms) and otherwise from the moment a run view of it is open.
    ``max_depth`` limits how many levels of sub-agents may start below this run (it wins over the
    blueprint's ``max_child_depth`` and the configuration's; 0: none at all). ``seed_commands=False``
    (``--no-seed-commands``) refuses the blueprint's command seeds for this run and its children.
    """
    from lev_nb.engine.launch import LaunchError, check_allowed_tools, check_launch
    from lev_nb.settings import current as current_settings

    settings = current_settings()  # read once: the checks and the run see the same configuration
    if not seed_commands:
        settings = dataclasses.replace(
            settings, security=dataclasses.replace(settings.security, allow_seed_commands=False))
    if max_depth is not None and (isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 0):
        raise LaunchError(
            f"max_depth must be a whole number of 0 or more, got {max_depth!r}",
            cli_hint="pass --max-depth N with N >= 0", python_hint="pass max_depth=N with N >= 0",
        )
    plan = cached_plan(blueprint)
    launch = check_launch(
        plan, task=task, inputs=inputs, model=model, output_format=output_format,
        workdir=workdir, webhook=webhook, settings=settings, options=start_options(), home=home,
    )
    allowed = check_allowed_tools(plan, allow, home)
    request = None
    if output_format or output_instructions or output_schema or output_validator is not None:
        request = OutputSpec(
            format=output_format,
            instructions=output_instructions,
            schema=output_schema,
            validator=LAUNCH_VALIDATOR if output_validator is not None else None,
        )
    if output_schema or plan.script_tools or _declares_schema(plan):
        from lev_nb.schemas import warm_up

        warm_up()  # jsonschema, imported in the background before the first check needs it
    validators = compile_validators(plan, output_validator)
    hook_scripts, region_scripts = compile_run_scripts(plan)
    runner = Runner(
        plan,
        task=task,
        provider=launch.provider,
        workdir=launch.workdir,
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
        settings=settings,
        yolo=yolo,
        allow=allowed,
        interactive=interactive,
        max_depth=max_depth,
        launch_record=launch_record(
            blueprint, model=model, task=task, workdir=launch.workdir, inputs=inputs, output_request=request,
            output_validator=output_validator, webhook=webhook, yolo=yolo, allow=allowed, max_depth=max_depth,
        ),
    )
    runner.blueprint = blueprint
    run = Run(runner)
    runner.handle = run  # before the run starts, so on_complete always receives it
    if interactive is None and views.person_here():
        run.attend()  # before the first request: a notebook person is asked from the start
    run.start()
    return run


def resume(run_id: str, **kwargs: Any) -> Run:
    """``lev_nb.resume(run_id)``: continue a paused run, or one whose process was killed, from its
    record (see :func:`lev_nb.engine.resume.resume_run` for the keyword arguments)."""
    from lev_nb.engine.resume import resume_run

    return resume_run(run_id, **kwargs)


def _declares_schema(plan: Any) -> bool:
    """Whether the blueprint asks for a JSON Schema check of an answer (agent or stage output)."""
    specs = [plan.agent_output] + [stage.output for stage in plan.stages]
    return any(spec is not None and spec.schema for spec in specs)


def start_options() -> tuple[str, ...]:
    """The keyword names :func:`start_run` takes itself (any other keyword is a blueprint input)."""
    code = start_run.__code__
    return code.co_varnames[1:code.co_argcount + code.co_kwonlyargcount]


def run(blueprint: Any, task: str = "", model: str | Provider | None = None, **kwargs: Any) -> Run:
    """``lev_nb.run(path_or_blueprint, task=..., ...)``: load the blueprint if needed, then start it."""
    from lev_nb.catalog import load

    return start_run(load(blueprint), task=task, model=model, **kwargs)
