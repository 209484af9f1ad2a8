"""The combined progress view of a batch (``lev_nb.run_many`` in a notebook; issue 15), and the
table its summaries display as.

One view for the whole batch, however many processes or cluster workers run it: an ipywidgets
progress bar of finished tasks, its percentage, rate and time left, a line of counts (running,
complete, failed, retried, workers, elapsed time) and, when the batch runs on a Dask cluster, a
link to Dask's dashboard. The batch layer calls :meth:`BatchView.update` with its
:class:`~lev_nb.batch.BatchProgress`; the view assigns widget traits only, so it redraws while the
cell is blocked in ``run_many``. Like the run view, every display carries an inline-styled
``text/html`` snapshot, and when the batch ends the live display is replaced by the final
snapshot, so a saved notebook shows the bar and counts, never "model not found". Without
ipywidgets the view shows the same line as text once the batch ends.
"""

from __future__ import annotations

import html
from typing import Any

from lev_nb.notebook.viewstyle import ACCENT, BORDER, SHADE, SUCCESS, WARN

try:  # ipywidgets is optional: a console gets the text line
    import ipywidgets as _widgets
except ImportError:  # pragma: no cover
    _widgets = None

SUMMARY_ROWS = 200  # rows of the summaries' table; the rest are counted
CELL = f"border:1px solid {BORDER};padding:.15em .5em;text-align:left;vertical-align:top"


def counts_html(progress: Any) -> str:
    """The counts line, with the Dask dashboard link when there is one."""
    line = html.escape(f"{progress.pace()} · {progress.line()}")
    if progress.dashboard:
        url = html.escape(progress.dashboard, quote=True)
        line += f' &middot; <a href="{url}" target="_blank">Dask dashboard</a>'
    return f"<span class='lev-batch' style='font-size:13px'>{line}</span>"


def snapshot_html(progress: Any) -> str:
    """The batch as a static block: a bar (green when all completed, orange with failures) and the line."""
    colour = ACCENT if not progress.done else (SUCCESS if progress.failed == 0 else WARN)
    return (
        f"<div class='lev-batch-view' style='font-family:system-ui,sans-serif;max-width:64em;text-align:left'>"
        f"<div style='font-weight:600'>lev batch</div>"
        f"<div role='progressbar' aria-valuenow='{progress.percent}' style='height:8px;border-radius:4px;"
        f"margin:.3em 0;background-color:{SHADE};overflow:hidden'>"
        f"<div style='height:100%;width:{progress.percent}%;background-color:{colour}'></div></div>"
        f"{counts_html(progress)}</div>"
    )


def summaries_bundle(summaries: list[Any]) -> dict[str, Any]:
    """The summaries of a batch as an HTML table: task, status, output (or error), run id, worker."""
    head = "".join(f"<th style='{CELL}'>{h}</th>" for h in ("#", "task", "status", "output / error", "run", "worker"))
    rows = []
    for s in summaries[:SUMMARY_ROWS]:
        said = s.output if s.ok else (s.error or "")
        cells = (str(s.index), _clip(s.task), s.status, _clip(said or ""), s.run_id or "", s.worker or "")
        rows.append("<tr>" + "".join(f"<td style='{CELL}'>{html.escape(c)}</td>" for c in cells) + "</tr>")
    more = len(summaries) - SUMMARY_ROWS
    tail = f"<div style='opacity:.75'>… and {more} more</div>" if more > 0 else ""
    ok = sum(1 for s in summaries if s.ok)
    title = f"<div style='font-weight:600'>{len(summaries)} task{'s' if len(summaries) != 1 else ''}: {ok} complete</div>"
    table = (f"<table style='border-collapse:collapse;font-size:13px'><thead><tr>{head}</tr></thead>"
             f"<tbody>{''.join(rows)}</tbody></table>")
    return {"text/html": f"<div class='lev-batch-table' style='text-align:left'>{title}{table}{tail}</div>"}


def _clip(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class BatchView:
    """A live progress bar and counts line for one batch; displays itself when created."""

    def __init__(self, progress: Any) -> None:
        self.progress = progress
        self.bar: Any = None
        self.label: Any = None
        self._display_id: str | None = None
        self._parent: Any = None
        if _widgets is not None:
            self.bar = _widgets.IntProgress(value=0, min=0, max=max(1, progress.total), description="lev batch",
                                            bar_style="info")
            self.label = _widgets.HTML(counts_html(progress))
            self.box = _widgets.VBox([self.bar, self.label])
            self._show(self)

    @staticmethod
    def _show(obj: Any) -> None:
        from IPython.display import display

        display(obj)

    def _ipython_display_(self) -> None:
        """The live widget with its snapshot, under a display id the batch's end replaces."""
        from IPython.display import display

        from lev_nb.notebook.widget import _follow_cells, _parent_header

        bundle = {**self.box._repr_mimebundle_(), **self._snapshot()}
        _follow_cells()
        handle = display(bundle, raw=True, display_id=True)
        if handle is not None:
            self._display_id, self._parent = handle.display_id, _parent_header()

    def _snapshot(self) -> dict[str, str]:
        return {"text/html": snapshot_html(self.progress), "text/plain": f"lev batch: {self.progress.pace()} · {self.progress.line()}"}

    def update(self, progress: Any) -> None:
        """Show ``progress`` (called by the batch layer as the batch advances)."""
        self.progress = progress
        if self.bar is None:
            if progress.done:
                self._show(progress.line())
            return
        self.bar.value = progress.finished
        self.bar.description = f"{progress.percent}%"
        self.label.value = counts_html(progress)
        if progress.done:
            self.bar.bar_style = "success" if progress.failed == 0 else "warning"
            if self._display_id is not None:
                from lev_nb.notebook.widget import _update_display

                _update_display(self._snapshot(), self._display_id, self._parent)
                self._display_id = None

    def _repr_html_(self) -> str:
        return snapshot_html(self.progress)
