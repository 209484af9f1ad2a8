"""The blueprint as immutable tables (:mod:`lev_nb.blueprint.table`).

Field names are the TOML key names, so the generated JSON Schema describes the file format.
Each model only records the keys a blueprint actually wrote (``model_fields_set``), which is
what :meth:`Blueprint.to_toml` writes back. Lenient tables (``extra="allow"``) keep unknown keys
in ``model_extra`` (also reachable as ``.extra``); strict tables reject them at load time.

Build these through :func:`lev_nb.blueprint.load`, not by hand: the loader applies the format's
defaults, sugar and checks (docs/reference/blueprint.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, TypeVar

from . import constants as C
from .table import Table, field, private

Mode = Literal["autonomous", "interactive", "interactive_points", "fan_out", "output"]
Condition = Literal["always", "llm_choice", "error", "max_iterations", "stuck", "dead_end"]
TransformKind = Literal["direct", "clear", "compact", "summarize", "custom"]
Policy = Literal["allow", "ask", "deny"]
RegionKind = Literal[
    "temporary", "pinned", "sliding_window", "compacting", "compact_history", "clearable",
    "hashmap", "checklist", "custom",
]
SeedKind = Literal["caller", "glob", "files", "literal", "rhai", "command", "tools"]

# The public models, re-exported by the package (``from lev_nb.blueprint import Stage``): listed once here.
__all__ = [
    "AgentInfo", "Blueprint", "CallerInput", "Compaction", "ContextConfig", "Edge", "FileTracking",
    "Gate", "Hooks", "InteractionPoint", "ModelRef", "ModelSpec", "Nudge", "OutputSpec", "ReadPaths",
    "Region", "RegionMapping", "RepetitionDetection", "RoutingOverride", "SafeCommands", "Sandbox",
    "Security", "Seed", "SeedTool", "Stage", "StageContext", "ToolRouting", "TransformConfig",
    "TransformSpec", "default_layout",
]


_M = TypeVar("_M", bound=Table)


def construct(cls: type[_M], **values: Any) -> _M:
    """Build a table from values the loader has already checked (the given keys become
    ``model_fields_set``; unknown keys go to ``model_extra`` on lenient tables)."""
    return cls.from_checked(**values)


class _Strict(Table, extra="forbid"):
    """A table that rejects unknown keys (the loader reports them with a location)."""


class _Lenient(Table, extra="allow"):
    """A table that keeps unknown keys instead of rejecting them."""

    @property
    def extra(self) -> dict[str, Any]:
        """Keys the blueprint wrote that lev_nb does not know, kept as written."""
        return dict(self.model_extra or {})


# ------------------------------------------------------------------------------------------------
# Models, output, nudge, hooks, permissions
# ------------------------------------------------------------------------------------------------
class ModelRef(_Lenient):
    """One ``{provider, model}`` entry of a stage's fallback list."""

    provider: str = C.DEFAULT_PROVIDER
    model: str = C.DEFAULT_MODEL

    @property
    def spec(self) -> str:
        """``provider/model`` as one string."""
        return f"{self.provider}/{self.model}"


def _default_models() -> list[ModelRef]:
    return [construct(ModelRef)]


class ModelSpec(_Lenient):
    """A stage's ``model`` table. ``models`` is the resolved, ordered fallback list (never empty)."""

    models: list[ModelRef] = field(default_factory=_default_models)
    provider: str | None = None
    model: str | None = None
    fallbacks: list[ModelRef] | None = None
    allow_user_default: bool = True
    request_timeout_secs: int | None = None
    parameters: dict[str, Any] = field(default_factory=dict)

    @property
    def primary(self) -> ModelRef:
        """The first entry of the fallback list."""
        return self.models[0]


class Nudge(_Lenient):
    """The empty-response nudge settings (``[agent.nudge]`` / ``[stages.X.nudge]``); None = inherit."""

    enabled: bool | None = None
    max: int | None = None
    text: str | None = None


class OutputSpec(_Lenient):
    """The shape of a final answer (``[agent.output]`` / ``[stages.X.output]``)."""

    format: str | None = None
    instructions: str | None = None
    example: str | None = None
    json_schema: dict[str, Any] | None = field(default=None, alias="schema")
    validator: str | None = None


class Hooks(_Strict):
    """``[stages.X.hooks]``: Rhai script paths, relative to the blueprint's folder."""

    on_stage_enter: str | None = None
    on_stage_exit: str | None = None
    before_inference: str | None = None
    after_inference: str | None = None
    on_tool_call: str | None = None
    on_completion: str | None = None
    on_error: str | None = None

    def items(self) -> list[tuple[str, str]]:
        """The hooks that are set, as (hook name, script path) pairs."""
        return [(k, v) for k in C.HOOK_KEYS if (v := getattr(self, k)) is not None]


class RoutingOverride(_Strict):
    """One ``tool_routing.overrides.<tool>`` entry (the string form becomes ``region``)."""

    region: str | None = None
    max_result_tokens: int | None = None


class ToolRouting(_Strict):
    """``[stages.X.tool_routing]``: where tool results are written."""

    default_region: str = "tool_results"
    persist: bool = True
    max_result_tokens: int | None = None
    overrides: dict[str, RoutingOverride] = field(default_factory=dict)
    max_result_tokens_per_tool: dict[str, int] = field(default_factory=dict)

    def target_regions(self) -> list[tuple[str, str]]:
        """(key path, region) for every routing target, default first then overrides."""
        out = [("default_region", self.default_region)]
        for tool, ov in self.overrides.items():
            out.append((f"overrides.{tool}", ov.region if ov.region is not None else self.default_region))
        return out


class Sandbox(_Lenient):
    """``[sandbox]`` (top level or per stage). ``kind`` None means the host."""

    kind: Literal["none", "namespace", "container"] | None = None
    image: str | None = None
    engine: str | None = None
    network: bool = True
    mount: list[str] = field(default_factory=list)
    persist: bool = False
    on_unavailable: Literal["error", "warn"] = "error"


class Security(_Lenient):
    """``[security]``: taint tracking is on whenever the block is present."""

    taint_tracking: bool = True


class InteractionPoint(_Lenient):
    """One entry of an ``interactive_points`` stage's ``interaction_points``."""

    name: str = ""
    prompt: str = ""
    required: bool = True
    unattended: Literal["auto_approve", "ask"] = "auto_approve"
    style: Literal["free_text", "multiple_choice", "confirm"] = "free_text"
    options: list[str] = field(default_factory=list)
    directives: dict[str, str] = field(default_factory=dict)
    abort_options: list[str] = field(default_factory=list)
    edit_options: list[str] = field(default_factory=list)
    document_region: str | None = None


# ------------------------------------------------------------------------------------------------
# Transitions
# ------------------------------------------------------------------------------------------------
class Gate(_Strict):
    """An edge gate: what the stage must show before the edge may be taken."""

    require_modifications: bool = False
    require_regions: list[str] = field(default_factory=list)
    require_region_updated: str | None = None
    require_no_open_items: str | None = None
    message: str | None = None
    region: str | None = None
    tools: list[str] = field(default_factory=list)
    max_attempts: int | None = None

    @property
    def attempts(self) -> int:
        """How many times the stage is re-run before the edge is forced through."""
        return C.DEFAULT_GATE_ATTEMPTS if self.max_attempts is None else self.max_attempts


class TransformConfig(_Lenient):
    """Per-region rules of a ``transform = "custom"`` edge."""

    carry: list[str] = field(default_factory=list)
    compact: list[str] = field(default_factory=list)
    clear: list[str] = field(default_factory=list)
    compact_prompt: str | None = None


class Edge(_Strict):
    """One transition ``[stages.S.transitions.<target>]``."""

    target: str = field(exclude=True)
    condition: Condition = "always"
    hint: str | None = None
    transform: TransformKind = "direct"
    transform_config: TransformConfig | None = None
    gate: Gate | None = None
    stuck_after_iterations: int | None = None
    stuck_after_minutes: int | None = None
    stuck_after_same_file_edits: int | None = None
    stuck_after_tool_calls: int | None = None

    @property
    def is_normal(self) -> bool:
        """True for the edges the model follows or picks (``always`` / ``llm_choice``)."""
        return self.condition in C.NORMAL_CONDITIONS

    @property
    def transform_kind(self) -> str:
        """The transform with its alias folded (``summarize`` -> ``compact``)."""
        return "compact" if self.transform == "summarize" else self.transform

    @property
    def stuck_thresholds(self) -> dict[str, int]:
        """The stuck thresholds that are set, keyed by their TOML key."""
        return {k: v for k in C.STUCK_KEYS if (v := getattr(self, k)) is not None}


# ------------------------------------------------------------------------------------------------
# Context regions
# ------------------------------------------------------------------------------------------------
class SeedTool(_Lenient):
    """A tool call made by a ``tool`` / ``tools`` seed."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)


class Seed(_Strict):
    """How a region is filled at spawn. ``kind`` tells which of the other fields is used.

    caller: ``key`` (a caller input); glob/literal/rhai/command: ``value``; files: ``files``;
    tools (both the ``tool`` and ``tools`` forms): ``tools`` and ``refresh``.
    """

    kind: SeedKind
    key: str | None = None
    value: str | None = None
    files: list[str] = field(default_factory=list)
    tools: list[SeedTool] = field(default_factory=list)
    refresh: Literal["once", "each_stage"] = "once"

    def to_toml_value(self) -> dict[str, Any]:
        """The table form of this seed, which loads back to an equal seed."""
        if self.kind == "caller":
            return {"caller": self.key}
        if self.kind == "files":
            return {"files": list(self.files)}
        if self.kind == "tools":
            out: dict[str, Any] = {
                "tools": [{"name": t.name, "args": dict(t.args)} if t.args else t.name for t in self.tools]
            }
            if self.refresh != "once":
                out["refresh"] = self.refresh
            return out
        return {self.kind: self.value}


def parse_percent(text: str) -> float | str:
    """Parse an ``"N%"`` budget into a fraction in (0, 1], or return an error text."""
    s = text.strip()
    if not s.endswith("%"):
        return "must end with '%' (for example \"25%\")"
    number = s[:-1].strip()
    try:
        if "_" in number or not number:  # Python-only spellings the upstream parser refuses
            raise ValueError(number)
        value = float(number)
    except ValueError:
        return f"'{number}' is not a valid number"
    if not (0 < value <= 100):  # also refuses nan and inf
        return "must be greater than 0% and at most 100%"
    return value / 100.0


def _round_half_away(x: float) -> int:
    return int(x + 0.5) if x >= 0 else -int(-x + 0.5)


class Region(_Lenient):
    """One context region ``[context.regions.<name>]``. ``max_tokens`` None means not written."""

    name: str = field(exclude=True)
    kind: RegionKind = "temporary"
    budget: str | None = None
    max_tokens: int | None = None
    min_tokens: int | None = None
    required: bool = False
    required_message: str | None = None
    summarizable: bool = True
    description: str | None = None
    describe_in_prompt: bool = False
    volatility: Literal["stable", "grows", "rewritten"] = "rewritten"
    admission: Literal["evict", "reject"] = "evict"
    seed: Seed | None = None
    max_items: int = C.DEFAULT_WINDOW_ITEMS
    strategy: Literal["per_item", "bulk", "compact"] = "per_item"
    overflow: int = 10
    compact_count: int = 10
    compact_at: str | None = None
    threshold_tokens: int | None = None
    source_region: str = ""
    max_entries: int | None = None
    script: str | None = None
    persistent: bool = False

    @property
    def budget_fraction(self) -> float | None:
        """The percentage budget as a fraction (0.25 for "25%"), or None for an absolute budget."""
        if self.budget is None:
            return None
        value = parse_percent(self.budget)
        return value if isinstance(value, float) else None

    @property
    def is_percentage(self) -> bool:
        """True when the budget is a percentage of the model's context window."""
        return self.budget_fraction is not None

    @property
    def effective_max_tokens(self) -> int:
        """``max_tokens`` or its default (5000)."""
        return C.DEFAULT_REGION_MAX_TOKENS if self.max_tokens is None else self.max_tokens

    @property
    def is_fixed(self) -> bool:
        """Pinned-like regions: never evicted, untouched by edge transforms."""
        return self.kind in C.FIXED_KINDS or (self.kind == "custom" and self.persistent)

    @property
    def is_stage_specific(self) -> bool:
        """Regions that ``clear`` / ``compact`` edges act on (every kind that is not fixed)."""
        return not self.is_fixed

    @property
    def caller_key(self) -> str | None:
        """The caller input that fills this region, if it is caller-seeded."""
        return self.seed.key if self.seed is not None and self.seed.kind == "caller" else None

    def resolve_budget(self, window: int) -> int:
        """Token budget for a model with ``window`` tokens of context (docs/concepts.md#context-regions)."""
        fraction = self.budget_fraction
        if fraction is None:
            return self.effective_max_tokens
        value = _round_half_away(window * fraction)
        if self.max_tokens is not None:
            value = min(value, self.max_tokens)
        if self.min_tokens is not None:
            value = max(value, self.min_tokens)
        return value


def default_layout() -> dict[str, Region]:
    """The layout used when a blueprint declares no regions: system + conversation (18000).

    ``system`` holds the task and the entering stage's instructions: the runtime writes it at
    spawn and at each stage entry and nothing else does, so it is declared ``stable`` and a long
    system prompt is cached for the rest of the stage (the pessimistic default would re-send it
    at full price on every call)."""
    return {
        "system": construct(Region, name="system", kind="pinned", max_tokens=8000, volatility="stable"),
        "conversation": construct(Region, name="conversation", kind="sliding_window", max_items=10,
                                               max_tokens=10000),
    }


_DEFAULT_LAYOUT = default_layout()


class StageContext(_Strict):
    """``[stages.X.context]``: a stage's own layout, replacing the global one."""

    regions: dict[str, Region] = field(default_factory=dict)


class FileTracking(_Lenient):
    """``[context.file_tracking]``: mirror read/written files into a hashmap region."""

    region: str = "files"
    track_reads: bool = True
    track_writes: bool = True
    max_file_tokens: int | None = None


class ContextConfig(_Lenient):
    """The top-level ``[context]`` table."""

    regions: dict[str, Region] = field(default_factory=dict)
    file_tracking: FileTracking | None = None


# ------------------------------------------------------------------------------------------------
# Stage
# ------------------------------------------------------------------------------------------------
class Stage(_Strict):
    """One ``[stages.<name>]`` table, with the mode sugar already applied.

    ``available_tools`` includes what the mode adds (``submit_output`` / ``fan_out``), and
    ``require_output`` / ``allow_complete`` hold the effective values. ``transitions`` is None
    when the key is absent and ``{}`` for an explicit terminal; edges keep declaration order.
    Fan-out keys are only kept on ``fan_out`` stages and ``interaction_points`` only on
    ``interactive_points`` stages, as upstream reads them.
    """

    name: str = field(exclude=True)
    mode: Mode = "autonomous"
    description: str | None = None
    system_prompt: str | None = None
    model: ModelSpec = field(default_factory=lambda: construct(ModelSpec))
    available_tools: list[str] = field(default_factory=list)
    available_connectors: list[str] = field(default_factory=list)
    required_tools: list[str] = field(default_factory=list)
    max_iterations: int | None = None
    max_revisits: int | None = None
    transition_prompt: str | None = None
    allow_complete: bool = False
    requires_children: bool = False
    allow_as_worker: bool = False
    accepts_messages: bool = True
    allow_blocking_tools: bool = False
    require_output: bool = False
    output: OutputSpec | None = None
    nudge: Nudge | None = None
    hooks: Hooks | None = None
    tool_permissions: dict[str, Policy] = field(default_factory=dict)
    tool_routing: ToolRouting | None = None
    context: StageContext | None = None
    sandbox: Sandbox | None = None
    security: Security | None = None
    batch_tool_hint: bool | None = None
    shell_hint: bool | None = None
    transitions: dict[str, Edge] | None = None
    interaction_points: list[InteractionPoint] = field(default_factory=list)
    worker_agent: str | None = None
    worker_stage: str | None = None
    worker_query: str | None = None
    merge_stage: str | None = None
    split_prompt: str = ""
    results_region: str | None = None
    max_workers: int = C.DEFAULT_MAX_WORKERS
    max_items: int | None = None
    max_attempts: int = C.DEFAULT_FAN_OUT_ATTEMPTS
    on_worker_failure: Literal["continue", "fail_all"] = "continue"

    @property
    def effective_tools(self) -> list[str]:
        """The tools offered to the model (``available_tools``, mode sugar included)."""
        return list(self.available_tools)

    @property
    def models(self) -> list[ModelRef]:
        """The stage's ordered model fallback list."""
        return list(self.model.models)

    @property
    def has_transitions(self) -> bool:
        """True when the stage wrote a ``transitions`` key (even an empty one)."""
        return self.transitions is not None

    @property
    def is_explicit_terminal(self) -> bool:
        """``transitions = {}``: the run ends here."""
        return self.transitions is not None and not self.transitions

    @property
    def edges(self) -> list[Edge]:
        """The stage's edges in declaration order (empty when there are none)."""
        return list((self.transitions or {}).values())

    @property
    def normal_edges(self) -> list[Edge]:
        """Edges the model follows or chooses (``always`` / ``llm_choice``)."""
        return [e for e in self.edges if e.is_normal]

    def edges_with(self, condition: str) -> list[Edge]:
        """Edges with the given condition, in declaration order."""
        return [e for e in self.edges if e.condition == condition]

    @property
    def own_layout(self) -> dict[str, Region] | None:
        """The stage's own regions, or None when it uses the global layout."""
        if self.context is not None and self.context.regions:
            return self.context.regions
        return None

    @property
    def worker_target(self) -> tuple[str, str] | None:
        """For a fan-out stage: ("worker_agent"|"worker_stage"|"worker_query", value)."""
        for key in ("worker_agent", "worker_stage", "worker_query"):
            value = getattr(self, key)
            if value is not None:
                return key, value
        return None


# ------------------------------------------------------------------------------------------------
# Agent-level tables
# ------------------------------------------------------------------------------------------------
class AgentInfo(_Lenient):
    """The ``[agent]`` table."""

    name: str = "unnamed"
    version: str = "0.1.0"
    description: str = ""
    entry_stage: str | None = None
    max_child_depth: int | None = None
    dynamic_tools: bool = False
    batch_tool_hint: bool | None = None
    shell_hint: bool | None = None
    nudge: Nudge | None = None
    output: OutputSpec | None = None


class ReadPaths(_Lenient):
    """``[read_paths]``: reads outside the workdir the blueprint asks for."""

    allow: list[str] = field(default_factory=list)


class SafeCommands(_Lenient):
    """``[safe_commands]``: tools and shell prefixes the blueprint asks to run without a prompt."""

    tools: list[str] = field(default_factory=list)
    shell: list[str] = field(default_factory=list)


class Compaction(_Lenient):
    """``[compaction]``: the summarizer used to compact regions."""

    provider: str = C.DEFAULT_PROVIDER
    model: str = C.DEFAULT_MODEL
    system_prompt: str | None = None
    max_summary_tokens: int = 2000
    temperature: float = 0.2


class RepetitionDetection(_Lenient):
    """``[repetition_detection]``: loop-nudge thresholds (None = runtime default)."""

    enabled: bool | None = None
    max_repeat_calls: int | None = None
    max_readonly_streak: int | None = None


class RegionMapping(_Lenient):
    """One mapping of a ``[[transforms]]`` entry (``transform`` None = plain copy)."""

    from_region: str = ""
    to_region: str = ""
    transform: Literal["direct", "summarize", "extract"] | None = None
    fields: list[str] | None = None


class TransformSpec(_Lenient):
    """One ``[[transforms]]`` entry: how regions map onto a child blueprint's at spawn."""

    from_blueprint: str | None = None
    to_blueprint: str | None = None
    mappings: list[RegionMapping] = field(default_factory=list)


class CallerInput(_Strict):
    """A caller input: a global region filled from a named launch input."""

    key: str
    region: str
    required: bool


# ------------------------------------------------------------------------------------------------
# Blueprint
# ------------------------------------------------------------------------------------------------
def _order_signature(bp: "Blueprint") -> list[Any]:
    """Declaration orders that dict equality ignores but the format gives meaning to."""
    sig: list[Any] = [list(bp.stages), list(bp.context.regions)]
    for st in bp.stages.values():
        sig.append(list(st.transitions) if st.transitions is not None else None)
        sig.append(list(st.own_layout or {}))
    return sig


class Blueprint(_Lenient):
    """A whole agent blueprint (``agent.leviath``), immutable.

    Equality compares the model only, not where it was read from, so a blueprint equals the one
    loaded back from its :meth:`to_toml`.
    """

    agent: AgentInfo = field(default_factory=lambda: construct(AgentInfo))
    stages: dict[str, Stage] = field(default_factory=dict)
    context: ContextConfig = field(default_factory=lambda: construct(ContextConfig))
    tool_permissions: dict[str, Policy] = field(default_factory=dict)
    security: Security | None = None
    sandbox: Sandbox | None = None
    read_paths: ReadPaths | None = None
    safe_commands: SafeCommands | None = None
    compaction: Compaction | None = None
    repetition_detection: RepetitionDetection | None = None
    transforms: list[TransformSpec] = field(default_factory=list)

    _raw: dict[str, Any] = private(default_factory=dict)
    _source_path: Path | None = private(default=None)
    _source_text: str | None = private(default=None)
    _base_dir: Path | None = private(default=None)  # the folder of a blueprint given as text

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Blueprint):
            return NotImplemented
        return (
            self.__dict__ == other.__dict__
            and self.model_extra == other.model_extra
            and _order_signature(self) == _order_signature(other)
        )

    __hash__ = None  # type: ignore[assignment]

    # -- provenance --------------------------------------------------------------------------
    @property
    def raw(self) -> dict[str, Any]:
        """The parsed TOML as written (for "was this key written" questions)."""
        return self._raw

    def stage_writes(self, stage: str, key: str) -> bool:
        """True when the text writes ``key`` in stage ``stage``'s table (not a default filled in)."""
        stages = self._raw.get("stages")
        table = stages.get(stage) if isinstance(stages, dict) else None
        return isinstance(table, dict) and key in table

    @property
    def source_path(self) -> Path | None:
        """The agent.leviath this was read from (None when loaded from text)."""
        return self._source_path

    @property
    def source_text(self) -> str | None:
        """The TOML text this was read from."""
        return self._source_text

    @property
    def base_dir(self) -> Path | None:
        """The agent folder (scripts resolve against it): the manifest's folder, or the folder a
        blueprint given as text was given (``load_text(..., base_dir=)``); else None."""
        if self._base_dir is not None:
            return self._base_dir
        return self._source_path.parent if self._source_path is not None else None

    # -- stages and graph --------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The agent's name."""
        return self.agent.name

    @property
    def stage_names(self) -> list[str]:
        """Stage names in declaration order."""
        return list(self.stages)

    @property
    def entry_stage(self) -> str:
        """``agent.entry_stage`` if set, otherwise the first declared stage."""
        if self.agent.entry_stage is not None:
            return self.agent.entry_stage
        return next(iter(self.stages), C.IMPLICIT_STAGE_NAME)

    @property
    def is_graph_mode(self) -> bool:
        """True when any stage writes ``transitions`` (even an empty one)."""
        return any(s.transitions is not None for s in self.stages.values())

    def next_stage(self, name: str) -> str | None:
        """The stage declared after ``name`` (the linear fall-through), or None for the last."""
        names = self.stage_names
        i = names.index(name)
        return names[i + 1] if i + 1 < len(names) else None

    def is_terminal(self, name: str) -> bool:
        """Whether the run can end at ``name`` on normal completion (docs/concepts.md#transitions)."""
        stage = self.stages[name]
        if stage.mode == "fan_out" and stage.merge_stage is not None:
            return False  # the run moves on to the merge stage once the workers finish
        if stage.transitions is None:
            return self.next_stage(name) is None
        if not stage.transitions:
            return True
        return not stage.normal_edges

    @property
    def terminal_stages(self) -> list[str]:
        """Stages where the run ends on normal completion, in declaration order."""
        return [n for n in self.stages if self.is_terminal(n)]

    @property
    def output_stages(self) -> list[str]:
        """Stages with ``mode = "output"``."""
        return [n for n, s in self.stages.items() if s.mode == "output"]

    # -- context -----------------------------------------------------------------------------
    @property
    def global_layout(self) -> dict[str, Region]:
        """The declared ``[context.regions]``, or the default layout when none are declared."""
        return self.context.regions if self.context.regions else _DEFAULT_LAYOUT

    def layout_for(self, stage: str | Stage) -> dict[str, Region]:
        """The regions a stage runs with: its own, else the global layout, else the default."""
        st = self.stages[stage] if isinstance(stage, str) else stage
        own = st.own_layout
        return own if own is not None else self.global_layout

    def visible_regions(self, stage: str | Stage) -> set[str]:
        """Region names a stage can address: its layout plus the always-visible ones."""
        return set(self.layout_for(stage)) | set(C.ALWAYS_VISIBLE_REGIONS)

    @property
    def known_regions(self) -> set[str]:
        """Every region name any layout declares, plus the always-visible ones."""
        names = set(self.global_layout) | set(C.ALWAYS_VISIBLE_REGIONS)
        for st in self.stages.values():
            if st.own_layout:
                names |= set(st.own_layout)
        return names

    @property
    def inputs(self) -> list[CallerInput]:
        """Caller inputs: the caller-seeded global regions, in declaration order."""
        return [
            construct(CallerInput, key=r.caller_key, region=name, required=r.required)
            for name, r in self.context.regions.items()
            if r.caller_key is not None
        ]

    @property
    def accepts_task(self) -> bool:
        """True when some global region is filled from the caller's ``task``."""
        return any(i.key == "task" for i in self.inputs)

    # -- output ------------------------------------------------------------------------------
    def to_toml(self) -> str:
        """Write the blueprint back as TOML; loading the result gives an equal blueprint."""
        from .writer import blueprint_to_toml

        return blueprint_to_toml(self)

    def validate_report(self, **kwargs: Any) -> Any:
        """Run the checks and lints of docs/blueprint.md#validation-and-lints; returns a
        :class:`~lev_nb.blueprint.Report`.
        (``lev_nb.validate`` also compiles the blueprint's scripts.)"""
        from .pipeline import validate_blueprint

        return validate_blueprint(self, **kwargs)

    # -- the graph -----------------------------------------------------------------------------
    def mermaid(self, direction: str | None = None, current: str | None = None) -> str:
        """The stage graph as Mermaid flowchart text (``current`` highlights one stage;
        ``direction`` LR/TB/RL/BT, by default TB, or LR for a small graph)."""
        from .graph import blueprint_mermaid

        return blueprint_mermaid(self, direction=direction, current=current)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        # No HTML or markdown: JupyterLab draws text/vnd.mermaid itself, with no network, only when
        # no richer type is in the bundle (it ranks Mermaid above SVG). Front ends without Mermaid
        # (VS Code, Colab, GitHub) show the SVG Graphviz drew, when it is installed.
        from .graph import Diagram
        from .picture import svg_or_none

        return Diagram(self.mermaid(), picture=lambda: svg_or_none(self))._repr_mimebundle_()

    def picture(self, fmt: str = "svg", direction: str | None = None, current: str | None = None) -> Any:
        """The stage graph drawn by Graphviz: SVG text, or PNG bytes for ``fmt="png"``
        (:class:`~lev_nb.blueprint.picture.GraphvizMissing` when Graphviz is not installed)."""
        from .picture import render

        data = render(self, fmt, direction=direction, current=current)
        return data.decode("utf-8") if fmt == "svg" else data

    # -- running -------------------------------------------------------------------------------
    def run(self, task: str = "", model: Any = None, workdir: Any = None, **kwargs: Any) -> Any:
        """Start a run on lev_nb's engine thread and return its :class:`~lev_nb.engine.handle.Run`.

        ``model`` is None (each stage's own model), ``"mock"``, ``"scripted:FILE"``,
        ``"provider/model"`` or a Provider object; keyword arguments are those of
        :func:`lev_nb.engine.api.start_run` (output_format, output_schema, on_complete, yolo,
        allow, interactive, ...) and the blueprint's caller inputs.
        """
        from lev_nb.engine.api import start_run

        return start_run(self, task=task, model=model, workdir=workdir, **kwargs)
