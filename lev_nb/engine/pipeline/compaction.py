"""Compaction: regions summarised by the blueprint's ``[compaction]`` model (docs/concepts.md#transforms,
docs/concepts.md#context-regions).

Four things ask for a summary:

- an edge's ``compact`` / ``summarize`` transform, or the ``compact`` list of a ``custom`` one, for
  the regions of the stage being left (``summarizable = false`` and pinned regions are never
  handed over; a custom transform's ``compact_prompt`` replaces the default instructions);
- a ``compacting`` region that grew past its threshold (``compact_at`` / ``threshold_tokens``);
- a ``sliding_window`` with ``strategy = "compact"``, for the entries it evicted;
- the whole context nearing the model's window (90%): temporary and clearable regions lose their
  oldest entries first, then compacting regions are summarised whatever their threshold.

A summary goes to the ``compact_history`` region paired with its source (``source_region``) and the
source is emptied; without a pair it replaces the source's content. The summariser is the model
given at launch when there is one (a scripted run scripts its summaries too), else the
``[compaction]`` model (default anthropic/claude-sonnet-4-6). Its calls are billed to the current
stage like any other. When it cannot be reached, or answers with nothing, the regions are carried
unchanged and a ``compaction`` event says so.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from lev_nb.engine import events as ev
from lev_nb.messages import Message, ModelRequest
from lev_nb.providers.base import Provider, ProviderError
from lev_nb.taint.levels import highest

if TYPE_CHECKING:
    from lev_nb.engine.context.regions import Entry
    from lev_nb.engine.context.window import TransformResult
    from lev_nb.engine.pipeline.inference import Inference
    from lev_nb.engine.state import RunState

__all__ = ["Compactor", "DEFAULT_COMPACTION_PROMPT", "PRESSURE_THRESHOLD", "render_entries"]

DEFAULT_COMPACTION_PROMPT = (
    "You condense the working memory of an AI agent that is still in the middle of its task. Keep "
    "every fact, decision, name, path, number, result and open question it will need later; drop "
    "repetition and chatter. Write plain prose or terse bullet points. Answer with the summary only."
)
DEFAULT_INSTRUCTIONS = "Summarise the content of context region '{region}'."
#: The share of the model's window the context may fill before it is made smaller.
PRESSURE_THRESHOLD = 0.9


def render_entries(entries: list[Entry]) -> str:
    """Entries as text for the summariser: who said what, which tools were called and answered."""
    lines: list[str] = []
    for entry in entries:
        if entry.kind == "user_message":
            lines.append(f"User: {entry.content}")
        elif entry.kind == "assistant_turn":
            calls = "".join(
                f"\n[called {c.get('name')} {json.dumps(c.get('input') or {}, ensure_ascii=False)}]"
                for c in entry.tool_calls
            )
            lines.append(f"Assistant: {entry.content}{calls}")
        elif entry.kind == "tool_result":
            status = "error from" if entry.is_error else "result of"
            lines.append(f"[{status} {entry.tool_name or 'a tool'}] {entry.content}")
        elif entry.key is not None:
            lines.append(f"[{entry.key}] {entry.content}")
        else:
            lines.append(entry.content)
    return "\n\n".join(lines)


class Compactor:
    """Runs the summaries of one run; the transitions and the run loop call it."""

    def __init__(self, state: RunState, inference: Inference) -> None:
        self.state = state
        self.inference = inference

    # -- the summariser ---------------------------------------------------------------------------
    def _summariser(self) -> tuple[Provider, str, str]:
        """(provider, provider name, model) that writes the summaries."""
        from lev_nb.providers.resolve import ModelOverride, provider_for

        launched = self.inference.provider
        plan = self.state.plan.compaction
        if isinstance(launched, ModelOverride):
            return launched, launched.provider, launched.model
        if launched is not None:
            return launched, getattr(launched, "name", "custom"), plan.model
        return provider_for(plan.provider, plan.model, self.state.settings), plan.provider, plan.model

    async def _summarise(self, region: str, content: str, prompt: str | None) -> tuple[str, str]:
        """(summary, label of the model) for ``content``; raises ProviderError when it cannot."""
        plan = self.state.plan.compaction
        provider, provider_name, model = self._summariser()
        instructions = (prompt or DEFAULT_INSTRUCTIONS).replace("{region}", region)
        request = ModelRequest(
            provider=provider_name,
            model=model,
            system=[plan.system_prompt or DEFAULT_COMPACTION_PROMPT],
            messages=[Message("user", f"{instructions} Keep it under about {plan.max_summary_tokens} "
                                      f"tokens.\n\n<content region=\"{region}\">\n{content}\n</content>")],
            max_tokens=plan.max_summary_tokens,
            temperature=plan.temperature,
            purpose="summary",
            stage=self.state.stage.name,
            timeout_s=self.state.settings.limits.request_timeout_secs,
        )
        label = f"{provider_name}/{model}"
        try:
            response = await self.inference._complete(request, provider)
        except ProviderError as exc:
            self.inference._record(request, None, error=exc.message)
            raise
        self.inference._record(request, response)
        summary = response.text.strip()
        if not summary:
            # An empty summary is a failed compaction, not a region worth nothing: keep the region.
            raise ProviderError("invalid_response", "the summariser answered with nothing")
        return summary, label

    # -- what asks for a summary ------------------------------------------------------------------
    async def after_transform(self, result: TransformResult, config: dict[str, Any]) -> None:
        """Summarise what an edge transform handed over (before the next stage is entered), and
        say which regions it named but left alone."""
        for name, why in result.skipped.items():
            self.state.warn(f"the transform left region '{name}' as it is: {why}", "context-kept")
        if result.to_summarise:
            await self.summarise_regions(list(result.to_summarise), "transform", config.get("compact_prompt"))

    async def maintain(self) -> None:
        """Before a stage turn: summarise compacting regions past their threshold and the entries
        sliding windows evicted to be summarised, then keep the context inside the model's window."""
        ctx = self.state.ctx
        over = [r.name for r in ctx.visible_regions()
                if r.kind == "compacting" and not r.is_empty() and r.tokens >= r.config.threshold]
        if over:
            await self.summarise_regions(over, "threshold", None)
        for region in ctx.all_regions():
            if region.evicted_for_summary:
                await self._summarise_evicted(region.name)
        await self._relieve_pressure()

    async def summarise_regions(self, names: list[str], trigger: str, prompt: str | None) -> None:
        """Replace each region's content by its summary (or file it in its compact_history)."""
        ctx = self.state.ctx
        names = [n for n in names if ctx.has_region(n) and not ctx.is_empty(n)]
        if not names:
            return
        done: list[str] = []
        failed: dict[str, str] = {}
        before = after = 0
        label = ""
        for name in names:
            region = ctx.region(name)
            tokens = region.tokens
            try:
                summary, label = await self._summarise(name, render_entries(region.entries), prompt)
            except ProviderError as exc:
                failed[name] = exc.message
                continue
            before += tokens
            after += await self.state.in_context(ctx.store_summary, name, summary)
            done.append(name)
        self._report(trigger, done, failed, label, before, after)

    async def _summarise_evicted(self, name: str) -> None:
        """Summarise what a compact-strategy sliding window evicted, with its earlier summary."""
        ctx = self.state.ctx
        region = ctx.region(name)
        evicted, region.evicted_for_summary = list(region.evicted_for_summary), ()
        earlier = next((e for e in region.entries if e.metadata.get("summary")), None)
        content = render_entries(evicted)
        if earlier is not None:
            content = f"{earlier.content}\n\n{content}"
        tokens = sum(e.tokens for e in evicted)
        try:
            summary, label = await self._summarise(name, content, None)
        except ProviderError as exc:
            self._report("window", [], {name: exc.message}, "", tokens, 0, dropped=len(evicted))
            return
        sensitivity = highest([e.label for e in evicted] + ([earlier.label] if earlier is not None else []))
        after = await self.state.in_context(ctx.store_window_summary, name, summary, sensitivity)
        self._report("window", [name], {}, label, tokens, after)

    async def _relieve_pressure(self) -> None:
        """Keep the visible context under 90% of the model's window: evict from temporary and
        clearable regions, oldest first, then summarise compacting regions."""
        ctx = self.state.ctx
        limit = int(ctx.window_tokens * PRESSURE_THRESHOLD)
        if ctx.total_tokens() < limit:
            return
        for name, entries, tokens in ctx.evict_for_room(limit):
            self.state.rec.emit(ev.ContextEvicted(
                self.state.run_id, self.state.stage.name, region=name, entries=entries, tokens=tokens,
                reason=f"the context was over {PRESSURE_THRESHOLD:.0%} of the model's {ctx.window_tokens}-token window"))
        if ctx.total_tokens() >= limit:
            compacting = [r.name for r in ctx.visible_regions() if r.kind == "compacting" and not r.is_empty()]
            await self.summarise_regions(compacting, "pressure", None)

    def _report(self, trigger: str, done: list[str], failed: dict[str, str], label: str, before: int, after: int,
                dropped: int = 0) -> None:
        state = self.state
        if done:
            state.rec.emit(ev.Compaction(state.run_id, state.stage.name, trigger=trigger, regions=done,
                                         outcome="summarised", model=label, tokens_before=before, tokens_after=after))
        if failed:
            reasons = "; ".join(f"{name}: {why}" for name, why in failed.items())
            what = (f"{dropped} evicted entries were dropped without a summary" if dropped
                    else "the regions were carried unchanged")
            state.rec.emit(ev.Compaction(state.run_id, state.stage.name, trigger=trigger, regions=list(failed),
                                         outcome="carried", reason=f"no summary ({reasons}); {what}"))
        state.rec.save()
