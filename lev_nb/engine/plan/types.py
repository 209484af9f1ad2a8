"""The engine's view of a blueprint: plain, frozen, precomputed facts (docs/concepts.md#stages).

The run loop reads only these dataclasses, never the blueprint model
(:mod:`lev_nb.engine.plan.build` is the one place that does), so the format can grow without the
loop noticing. Defaults the blueprint layer also knows are read from
:mod:`lev_nb.blueprint.constants`, not repeated here.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from lev_nb.blueprint.constants import (
    DEFAULT_FAN_OUT_ATTEMPTS,
    DEFAULT_GATE_ATTEMPTS,
    DEFAULT_MAX_WORKERS,
    DEFAULT_WINDOW_TOKENS,
)
from lev_nb.records import record
from lev_nb.sandbox import SandboxSpec

NORMAL_CONDITIONS = frozenset({"always", "llm_choice"})
DEFAULT_MAX_NUDGES = 3
DEFAULT_NUDGE_TEXT = (
    "You have tools available. Use them to make progress on the task - for instance, start by "
    "looking at the relevant files in the working directory."
)


@record
class OutputSpec:
    """The shape a final answer must take; every field optional."""

    format: str | None = None
    instructions: str | None = None
    example: str | None = None
    schema: dict[str, Any] | None = None
    validator: str | None = None

    def is_empty(self) -> bool:
        """True when the spec asks for nothing at all."""
        return not any((self.format, self.instructions, self.example, self.schema, self.validator))


@record
class SeedPlan:
    """One region's seed, as the engine runs it."""

    region: str
    kind: str
    key: str | None = None
    value: str | None = None
    files: tuple[str, ...] = ()
    tools: tuple[tuple[str, str], ...] = ()  # (tool name, JSON arguments)
    refresh: str = "once"
    required: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@record
class RepetitionPolicy:
    """The thresholds in force (``[repetition_detection]``, runtime defaults otherwise)."""

    enabled: bool = True
    max_repeat_calls: int = 3
    max_readonly_streak: int = 10


@record
class GatePlan:
    """Preconditions an edge imposes on the stage it leaves."""

    require_modifications: bool = False
    require_regions: tuple[str, ...] = ()
    require_region_updated: str | None = None
    require_no_open_items: str | None = None
    region: str | None = None
    tools: tuple[str, ...] = ()
    message: str | None = None
    max_attempts: int = DEFAULT_GATE_ATTEMPTS


@record
class EdgePlan:
    """One transition, in declaration order."""

    target: str
    condition: str = "always"
    hint: str | None = None
    transform: str = "direct"
    transform_config: dict[str, Any] = field(default_factory=dict)
    gate: GatePlan | None = None
    stuck_after_iterations: int | None = None
    stuck_after_minutes: float | None = None
    stuck_after_same_file_edits: int | None = None
    stuck_after_tool_calls: int | None = None

    @property
    def is_normal(self) -> bool:
        """Normal edges are the ones the model follows or picks on completion."""
        return self.condition in NORMAL_CONDITIONS


@record
class ModelChoice:
    """A provider/model pair from a stage's ordered model list."""

    provider: str
    model: str


@record
class CompactionPlan:
    """The summariser that compacts regions (``[compaction]``; the runtime defaults otherwise).

    ``declared`` says whether the blueprint wrote the table.
    """

    provider: str = "anthropic"
    model: str = "claude-sonnet-4-6"
    system_prompt: str | None = None
    max_summary_tokens: int = 2000
    temperature: float = 0.2
    declared: bool = False


@record
class NudgePlan:
    """The blueprint's word on one stage's empty-response nudge (agent, then stage; None: not set).

    The machine's ``[nudge]`` defaults sit between these and the built-in ones, so the effective
    nudge is resolved per run by :meth:`resolve` (docs/concepts.md#nudges-and-holds: stage > agent > config >
    built-in; a reviewed interactive_points stage is not nudged by default).
    """

    enabled: bool | None = None
    max: int | None = None
    text: str | None = None
    reviewed: bool = False

    def resolve(self, machine: Any) -> tuple[bool, int, str]:
        """``(enabled, max, text)`` with ``machine`` (the settings' ``nudge`` table) beneath."""
        enabled = self.enabled
        if enabled is None:
            enabled = machine.enabled if machine.enabled is not None else not self.reviewed
        maximum = self.max if self.max is not None else machine.max if machine.max is not None else DEFAULT_MAX_NUDGES
        text = self.text or machine.text or DEFAULT_NUDGE_TEXT
        return enabled, maximum, text


@record
class FanOutPlan:
    """How a fan_out stage splits work and where the results go."""

    worker_stage: str | None = None
    worker_agent: str | None = None
    worker_query: str | None = None
    merge_stage: str | None = None
    results_region: str = "conversation"
    max_workers: int = DEFAULT_MAX_WORKERS
    max_items: int = 0
    max_attempts: int = DEFAULT_FAN_OUT_ATTEMPTS
    on_worker_failure: str = "continue"


@record
class PointPlan:
    """One interaction point of an ``interactive_points`` stage (docs/runs.md#a-person-in-the-loop)."""

    name: str
    prompt: str = ""
    required: bool = True
    unattended: str = "auto_approve"  # auto_approve | ask
    style: str = "free_text"  # free_text | multiple_choice | confirm
    options: tuple[str, ...] = ()
    directives: tuple[tuple[str, str], ...] = ()  # (option label, directive text), in order
    abort_options: tuple[str, ...] = ()
    edit_options: tuple[str, ...] = ()
    document_region: str | None = None


@record
class MappingPlan:
    """One region a parent hands its child at spawn (a ``[[transforms.mappings]]`` entry)."""

    from_region: str
    to_region: str
    transform: str = "direct"  # direct | summarize | extract
    fields: tuple[str, ...] = ()  # extract: the keys of a JSON object kept


@record
class TransformPlan:
    """A ``[[transforms]]`` entry: the regions a ``from_blueprint`` parent hands a
    ``to_blueprint`` child when it starts it (sub-agent or fan-out worker)."""

    from_blueprint: str
    to_blueprint: str
    mappings: tuple[MappingPlan, ...] = ()


@record
class StagePlan:
    """Everything the run loop needs to know about one stage."""

    name: str
    index: int
    mode: str = "autonomous"
    system_prompt: str | None = None
    description: str | None = None
    models: tuple[ModelChoice, ...] = ()  # as the stage writes them; () when it names no model
    allow_user_default: bool = True  # fall back to the configured default model when none is usable
    parameters: dict[str, Any] = field(default_factory=dict)
    request_timeout_secs: float | None = None
    tools: tuple[str, ...] = ()
    connectors: tuple[str, ...] = ()  # MCP servers whose every tool the stage is granted
    tool_permissions: dict[str, str] = field(default_factory=dict)
    max_iterations: int | None = None
    max_revisits: int | None = None
    # None: the key was absent (fall through); (): present but empty (terminal).
    transitions: tuple[EdgePlan, ...] | None = None
    transition_prompt: str | None = None
    allow_complete: bool = False
    require_output: bool = False
    output: OutputSpec | None = None
    nudge: NudgePlan = field(default_factory=NudgePlan)
    layout: tuple[Any, ...] | None = None  # the stage's own RegionConfigs, if it declares a layout
    tool_routing: dict[str, Any] | None = None
    fan_out: FanOutPlan | None = None
    allow_as_worker: bool = False
    requires_children: bool = False  # the stage does not leave while a sub-agent it spawned runs
    accepts_messages: bool = True  # messages sent to the run are delivered only in such a stage
    hooks: dict[str, str] = field(default_factory=dict)
    # the interaction points of an interactive_points stage, in order
    interaction_points: tuple[PointPlan, ...] = ()
    required_tools: tuple[str, ...] = ()  # blocking tools the stage keeps under --yolo
    window_tokens: int = DEFAULT_WINDOW_TOKENS  # the context window of the stage's first model
    # Where the stage's commands run: the stronger of the agent's and its own [sandbox]
    sandbox: SandboxSpec = field(default_factory=SandboxSpec)
    # The stage's own [stages.<name>.security] taint_tracking (None: inherits the agent's)
    taint_tracking: bool | None = None
    # The system-prompt hints as the blueprint sets them (the stage's word, else the agent's);
    # None: the blueprint is silent and the configuration decides (engine/context/hints.py).
    batch_tool_hint: bool | None = None
    shell_hint: bool | None = None

    def find_edge(self, condition: str) -> list[EdgePlan]:
        """Edges with the given condition, in declaration order."""
        return [e for e in self.transitions or () if e.condition == condition]

    @property
    def declares_normal_edge(self) -> bool:
        """True when the stage has at least one always/llm_choice edge."""
        return any(e.is_normal for e in self.transitions or ())


@record
class RunPlan:
    """The whole blueprint as the engine sees it."""

    agent_name: str
    stages: tuple[StagePlan, ...]
    entry: str
    layout: tuple[Any, ...]  # global RegionConfigs (default layout when none declared)
    agent_output: OutputSpec | None = None
    tool_permissions: dict[str, str] = field(default_factory=dict)
    base_dir: str | None = None
    source_path: str | None = None
    caller_regions: tuple[str, ...] = ("task",)
    script_tools: dict[str, Any] = field(default_factory=dict)  # name -> ToolDef
    skipped_scripts: tuple[Any, ...] = ()  # tool scripts that did not load, with reasons
    # Values the blueprint writes with the wrong type, read as not set: one sentence each (wrong-type)
    ignored_values: tuple[str, ...] = ()
    seeds: tuple[SeedPlan, ...] = ()  # the global layout's seeds, in declaration order
    repetition: RepetitionPolicy = field(default_factory=RepetitionPolicy)
    # How deep sub-agents and workers may nest ([agent] max_child_depth); None: the blueprint
    # sets none, so the launch or the configuration ([limits] max_child_depth) decides.
    max_child_depth: int | None = None
    read_paths: tuple[str, ...] = ()  # [read_paths] allow: reads outside the workdir it asks for
    # [safe_commands]: what the blueprint asks to run unasked (counts only where the user honours it)
    safe_tools: tuple[str, ...] = ()
    safe_shell: tuple[str, ...] = ()
    dynamic_tools: bool = False  # [agent] dynamic_tools: tools the agent writes into <workdir>/tools
    file_tracking: Any = None  # [context.file_tracking] (blueprint FileTracking), None: off
    compaction: CompactionPlan = field(default_factory=CompactionPlan)
    window_tokens: int = DEFAULT_WINDOW_TOKENS  # the entry stage's model's context window
    sandbox: SandboxSpec = field(default_factory=SandboxSpec)  # the agent's [sandbox]: seed commands
    transforms: tuple[TransformPlan, ...] = ()  # [[transforms]]: regions handed from parent to child at spawn
    # The agent's [security] taint_tracking (None: no [security] block)
    taint_tracking: bool | None = None

    def tracks_taint(self, stage: StagePlan, machine: bool) -> bool:
        """Whether ``stage`` runs behind the taint gate: the machine-wide ``taint_tracking``, or the
        stage's own ``[security]``, else the agent's. A blueprint can turn it on, never off."""
        own = stage.taint_tracking if stage.taint_tracking is not None else self.taint_tracking
        return machine or bool(own)

    def tracks_taint_anywhere(self, machine: bool) -> bool:
        """Whether any stage runs behind the taint gate (then every tool result is labelled)."""
        return any(self.tracks_taint(s, machine) for s in self.stages)

    def stage(self, name: str) -> StagePlan:
        """The stage called ``name`` (KeyError if there is none)."""
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise KeyError(name)

    def has_stage(self, name: str) -> bool:
        """True when a stage of that name exists."""
        return any(s.name == name for s in self.stages)

    @property
    def caller_inputs(self) -> tuple[SeedPlan, ...]:
        """The caller seeds of the global layout (the blueprint's declared inputs), in order."""
        return tuple(s for s in self.seeds if s.kind == "caller")

    @property
    def any_requires_output(self) -> bool:
        """True when some stage owes a final output (the run then must end with one)."""
        return any(s.require_output for s in self.stages)

    def reachable_from(self, entry: str) -> list[StagePlan]:
        """Stages a run entered at ``entry`` can get to: along edges, fall-through and merges.

        A fan-out's worker stage is not reached this way: it runs in child runs of its own.
        """
        seen: dict[str, StagePlan] = {}
        pending = [entry]
        while pending:
            name = pending.pop()
            if name in seen or not self.has_stage(name):
                continue
            stage = seen[name] = self.stage(name)
            if stage.transitions is None:
                if stage.index + 1 < len(self.stages):
                    pending.append(self.stages[stage.index + 1].name)
            else:
                pending.extend(edge.target for edge in stage.transitions)
            if stage.fan_out is not None and stage.fan_out.merge_stage:
                pending.append(stage.fan_out.merge_stage)
        return list(seen.values())

    def scripted_regions(self) -> list[tuple[str | None, Any]]:
        """Every custom-region declaration with a script, as (stage name or None for the global
        layout, RegionConfig), global layout first."""
        found: list[tuple[str | None, Any]] = [(None, c) for c in self.layout if c.kind == "custom" and c.script]
        for stage in self.stages:
            found += [(stage.name, c) for c in stage.layout or () if c.kind == "custom" and c.script]
        return found

    def owes_output_from(self, entry: str) -> bool:
        """True when a stage reachable from ``entry`` requires a final output, so a run entered
        there must end with one (a worker run owes only what its own part of the graph owes)."""
        return any(s.require_output for s in self.reachable_from(entry))
