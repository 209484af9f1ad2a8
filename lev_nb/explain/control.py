"""Stopping a run owned by another process: ``lev cancel`` and ``lev kill``.

Cancel asks the run itself to stop: a ``cancel`` left in its ``inbox/`` (as ``lev msg`` leaves a
message), which the owning process reads within about a second (lev_nb.engine.runner watches a
root run's inbox; a sub-agent reads it at its next step); the run ends ``cancelled`` with its
record saying who cancelled it. A run nobody owns any more (paused, or its process gone) is
closed here instead, under the record's claim lock so that a ``lev resume`` cannot take it at the
same moment.

Kill signals the owning process (SIGTERM; SIGKILL with ``force``), which stops every run that
process hosts; the records of its runs stay as they stood, so ``lev resume`` can continue them.
A pid in a record may have been reused by an unrelated process since: a process that started
after the run was claimed is never signalled.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import Any

from lev_nb.engine import events as ev
from lev_nb.explain.record import RunRecord
from lev_nb.records import record
from lev_nb.store import EVENTS, TERMINAL_STATUSES, RecordBusy, encode_line, encode_meta, parse_stamp, utc_now
from lev_nb.store.listing import OWNED_STATUSES, owner_gone, pid_alive, scan_runs

__all__ = ["Stopped", "cancel", "kill", "CANCEL_WAIT_S", "KILL_WAIT_S"]

CANCEL_WAIT_S = 10.0  # how long `lev cancel` waits to see the run end
KILL_WAIT_S = 5.0  # how long `lev kill` waits to see the process gone
POLL_S = 0.1
CLOCK_SLACK_S = 2.0  # a process start time read from /proc is rounded to clock ticks


@record
class Stopped:
    """What ``cancel`` or ``kill`` did: ``ok`` (the run or process stopped as asked), and the
    sentence that says so (or why not, and what to do)."""

    ok: bool
    message: str


def _ended(meta: dict[str, Any]) -> str | None:
    """The refusal for a run that has already ended, else None."""
    status = meta.get("status")
    if status in TERMINAL_STATUSES:
        return f"run '{meta.get('run_id')}' has already ended ({status}); there is nothing to stop"
    return None


def cancel(record: RunRecord, by: str, wait_s: float = CANCEL_WAIT_S,
           sleep: Callable[[float], None] = time.sleep) -> Stopped:
    """Cancel ``record``'s run (see the module docstring); ``by`` says who, for its record."""
    meta = record.reload()
    refusal = _ended(meta)
    if refusal:
        return Stopped(False, refusal)
    if meta.get("status") not in OWNED_STATUSES or owner_gone(meta):
        return _close(record, by)
    record.store.post_inbox({"type": "cancel", "by": by})
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        sleep(POLL_S)
        meta = record.reload()
        if meta.get("status") in TERMINAL_STATUSES:
            how = meta.get("status")
            return Stopped(how == "cancelled", f"run {record.run_id} ended {how}"
                           + (f" ({meta.get('error')})" if how == "cancelled" and meta.get("error") else ""))
        if owner_gone(meta):
            return _close(record, by)
    return Stopped(False, f"asked run {record.run_id} to stop; it has not ended within {wait_s:g} s (its process, "
                          f"pid {meta.get('pid')}, takes the request at its next step); `lev ps` shows when it "
                          "has, and `lev kill` stops its process")


def _close(record: RunRecord, by: str) -> Stopped:
    """Write the record of a run nobody runs (paused, or its process gone) as cancelled."""
    store = record.store
    try:
        with store.claim():
            meta = record.reload()
            refusal = _ended(meta)
            if refusal:
                return Stopped(False, refusal)
            if meta.get("status") in OWNED_STATUSES and not owner_gone(meta):
                return Stopped(False, f"run {record.run_id} was taken up again by process {meta.get('pid')} just "
                                      "now; run `lev cancel` again to stop it there")
            was = meta.get("status")
            reason = f"cancelled by {by}" + (" while paused" if was == "paused" else
                                             f" after its process (pid {meta.get('pid')}) was gone")
            now = utc_now()
            meta.update(status="cancelled", error=reason, updated_at=now, last_progress_at=now,
                        waiting_on=None, pending=[], needs_setup=None)
            store.write_meta(encode_meta(meta))
            stage = meta.get("current_stage") or None
            store.append_lines(EVENTS, [encode_line(ev.Completed(
                record.run_id, stage, status="cancelled", error=reason, produced_output=bool(meta.get("final_output")),
                final_output=meta.get("final_output")).to_dict())])
    except RecordBusy:
        return Stopped(False, f"run {record.run_id} is being resumed by another process right now; "
                              "run `lev cancel` again once it has started")
    except OSError as exc:
        return Stopped(False, f"the record of run {record.run_id} cannot be written: {exc.strerror or exc}")
    return Stopped(True, f"run {record.run_id} is cancelled (it was {was}, and no process was running it)")


def kill(record: RunRecord, force: bool = False, wait_s: float = KILL_WAIT_S,
         sleep: Callable[[float], None] = time.sleep) -> Stopped:
    """Signal the process that owns ``record``'s run: SIGTERM, or SIGKILL with ``force``."""
    meta = record.reload()
    refusal = _ended(meta)
    if refusal:
        return Stopped(False, refusal)
    pid = meta.get("pid")
    if meta.get("status") == "paused":
        return Stopped(False, f"run {record.run_id} is paused: no process runs it; `lev cancel {record.run_id}` "
                              "closes it, `lev resume` continues it")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return Stopped(False, f"the record of run {record.run_id} names no process; `lev cancel` closes it")
    if not pid_alive(pid):
        return Stopped(False, f"the process of run {record.run_id} (pid {pid}) is already gone; "
                              f"`lev resume {record.run_id}` continues the run, `lev cancel` closes it")
    if pid == os.getpid():
        return Stopped(False, f"run {record.run_id} runs in this very process; cancel it instead (run.cancel())")
    started = _process_started(pid)
    claimed = _claimed_at(meta)
    if started is not None and claimed is not None and started > claimed + CLOCK_SLACK_S:
        return Stopped(False, f"pid {pid} now belongs to another process (it started after run {record.run_id} "
                              "was claimed); the run's own process is gone: `lev cancel` closes its record")
    others = [e.run_id for e in scan_runs(record.store.dir.parent.parent)
              if e.state == "live" and e.run_id != record.run_id and e.meta.get("pid") == pid
              and not e.meta.get("parent_run_id")]
    sig = signal.SIGKILL if force else signal.SIGTERM
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:
        return Stopped(False, f"not allowed to signal process {pid} (it belongs to another user)")
    deadline = time.monotonic() + wait_s
    while pid_alive(pid) and time.monotonic() < deadline:
        sleep(POLL_S)
    name = sig.name
    if pid_alive(pid):
        return Stopped(False, f"sent {name} to process {pid} (run {record.run_id}); it is still running after "
                              f"{wait_s:g} s" + ("" if force else "; `lev kill --force` sends SIGKILL"))
    also = f"; it also ran {len(others)} other run{'s' if len(others) != 1 else ''} ({', '.join(others[:5])}" \
           f"{' ...' if len(others) > 5 else ''})" if others else ""
    return Stopped(True, f"stopped process {pid} with {name}{also}. The record of run {record.run_id} stays as it "
                         f"stood: `lev resume {record.run_id}` continues it, `lev cancel {record.run_id}` closes it")


def _claimed_at(meta: dict[str, Any]) -> float | None:
    """When the run's current owner took it (its start, or its latest resume), as unix seconds."""
    stamps = [meta.get("started_at")]
    resumed = meta.get("resumed")
    if isinstance(resumed, dict) and isinstance(resumed.get("at"), list) and resumed["at"]:
        stamps.append(resumed["at"][-1])
    found = []
    for stamp in stamps:
        if (moment := parse_stamp(stamp)) is not None:
            found.append(moment.timestamp())
    return max(found) if found else None


def _process_started(pid: int) -> float | None:
    """When process ``pid`` started, as unix seconds (Linux /proc), or None when unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            fields = handle.read().rpartition(")")[2].split()
        with open("/proc/stat", encoding="ascii", errors="replace") as handle:
            boot = next(float(line.split()[1]) for line in handle if line.startswith("btime "))
        return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None
