"""The combined progress view of a batch (``lev_nb.run_many`` in a notebook; issue 15).

One view for the whole batch, however many processes or cluster workers run it: an ipywidgets
progress bar of finished tasks, a line of counts (running, complete, failed, retried, workers,
elapsed time) and, when the batch runs on a Dask cluster, a link to Dask's dashboard. The batch
layer calls :meth:`BatchView.update` with its :class:`~lev_nb.batch.BatchProgress`; the view
assigns widget traits only, so it redraws while the cell is blocked in ``run_many``. Without
ipywidgets the view shows the same line as text once the batch ends.
"""

from __future__ import annotations

import html
from typing import Any

try:  # ipywidgets is optional: a console gets the text line
    import ipywidgets as _widgets
except ImportError:  # pragma: no cover
    _widgets = None


def counts_html(progress: Any) -> str:
    """The counts line, with the Dask dashboard link when there is one."""
    line = html.escape(progress.line())
    if progress.dashboard:
        url = html.escape(progress.dashboard, quote=True)
        line += f' &middot; <a href="{url}" target="_blank">Dask dashboard</a>'
    return f"<span class='lev-batch'>{line}</span>"


class BatchView:
    """A live progress bar and counts line for one batch; displays itself when created."""

    def __init__(self, progress: Any) -> None:
        self.progress = progress
        self.bar: Any = None
        self.label: Any = None
        if _widgets is not None:
            self.bar = _widgets.IntProgress(value=0, min=0, max=max(1, progress.total), description="lev batch",
                                            bar_style="info")
            self.label = _widgets.HTML(counts_html(progress))
            self.box = _widgets.VBox([self.bar, self.label])
            self._show(self.box)

    @staticmethod
    def _show(obj: Any) -> None:
        from IPython.display import display

        display(obj)

    def update(self, progress: Any) -> None:
        """Show ``progress`` (called by the batch layer as the batch advances)."""
        self.progress = progress
        if self.bar is None:
            if progress.done:
                self._show(progress.line())
            return
        self.bar.value = progress.finished
        self.label.value = counts_html(progress)
        if progress.done:
            self.bar.bar_style = "success" if progress.failed == 0 else "warning"

    def _repr_html_(self) -> str:
        return counts_html(self.progress)
