"""The run record: ``$LEV_HOME/runs/<run_id>/`` (docs/runs.md#the-run-record).

- :mod:`lev_nb.store.meta`: the typed record (``RunMeta``, ``RunFlags``, statuses, run ids).
- :mod:`lev_nb.store.files`: one run's folder, atomic replacement, append-only JSONL.
- :mod:`lev_nb.store.writer`: the background thread that does every run's disk writes.
- :mod:`lev_nb.store.listing`: reading all records for ``lev ps`` and ``lev result``.
"""

from __future__ import annotations

from lev_nb.store.files import (
    EVENTS,
    FINAL_OUTPUT,
    JOURNAL,
    LAUNCH,
    META,
    TRANSCRIPT,
    RecordBusy,
    RecordUnwritable,
    RunStore,
    encode_line,
    encode_meta,
    lev_home,
    read_jsonl,
    runs_dir,
    write_atomic,
)
from lev_nb.store.listing import RunEntry, RunNotFound, find_run, list_runs, owner_gone, pid_alive, scan_runs
from lev_nb.store.meta import RUN_STATUSES, TERMINAL_STATUSES, RunFlags, RunMeta, new_run_id, parse_stamp, utc_now

__all__ = [
    "EVENTS",
    "FINAL_OUTPUT",
    "JOURNAL",
    "LAUNCH",
    "META",
    "RUN_STATUSES",
    "TERMINAL_STATUSES",
    "TRANSCRIPT",
    "RunFlags",
    "RunMeta",
    "RunEntry",
    "RunNotFound",
    "RecordBusy",
    "RecordUnwritable",
    "RunStore",
    "find_run",
    "lev_home",
    "list_runs",
    "owner_gone",
    "pid_alive",
    "scan_runs",
    "new_run_id",
    "parse_stamp",
    "read_jsonl",
    "encode_line",
    "encode_meta",
    "runs_dir",
    "utc_now",
    "write_atomic",
]
