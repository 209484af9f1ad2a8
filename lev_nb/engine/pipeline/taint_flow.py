"""Taint tracking inside a run: labelling tool results and asking the taint gate
(:mod:`lev_nb.taint`) before an outbound call.

When any stage of the run is tracked (``taint_tracking`` in config.toml, or a blueprint's
``[security]``), every tool result enters context with its tool's sensitivity, so the context's
label is known wherever the run goes. In a tracked stage each call the permission allowed is then
put to the gate; a blocked call becomes an approval request like any other (notebook form,
terminal prompt, ``lev respond``), and with nobody to ask it is refused with a warning. ``--yolo``
lets it through, with a warning. The policy file and rules are read once, when the run starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable, Callable

from lev_nb.messages import ToolCall
from lev_nb.taint import Policy, PolicyError, RuleSet, TaintGate, load_policy, load_rules, rules_dir
from lev_nb.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from lev_nb.engine.plan.types import StagePlan
    from lev_nb.engine.state import RunState

RULE_FAILED = "policy-rule-failed"


class TaintFlow:
    """One run's taint tracking (inert when no stage of the run is tracked)."""

    def __init__(self, state: RunState, registry: ToolRegistry, *, reads_outside: bool) -> None:
        self.state = state
        self.registry = registry
        self.machine = bool(state.settings.taint_tracking)
        self.on = state.plan.tracks_taint_anywhere(self.machine)
        self.gate: TaintGate | None = None
        if self.on:
            self.gate = TaintGate(self._policy(), self._rules(), reads_outside=reads_outside)

    def _policy(self) -> Policy:
        try:
            return load_policy()
        except PolicyError as exc:  # the launch checked it; it changed since: allow nothing extra
            self.state.warn(f"the taint policy file cannot be used, so no allowlist rule applies: {exc}",
                            RULE_FAILED, in_stage=False)
            return Policy()

    def _rules(self) -> RuleSet:
        rules = load_rules(rules_dir())
        for problem in rules.problems:
            self.state.warn(problem, RULE_FAILED, in_stage=False)
        return rules

    def label(self, tool: str) -> str:
        """The label a result of ``tool`` enters context with."""
        if self.gate is None:
            return "public"
        return self.gate.classify(self.registry.canonical(tool)).sensitivity

    def gate_for(self, stage: StagePlan) -> Callable[[ToolCall], Awaitable[str | None]] | None:
        """The check to run before each permitted call of ``stage`` (None: the stage is not tracked)."""
        if self.gate is None or not self.state.plan.tracks_taint(stage, self.machine):
            return None
        return self.check

    async def check(self, call: ToolCall) -> str | None:
        """None when ``call`` may run; else the ``[blocked]`` text it returns instead."""
        assert self.gate is not None
        state = self.state
        tool = self.registry.canonical(call.name)
        ctx = state.ctx
        verdict = self.gate.check(tool, call.arguments, ctx.label(), ctx.region_labels())
        for problem in verdict.problems:
            state.warn(problem, RULE_FAILED)
        if verdict.allowed:
            return None
        why = verdict.describe()
        if state.meta.yolo:
            state.warn(f"--yolo let a call through the taint gate: {why}", "taint-gate-waived")
            return None
        hub = state.interaction
        if hub is None:
            state.warn(f"the taint gate blocked a call: {why}; nobody could be asked, so it did not run",
                       "taint-gate-denied")
            return f"[blocked] {why}. Nobody could be asked to allow it, so it did not run."
        answer = await hub.taint_approve(call, tool, why)
        return None if answer is True else str(answer)
