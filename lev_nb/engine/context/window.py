"""A run's context window: every region it declared, which of them the current stage sees, and
the writes the engine makes into them (turns, tool results, nudges, notes, seeds, transforms)
(docs/concepts.md#context-regions).

Regions and their eviction rules live in :mod:`lev_nb.engine.context.regions`; turning the window
into a model request lives in :mod:`lev_nb.engine.context.assembly`; the ``context_*`` and
``todo_*`` tools act on it through :mod:`lev_nb.engine.context.access`.
"""

from __future__ import annotations

import hashlib
from dataclasses import field
from typing import Any, Iterable

from lev_nb.blueprint.constants import DEFAULT_WINDOW_TOKENS
from lev_nb.engine.context.assembly import assemble, assemble_blocks
from lev_nb.engine.context.regions import (
    ALWAYS_VISIBLE,
    FINAL_OUTPUT_REGION_TOKENS,
    Entry,
    Region,
    RegionConfig,
    RegionFullError,
    default_layout,
    ensure_auto_regions,
    trim_with_note,
)
from lev_nb.records import record
from lev_nb.taint.levels import highest
from lev_nb.text import cut_text, estimate_tokens, sorted_json

__all__ = [
    "ContextWindow",
    "RoutedResult",
    "StageInstructionsError",
    "ToolRouting",
    "TransformResult",
]

INSTRUCTIONS_PREFIX = "[Stage instructions:"
SEED_TRUNCATION_NOTE = "\n[...truncated by lev_nb: the seed was larger than this region's budget]"
FINAL_OUTPUT_NOTE = (
    "\n[...cut here to fit the context; the complete answer is the run's final output]"
)
RESULT_CAP_NOTE = "\n[...truncated]"
SUMMARY_TRUNCATION_NOTE = "\n[...summary cut to fit its region]"
SUMMARY_HEADING = "[Summary of earlier context]"
WINDOW_FULL_TEXT = "[tool result truncated - context window full]"
OMITTED_TEXT = "[result omitted]"
MESSAGE_TRIM_NOTE = "\n[...truncated: this message was larger than the conversation's budget]"
PREVIEW_CHARS = 160
# Below this many free tokens a partial result is not worth keeping.
MIN_PARTIAL_TOKENS = 100


class StageInstructionsError(Exception):
    """A stage's instructions do not fit the region they are placed in."""


@record
class ToolRouting:
    """Where a stage's tool results go (``[stages.S.tool_routing]``).

    ``overrides`` maps a tool name to a region name or to ``{"region": ..., "max_result_tokens":
    ...}``; ``max_result_tokens_per_tool`` caps single tools.
    """

    default_region: str = "tool_results"
    overrides: dict[str, Any] = field(default_factory=dict)
    persist: bool = True
    max_result_tokens: int | None = None
    max_result_tokens_per_tool: dict[str, int] = field(default_factory=dict)


@record
class RoutedResult:
    """Where one tool result ended up.

    ``region`` holds the full (or cut) text; ``conversation_text`` is what the conversation's
    tool_result block says (the result itself when ``region`` is the conversation, else a pointer).
    ``outcome`` is ``stored``, ``truncated`` (capped or cut to fit) or ``dropped``.
    """

    region: str
    conversation_text: str
    outcome: str
    tokens: int


@record
class TransformResult:
    """What an edge transform did: regions emptied, regions left for the summariser, and
    regions named by the transform that it left alone (with the reason)."""

    cleared: list[str] = field(default_factory=list)
    to_summarise: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


def _call_record(call: Any) -> dict[str, Any]:
    """Normalise a tool call (a ToolCall-like object or a dict) to ``{id, name, input}``."""
    if isinstance(call, dict):
        arguments = call.get("input", call.get("arguments")) or {}
        return {"id": str(call.get("id", "")), "name": str(call.get("name", "")),
                "input": arguments}
    arguments = getattr(call, "arguments", None)
    if arguments is None:
        arguments = getattr(call, "input", None) or {}
    return {"id": str(call.id), "name": str(call.name), "input": arguments}


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat[:PREVIEW_CHARS] + ("…" if len(flat) > PREVIEW_CHARS else "")


class ContextWindow:
    """Every region a run has declared, the stage's view of them, and writes into them.

    Regions declared by the global layout or any stage layout live for the whole run; a stage
    layout only decides which are *visible* (hidden regions keep their content). The regions in
    :data:`ALWAYS_VISIBLE` are shown in every stage.
    """

    def __init__(self, layout: list[RegionConfig], window_tokens: int = DEFAULT_WINDOW_TOKENS) -> None:
        self.window_tokens = window_tokens
        self._global_layout = ensure_auto_regions(list(layout) or default_layout())
        self._global_configs = {config.name: config for config in self._global_layout}
        self._regions: dict[str, Region] = {}
        self._visible: list[str] = []
        self._shown: list[Region] = []  # the regions of _visible, in order (see _show)
        self.declare(self._global_layout)
        self.apply_stage_layout(None)

    # -- regions and visibility -----------------------------------------------------------------
    def declare(self, configs: Iterable[RegionConfig]) -> None:
        """Make sure every region in ``configs`` exists (existing ones keep their content)."""
        for config in configs:
            if config.name not in self._regions:
                self._regions[config.name] = self._new_region(config)

    def _new_region(self, config: RegionConfig) -> Region:
        """The holder of a newly declared region (a run context may supply scripted ones)."""
        return Region(config)

    def apply_stage_layout(self, stage_layout: list[RegionConfig] | None) -> None:
        """Show the stage's own regions (or the global layout for None), hiding the rest.

        A region declared in both places takes the stage's declaration while that stage runs.
        """
        configs = list(self._global_layout if stage_layout is None else stage_layout)
        self.declare(configs)
        stage_configs = {config.name: config for config in configs}
        for name, region in self._regions.items():
            config = stage_configs.get(name) or self._global_configs.get(name)
            region.configure(config or region.config)
        visible = [config.name for config in configs]
        visible += [n for n in self._regions if n in ALWAYS_VISIBLE and n not in visible]
        self._show(visible)

    def _show(self, names: list[str]) -> None:
        """Make ``names`` the visible regions. Their list is kept with them: every model call asks
        for it several times (the request, the pressure check, the recorded sizes)."""
        self._visible = names
        self._shown = [self._regions[name] for name in names]

    def has_region(self, name: str) -> bool:
        """Whether a region of that name has been declared (visible or not)."""
        return name in self._regions

    def is_visible(self, name: str) -> bool:
        """Whether the current stage sees the region."""
        return name in self._visible

    def region(self, name: str) -> Region:
        """The region called ``name`` (KeyError if it was never declared)."""
        return self._regions[name]

    def visible_regions(self) -> list[Region]:
        """The regions the current stage sees, in prompt order."""
        return list(self._shown)

    def all_regions(self) -> list[Region]:
        """Every declared region, visible or not, in declaration order."""
        return list(self._regions.values())

    @property
    def conversation(self) -> Region:
        """The conversation region (always present)."""
        return self._regions["conversation"]

    # -- stage instructions ---------------------------------------------------------------------
    def set_stage_instructions(self, stage: str, prompt: str | None) -> str:
        """Write a stage's instructions and return the region that holds them.

        They go to ``stage_instructions`` when declared (replacing its content; it moves to the
        end of the prompt order), else to the first visible pinned region (replacing earlier
        instructions there), else to the conversation. An empty prompt only removes old ones.
        Raises :class:`StageInstructionsError` when they do not fit.
        """
        text = f"{INSTRUCTIONS_PREFIX} {prompt}]" if prompt else ""
        if self.has_region("stage_instructions"):
            target = self._regions["stage_instructions"]
            target.clear()
            self._show([n for n in self._visible if n != "stage_instructions"] + ["stage_instructions"])
        else:
            # final_output is the answer's mirror and is rewritten on every submission.
            pinned = [
                r for r in self.visible_regions() if r.kind == "pinned" and r.name != "final_output"
            ]
            target = pinned[0] if pinned else self.conversation
            if target.kind == "pinned":
                target.entries = [
                    e for e in target.entries if not e.content.startswith(INSTRUCTIONS_PREFIX)
                ]
        if not text:
            return target.name
        try:
            target.add(Entry.make(text))
        except RegionFullError as err:
            raise StageInstructionsError(
                f"the instructions of stage '{stage}' (~{estimate_tokens(text)} tokens) do not "
                f"fit context region '{target.name}': {err}. Raise that region's max_tokens or "
                "shorten the stage's system_prompt."
            ) from err
        return target.name

    # -- conversation -------------------------------------------------------------------------
    def _add_fitted(self, region: Region, entry: Entry) -> None:
        """Add to an evicting region, cutting an entry that exceeds the whole budget."""
        if entry.tokens > region.max_tokens:
            text, _ = trim_with_note(entry.content, region.max_tokens, MESSAGE_TRIM_NOTE)
            entry.content, entry.tokens = text, estimate_tokens(text)
        region.add(entry)

    def add_user(self, text: str) -> None:
        """Append a user message to the conversation."""
        self._add_fitted(self.conversation, Entry.make(text, kind="user_message"))

    def add_assistant(self, text: str, tool_calls: Iterable[Any] = ()) -> None:
        """Append an assistant turn (its text and the tool calls it made)."""
        calls = [_call_record(call) for call in tool_calls]
        self._add_fitted(
            self.conversation, Entry.make(text or "", kind="assistant_turn", tool_calls=calls)
        )

    def add_tool_result(
        self, call_id: str, tool_name: str, content: str, is_error: bool = False, *, label: str = "public",
        tokens: int | None = None,
    ) -> None:
        """Append one tool result to the conversation as it is (see :meth:`route_tool_result`;
        ``tokens``: the content's estimate, when the caller has it)."""
        entry = Entry.make(
            content, kind="tool_result", content_tokens=tokens, tool_call_id=call_id, tool_name=tool_name,
            is_error=is_error, label=label,
        )
        self._add_fitted(self.conversation, entry)

    def nudge(self, text: str) -> None:
        """Tell the model something from the runtime: ``[System] <text>`` as a user-side entry."""
        self._add_fitted(self.conversation, Entry.make("[System] " + text))

    def note(self, region_pref: str, text: str) -> str | None:
        """Best-effort note (stuck/error reports): into ``region_pref`` when the stage sees it,
        else the conversation. Returns the region written, or None when it did not fit."""
        target = self._regions[region_pref] if self.is_visible(region_pref) else self.conversation
        try:
            target.add(Entry.make(text))
        except RegionFullError:
            return None
        return target.name

    # -- tool results -------------------------------------------------------------------------
    def _batch_tokens(self) -> int:
        """Tokens of the newest assistant turn and everything after it in the conversation."""
        total = 0
        for entry in reversed(self.conversation.entries):
            total += entry.tokens
            if entry.kind == "assistant_turn":
                return total
        return 0

    def _room(self, region: Region) -> int:
        """How many tokens a new entry may take in ``region`` without being refused."""
        if region.config.never_evicts or region.config.admission == "reject":
            return region.free_tokens
        if region.name == "conversation":
            # A result never pushes out the turn that asked for it.
            return max(0, region.max_tokens - self._batch_tokens())
        return region.max_tokens

    @staticmethod
    def _fit_result(content: str, room: int, tokens: int) -> tuple[str, str]:
        """Fit a result of ``tokens`` into ``room`` tokens: (text, outcome) following the truncation ladder."""
        if tokens <= room:
            return content, "stored"
        if room > MIN_PARTIAL_TOKENS:
            # Reserve room for the marker, whose length depends on the omitted count.
            keep = cut_text(content, room * 4 - 64)
            omitted = len(content) - len(keep)
            return f"{keep}... [truncated, {omitted} chars omitted]", "truncated"
        if estimate_tokens(WINDOW_FULL_TEXT) <= room:
            return WINDOW_FULL_TEXT, "dropped"
        return OMITTED_TEXT, "dropped"

    def _route_target(self, tool_name: str, routing: ToolRouting | None) -> tuple[str, int | None]:
        if routing is None:
            return "conversation", None
        override = routing.overrides.get(tool_name)
        target, cap = routing.default_region, None
        if isinstance(override, str):
            target = override
        elif isinstance(override, dict):
            target = override.get("region") or routing.default_region
            cap = override.get("max_result_tokens")
        if cap is None:
            cap = routing.max_result_tokens_per_tool.get(tool_name, routing.max_result_tokens)
        if not routing.persist and self.has_region("scratch"):
            target = "scratch"
        if not self.has_region(target):
            target = "conversation"
        return target, cap

    def route_tool_result(
        self,
        call_id: str,
        tool_name: str,
        content: str,
        *,
        is_error: bool = False,
        routing: ToolRouting | None = None,
        label: str = "public",
    ) -> RoutedResult:
        """Store one tool result per the stage's routing and put its block in the conversation.

        Errors stay in the conversation so the model sees them at once. A routed result is kept
        whole in its region and the conversation gets a pointer with a short preview.
        """
        target, cap = self._route_target(tool_name, routing)
        if is_error:
            target = "conversation"
        outcome = "stored"
        # The result's estimate is worked out once (a long result is encoded again for each one).
        full_tokens = tokens = estimate_tokens(content)
        if cap is not None and full_tokens > cap:
            content = cut_text(content, cap * 4) + RESULT_CAP_NOTE
            tokens = estimate_tokens(content)
            outcome = "truncated"
        region = self._regions[target]
        text, fitted = self._fit_result(content, self._room(region), tokens)
        outcome = fitted if fitted != "stored" else outcome
        text_tokens = tokens if text is content else estimate_tokens(text)
        if target == "conversation":
            self.add_tool_result(call_id, tool_name, text, is_error, label=label, tokens=text_tokens)
            return RoutedResult("conversation", text, outcome, text_tokens)
        if fitted != "dropped":
            region.add(Entry.make(text, content_tokens=text_tokens, metadata={"tool": tool_name, "call_id": call_id},
                                  label=label))
        pointer = self._pointer(target, full_tokens, text_tokens, outcome, content)
        self.add_tool_result(call_id, tool_name, pointer, False, label=label)  # its preview quotes the data
        return RoutedResult(target, pointer, outcome, text_tokens)

    def _pointer(self, target: str, full: int, kept: int, fitted: str, content: str) -> str:
        preview = _preview(content)
        if fitted == "dropped":
            return (f"[Output ({full} tokens) did not fit context region '{target}' and was "
                    f"not kept. Preview: {preview}]")
        where = (f"is stored in context region '{target}' under its heading; that region is "
                 "already part of this prompt, so no tool call is needed to read it")
        if not self.is_visible(target):
            where = (f"is stored in context region '{target}', which the current stage does not "
                     "show; a later stage that shows it will see it")
        if fitted == "truncated":
            return f"[Output ({full} tokens, cut to {kept} to fit) {where}. Preview: {preview}]"
        return f"[Output ({full} tokens) {where}. Preview: {preview}]"

    # -- gates ----------------------------------------------------------------------------------
    def digest(self, region: str) -> str:
        """A content hash of ``region`` ("" when it was never declared)."""
        if region not in self._regions:
            return ""
        payload = [
            [e.kind, e.key, e.content, e.metadata, e.tool_calls, e.tool_call_id, e.is_error]
            for e in self._regions[region].entries
        ]
        raw = sorted_json(payload).encode("utf-8")
        return hashlib.sha256(raw).hexdigest()

    def is_empty(self, region: str) -> bool:
        """Whether ``region`` holds nothing (True as well when it was never declared)."""
        return region not in self._regions or self._regions[region].is_empty()

    def open_items(self, region: str) -> list[tuple[int, str]]:
        """Open checklist items of ``region`` as (id, text); [] for anything else."""
        if region not in self._regions:
            return []
        return [
            (int(e.metadata["id"]), e.content)
            for e in self._regions[region].entries
            if "id" in e.metadata and not e.metadata.get("done")
        ]

    # -- transforms -----------------------------------------------------------------------------
    def apply_transform(self, kind: str, config: dict[str, Any] | None = None) -> TransformResult:
        """Apply an edge transform to the regions of the stage being left.

        ``direct`` does nothing; ``clear`` empties the stage-specific regions; ``compact`` and
        ``summarize`` return the stage-specific, summarizable, non-empty regions for the engine
        to summarise; ``custom`` clears ``clear - carry`` and returns ``compact - carry``.
        Pinned regions are never touched. Only regions the stage sees are considered, except for
        regions a custom transform names explicitly.
        """
        if kind == "direct":
            return TransformResult()
        if kind == "clear":
            cleared = []
            for region in self.visible_regions():
                if region.config.stage_specific and not region.is_empty():
                    region.clear()
                    cleared.append(region.name)
            return TransformResult(cleared=cleared)
        if kind in ("compact", "summarize"):
            names = [
                r.name for r in self.visible_regions()
                if r.config.stage_specific and r.config.summarizable and not r.is_empty()
            ]
            return TransformResult(to_summarise=names)
        if kind == "custom":
            return self._custom_transform(config or {})
        raise ValueError(
            f"unknown transform {kind!r} (valid: direct, clear, compact, summarize, custom)"
        )

    def _custom_transform(self, config: dict[str, Any]) -> TransformResult:
        carry = set(config.get("carry") or [])
        cleared: list[str] = []
        to_summarise: list[str] = []
        skipped: dict[str, str] = {}
        for name in config.get("clear") or []:
            if name in carry:
                continue
            if name not in self._regions:
                skipped[name] = "not declared"
            elif self._regions[name].kind == "pinned":
                skipped[name] = "pinned regions are never changed by a transform"
            else:
                self._regions[name].clear()
                cleared.append(name)
        for name in config.get("compact") or []:
            if name in carry or name in cleared:
                continue
            region = self._regions.get(name)
            if region is None:
                skipped[name] = "not declared"
            elif region.kind == "pinned":
                skipped[name] = "pinned regions are never changed by a transform"
            elif not region.config.summarizable:
                skipped[name] = "declared summarizable = false"
            elif not region.is_empty():
                to_summarise.append(name)
        return TransformResult(cleared=cleared, to_summarise=to_summarise, skipped=skipped)

    def replace_with_summary(self, region: str, summary: str) -> None:
        """Replace a region's content with one summary entry, cut to its budget if needed."""
        target = self._regions[region]
        text, _ = trim_with_note(summary, target.max_tokens, SEED_TRUNCATION_NOTE)
        label = highest(e.label for e in target.entries)  # a summary is as sensitive as what it sums up
        target.clear()
        target.add(Entry.make(text, label=label))

    def paired_history(self, source: str) -> Region | None:
        """The compact_history region that keeps ``source``'s summaries, if one is declared."""
        return next(
            (r for r in self._regions.values() if r.kind == "compact_history" and r.config.source_region == source),
            None,
        )

    def store_summary(self, region: str, summary: str) -> int:
        """File a summary of ``region``: into its paired compact_history (emptying the region), else
        in place of its content (a sliding window keeps it as its first entry). Returns the tokens
        the summary takes."""
        history = self.paired_history(region)
        if history is not None and history.name != region:
            text, _ = trim_with_note(summary, history.free_tokens, SUMMARY_TRUNCATION_NOTE)
            if history.free_tokens > MIN_PARTIAL_TOKENS:
                label = highest(e.label for e in self._regions[region].entries)
                history.add(Entry.make(text, metadata={"source": region}, label=label))
                self._regions[region].clear()
                return estimate_tokens(text)
        target = self._regions[region]
        if target.kind == "sliding_window":
            target.clear()
            return self.store_window_summary(region, summary)
        self.replace_with_summary(region, summary)
        return target.tokens

    def store_window_summary(self, region: str, summary: str, label: str = "public") -> int:
        """Keep a summary of what a sliding window evicted (``label``: the most sensitive of those
        entries): in its paired compact_history, else as the window's first entry (replacing an
        earlier summary), cut to a quarter of its budget."""
        history = self.paired_history(region)
        if history is not None and history.free_tokens > MIN_PARTIAL_TOKENS:
            text, _ = trim_with_note(summary, history.free_tokens, SUMMARY_TRUNCATION_NOTE)
            history.add(Entry.make(text, metadata={"source": region}, label=label))
            return estimate_tokens(text)
        target = self._regions[region]
        text, _ = trim_with_note(f"{SUMMARY_HEADING}\n{summary}", max(1, target.max_tokens // 4),
                                 SUMMARY_TRUNCATION_NOTE)
        target.entries = [e for e in target.entries if not e.metadata.get("summary")]
        target.entries.insert(0, Entry.make(text, metadata={"summary": True}, label=label))
        return estimate_tokens(text)

    def evict_for_room(self, limit: int) -> list[tuple[str, int, int]]:
        """Drop the oldest entries of the visible temporary and clearable regions (a clearable one
        all at once) until the visible context holds fewer than ``limit`` tokens. Returns
        (region, entries dropped, tokens dropped) for each region touched."""
        dropped: list[tuple[str, int, int]] = []
        for region in self.visible_regions():
            if self.total_tokens() < limit:
                break
            if region.kind not in ("temporary", "clearable") or not region.entries:
                continue
            count = tokens = 0
            while region.entries and self.total_tokens() >= limit:
                victims = list(region.entries) if region.kind == "clearable" else [region.entries[0]]
                for victim in victims:
                    region.entries.remove(victim)
                    count += 1
                    tokens += victim.tokens
            dropped.append((region.name, count, tokens))
        return dropped

    # -- seeds and the final output mirror -----------------------------------------------------
    def seed(self, region: str, text: str) -> bool:
        """Put caller or seed input into ``region``, cut to its budget with a closing note.

        Returns whether the text was cut. KeyError when the region was never declared.
        """
        target = self._regions[region]
        fitted, cut = trim_with_note(text, self._room(target), SEED_TRUNCATION_NOTE)
        target.add(Entry.make(fitted))
        return cut

    def mirror_final_output(self, content: str) -> bool:
        """Show the accepted final answer in the pinned ``final_output`` region.

        The region is emptied first and the answer cut to 2000 tokens (or the region's smaller
        budget) with a closing note. Returns whether it was cut.
        """
        target = self._regions["final_output"]
        limit = min(FINAL_OUTPUT_REGION_TOKENS, target.max_tokens)
        text, cut = trim_with_note(content, limit, FINAL_OUTPUT_NOTE)
        target.clear()
        target.add(Entry.make(text))
        return cut

    # -- taint tracking --------------------------------------------------------------------------
    def region_labels(self) -> dict[str, str]:
        """Each region's label: the most sensitive of its entries' (public when empty), so a
        region's label falls again as its sensitive entries are evicted. Hidden regions count."""
        return {name: highest(e.label for e in region.entries) for name, region in self._regions.items()}

    def label(self) -> str:
        """The label of everything the run holds in context (the most sensitive region's)."""
        return highest(self.region_labels().values())

    # -- views ----------------------------------------------------------------------------------
    def total_tokens(self) -> int:
        """Tokens held by the regions the current stage sees."""
        return sum(region.tokens for region in self.visible_regions())

    def snapshot(self) -> dict[str, Any]:
        """Every region (with kind, usage, entries and visibility) as plain data."""
        regions = []
        for region in self._regions.values():
            data = region.to_dict()
            data["visible"] = self.is_visible(region.name)
            regions.append(data)
        return {
            "total_tokens": self.total_tokens(),
            "max_tokens": self.window_tokens,
            "regions": regions,
        }

    def assemble(self) -> tuple[list[str], list[Any]]:
        """The visible regions as a request: (system blocks, messages). See assembly.py."""
        return assemble(self.visible_regions())

    def assemble_blocks(self) -> tuple[list[Any], list[Any]]:
        """The visible regions as (described system blocks, messages). See assembly.py."""
        return assemble_blocks(self.visible_regions())
