"""The context window of one run, built from its plan (docs/runs.md#the-run-loop):
:class:`RunContext` is a :class:`~lev_nb.engine.context.window.ContextWindow` that holds every
region any layout of the plan declares, hosts the scripted custom regions, and answers the few
questions the run loop asks (required regions, seeding the task, transforms).
"""

from __future__ import annotations

from typing import Any

from lev_nb.blueprint.constants import DEFAULT_WINDOW_TOKENS
from lev_nb.engine.context.custom import RegionHost, ScriptedRegion
from lev_nb.engine.context.window import ContextWindow
from lev_nb.engine.plan.types import RunPlan, StagePlan


class RunContext(ContextWindow):
    """A ContextWindow that knows the run's stage layouts (and its scripted custom regions)."""

    def __init__(
        self, layout: list[Any], window_tokens: int = DEFAULT_WINDOW_TOKENS, *, region_host: RegionHost | None = None
    ) -> None:
        self.region_host = region_host  # before the base class declares the regions
        super().__init__(layout, window_tokens)

    @property
    def scripted(self) -> bool:
        """True when custom-region scripts shape some region (rendering then runs off the engine thread)."""
        return self.region_host is not None and bool(self.region_host.scripts)

    def _new_region(self, config: Any) -> Any:
        host = self.region_host
        if host is not None and config.name in host.names:
            return ScriptedRegion(config, host)
        return super()._new_region(config)

    def enter_stage(self, stage: StagePlan) -> None:
        """Show the stage's own regions (or the global layout); the window is the stage's model's."""
        self.window_tokens = stage.window_tokens
        self.apply_stage_layout(list(stage.layout) if stage.layout is not None else None)

    def seed_input(self, region: str, text: str) -> None:
        """Fill a caller-seeded region (the task goes to ``task``, else the first pinned region)."""
        if region == "task" and not self.has_region("task"):
            pinned = [r for r in self.visible_regions() if r.kind == "pinned" and r.name != "final_output"]
            if pinned:
                self.seed(pinned[0].name, f"Task: {text}")
            else:
                self.add_user(text)
            return
        if self.has_region(region):
            self.seed(region, text)

    def required_regions(self) -> list[str]:
        """Names of the visible regions declared ``required = true``."""
        return [r.name for r in self.visible_regions() if r.config.required]

    def required_message(self, region: str) -> str | None:
        """The region's own ``required_message``, if it has one."""
        return self.region(region).config.required_message if self.has_region(region) else None

    def has_content(self, region: str) -> bool:
        """True when the region exists and holds something."""
        return self.has_region(region) and not self.is_empty(region)

    def transform(self, kind: str, config: dict[str, Any]) -> Any:
        """Apply an edge transform; the TransformResult says what the summariser must do."""
        return self.apply_transform(kind, config)


def build_context(plan: RunPlan, region_scripts: dict[str, Any] | None = None) -> RunContext:
    """A fresh context window holding every region the blueprint declares anywhere.

    ``region_scripts`` (compiled custom-region scripts by path) makes the scripted custom regions
    render, admit and evict through their scripts.
    """
    names = {config.name for _, config in plan.scripted_regions()}
    host = RegionHost(region_scripts or {}, names) if names else None
    ctx = RunContext(list(plan.layout), plan.window_tokens, region_host=host)
    for stage in plan.stages:
        if stage.layout is not None:
            ctx.declare(stage.layout)
    return ctx


__all__ = ["RunContext", "build_context"]
