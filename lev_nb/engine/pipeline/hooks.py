"""Stage hooks in a run: firing the Rhai scripts a stage names at each point of the loop.

A stage may name a Rhai file for any of the hooks in ``HOOK_NAMES`` (``[stages.S.hooks]``). The
files are compiled before the run starts (:mod:`lev_nb.engine.prepare`; a broken one stops the run
before any model call), and the run loop asks :class:`RunHooks` at each point (docs/rhai.md#stage-hooks,
docs/runs.md#the-run-loop):

- ``on_stage_enter``: the stage was entered, before its first inference;
- ``before_inference``: the request is assembled; Cancel skips the inference and fails the run;
- ``after_inference``: the response arrived; Modify(text) replaces its text;
- ``on_tool_call``: before policy and approval; Modify([{name, arguments?}]) replaces the calls;
- ``on_stage_exit``: the stage finished, before its transition is chosen;
- ``on_completion`` / ``on_error``: once, when the run ends complete / in error.

The region hooks (enter, before_inference, exit) may Modify with a map ``{region: "text"}`` that
replaces those regions' content. A hook never fails open: a script error, a malformed outcome, a
Retry or a Cancel raises :class:`HookFailure`, which ends the run in error with a message that
names the hook.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lev_nb.engine import events as ev
from lev_nb.engine.context.regions import Entry, RegionFullError
from lev_nb.messages import ModelResponse, ToolCall
from lev_nb.text import without_surrogates
from lev_nb.scripting import Allow, Cancel, HookScript, Modify, Retry, ScriptError

if TYPE_CHECKING:
    from lev_nb.engine.plan.types import StagePlan
    from lev_nb.engine.state import RunState

__all__ = ["HookFailure", "RunHooks"]

# What a Cancel stops, per hook, for the run's error message.
CANCEL_MEANING: dict[str, str] = {
    "on_stage_enter": "refused to enter the stage",
    "before_inference": "refused the inference",
    "after_inference": "refused the response",
    "on_tool_call": "refused the tool calls",
    "on_stage_exit": "refused to leave the stage",
    "on_completion": "refused the completion",
    "on_error": "cancelled the error report",
}
NO_REASON = "no reason given"
SUMMARY_CHARS = 200


class HookFailure(Exception):
    """A hook failed, cancelled or asked for a retry; the run ends in error with this message."""


def _summary(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    flat = " ".join(text.split())
    return flat[:SUMMARY_CHARS] + ("…" if len(flat) > SUMMARY_CHARS else "")


def _type_name(value: Any) -> str:
    names = {bool: "bool", int: "integer", float: "float", str: "string", list: "array", dict: "map"}
    return "()" if value is None else names.get(type(value), type(value).__name__)


class RunHooks:
    """Fires one run's stage hooks; every method raises :class:`HookFailure` on failure.

    Receives the run state and the compiled hook scripts, keyed by the paths the blueprint writes.
    """

    def __init__(self, state: RunState, scripts: Mapping[str, HookScript]) -> None:
        self.state = state
        self.scripts = dict(scripts)
        self.terminal_fired = False

    # -- plumbing ---------------------------------------------------------------------------
    def has(self, hook: str, stage: StagePlan | None = None) -> bool:
        """Whether the (current) stage names a script for ``hook``."""
        stage = stage or self.state.stage
        return hook in stage.hooks

    async def _fire(self, hook: str, ctx: dict[str, Any]) -> Any:
        """Run ``hook`` of the current stage; returns the Modify value, or None for Allow."""
        stage = self.state.stage
        path = stage.hooks.get(hook)
        if path is None:
            return None
        script = self.scripts.get(path)
        if script is None:  # only when a Runner was built without compiling its hooks
            raise HookFailure(f"{hook}: the hook script '{path}' was not compiled for this run")
        try:
            # Rhai releases the GIL, so a worker thread keeps the engine loop free.
            outcome = await asyncio.to_thread(script.run, hook, without_surrogates(ctx))
        except ScriptError as exc:
            raise HookFailure(f"{hook}: {exc.message}") from None
        if isinstance(outcome, Allow):
            return None
        if isinstance(outcome, Modify):
            return outcome.value
        if isinstance(outcome, Cancel):
            raise HookFailure(f"{hook}: {CANCEL_MEANING[hook]}: {outcome.reason or NO_REASON}")
        if isinstance(outcome, Retry):
            raise HookFailure(
                f"{hook}: the script asked for a retry, which no hook supports; return "
                "#{action: \"cancel\", reason: ...} to stop the run instead"
            )
        raise HookFailure(f"{hook}: unexpected outcome {outcome!r}")  # pragma: no cover

    def _modified(self, hook: str, what: str, value: Any) -> None:
        state = self.state
        state.rec.emit(
            ev.HookModified(state.run_id, state.stage.name, hook=hook, target=what, summary=_summary(value))
        )

    def _base_ctx(self) -> dict[str, Any]:
        stage = self.state.stage
        return {"stage": stage.name, "stage_index": stage.index}

    def _region_ctx(self) -> dict[str, Any]:
        regions = {
            region.name: "\n".join(entry.content for entry in region.entries)
            for region in self.state.ctx.visible_regions()
        }
        return {**self._base_ctx(), "regions": regions}

    async def _replace_regions(self, hook: str, value: Any) -> None:
        """Apply a region-map Modify: each named region gets exactly the given text (off the
        engine thread when a custom region's on_write may run)."""
        window = self.state.ctx
        if not isinstance(value, dict):
            raise HookFailure(
                f"{hook}: 'modify' needs a map of region name to text, got {_type_name(value)}"
            )
        for name, text in value.items():
            if not window.is_visible(name):
                visible = ", ".join(r.name for r in window.visible_regions())
                raise HookFailure(
                    f"{hook}: cannot modify region '{name}': the stage has no such region "
                    f"(regions: {visible})"
                )
            if not isinstance(text, str):
                raise HookFailure(
                    f"{hook}: the new content of region '{name}' must be a string, got {_type_name(text)}"
                )
        def replace(name: str, text: str) -> None:
            region = window.region(name)
            saved = list(region.entries)
            region.clear()
            try:
                if text:
                    region.add(Entry.make(text))
            except RegionFullError as exc:
                region.entries = saved
                raise HookFailure(f"{hook}: cannot replace region '{name}': {exc}") from None

        for name, text in value.items():
            await self.state.in_context(replace, name, text)
            self._modified(hook, f"region:{name}", text)

    # -- the hook points ----------------------------------------------------------------------
    async def stage_enter(self) -> None:
        """``on_stage_enter``: may replace region content before the stage's first inference."""
        if self.has("on_stage_enter"):
            value = await self._fire("on_stage_enter", self._region_ctx())
            if value is not None:
                await self._replace_regions("on_stage_enter", value)

    async def before_inference(self) -> bool:
        """``before_inference``: True when it replaced regions (the request must be rebuilt)."""
        if not self.has("before_inference"):
            return False
        value = await self._fire("before_inference", self._region_ctx())
        if value is None:
            return False
        await self._replace_regions("before_inference", value)
        return True

    async def after_inference(self, response: ModelResponse) -> None:
        """``after_inference``: may replace the response text (not its tool calls)."""
        if not self.has("after_inference"):
            return
        usage = response.usage
        ctx = {
            **self._base_ctx(),
            "response": response.text,
            "tokens_used": usage.prompt_tokens + usage.completion_tokens,
            "tool_calls": [call.name for call in response.tool_calls],
        }
        value = await self._fire("after_inference", ctx)
        if value is None:
            return
        if not isinstance(value, str):
            raise HookFailure(
                f"after_inference: 'modify' needs the replacement response text (a string), got {_type_name(value)}"
            )
        response.text = value
        self._modified("after_inference", "response", value)

    async def tool_calls(self, response: ModelResponse) -> None:
        """``on_tool_call``: may replace the batch of calls (fresh ids ``hook-<name>-<i>``)."""
        if not response.tool_calls or not self.has("on_tool_call"):
            return
        ctx = {
            **self._base_ctx(),
            "tool_calls": [{"name": c.name, "arguments": dict(c.arguments or {})} for c in response.tool_calls],
        }
        value = await self._fire("on_tool_call", ctx)
        if value is None:
            return
        response.tool_calls = _replacement_calls(value)
        self._modified("on_tool_call", "tool_calls", [c.name for c in response.tool_calls])

    async def stage_exit(self) -> None:
        """``on_stage_exit``: may replace region content before the transition is chosen."""
        if self.has("on_stage_exit"):
            value = await self._fire("on_stage_exit", self._region_ctx())
            if value is not None:
                await self._replace_regions("on_stage_exit", value)

    async def terminal(self, status: str, error: str | None) -> tuple[str, str | None]:
        """Fire ``on_completion`` or ``on_error`` once; returns the (status, error) to record.

        A cancelled run fires neither. The hook is marked fired before it runs, so a failing
        terminal hook is not retried (and a failed ``on_completion`` does not fire ``on_error``).
        """
        if self.terminal_fired or status not in ("complete", "error"):
            return status, error
        hook = "on_completion" if status == "complete" else "on_error"
        if not self.has(hook):
            return status, error
        self.terminal_fired = True
        final = self.state.final_output
        output = final.content if final is not None else ""
        ctx = {
            **self._base_ctx(),
            "status": status,
            "output": output if status == "complete" else "",
            "error": (error or "") if status == "error" else "",
        }
        try:
            value = await self._fire(hook, ctx)
            if value is None:
                return status, error
            if not isinstance(value, str):
                raise HookFailure(f"{hook}: 'modify' needs a string, got {_type_name(value)}")
            if hook == "on_error":
                self._modified(hook, "error", value)
                return status, value
            self._replace_output(value)
            return status, error
        except HookFailure as exc:
            if status == "error":
                return "error", f"{exc} (the run had already failed: {error})"
            return "error", str(exc)

    def _replace_output(self, content: str) -> None:
        """Replace the final output's content (on disk, in meta.json and in context)."""
        from lev_nb.engine.pipeline.outputs import cap_content

        state = self.state
        if state.final_output is None:
            raise HookFailure(
                "on_completion: 'modify' replaces the final output, but this run submitted none"
            )
        capped, cut = cap_content(content)
        state.keep_final_output(dataclasses.replace(state.final_output, content=capped, truncated=cut))
        self._modified("on_completion", "final_output", capped)


def _replacement_calls(value: Any) -> list[ToolCall]:
    """Read an ``on_tool_call`` Modify value: an array of ``{name, arguments?}`` maps."""
    if not isinstance(value, list):
        raise HookFailure(
            f"on_tool_call: 'modify' needs an array of #{{name, arguments}} maps, got {_type_name(value)}"
        )
    calls: list[ToolCall] = []
    for index, item in enumerate(value):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            raise HookFailure(f"on_tool_call: item {index} of the new calls must be a map with a string 'name'")
        arguments = item.get("arguments", {})
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise HookFailure(
                f"on_tool_call: the 'arguments' of item {index} ('{item['name']}') must be a map, "
                f"got {_type_name(arguments)}"
            )
        calls.append(ToolCall(id=f"hook-{item['name']}-{index}", name=item["name"], arguments=arguments))
    return calls
