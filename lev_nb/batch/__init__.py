"""Batches: one blueprint over many tasks, across the processes of this machine or a Dask cluster
(issue 15). The layer sits between the command line / notebook and the engine: it starts worker
processes, each hosting its own engine loop, and gathers their runs' summaries and progress.

- :func:`run_many` (``lev_nb.run_many``): the batch, with :class:`RunSummary` per task and
  :class:`BatchProgress` for progress views.
- :mod:`lev_nb.batch.worker`: what runs inside a worker process.
"""

from __future__ import annotations

from lev_nb.batch.many import BatchProgress, RunSummaries, RunSummary, run_many

__all__ = ["BatchProgress", "RunSummaries", "RunSummary", "run_many"]
