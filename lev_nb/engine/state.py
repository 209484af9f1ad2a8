"""Per-stage counters, reset every time a stage is entered (spec/runtime.md §3.1)."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass
class StageProgress:
    """What the watchdogs and gates measure within the current stage visit."""

    iterations: int = 0
    total_tool_calls: int = 0
    text_only_nudges: int = 0
    modifying_tool_calls: int = 0
    blocked_modification_calls: int = 0
    gate_reentries: int = 0
    output_reentries: int = 0
    required_reentries: int = 0
    fan_out_reentries: int = 0
    fanned_out: bool = False
    edits_by_path: Counter[str] = field(default_factory=Counter)
    started_at: float = field(default_factory=time.monotonic)
    stuck_fired: bool = False
    digests: dict[str, str] = field(default_factory=dict)
    last_text: str = ""
    repetition: Any = None  # a RepetitionWatch, created when the stage is entered
    points_done: bool = False


@dataclass
class Outcome:
    """Why a stage stopped other than by finishing normally."""

    kind: str  # error | max_iterations | stuck
    message: str = ""


class RunFailure(Exception):
    """A failure that ends the run in error with this message (bad input, an unanswerable checkpoint)."""
