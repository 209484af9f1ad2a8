"""What lev_nb sets only in a process of its own (the ``lev`` command, a batch's local worker
processes), never in a caller's: a notebook's or a program's interpreter stays as its owner set it.
"""

from __future__ import annotations

import gc

__all__ = ["COLLECTOR_THRESHOLDS", "tune_collector"]

# Most of a process's objects live on (imports at start, then every run's record and context): with
# the default young-generation threshold (700) the collector scanned them over and over, about 3% of
# `lev validate` and of a first `lev run`, and more with a thousand runs in flight. mypy's command
# line does the same.
COLLECTOR_THRESHOLDS = (100_000, 10, 10)


def tune_collector() -> None:
    """Collect young objects less often (:data:`COLLECTOR_THRESHOLDS`). Call it only in a process
    lev_nb started for itself."""
    gc.set_threshold(*COLLECTOR_THRESHOLDS)
