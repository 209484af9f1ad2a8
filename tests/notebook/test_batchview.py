"""The combined progress view of a batch (lev_nb.notebook.batchview, issue 15)."""

from __future__ import annotations

import pytest

from lev_nb.batch import BatchProgress
from lev_nb.notebook import batchview


def test_the_view_shows_the_bar_the_counts_and_the_dashboard(monkeypatch: pytest.MonkeyPatch) -> None:
    shown = []
    monkeypatch.setattr(batchview.BatchView, "_show", staticmethod(shown.append))
    progress = BatchProgress(total=10, workers=2, dashboard="http://127.0.0.1:8787/status")
    view = batchview.BatchView(progress)
    assert shown == [view.box]
    progress.started, progress.complete, progress.failed, progress.retried = 6, 3, 1, 2
    view.update(progress)
    assert (view.bar.value, view.bar.max) == (4, 10)
    assert "4/10 finished: 2 running, 3 complete, 1 failed, 2 retried, 2 workers" in view.label.value
    assert 'href="http://127.0.0.1:8787/status"' in view.label.value
    progress.done = True
    view.update(progress)
    assert view.bar.bar_style == "warning"  # a failed task shows


def test_run_many_shows_the_view_through_the_facade_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    import lev_nb  # noqa: F401  (fills the view slots)
    from lev_nb.engine import views

    made = views.view(views.BATCH_VIEW, BatchProgress(total=1))
    assert isinstance(made, batchview.BatchView)
