"""The live run widget: a run that shows itself while it proceeds.

``RunWidget(run)`` is an ipywidgets ``VBox`` (a header, a progress bar, a table of the stage visits
and the last few events). It follows the run through ``run.subscribe``: the callback runs on the
engine thread and only assigns traits, which ipywidgets sends as comm messages at once, so the view
updates even while the cell that started the run is blocked in ``run.wait()``. Nothing is ever
printed (no ``Output`` widget), so a headless executor such as nbval sees only the widget's
``text/plain``, which is the deterministic ``repr`` ``<RunWidget RUN_ID STATUS>``.

Without ipywidgets, :func:`watch` shows a plain-text view of the run instead.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

try:  # ipywidgets is optional: the text fallback covers a console without it
    import ipywidgets as _widgets

    _VBox: Any = _widgets.VBox
except ImportError:  # pragma: no cover - exercised by monkeypatching _widgets in the tests
    _widgets = None
    _VBox = object

BAR_STYLES = {"complete": "success", "error": "danger", "cancelled": "warning"}
RECENT_EVENTS = 5


@dataclass
class StageVisit:
    """One stay in a stage: which one, the how-many-th time, and what happened there."""

    stage: str
    visit: int
    turns: int = 0
    tool_calls: int = 0


class RunState:
    """What the widget shows, folded from the run's events in order (no widget code here)."""

    def __init__(self, recent: int = RECENT_EVENTS) -> None:
        self.agent = ""
        self.status = "starting"
        self.error: str | None = None
        self.visits: list[StageVisit] = []
        self.recent: list[str] = []
        self.seen = 0
        self._recent_limit = recent

    def apply(self, event: Any) -> None:
        """Fold one event into the state."""
        kind = event.kind
        if kind == "run_started":
            self.agent = event.agent
            self.status = "running"
        elif kind == "stage_entered":
            self.visits.append(StageVisit(event.stage or "?", event.visit))
        elif kind == "model_call" and event.purpose == "stage" and self.visits:
            self.visits[-1].turns += 1
        elif kind == "tool_finished" and self.visits:
            self.visits[-1].tool_calls += 1
        elif kind == "completed":
            self.status = event.status
            self.error = event.error
        self.recent = (self.recent + [event.describe()])[-self._recent_limit :]
        self.seen += 1

    @property
    def stages_visited(self) -> list[str]:
        """Distinct stages entered, in first-entry order."""
        return list(dict.fromkeys(v.stage for v in self.visits))


def header_html(state: RunState, run_id: str) -> str:
    """The header line: agent, run id, status (and the error of a failed run)."""
    colour = {"complete": "#2e7d32", "error": "#c62828", "cancelled": "#ef6c00"}.get(state.status, "#1565c0")
    text = (
        f"<b>{html.escape(state.agent or 'agent')}</b> · <code>{html.escape(run_id)}</code> · "
        f"<span style='color:{colour}'>{html.escape(state.status)}</span>"
    )
    if state.error:
        text += f"<br><span style='color:#c62828'>{html.escape(state.error)}</span>"
    return text


def stages_html(state: RunState) -> str:
    """The table of stage visits with their turns and tool calls."""
    rows = "".join(
        f"<tr><td>{html.escape(v.stage)}</td><td>{v.visit}</td><td>{v.turns}</td><td>{v.tool_calls}</td></tr>"
        for v in state.visits
    )
    return (
        "<table><thead><tr><th>stage</th><th>visit</th><th>turns</th><th>tool calls</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def events_html(state: RunState) -> str:
    """The last few events, one per line."""
    lines = "<br>".join(html.escape(line) for line in state.recent)
    return f"<div style='font-family:monospace;font-size:smaller'>{lines}</div>"


class RunWidget(_VBox):
    """A live view of a :class:`~lev_nb.engine.handle.Run` (requires ipywidgets).

    ``stages`` (the blueprint's stage names) sets the progress bar's length; without it the bar
    grows with the stages entered. Attributes ``header``, ``progress``, ``stage_table`` and
    ``recent_events`` are the child widgets.
    """

    def __init__(self, run: Any, stages: Sequence[str] | None = None, recent: int = RECENT_EVENTS) -> None:
        if _widgets is None:
            raise ImportError("RunWidget needs ipywidgets; install it, or use lev_nb.notebook.watch()")
        self._run = run
        self._stages = list(stages or [])
        self._state = RunState(recent)
        self._lock = threading.Lock()
        self.header = _widgets.HTML()
        self.progress = _widgets.IntProgress(value=0, min=0, max=max(len(self._stages), 1), bar_style="info")
        self.stage_table = _widgets.HTML()
        self.recent_events = _widgets.HTML()
        super().__init__(children=[self.header, self.progress, self.stage_table, self.recent_events])
        self._refresh()
        run.subscribe(self._on_event, replay=True)

    @property
    def run(self) -> Any:
        """The run this widget follows."""
        return self._run

    @property
    def status(self) -> str:
        """The status as the widget last saw it."""
        return self._state.status

    def _on_event(self, _event: Any) -> None:
        # Called on the engine thread (and once per past event during subscribe's replay, which
        # may interleave with live events): fold the log's events in order from where we stopped.
        self._refresh()

    def _refresh(self) -> None:
        with self._lock:
            pending = self._run.events.snapshot()[self._state.seen :]
            if not pending and self._state.seen:
                return
            for event in pending:
                self._state.apply(event)
            self._render()

    def _render(self) -> None:
        state = self._state
        run_id = self._run.run_id
        self.header.value = header_html(state, run_id)
        self.stage_table.value = stages_html(state)
        self.recent_events.value = events_html(state)
        visited = len(state.stages_visited)
        total = max(len(self._stages), visited, 1)
        self.progress.max = total
        self.progress.value = total if state.status == "complete" else visited
        self.progress.description = state.status
        self.progress.bar_style = BAR_STYLES.get(state.status, "info")

    def __repr__(self) -> str:
        return f"<RunWidget {self._run.run_id} {self._state.status}>"


class RunText:
    """The text view :func:`watch` returns when ipywidgets is missing: the run's own repr, live."""

    def __init__(self, run: Any) -> None:
        self.run = run

    def __repr__(self) -> str:
        return repr(self.run)


def watch(run: Any, stages: Sequence[str] | None = None, display: bool = True) -> Any:
    """Show ``run`` live in the notebook and return the view (a RunWidget, or RunText without ipywidgets)."""
    view: Any = RunWidget(run, stages) if _widgets is not None else RunText(run)
    if display:
        from IPython.display import display as show

        show(view)
    return view
