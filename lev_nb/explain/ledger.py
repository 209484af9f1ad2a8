"""``lev stages RUN``: the per-stage token ledger of a recorded run, where a staged agent's cost
lives (prompt, output, cache read, cache write, calls and cost per stage), and with ``regions``
each stage's per-region token high-water mark, largest first.

The tokens come from meta.json's ``usage.by_stage`` (finished child runs are counted in the stage
that started them); the region sizes from the ``regions`` each transcript entry records (a record
written before they were recorded has none to show).
"""

from __future__ import annotations

from typing import Any

from lev_nb.explain.fields import as_cost, as_dict, as_int
from lev_nb.explain.record import RunRecord
from lev_nb.explain.story import format_cost
from lev_nb.records import record

__all__ = ["LedgerRow", "ledger", "ledger_text", "region_peaks"]


@record
class LedgerRow:
    """One stage's line of the ledger (``status``: where the run is or how it left the stage)."""

    stage: str
    status: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    cache_write_tokens: int
    calls: int
    cost_usd: float | None

    def to_dict(self) -> dict[str, Any]:
        """The row as JSON-ready data (``lev stages --json``)."""
        return {"stage": self.stage, "status": self.status, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "cached_tokens": self.cached_tokens,
                "cache_write_tokens": self.cache_write_tokens, "calls": self.calls, "cost_usd": self.cost_usd}


def ledger(meta: dict[str, Any]) -> list[LedgerRow]:
    """The ledger's rows: the stages in the order the run first entered them, then any stage
    that has usage only (a fan-out's worker stage)."""
    by_stage = as_dict(as_dict(meta.get("usage")).get("by_stage"))
    history = [s for s in meta.get("stage_history") or [] if isinstance(s, str)]
    current = meta.get("current_stage") or (history[-1] if history else None)
    rows = []
    for name in dict.fromkeys(history + list(by_stage)):
        spent = as_dict(by_stage.get(name))
        if name == current:
            status = str(meta.get("status") or "?")
        else:
            status = "complete" if name in history else "worker"
        rows.append(LedgerRow(
            name, status, as_int(spent.get("prompt_tokens")), as_int(spent.get("completion_tokens")),
            as_int(spent.get("cached_tokens")), as_int(spent.get("cache_write_tokens")), as_int(spent.get("calls")),
            as_cost(spent.get("cost_usd")),
        ))
    return rows


def region_peaks(transcript: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Each stage's regions with the most tokens each held in one of its requests, largest first."""
    peaks: dict[str, dict[str, int]] = {}
    for entry in transcript:
        regions = entry.get("regions")
        if not isinstance(regions, list):
            continue
        stage = peaks.setdefault(str(entry.get("stage") or "?"), {})
        for region in regions:
            if isinstance(region, dict) and isinstance(region.get("name"), str):
                stage[region["name"]] = max(stage.get(region["name"], 0), as_int(region.get("tokens")))
    return {s: dict(sorted(r.items(), key=lambda kv: -kv[1])) for s, r in peaks.items()}


def ledger_text(record: RunRecord, regions: bool = False) -> str:
    """The ledger as ``lev stages`` prints it (see the module docstring)."""
    rows = ledger(record.meta)
    if not rows:
        return f"run {record.run_id} has made no model call yet\n"
    header = ("STAGE", "STATUS", "PROMPT", "OUTPUT", "CACHE RD", "CACHE WR", "CALLS", "COST")
    total = LedgerRow("TOTAL", "", sum(r.prompt_tokens for r in rows), sum(r.completion_tokens for r in rows),
                      sum(r.cached_tokens for r in rows), sum(r.cache_write_tokens for r in rows),
                      sum(r.calls for r in rows), as_cost(record.meta.get("cost_usd")))
    cells = [(r.stage, r.status, str(r.prompt_tokens), str(r.completion_tokens), str(r.cached_tokens),
              str(r.cache_write_tokens), str(r.calls), format_cost(r.cost_usd, r.prompt_tokens + r.completion_tokens))
             for r in [*rows, total]]
    widths = [max(len(c[i]) for c in [header, *cells]) for i in range(len(header))]
    left = {0, 1}
    lines = ["  ".join(c.ljust(widths[i]) if i in left else c.rjust(widths[i]) for i, c in enumerate(row))
             for row in [header, *cells]]
    if regions:
        peaks = region_peaks(record.transcript())
        if not peaks:
            lines += ["", "no region sizes are recorded for this run (it was recorded by an older lev_nb)"]
        for stage, sizes in peaks.items():
            lines += ["", f"{stage}: the most tokens each region held in one request"]
            width = max((len(n) for n in sizes), default=0)
            lines += [f"  {name.ljust(width)}  {tokens:>8}" for name, tokens in sizes.items()]
    return "\n".join(lines) + "\n"
