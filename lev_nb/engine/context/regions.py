"""Context regions: their declaration, their entries, and how each kind makes room
(docs/concepts.md#context-regions).

A region is a named slice of the prompt with its own token budget and a *kind* that decides what
happens when a write does not fit (evict the oldest, wipe everything, evict the least recently
updated key, or refuse). This module knows nothing about stages, tools or requests; the
:mod:`lev_nb.engine.context.window` window composes regions into a run's memory and
:mod:`lev_nb.engine.context.assembly` turns them into a model request.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field
from typing import Any

from lev_nb.records import record
from lev_nb.text import cut_text, estimate_tokens, is_blank, sorted_json

REGION_KINDS: tuple[str, ...] = (
    "temporary",
    "pinned",
    "sliding_window",
    "compacting",
    "compact_history",
    "clearable",
    "hashmap",
    "checklist",
    "custom",
)
ENTRY_KINDS: tuple[str, ...] = ("text", "user_message", "assistant_turn", "tool_result")
VOLATILITIES: tuple[str, ...] = ("stable", "grows", "rewritten")
SLIDING_STRATEGIES: tuple[str, ...] = ("per_item", "bulk", "compact")

#: Regions a stage sees whatever its own layout says.
ALWAYS_VISIBLE: frozenset[str] = frozenset(
    {"conversation", "tool_results", "final_output", "stage_instructions"}
)

#: The final answer's mirror in context is capped at this many tokens.
FINAL_OUTPUT_REGION_TOKENS = 2000
DEFAULT_REGION_TOKENS = 5000


def trim_with_note(text: str, tokens: int, note: str) -> tuple[str, bool]:
    """Fit ``text`` into ``tokens``, ending a cut text with ``note``.

    Returns the (possibly shortened) text and whether it was cut. The note is counted inside the
    budget, so the result always fits.
    """
    if estimate_tokens(text) <= tokens:
        return text, False
    room = max(0, tokens * 4 - len(note.encode("utf-8")))
    return cut_text(text, room) + note, True


@record
class RegionConfig:
    """One declared region, with its budget already resolved to absolute tokens.

    This is the engine's own small input type; the blueprint model is converted into it.
    """

    name: str
    kind: str = "temporary"
    max_tokens: int = DEFAULT_REGION_TOKENS
    max_items: int = 10
    strategy: str = "per_item"
    overflow: int = 10
    compact_count: int = 10
    max_entries: int | None = None
    required: bool = False
    required_message: str | None = None
    summarizable: bool = True
    description: str | None = None
    describe_in_prompt: bool = False
    volatility: str = "rewritten"
    admission: str = "evict"
    persistent: bool = False
    script: str | None = None
    # compacting: summarise once the region holds this many tokens (resolved by the plan).
    compact_threshold: int | None = None
    # compact_history: the region whose summaries it keeps ("" for none).
    source_region: str = ""

    @property
    def threshold(self) -> int:
        """The compacting threshold in tokens (80% of the budget when the plan set none)."""
        return self.compact_threshold if self.compact_threshold is not None else self.max_tokens * 8 // 10

    def __post_init__(self) -> None:
        kind = "hashmap" if self.kind == "hash_map" else self.kind
        if kind not in REGION_KINDS:
            raise ValueError(
                f"region '{self.name}': unknown kind {self.kind!r} "
                f"(valid kinds: {', '.join(REGION_KINDS)})"
            )
        object.__setattr__(self, "kind", kind)
        if self.volatility not in VOLATILITIES:
            raise ValueError(
                f"region '{self.name}': volatility {self.volatility!r} is not one of "
                f"{', '.join(VOLATILITIES)}"
            )
        if self.admission not in ("evict", "reject"):
            raise ValueError(
                f"region '{self.name}': admission {self.admission!r} is not 'evict' or 'reject'"
            )
        if self.strategy not in SLIDING_STRATEGIES:
            raise ValueError(
                f"region '{self.name}': strategy {self.strategy!r} is not one of "
                f"{', '.join(SLIDING_STRATEGIES)}"
            )

    @property
    def never_evicts(self) -> bool:
        """Whether entries of this region are never dropped to make room."""
        return self.kind in ("pinned", "checklist", "compact_history") or (
            self.kind == "custom" and self.persistent
        )

    @property
    def stage_specific(self) -> bool:
        """Whether a ``clear``/``compact`` edge transform touches this region."""
        return self.kind not in ("pinned", "compact_history", "hashmap") and not (
            self.kind == "custom" and self.persistent
        )


def default_layout() -> list[RegionConfig]:
    """The layout used when a blueprint declares no regions: ``system`` and ``conversation``."""
    return [
        RegionConfig(name="system", kind="pinned", max_tokens=8000, volatility="stable"),  # as blueprint.default_layout
        RegionConfig(name="conversation", kind="sliding_window", max_items=10, max_tokens=10000),
    ]


def ensure_auto_regions(layout: list[RegionConfig]) -> list[RegionConfig]:
    """Return ``layout`` plus the regions every run needs, for those it does not declare.

    Adds ``tool_results`` (temporary, 5000), ``conversation`` (sliding window of 50, 10000)
    and ``final_output`` (pinned, 2000), in that order, after the declared regions.
    """
    global _AUTO_REGIONS
    if _AUTO_REGIONS is None:  # made once: every run asks, and a RegionConfig is immutable
        _AUTO_REGIONS = (
            RegionConfig(name="tool_results", kind="temporary", max_tokens=5000),
            RegionConfig(name="conversation", kind="sliding_window", max_items=50, max_tokens=10000),
            RegionConfig(name="final_output", kind="pinned", max_tokens=FINAL_OUTPUT_REGION_TOKENS),
        )
    names = {region.name for region in layout}
    return list(layout) + [region for region in _AUTO_REGIONS if region.name not in names]


_AUTO_REGIONS: tuple[RegionConfig, ...] | None = None


@record(frozen=False)
class Entry:
    """One item held by a region.

    ``kind`` says how the conversation renders it: ``text`` and ``user_message`` become user
    text, ``assistant_turn`` an assistant message with its ``tool_calls`` (dicts with ``id``,
    ``name``, ``input``), ``tool_result`` a result block for ``tool_call_id``.
    """

    content: str
    tokens: int
    kind: str = "text"
    key: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    tool_call_id: str | None = None
    tool_name: str | None = None
    is_error: bool = False
    # Taint tracking: how sensitive this entry is (public | internal | private), set by the runtime.
    label: str = "public"
    # What the conversation renders this entry as, made on first use and kept with the content it
    # was made from (lev_nb.engine.context.assembly): a long conversation is not rebuilt every turn.
    rendered: tuple[str, Any] | None = field(default=None, compare=False, repr=False)
    # The user message of the run of tool results this entry starts, with the blocks it was made of.
    grouped: tuple[tuple[Any, ...], Any] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def make(cls, content: str, kind: str = "text", *, content_tokens: int | None = None, **fields: Any) -> Entry:
        """Build an entry whose token count is estimated from its content (and tool calls);
        ``content_tokens``, when the caller has estimated the content already, is used as it is."""
        if kind not in ENTRY_KINDS:
            raise ValueError(f"unknown entry kind {kind!r} (valid: {', '.join(ENTRY_KINDS)})")
        tokens = estimate_tokens(content) if content_tokens is None else content_tokens
        calls = fields.get("tool_calls") or []
        if calls:
            tokens += estimate_tokens(sorted_json(calls))
        return cls(content=content, tokens=tokens, kind=kind, **fields)

    def to_dict(self) -> dict[str, Any]:
        """The entry as plain JSON-ready data (for snapshots)."""
        data: dict[str, Any] = {"content": self.content, "tokens": self.tokens, "kind": self.kind}
        if self.key is not None:
            data["key"] = self.key
        if self.metadata:
            data["metadata"] = dict(self.metadata)
        if self.tool_calls:
            data["tool_calls"] = [dict(call) for call in self.tool_calls]
        if self.kind == "tool_result":
            data["tool_call_id"] = self.tool_call_id
            data["tool_name"] = self.tool_name
            data["is_error"] = self.is_error
        if self.label != "public":
            data["label"] = self.label
        return data


def _victim(candidate: list[Entry], newcomer: Entry) -> int:
    """The index of the entry to evict next (-1: none): the oldest but the newcomer, and a summary
    of what was evicted earlier only when nothing else is left, since it stands for all of that."""
    fallback = -1
    for index, entry in enumerate(candidate):
        if entry is newcomer:
            continue
        if not entry.metadata.get("summary"):
            return index
        if fallback < 0:
            fallback = index
    return fallback


class RegionFullError(Exception):
    """A write was refused because the region cannot make room for it."""

    def __init__(self, region: str, message: str, needed: int, free: int) -> None:
        super().__init__(message)
        self.region = region
        self.needed = needed
        self.free = free


class Region:
    """A declared region and the entries it holds right now."""

    def __init__(self, config: RegionConfig) -> None:
        self.configure(config)
        self.entries: list[Entry] = []
        # Checklist ids come from a counter, so an id never names a different item later.
        self._next_item_id = 1
        # A sliding window with strategy = "compact" keeps what it evicts here until the engine
        # has summarised it (see lev_nb.engine.pipeline.compaction). Empty until then: a shared
        # empty tuple, not a list for every region of every live run.
        self.evicted_for_summary: Sequence[Entry] = ()
        # The token total of ``entries``, asked several times a turn, is summed again only when the
        # list was replaced or changed length (see tokens). Entries are edited only before they are
        # stored, and nothing replaces one in place, so identity and length say when it is stale.
        self._counted: tuple[list[Entry], int, int] | None = None  # (list, its length, its tokens)
        # The system block the region rendered last, with what it was rendered from (see
        # lev_nb.engine.context.assembly.render_system_block): the same test of identity and length.
        self.block: tuple[list[Entry], int, RegionConfig, str | None] | None = None

    def configure(self, config: RegionConfig) -> None:
        """Take ``config`` as the region's declaration (a stage may declare it its own way)."""
        self.config = config
        # Read dozens of times a turn: kept as plain attributes rather than looked up through config.
        self.name: str = config.name
        self.kind: str = config.kind
        self.max_tokens: int = config.max_tokens  # the resolved budget in tokens

    # -- facts -----------------------------------------------------------------------------------
    def unchanged_since(self, entries: list[Entry], count: int) -> bool:
        """Whether the region still holds ``entries``, which held ``count`` entries when something
        was worked out from them (see ``_counted`` in __init__: identity and length tell)."""
        return entries is self.entries and count == len(entries)

    @property
    def tokens(self) -> int:
        """Tokens held right now."""
        counted = self._counted
        if counted is not None and self.unchanged_since(counted[0], counted[1]):
            return counted[2]
        entries = self.entries
        total = sum(entry.tokens for entry in entries)
        self._counted = (entries, len(entries), total)
        return total

    @property
    def free_tokens(self) -> int:
        """Tokens still free without dropping anything."""
        return max(0, self.max_tokens - self.tokens)

    def is_empty(self) -> bool:
        """Whether the region holds nothing (blank entries count as nothing)."""
        return all(is_blank(entry.content) for entry in self.entries)

    def find_key(self, key: str) -> int | None:
        """Index of the entry stored under ``key``, or None."""
        for index, entry in enumerate(self.entries):
            if entry.key == key:
                return index
        return None

    def text(self) -> str:
        """The region's entries joined by blank lines (what ``context_read`` returns)."""
        if self.kind == "checklist":
            return render_checklist(self.entries)
        return "\n\n".join(entry.content for entry in self.entries)

    # -- changes ---------------------------------------------------------------------------------
    def clear(self) -> None:
        """Drop every entry."""
        self.entries.clear()

    def add(self, entry: Entry) -> list[Entry]:
        """Store ``entry`` (upserting when it has a key already present), making room by kind.

        Returns the entries evicted to make room. Raises :class:`RegionFullError` when the region
        cannot take the entry: it never evicts, it is declared ``admission = "reject"``, or the
        entry alone exceeds the whole budget. A refused write changes nothing.
        """
        candidate = list(self.entries)
        total = self.tokens + entry.tokens
        position = self.find_key(entry.key) if entry.key is not None else None
        if position is not None:
            total -= candidate[position].tokens
            if self.kind != "hashmap":
                candidate[position] = entry
            else:
                # A hashmap orders entries by last update, so an upsert moves to the back.
                del candidate[position]
                candidate.append(entry)
        else:
            candidate.append(entry)
        evicted: list[Entry] = []
        if not self._fits(total, len(candidate)):
            self._check_admissible(entry, position)
            evicted, total = self._make_room(candidate, entry, total)
        self.entries = candidate
        self._counted = (candidate, len(candidate), total)
        return evicted

    def _fits(self, tokens: int, count: int) -> bool:
        """Whether ``count`` entries holding ``tokens`` in all stay within the region's limits."""
        if tokens > self.max_tokens:
            return False
        if self.kind == "sliding_window" and count > self.config.max_items:
            return False
        limit = self.config.max_entries
        return not (self.kind == "hashmap" and limit is not None and count > limit)

    def _check_admissible(self, entry: Entry, position: int | None) -> None:
        """Raise RegionFullError when the region may not make room for ``entry``."""
        config = self.config
        if entry.tokens <= self.max_tokens and not config.never_evicts and config.admission != "reject":
            return  # the usual case, a window that evicts: nothing to work out
        replaced = self.entries[position].tokens if position is not None else 0
        free = self.free_tokens + replaced
        if entry.tokens > self.max_tokens:
            raise RegionFullError(
                self.name,
                f"region '{self.name}' cannot take this entry: it needs ~{entry.tokens} tokens "
                f"and the region's whole budget is {self.max_tokens}. Write something shorter.",
                entry.tokens,
                free,
            )
        if self.config.never_evicts:
            raise RegionFullError(
                self.name,
                f"region '{self.name}' ({self.kind}) is full: this entry needs ~{entry.tokens} "
                f"tokens and {free} of its {self.max_tokens} are free. A {self.kind} region never "
                "drops entries to make room; remove some with context_delete or write less.",
                entry.tokens,
                free,
            )
        if self.config.admission == "reject":
            raise RegionFullError(
                self.name,
                f"region '{self.name}' is full and declared admission = \"reject\": this entry "
                f"needs ~{entry.tokens} tokens and {free} of its {self.max_tokens} are free "
                f"({len(self.entries)} entries held). Remove some with context_delete first.",
                entry.tokens,
                free,
            )

    def _make_room(self, candidate: list[Entry], newcomer: Entry, total: int) -> tuple[list[Entry], int]:
        """Evict from ``candidate`` (holding ``total`` tokens) in place until it fits; the newcomer
        always stays. Returns what was evicted and the tokens left, the total going down with each
        eviction instead of being summed again."""
        if self.kind == "clearable":
            evicted = [e for e in candidate if e is not newcomer]
            candidate[:] = [newcomer]
            return evicted, newcomer.tokens
        evicted = []
        chunk = 1
        if self.kind == "sliding_window" and self.config.strategy == "bulk":
            chunk = max(1, self.config.overflow)
        elif self.kind == "sliding_window" and self.config.strategy == "compact":
            chunk = max(1, self.config.compact_count)
        while not self._fits(total, len(candidate)):
            for _ in range(chunk):
                index = _victim(candidate, newcomer)
                if index < 0:
                    break
                victim = candidate.pop(index)
                evicted.append(victim)
                total -= victim.tokens
            if len(candidate) == 1:
                break
        if self.kind == "sliding_window" and self.config.strategy == "compact":
            kept = [e for e in evicted if not e.metadata.get("summary")]
            if kept:
                self.evicted_for_summary = [*self.evicted_for_summary, *kept]
        return evicted, total

    # -- checklist items ---------------------------------------------------------------------------
    def checklist_item(self, item_id: int) -> Entry | None:
        """The checklist entry carrying ``item_id``, or None."""
        return next((e for e in self.entries if e.metadata.get("id") == item_id), None)

    def add_checklist_item(self, text: str) -> int:
        """Append an open checklist item and return its id (refused like any write when full)."""
        existing = [int(e.metadata["id"]) for e in self.entries if "id" in e.metadata]
        item_id = max([self._next_item_id, *(i + 1 for i in existing)])
        entry = Entry(content=text, tokens=0, key=str(item_id),
                      metadata={"id": item_id, "done": False})
        entry.tokens = estimate_tokens(checklist_line(entry))
        self.add(entry)
        self._next_item_id = item_id + 1
        return item_id

    def update_checklist_item(self, item_id: int, **changes: Any) -> Entry:
        """Set metadata fields (``done``, ``note``) of one item, refusing growth past the budget.

        Raises KeyError when no item carries ``item_id``.
        """
        entry = self.checklist_item(item_id)
        if entry is None:
            raise KeyError(item_id)
        updated = Entry(content=entry.content, tokens=0, key=entry.key,
                        metadata={**entry.metadata, **changes})
        updated.tokens = estimate_tokens(checklist_line(updated))
        self.add(updated)
        return updated

    def remove_key(self, key: str) -> bool:
        """Drop the entry stored under ``key``; False when there is none."""
        position = self.find_key(key)
        if position is None:
            return False
        del self.entries[position]
        return True

    def to_dict(self) -> dict[str, Any]:
        """The region as plain data: name, kind, budget, usage and entries."""
        data: dict[str, Any] = {
            "name": self.name,
            "kind": self.kind,
            "current_tokens": self.tokens,
            "max_tokens": self.max_tokens,
            "entries": [entry.to_dict() for entry in self.entries],
        }
        if self.config.description:
            data["description"] = self.config.description
        return data


# -- checklists ----------------------------------------------------------------------------------
def checklist_line(entry: Entry) -> str:
    """One checklist item as shown to the model, with its note underneath if any."""
    box = "[x]" if entry.metadata.get("done") else "[ ]"
    line = f"{box} {entry.metadata.get('id')} {entry.content}"
    note = entry.metadata.get("note")
    if note:
        line += f"\n    note: {note}"
    return line


def render_checklist(entries: list[Entry]) -> str:
    """The checklist block: a count header, then open items, then done items."""
    items = [e for e in entries if "id" in e.metadata]
    if not items:
        return ""
    open_items = [e for e in items if not e.metadata.get("done")]
    done_items = [e for e in items if e.metadata.get("done")]
    lines = [checklist_line(e) for e in open_items + done_items]
    header = f"Checklist ({len(open_items)} open, {len(done_items)} done):"
    return header + "\n" + "\n".join(lines)
