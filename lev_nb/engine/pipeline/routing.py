"""Choosing where a finished stage goes (docs/concepts.md#transitions): edge lookup with revisit budgets,
normal resolution, the routing prompt and how a model's answer is matched to an edge."""

from __future__ import annotations

import re

from lev_nb.engine.plan.types import EdgePlan, RunPlan, StagePlan
from lev_nb.records import record


@record
class Resolution:
    """What normal resolution decided.

    ``kind`` is one of: ``next`` (take ``edge``; ``gated`` says whether its gate applies),
    ``fallthrough`` (linear move to the next declared stage), ``choose`` (ask the model among
    ``choices``), ``terminal`` (the run ends here) or ``dead_end``.
    """

    kind: str
    edge: EdgePlan | None = None
    choices: tuple[EdgePlan, ...] = ()


def within_budget(plan: RunPlan, visits: dict[str, int], target: str) -> bool:
    """True when ``target`` exists and may still be entered under its ``max_revisits``."""
    if not plan.has_stage(target):
        return False
    limit = plan.stage(target).max_revisits
    return limit is None or visits.get(target, 0) <= limit


def find_conditioned(
    plan: RunPlan, stage: StagePlan, visits: dict[str, int], condition: str
) -> EdgePlan | None:
    """The first edge with ``condition`` whose target still has revisit budget."""
    for edge in stage.find_edge(condition):
        if within_budget(plan, visits, edge.target):
            return edge
    return None


def resolve_normal(plan: RunPlan, stage: StagePlan, visits: dict[str, int]) -> Resolution:
    """Where a stage that finished normally goes next, before any model is asked."""
    if stage.transitions is None:
        if stage.index + 1 < len(plan.stages):
            return Resolution("fallthrough")
        return Resolution("terminal")
    if not stage.transitions:
        return Resolution("terminal")
    choosable = tuple(
        e for e in stage.transitions if e.is_normal and within_budget(plan, visits, e.target)
    )
    if not choosable:
        return Resolution("dead_end") if stage.declares_normal_edge else Resolution("terminal")
    if len(choosable) == 1 and not stage.allow_complete:
        return Resolution("next", edge=choosable[0])
    return Resolution("choose", choices=choosable)


def routing_prompt(stage: StagePlan, choices: tuple[EdgePlan, ...]) -> str:
    """The question put to the model when it must pick the next stage."""
    lines = [f"- {e.target}: {e.hint}" if e.hint else f"- {e.target}" for e in choices]
    if stage.transition_prompt:
        head = f"{stage.transition_prompt}\n\nAvailable transitions:\n"
    else:
        head = f"The '{stage.name}' stage is finished. These stages can run next:\n"
    if stage.allow_complete:
        tail = (
            "\nReply with only the name of the stage that should run next, or with only the word "
            "DONE if the run should end here."
        )
    else:
        tail = "\nReply with only the name of the stage that should run next."
    return head + "\n".join(lines) + "\n" + tail


_WORD = re.compile(r"[A-Za-z0-9_]+")


def match_choice(
    answer: str, choices: tuple[EdgePlan, ...], allow_done: bool
) -> EdgePlan | None | str:
    """Map a routing answer to an edge, the string ``"DONE"``, or None when nothing matched.

    Candidates are the first non-empty line, then the last line when there are several and it
    is at most three words; in each, the first word equal (case-insensitively) to DONE or to a
    target wins. Targets may contain characters other than word characters, so a whole-line
    match is tried first.
    """
    lines = [ln.strip() for ln in answer.splitlines() if ln.strip()]
    if not lines:
        return None
    candidates = [lines[0]]
    if len(lines) > 1 and len(lines[-1].split()) <= 3:
        candidates.append(lines[-1])
    by_name = {e.target.lower(): e for e in choices}
    for line in candidates:
        whole = line.strip(" .`'\"*").lower()
        if whole in by_name:
            return by_name[whole]
        for word in _WORD.findall(line):
            low = word.lower()
            if low == "done" and allow_done:
                return "DONE"
            if low in by_name:
                return by_name[low]
    return None
