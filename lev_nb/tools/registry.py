"""Tool definitions and the registry that names them (with the ``bash`` -> ``shell`` alias)."""

from __future__ import annotations

import itertools
import types
from collections.abc import Mapping
from dataclasses import field, replace
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, Literal

from lev_nb.blueprint.constants import MODIFYING_TOOLS
from lev_nb.messages import ToolSpec
from lev_nb.records import record

if TYPE_CHECKING:
    from lev_nb.tools.context import ToolContext

__all__ = ["ToolDef", "ToolRegistry", "Handler", "PolicyName", "ALIASES", "MODIFYING_TOOLS"]

PolicyName = Literal["allow", "ask", "deny"]
Handler = Callable[["ToolContext", dict[str, Any]], Awaitable[str]]

# Alternative spellings a blueprint or a model may use, mapped to the canonical tool name.
ALIASES: dict[str, str] = {"bash": "shell"}
# Tools whose successful call counts as a file modification (shell writes are invisible on purpose).


@record
class ToolDef:
    """One tool: what the model sees (name, description, schema) and how lev_nb runs it.

    ``inline`` tools have no handler: the engine answers them itself (submit_output, fan_out,
    runtime_info). ``modifying`` marks tools whose success counts as changing a file;
    ``readonly`` marks tools that only look. ``run_state`` marks tools that act on the run's own
    state (its context regions and checklists), not the world: a resumed run runs them again as
    it replays, instead of taking their result from its journal.
    """

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    handler: Handler | None = None
    modifying: bool = False
    readonly: bool = False
    default_policy: PolicyName = "ask"
    inline: bool = False
    run_state: bool = False
    requires: tuple[str, ...] = ()  # a script tool's @requires capabilities

    def spec(self, advertised_name: str | None = None) -> ToolSpec:
        """The ToolSpec sent to the model, under ``advertised_name`` when the stage used an alias."""
        return ToolSpec(name=advertised_name or self.name, description=self.description, parameters=self.parameters)


# Answers kept per name a model may send (canonical spellings, resolved policies): a model inventing
# tool names cannot grow such a table past this.
KEPT_ANSWERS = 512


class ToolRegistry:
    """Tools by canonical name. Lookups accept aliases and are case-insensitive."""

    def __init__(self, defs: Iterable[ToolDef] = (), aliases: dict[str, str] | None = None) -> None:
        # A copy's tools are its original's table, read-only and shared, under a table of its own
        # (see copy): the copy's own entries are the ones it registered.
        self._base: Mapping[str, ToolDef] = {}
        self._defs: dict[str, ToolDef] = {}
        self._aliases: dict[str, str] = dict(ALIASES if aliases is None else aliases)
        self._canon: dict[str, str] = {}  # name asked -> canonical (see canonical)
        self._named: tuple[list[str], int, int, frozenset[str]] | None = None  # see canonical_names
        self.generation = 0  # how many tools were registered: what was worked out from the tools is stale after one
        for d in defs:
            self.register(d)

    def register(self, tool: ToolDef) -> None:
        """Add or replace a tool."""
        self._defs[tool.name] = tool
        self._canon = {}  # a new name may now be what an earlier spelling means
        self.generation += 1

    def copy(self) -> "ToolRegistry":
        """An independent registry with the same tools, for adding a run's own script tools.

        The copy reads this registry's tools from a frozen snapshot shared with every other copy
        and keeps only what it registers itself: every run starts from a copy of the built-in
        tools and adds one or two, and each live run used to hold a table of all of them."""
        twin = ToolRegistry.__new__(ToolRegistry)
        twin._base = self._snapshot()
        twin._defs = {}
        twin._aliases = self._aliases  # never written after construction
        twin._canon = {}
        twin._named = None
        twin.generation = 0
        return twin

    def _snapshot(self) -> Mapping[str, ToolDef]:
        if not self._defs:
            return self._base
        merged = types.MappingProxyType({**self._base, **self._defs})
        self._base, self._defs = merged, {}  # later registrations go on top of it again
        return merged

    def _find(self, name: str) -> ToolDef | None:
        tool = self._defs.get(name)
        return tool if tool is not None else self._base.get(name)

    def _known(self) -> Iterable[str]:
        """Every name, in the order one merged table would hold them (a replaced tool keeps its place)."""
        if not self._base:
            return self._defs
        return itertools.chain(self._base, (name for name in self._defs if name not in self._base))

    def canonical(self, name: str) -> str:
        """The canonical spelling of ``name``: aliases folded, case matched to a known tool."""
        # Asked a dozen times a tool call (offered, permitted, run, merged): each answer is kept
        # until a tool is registered, within a bound a model inventing names cannot push past.
        known = self._canon.get(name)
        if known is None:
            if len(self._canon) >= KEPT_ANSWERS:
                self._canon = {}
            known = self._canon[name] = self._canonical(name)
        return known

    def canonical_names(self, names: list[str]) -> frozenset[str]:
        """The canonical spellings of ``names``. The answer for the last list asked about is kept
        while it is the same list, as long, with no tool registered since: every tool batch asks
        with its stage's offered list, which the engine keeps and never changes."""
        kept = self._named
        if kept is not None and kept[0] is names and kept[1] == len(names) and kept[2] == self.generation:
            return kept[3]
        found = frozenset(self.canonical(name) for name in names)
        self._named = (names, len(names), self.generation, found)
        return found

    def _canonical(self, name: str) -> str:
        if self._find(name) is not None:
            return name
        lowered = name.lower()
        if lowered in self._aliases:
            return self._aliases[lowered]
        for known in self._known():
            if known.lower() == lowered:
                return known
        return lowered

    def spellings(self, name: str) -> set[str]:
        """Every lower-case spelling that means the same tool as ``name`` (itself, canon, aliases)."""
        canon = self.canonical(name)
        names = {name.lower(), canon.lower()}
        names.update(alias for alias, target in self._aliases.items() if target == canon)
        return names

    def get(self, name: str) -> ToolDef | None:
        """The definition for ``name`` (or an alias of it), or None."""
        return self._find(self.canonical(name))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def names(self) -> list[str]:
        """Canonical names of every registered tool, sorted."""
        return sorted(self._known())

    def is_inline(self, name: str) -> bool:
        """True for tools the engine answers itself (no handler here)."""
        tool = self.get(name)
        return bool(tool and tool.inline)

    def specs(self, names: Iterable[str], skip_unknown: bool = False) -> list[ToolSpec]:
        """ToolSpecs for the stage's tool names, in order, under the names the stage used.

        Raises KeyError naming the first unknown tool unless ``skip_unknown``.
        """
        out: list[ToolSpec] = []
        for name in names:
            tool = self.get(name)
            if tool is None:
                if skip_unknown:
                    continue
                raise KeyError(f"unknown tool '{name}' (known: {', '.join(self.names())})")
            out.append(tool.spec(name))
        return out

    def with_description(self, name: str, description: str) -> None:
        """Replace one tool's description (the engine appends the output spec to submit_output)."""
        tool = self.get(name)
        if tool is None:
            raise KeyError(f"unknown tool '{name}'")
        self.register(replace(tool, description=description))
