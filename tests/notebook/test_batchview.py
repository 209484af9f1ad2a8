"""The combined progress view of a batch (lev_nb.notebook.batchview, issue 15)."""

from __future__ import annotations

import os

import pytest

from lev_nb.batch import BatchProgress
from lev_nb.notebook import batchview


def test_the_view_shows_the_bar_the_counts_and_the_dashboard(monkeypatch: pytest.MonkeyPatch) -> None:
    shown = []
    monkeypatch.setattr(batchview.BatchView, "_show", staticmethod(shown.append))
    progress = BatchProgress(total=10, workers=2, dashboard="http://127.0.0.1:8787/status")
    view = batchview.BatchView(progress)
    assert shown == [view]
    progress.started, progress.complete, progress.failed, progress.retried = 6, 3, 1, 2
    view.update(progress)
    assert (view.bar.value, view.bar.max) == (4, 10)
    assert "4/10 finished: 2 running, 3 complete, 1 failed, 2 retried, 2 workers" in view.label.value
    assert 'href="http://127.0.0.1:8787/status"' in view.label.value
    progress.done = True
    view.update(progress)
    assert view.bar.bar_style == "warning"  # a failed task shows


def test_the_counts_line_says_where_the_running_runs_are() -> None:
    progress = BatchProgress(total=40, started=12, workers=2)
    progress.stages = {"plan": 5, "review": 3, "draft": 2, "fix": 1, "ship": 1}
    line = progress.line()
    assert line.endswith(" · 5 in plan, 3 in review, 2 in draft, 1 in fix, 1 elsewhere")
    progress.stages = {}
    assert "·" not in progress.line()


def test_run_many_shows_the_view_through_the_facade_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    import lev_nb  # noqa: F401  (fills the view slots)
    from lev_nb.engine import views

    made = views.view(views.BATCH_VIEW, BatchProgress(total=1))
    assert isinstance(made, batchview.BatchView)


def test_run_many_in_a_real_kernel_shows_one_progress_view(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch started from a notebook cell: worker processes start from the kernel, and the cell
    shows one progress widget (and the summaries)."""
    nbclient = pytest.importorskip("nbclient")
    import nbformat
    from support import BLUEPRINTS, ROOT

    monkeypatch.setenv("LEV_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    cell = (
        "import lev_nb\n"
        f"out = lev_nb.run_many({str(BLUEPRINTS / 'triage')!r}, ['R-1: crash', 'R-2: slow'], model='mock',"
        " processes=2)\n"
        "print([s.status for s in out])"
    )
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(cell), nbformat.v4.new_code_cell("out")])
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = nb.cells[0].outputs
    views = [o for o in outputs if "lev batch" in o.get("data", {}).get("text/plain", "")]
    assert len(views) == 1  # one combined view for the whole batch
    # Saved, it is the final snapshot alone (no widget a reopened notebook cannot find), and says how it went.
    assert "application/vnd.jupyter.widget-view+json" not in views[0]["data"]
    assert "100% · " in views[0]["data"]["text/plain"] and "width:100%" in views[0]["data"]["text/html"]
    assert "2/2 finished" in views[0]["data"]["text/plain"]
    assert any("['complete', 'complete']" in o.get("text", "") for o in outputs), outputs
    # The summaries display as a table.
    [table] = nb.cells[1].outputs
    assert "<table" in table["data"]["text/html"] and table["data"]["text/html"].count("<td") == 12


def test_the_counts_tell_the_percentage_the_rate_and_the_time_left() -> None:
    progress = BatchProgress(total=10, started=6, complete=3, failed=1, elapsed_s=8.0)
    assert progress.pace() == "40% · 0.5 tasks/s · about 12 s left"
    assert "40% · 0.5 tasks/s" in batchview.counts_html(progress)
    progress.done = True
    assert "left" not in progress.pace()
