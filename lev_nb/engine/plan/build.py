"""Turning a :class:`~lev_nb.blueprint.Blueprint` into the engine's :class:`RunPlan`
(docs/concepts.md#stages, docs/reference/blueprint.md#bp-stage).

This is the one place where the run engine reads the blueprint model. Where the model already
derives a value (``Gate.attempts``, ``Edge.transform_kind``, ``Stage.effective_tools``, ...), the
plan takes it from there rather than deriving it again.
"""

from __future__ import annotations

import json
from typing import Any

from lev_nb.engine.plan.types import (
    CompactionPlan,
    EdgePlan,
    FanOutPlan,
    GatePlan,
    MappingPlan,
    ModelChoice,
    NudgePlan,
    OutputSpec,
    RepetitionPolicy,
    RunPlan,
    SeedPlan,
    PointPlan,
    StagePlan,
    TransformPlan,
)
from lev_nb.blueprint.constants import DEFAULT_WINDOW_TOKENS
from lev_nb.engine.context.regions import RegionConfig
from lev_nb.sandbox import resolve as resolve_sandbox



def stage_plans(bp: Any) -> tuple[StagePlan, ...]:
    """The plan of each stage of a loaded blueprint, in order (what ``lev validate`` reads to say
    which model each stage would start on, without the tools a whole RunPlan needs)."""
    # A stage's own layout is resolved against its own model's window.
    return tuple(_stage_plan(bp, name, index, _window(bp, name)) for index, name in enumerate(bp.stage_names))


def plan_from_blueprint(bp: Any) -> RunPlan:
    """Precompute everything the run loop needs from a loaded blueprint."""
    window = _window(bp, bp.entry_stage)
    # The global layout (shared by every stage) is resolved against the entry stage's window.
    stages = stage_plans(bp)
    layout = tuple(_region_config(r, window) for r in bp.global_layout.values())
    caller = tuple(i.region for i in bp.inputs) or ("task",)
    from lev_nb.blueprint.lints_own import wrong_type
    from lev_nb.tools.builtin import default_registry
    from lev_nb.tools.scripts import script_tool_defs

    script_defs, skipped = script_tool_defs(bp.base_dir, set(default_registry().names()))
    return RunPlan(
        agent_name=bp.name,
        stages=stages,
        entry=bp.entry_stage,
        layout=layout,
        agent_output=_output_spec(bp.agent.output),
        tool_permissions=dict(bp.tool_permissions),
        base_dir=str(bp.base_dir) if bp.base_dir else None,
        source_path=str(bp.source_path) if bp.source_path else None,
        caller_regions=caller,
        script_tools={d.name: d for d in script_defs},
        skipped_scripts=tuple(skipped),
        ignored_values=tuple(f.message for f in wrong_type(bp)),
        seeds=_seed_plans(bp),
        repetition=_repetition(bp),
        max_child_depth=bp.agent.max_child_depth,
        read_paths=tuple(bp.read_paths.allow) if bp.read_paths is not None else (),
        safe_tools=tuple(bp.safe_commands.tools) if bp.safe_commands is not None else (),
        safe_shell=tuple(bp.safe_commands.shell) if bp.safe_commands is not None else (),
        file_tracking=bp.context.file_tracking,
        dynamic_tools=bool(bp.agent.dynamic_tools),
        compaction=_compaction(bp),
        window_tokens=window,
        sandbox=resolve_sandbox(bp.sandbox),
        taint_tracking=_taint_tracking(bp),
        transforms=_transforms(bp),
    )


def _transforms(bp: Any) -> tuple[TransformPlan, ...]:
    """The blueprint's ``[[transforms]]``, entries that name both blueprints."""
    return tuple(
        TransformPlan(
            from_blueprint=spec.from_blueprint,
            to_blueprint=spec.to_blueprint,
            mappings=tuple(
                MappingPlan(m.from_region, m.to_region, m.transform or "direct", tuple(m.fields or ()))
                for m in spec.mappings if m.from_region and m.to_region
            ),
        )
        for spec in bp.transforms if spec.from_blueprint and spec.to_blueprint
    )


def _taint_tracking(bp: Any) -> bool | None:
    """The agent's ``[security] taint_tracking`` (None: no block; a block is on unless it says false)."""
    return bp.security.taint_tracking if bp.security is not None else None


def _window(bp: Any, stage_name: str) -> int:
    """The context window of a stage's first model: a ``[model_capabilities]`` correction, else
    the built-in catalogue's (lev_nb.providers.catalogue), else a provider script's
    ``@max_context_tokens``, else DEFAULT_WINDOW_TOKENS."""
    from lev_nb.providers.catalogue import context_window
    from lev_nb.settings import ConfigError, current

    stage = bp.stages[stage_name]
    if not stage.models:
        return DEFAULT_WINDOW_TOKENS
    ref = stage.models[0]
    try:
        settings = current()
    except ConfigError:
        settings = None
    known = context_window(ref.provider, ref.model, settings)
    if known is not None:
        return known
    if settings is None:
        return DEFAULT_WINDOW_TOKENS
    from lev_nb.providers.rhai_provider import script_window

    return script_window(ref.provider, settings) or DEFAULT_WINDOW_TOKENS


def _compaction(bp: Any) -> CompactionPlan:
    raw = bp.compaction
    if raw is None:
        return CompactionPlan()
    return CompactionPlan(
        provider=raw.provider, model=raw.model, system_prompt=raw.system_prompt,
        max_summary_tokens=raw.max_summary_tokens, temperature=raw.temperature, declared=True,
    )


def _repetition(bp: Any) -> RepetitionPolicy:
    raw = bp.repetition_detection
    policy = RepetitionPolicy()
    if raw is None:
        return policy
    return RepetitionPolicy(
        enabled=policy.enabled if raw.enabled is None else raw.enabled,
        max_repeat_calls=policy.max_repeat_calls if raw.max_repeat_calls is None else raw.max_repeat_calls,
        max_readonly_streak=policy.max_readonly_streak if raw.max_readonly_streak is None else raw.max_readonly_streak,
    )


def _stage_plan(bp: Any, name: str, index: int, window: int) -> StagePlan:
    stage = bp.stages[name]
    own = stage.own_layout
    transitions = None
    if stage.transitions is not None:
        transitions = tuple(_edge_plan(e) for e in stage.edges)
    fan_out = None
    if stage.mode == "fan_out":
        fan_out = FanOutPlan(
            worker_stage=stage.worker_stage,
            worker_agent=stage.worker_agent,
            worker_query=stage.worker_query,
            merge_stage=stage.merge_stage,
            results_region=stage.results_region or "conversation",
            max_workers=stage.max_workers,
            max_items=stage.max_items or 0,
            max_attempts=stage.max_attempts,
            on_worker_failure=stage.on_worker_failure,
        )
    prompt = stage.system_prompt
    if stage.mode == "fan_out" and stage.split_prompt:
        prompt = f"{prompt}\n\n{stage.split_prompt}" if prompt else stage.split_prompt
    hooks = {}
    if stage.hooks is not None:
        hooks = {k: v for k, v in stage.hooks.model_dump().items() if v}
    return StagePlan(
        name=name,
        index=index,
        mode=stage.mode,
        system_prompt=prompt,
        description=stage.description,
        models=tuple(ModelChoice(m.provider, m.model) for m in stage.models) if bp.stage_writes(name, "model") else (),
        allow_user_default=stage.model.allow_user_default,
        parameters=dict(stage.model.parameters),
        request_timeout_secs=stage.model.request_timeout_secs,
        tools=tuple(stage.effective_tools),
        connectors=tuple(stage.available_connectors),
        tool_permissions=dict(stage.tool_permissions),
        max_iterations=stage.max_iterations,
        max_revisits=stage.max_revisits,
        transitions=transitions,
        transition_prompt=stage.transition_prompt,
        allow_complete=stage.allow_complete,
        require_output=stage.require_output,
        output=_output_spec(stage.output),
        nudge=_nudge(bp, stage),
        layout=tuple(_region_config(r, window) for r in own.values()) if own else None,
        tool_routing=stage.tool_routing.model_dump() if stage.tool_routing else None,
        fan_out=fan_out,
        allow_as_worker=stage.allow_as_worker,
        requires_children=stage.requires_children,
        accepts_messages=stage.accepts_messages,
        hooks=hooks,
        interaction_points=tuple(_point_plan(pt) for pt in stage.interaction_points)
        if stage.mode == "interactive_points"
        else (),
        required_tools=tuple(stage.required_tools),
        window_tokens=window,
        sandbox=resolve_sandbox(bp.sandbox, stage.sandbox),
        taint_tracking=stage.security.taint_tracking if stage.security is not None else None,
        batch_tool_hint=_first_set(stage.batch_tool_hint, bp.agent.batch_tool_hint),
        shell_hint=_first_set(stage.shell_hint, bp.agent.shell_hint),
    )


def _first_set(*levels: bool | None) -> bool | None:
    """The narrowest level that says something (stage before agent), or None when none does."""
    return next((level for level in levels if level is not None), None)


def _point_plan(point: Any) -> PointPlan:
    """An interaction point as the engine runs it."""
    return PointPlan(
        name=point.name,
        prompt=point.prompt,
        required=point.required,
        unattended=point.unattended,
        style=point.style,
        options=tuple(point.options),
        directives=tuple(point.directives.items()),
        abort_options=tuple(point.abort_options),
        edit_options=tuple(point.edit_options),
        document_region=point.document_region,
    )


def _edge_plan(edge: Any) -> EdgePlan:
    gate = None
    if edge.gate is not None:
        g = edge.gate
        gate = GatePlan(
            require_modifications=g.require_modifications,
            require_regions=tuple(g.require_regions),
            require_region_updated=g.require_region_updated,
            require_no_open_items=g.require_no_open_items,
            region=g.region,
            tools=tuple(g.tools),
            message=g.message,
            max_attempts=g.attempts,
        )
    config = edge.transform_config.model_dump() if edge.transform_config is not None else {}
    return EdgePlan(
        target=edge.target,
        condition=edge.condition,
        hint=edge.hint,
        transform=edge.transform_kind,
        transform_config=config,
        gate=gate,
        stuck_after_iterations=_positive(edge.stuck_after_iterations),
        stuck_after_minutes=_positive(edge.stuck_after_minutes),
        stuck_after_same_file_edits=_positive(edge.stuck_after_same_file_edits),
        stuck_after_tool_calls=_positive(edge.stuck_after_tool_calls),
    )


def _positive(value: int | None) -> int | None:
    return value if value is not None and value > 0 else None


def _nudge(bp: Any, stage: Any) -> NudgePlan:
    reviewed = stage.mode == "interactive_points" and bool(stage.interaction_points)
    enabled: bool | None = None
    maximum: int | None = None
    text: str | None = None
    for level in (bp.agent.nudge, stage.nudge):  # later levels win, field by field
        if level is None:
            continue
        if level.enabled is not None:
            enabled = level.enabled
        if level.max is not None and level.max >= 0:
            maximum = level.max
        if level.text:
            text = level.text
    return NudgePlan(enabled=enabled, max=maximum, text=text, reviewed=reviewed)


def _output_spec(spec: Any) -> OutputSpec | None:
    if spec is None:
        return None
    return OutputSpec(
        format=spec.format,
        instructions=spec.instructions,
        example=spec.example,
        schema=spec.json_schema,
        validator=spec.validator,
    )


def _region_config(region: Any, window: int) -> RegionConfig:
    budget = region.resolve_budget(window)
    return RegionConfig(
        name=region.name,
        kind=region.kind,
        max_tokens=budget,
        max_items=region.max_items,
        strategy=region.strategy,
        overflow=region.overflow,
        compact_count=region.compact_count,
        max_entries=region.max_entries,
        required=region.required,
        required_message=region.required_message,
        summarizable=region.summarizable,
        description=region.description,
        describe_in_prompt=region.describe_in_prompt,
        volatility=region.volatility,
        admission=region.admission,
        persistent=region.persistent,
        script=region.script,
        compact_threshold=_compact_threshold(region, budget) if region.kind == "compacting" else None,
        source_region=region.source_region or "",
    )


def _compact_threshold(region: Any, budget: int) -> int:
    """When a compacting region summarises (docs/concepts.md#context-regions): ``compact_at`` ("N%" of its
    resolved budget), capped by ``threshold_tokens``; with neither, 80% of the budget."""
    from lev_nb.blueprint.model import parse_percent

    threshold = budget * 8 // 10
    if region.compact_at:
        fraction = parse_percent(region.compact_at)
        if isinstance(fraction, float):
            threshold = int(budget * fraction)
    if region.threshold_tokens is not None and region.threshold_tokens > 0:
        threshold = min(threshold, region.threshold_tokens) if region.compact_at else region.threshold_tokens
    return max(1, threshold)


def _seed_plans(bp: Any) -> tuple[SeedPlan, ...]:
    """The seeds of the blueprint's global layout, in declaration order."""
    plans = []
    for name, region in bp.global_layout.items():
        seed = region.seed
        if seed is None:
            continue
        tools = tuple((t.name, json.dumps(t.args)) for t in seed.tools)
        plans.append(
            SeedPlan(
                region=name, kind=seed.kind, key=seed.key, value=seed.value, files=tuple(seed.files),
                tools=tools, refresh=seed.refresh, required=region.required,
            )
        )
    return tuple(plans)
