"""Edge gates: refusing a transition until the stage has something to show (docs/concepts.md#gates). Checks
run in the upstream order; the first that blocks wins."""

from __future__ import annotations

from typing import Any, Protocol

from lev_nb.blueprint.constants import MODIFYING_TOOLS
from lev_nb.engine.plan.types import GatePlan, StagePlan
from lev_nb.engine.state import StageProgress
from lev_nb.messages import StageDuties



class RegionView(Protocol):
    """The few context questions a gate asks."""

    def has_region(self, name: str) -> bool: ...
    def is_empty(self, name: str) -> bool: ...
    def digest(self, name: str) -> str: ...
    def open_items(self, name: str) -> list[Any]: ...


def modifying_tools(stage: StagePlan, gate: GatePlan | None = None) -> set[str]:
    """Tool names that count as modifying in this stage: the built-ins plus gate-named tools."""
    names = set(MODIFYING_TOOLS)
    for edge in stage.transitions or ():
        if edge.gate:
            names.update(edge.gate.tools)
    if gate:
        names.update(gate.tools)
    return names


def gate_block_message(
    gate: GatePlan, stage: StagePlan, progress: StageProgress, regions: RegionView
) -> str | None:
    """Why the gate refuses the transition right now, or None when it lets it through."""
    reason = _first_block(gate, stage, progress, regions)
    if reason is None:
        return None
    return gate.message or reason


def _first_block(
    gate: GatePlan, stage: StagePlan, progress: StageProgress, regions: RegionView
) -> str | None:
    name = gate.require_region_updated
    if name and regions.has_region(name) and name in progress.digests:
        if regions.digest(name) == progress.digests[name]:
            return (
                f"The `{name}` region has not changed since this stage began. Revise it - "
                "repeating what was already there does not count - before moving on."
            )
    name = gate.require_no_open_items
    if name and regions.has_region(name):
        items = regions.open_items(name)
        if items:
            listed = "; ".join(_item_text(item) for item in items)
            return (
                f"{len(items)} item(s) are still open in `{name}`: {listed}. Finish them, or mark "
                "them finished with todo_done, before moving on."
            )
    empty = [r for r in gate.require_regions if regions.has_region(r) and regions.is_empty(r)]
    if empty:
        return (
            f"This stage is not finished: the `{', '.join(empty)}` region is still empty. Write "
            "it with context_write (or context_append) before moving on."
        )
    if gate.require_modifications and not _modification_satisfied(gate, stage, progress, regions):
        return (
            "No file changes were recorded in this stage. Changes made through the shell (sed -i, "
            "tee, >, >>) are invisible to lev_nb. Make your changes with write_file or edit_file "
            "before moving on."
        )
    return None


def stage_duties(
    stage: StagePlan, progress: StageProgress, regions: RegionView, unmet_required: list[str]
) -> StageDuties:
    """What ``stage`` owes right now: the ``unmet_required`` regions, and whatever each of its gates
    would refuse the stage for at this moment (the same tests as :func:`gate_block_message`, all of
    them rather than the first)."""
    duties = StageDuties(regions=list(unmet_required))

    def owe(region: str) -> None:
        if region not in duties.regions:
            duties.regions.append(region)

    for edge in stage.transitions or ():
        gate = edge.gate
        if gate is None:
            continue
        name = gate.require_region_updated
        if (name and regions.has_region(name) and name in progress.digests
                and regions.digest(name) == progress.digests[name]):
            owe(name)
        for region in gate.require_regions:
            if regions.has_region(region) and regions.is_empty(region):
                owe(region)
        name = gate.require_no_open_items
        if name and regions.has_region(name):
            for item in regions.open_items(name):
                if isinstance(item, (tuple, list)) and (name, int(item[0])) not in duties.open_items:
                    duties.open_items.append((name, int(item[0])))
        if gate.require_modifications and not _modification_satisfied(gate, stage, progress, regions):
            duties.modify_files = True
    return duties


def _modification_satisfied(
    gate: GatePlan, stage: StagePlan, progress: StageProgress, regions: RegionView
) -> bool:
    offered = set(stage.tools)
    if not offered & modifying_tools(stage, gate):
        return True  # a stage that cannot modify anything cannot be asked to
    if progress.modifying_tool_calls > 0 or progress.blocked_modification_calls > 0:
        return True
    return bool(gate.region and regions.has_region(gate.region) and not regions.is_empty(gate.region))


def _item_text(item: Any) -> str:
    if isinstance(item, (tuple, list)) and len(item) >= 2:
        return f"{item[0]} {item[1]}"
    return str(item)
