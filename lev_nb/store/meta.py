"""The typed run record: ``RunMeta`` and ``RunFlags``, what meta.json holds (docs/runs.md#the-run-record).

The engine keeps one ``RunMeta`` per run and changes its attributes as the run moves; the record
writer turns it into meta.json with :meth:`RunMeta.to_dict`, which keeps the upstream's field names
and order and adds ``stage_history``. Readers of other runs' records (``lev ps``, ``lev result``) get
plain dicts, since a record on disk may come from another version or be half-written.
"""

from __future__ import annotations

import copy
import os
import re
import threading
import time
from dataclasses import field
from datetime import datetime
from typing import Any

from lev_nb.blueprint.constants import DEFAULT_MAX_CHILD_DEPTH
from lev_nb.records import record

__all__ = ["RunMeta", "RunFlags", "RUN_STATUSES", "TERMINAL_STATUSES", "utc_now", "new_run_id"]

#: Every status a run can have, in the order a run passes through them. ``waiting_input`` (a person must
#: answer: run.pending) and ``paused`` are not terminal; paused:
#: the run stopped because a person must set something up (credits, the network) and
#: ``lev resume`` / ``lev_nb.resume`` continues it from its record.
RUN_STATUSES = ("starting", "running", "waiting_input", "paused", "complete", "error", "cancelled")
#: The statuses a run never leaves.
TERMINAL_STATUSES = frozenset({"complete", "error", "cancelled"})


# The last second utc_now formatted, with its text: a run stamps its record several times a turn,
# and formatting the date part again each time cost more than the rest of a stamp.
_second: tuple[int, str] = (-1, "")


def utc_now() -> str:
    """The current time as an RFC 3339 UTC timestamp with milliseconds (``...Z``)."""
    global _second
    ns = time.time_ns()
    second, text = _second  # one read: another thread may replace the pair meanwhile
    if ns // 1_000_000_000 != second:
        second = ns // 1_000_000_000
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _second = (second, text)
    return f"{text}.{ns // 1_000_000 % 1000:03d}Z"


def parse_stamp(stamp: Any) -> datetime | None:
    """A record's ISO time (``...Z`` as :func:`utc_now` writes it) as a datetime, or None when
    ``stamp`` is not one."""
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None


# The random part of run ids, drawn from the system a few hundred ids at a time: os.urandom lets
# go of the interpreter lock, and with the engine thread busy, taking it back cost a run start more
# than the call itself. A forked child draws its own (its parent's bytes would give both the same ids).
_ID_BYTES = 6
_entropy = bytearray()
_entropy_lock = threading.Lock()


def _forked() -> None:
    global _entropy_lock
    _entropy.clear()
    _entropy_lock = threading.Lock()  # another thread may have held it when the process forked


os.register_at_fork(after_in_child=_forked)


def _random_hex() -> str:
    with _entropy_lock:
        if len(_entropy) < _ID_BYTES:
            _entropy[:] = os.urandom(_ID_BYTES * 256)
        drawn = bytes(_entropy[-_ID_BYTES:])
        del _entropy[-_ID_BYTES:]
    return drawn.hex()


def new_run_id(agent_name: str, now: float | None = None) -> str:
    """``<agent name, other than [A-Za-z0-9-] -> '-'>-<unix seconds>-<12 hex>``."""
    safe = re.sub(r"[^A-Za-z0-9-]", "-", agent_name) or "agent"
    secs = int(time.time() if now is None else now)
    return f"{safe}-{secs}-{_random_hex()}"


@record(frozen=False)
class RunFlags:
    """What a run did that a reader checks afterwards: files touched, gates forced, output given."""

    modified_files: list[str] = field(default_factory=list)
    modified_file_count: int = 0
    empty_output: bool = False
    no_output_tools: bool = False
    searches_run: int = 0
    searches_empty: int = 0
    max_iterations_hit: int = 0
    gates_forced: int = 0
    required_regions_abandoned: list[str] = field(default_factory=list)
    workspace_lost: bool = False
    produced_output: bool = False
    output_forced: int = 0
    splits_degraded: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The ``flags`` object of meta.json (lists copied, so the result is the caller's)."""
        return {
            "modified_files": list(self.modified_files),
            "modified_file_count": self.modified_file_count,
            "empty_output": self.empty_output,
            "no_output_tools": self.no_output_tools,
            "searches_run": self.searches_run,
            "searches_empty": self.searches_empty,
            "max_iterations_hit": self.max_iterations_hit,
            "gates_forced": self.gates_forced,
            "required_regions_abandoned": list(self.required_regions_abandoned),
            "workspace_lost": self.workspace_lost,
            "produced_output": self.produced_output,
            "output_forced": self.output_forced,
            "splits_degraded": self.splits_degraded,
        }


@record(frozen=False, slots=True)  # 41 fields, one instance per live run: see record()
class RunMeta:
    """One run's meta.json as a typed value; see the module docstring."""

    run_id: str
    agent_name: str
    task: str
    agent_path: str = ""
    model: str = ""
    pid: int = 0
    status: str = "starting"
    current_stage: str = ""
    stage_index: int = 0
    num_stages: int = 0
    iteration: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    tool_calls: int = 0
    workdir: str = ""
    started_at: str = field(default_factory=utc_now)
    updated_at: str = ""
    last_progress_at: str = ""
    error: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    parent_run_id: str | None = None
    children: list[str] = field(default_factory=list)
    depth: int = 0
    max_child_depth: int = DEFAULT_MAX_CHILD_DEPTH
    # One entry per child run, in start order: {run_id, kind (agent: spawn_agent; worker: fan_out),
    # agent_name, blueprint, status, error}; the status moves when the child ends.
    child_runs: list[dict[str, Any]] = field(default_factory=list)
    # Why the run is holding still, while it is: {reason: "children", outstanding: N} or
    # {reason: "stalled", models, wait_s} (every model's circuit is open; status running), or
    # {reason: tool_approval|user_prompt|interaction_point} (status waiting_input).
    waiting_on: dict[str, Any] | None = None
    flags: RunFlags = field(default_factory=RunFlags)
    final_output: dict[str, Any] | None = None
    output_request: dict[str, Any] | None = None
    stage_history: list[str] = field(default_factory=list)
    # What the model calls cost: the run total in USD (None while any call's model has no known
    # price), and tokens and cost per stage and in all (see lev_nb.providers.pricing).
    cost_usd: float | None = 0.0
    usage: dict[str, Any] = field(default_factory=dict)
    # Set while the run is paused because a person must set something up (an account out of
    # credits, a provider out of reach): {blocker: credits|providers, remedy, reason}.
    needs_setup: dict[str, Any] | None = None
    # Permissions given at launch (--yolo, --allow TOOL), inherited by child runs.
    yolo: bool = False
    allowed_tools: list[str] = field(default_factory=list)
    # While status is waiting_input: the open requests (as run.pending shows them), so
    # `lev respond` can answer from elsewhere.
    pending: list[dict[str, Any]] = field(default_factory=list)
    # Set once the run has been resumed: {count, at: [timestamps], from: [status it was resumed from]}.
    resumed: dict[str, Any] | None = None
    # What the run told the person, in order: {code, message, stage, at} (lev_nb.engine.run_warnings).
    warnings: list[dict[str, Any]] = field(default_factory=list)
    # A short title made after the run started ([title]; lev_nb.engine.title), None until then.
    title: str | None = None

    def __post_init__(self) -> None:
        self.updated_at = self.updated_at or self.started_at
        self.last_progress_at = self.last_progress_at or self.started_at

    @property
    def finished(self) -> bool:
        """True once the status is terminal."""
        return self.status in TERMINAL_STATUSES

    def touch(self) -> None:
        """Mark the record as updated now (``updated_at`` and ``last_progress_at``)."""
        now = utc_now()
        self.updated_at = now
        self.last_progress_at = now

    def to_dict(self, shared: bool = False) -> dict[str, Any]:
        """meta.json as a new dict: upstream field names in the upstream order, plus child_runs,
        stage_history, cost_usd, usage, needs_setup, the launch permissions, pending, resumed and warnings.
        ``shared`` leaves ``usage`` shared with the record, for a caller that only encodes the dict
        at once (the recorder, on every save)."""
        return {
            "run_id": self.run_id,
            "agent_name": self.agent_name,
            "agent_path": self.agent_path,
            "task": self.task,
            "model": self.model,
            "pid": self.pid,
            "status": self.status,
            "current_stage": self.current_stage,
            "stage_index": self.stage_index,
            "num_stages": self.num_stages,
            "iteration": self.iteration,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_tokens": self.cached_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "tool_calls": self.tool_calls,
            "workdir": self.workdir,
            "started_at": self.started_at,
            "updated_at": self.updated_at,
            "last_progress_at": self.last_progress_at,
            "error": self.error,
            "metadata": dict(self.metadata),
            "parent_run_id": self.parent_run_id,
            "children": list(self.children),
            "depth": self.depth,
            "max_child_depth": self.max_child_depth,
            "child_runs": [dict(c) for c in self.child_runs],
            "waiting_on": dict(self.waiting_on) if self.waiting_on is not None else None,
            "flags": self.flags.to_dict(),
            "final_output": dict(self.final_output) if self.final_output is not None else None,
            "output_request": dict(self.output_request) if self.output_request is not None else None,
            "stage_history": list(self.stage_history),
            "cost_usd": self.cost_usd,
            "usage": self.usage if shared else copy.deepcopy(self.usage),
            "needs_setup": dict(self.needs_setup) if self.needs_setup is not None else None,
            "yolo": self.yolo,
            "allowed_tools": list(self.allowed_tools),
            "pending": copy.deepcopy(self.pending) if self.pending else [],  # mostly empty: no copy machinery
            "resumed": copy.deepcopy(self.resumed) if self.resumed is not None else None,
            "warnings": [dict(w) for w in self.warnings],
            "title": self.title,
        }
