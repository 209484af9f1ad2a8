"""``lev log RUN``: a run's events (events.jsonl) told one sentence a line, as they happened.

Each line is the event's time (UTC), its stage and its sentence (:func:`lev_nb.explain.story.sentence`),
with the kind of call-out it deserves in capitals (WARNING, GATE, REJECTED, ...) and, indented
under it, the start of what the model said or a tool gave back. The deltas of a streaming answer
(``model_text``) are left out: the model call that ends them tells the answer once.
"""

from __future__ import annotations

import time
from typing import Any

from lev_nb.engine.events import event_from_dict
from lev_nb.explain.story import Line, clip, sentence

__all__ = ["log_line", "QUIET_KINDS"]

QUIET_KINDS = frozenset({"model_text"})
DETAIL_CHARS = 160
STAGE_WIDTH = 12


def log_line(data: dict[str, Any]) -> str | None:
    """One events.jsonl object as ``lev log`` prints it, or None for a kind it leaves out."""
    kind = str(data.get("type") or "?")
    if kind in QUIET_KINDS:
        return None
    try:
        line = sentence(event_from_dict(data))
    except (KeyError, TypeError, ValueError):  # a kind of another version, or a damaged line
        fields = ", ".join(f"{k}={clip(repr(v), 40)}" for k, v in data.items() if k not in ("type", "ts", "run_id", "stage"))
        line = Line(f"{kind}: {fields}" if fields else kind)
    ts = data.get("ts")
    clock = (time.strftime("%H:%M:%S", time.gmtime(ts)) + f".{int(ts * 1000) % 1000:03d}"
             if isinstance(ts, (int, float)) and not isinstance(ts, bool) else "--:--:--.---")
    stage = str(data.get("stage") or "-")
    tag = f"{line.callout.upper()}: " if line.callout else ""
    text = f"{clock}  {stage:<{STAGE_WIDTH}}  {tag}{line.text}"
    detail = clip(line.detail, DETAIL_CHARS) if line.detail.strip() else ""
    return text + (f"\n{' ' * (16 + STAGE_WIDTH)}{detail}" if detail else "")
