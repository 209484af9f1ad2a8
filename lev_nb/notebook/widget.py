"""The live run view: a run that shows itself while it proceeds, and leaves a static snapshot.

``RunWidget(run)`` is an ipywidgets ``VBox`` of HTML parts drawn by :mod:`lev_nb.notebook.runview`:
the header (agent, run id, status chip, task, elapsed time, model and tool calls, tokens), the
progress bar with the stage strip, a form for each request the run waits on (``requests``: see
:mod:`lev_nb.notebook.requests`; a view of a live run tells it that somebody can answer), one part
per stage visit (sentences, call-outs, a collapsible transcript), the runs it started (sub-agents
and fan-out workers, each with its status and a "show" button that opens that run's own view below
it), the final output and the error. It follows the run through ``run.subscribe``: the
callback runs on the engine thread, folds the event under a lock and only assigns traits, which
ipywidgets sends as comm messages at once, so the view updates while the cell that started the
run is blocked in ``run.wait()``. Redrawing is throttled (at most every ``MIN_INTERVAL_S``; the
last event always draws), and only the parts that changed are sent.

Every display of the widget also carries ``text/html`` and ``text/plain`` snapshots of its state.
When the run ends, each display of the live view is replaced (``update_display_data``, sent as
part of the cell that showed it) by the final snapshot alone, so a saved notebook, nbconvert,
VS Code and GitHub show the final state, not "model not found". A view displayed after the run
ended shows the snapshot at once.

Without ipywidgets, :func:`watch` returns a :class:`RunText`, which displays the same snapshot.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from lev_nb.notebook import runview

try:  # ipywidgets is optional: the text fallback covers a console without it
    import ipywidgets as _widgets

    _VBox: Any = _widgets.VBox
except ImportError:  # pragma: no cover - exercised by monkeypatching _widgets in the tests
    _widgets = None
    _VBox = object

_LIVE: weakref.WeakSet[Any] = weakref.WeakSet()  # views displayed live, until their run ends

MIN_INTERVAL_S = 0.25  # at most this often a redraw while events pour in
TICK_S = 1.0  # the elapsed time moves on this often while the run waits on a model
VIEW_MIME = "application/vnd.jupyter.widget-view+json"


def blueprint_of(run: Any) -> Any:
    """The Blueprint ``run`` was started from: ``run.blueprint`` when the handle offers it, else
    loaded again from the record's ``agent_path``; None for a blueprint given as text."""
    bp = getattr(run, "blueprint", None)
    if bp is not None and hasattr(bp, "stages"):
        return bp
    try:
        path = run.meta.get("agent_path") or ""
    except Exception:
        return None
    if not path or not Path(path).is_file():
        return None
    return _load_cached(path, Path(path).stat().st_mtime_ns)


@lru_cache(maxsize=32)
def _load_cached(path: str, mtime_ns: int) -> Any:
    from lev_nb.blueprint import BlueprintError
    from lev_nb.catalog import load

    try:
        return load(path)
    except BlueprintError:
        return None


def new_state(run: Any, stages: Sequence[str] | None = None) -> runview.RunState:
    """An empty view state for ``run``: the blueprint's stages (``stages`` overrides their names)
    and, when the blueprint is known, how far each stage is from an end (for honest progress)."""
    from lev_nb.blueprint.graph import stages_to_end

    bp = blueprint_of(run)
    if bp is None:
        return runview.RunState(run.run_id, list(stages or []))
    workers = {name: s.worker_stage for name, s in bp.stages.items() if s.mode == "fan_out" and s.worker_stage}
    return runview.RunState(run.run_id, list(stages or bp.stage_names), stages_to_end(bp), workers)


def follow(run: Any, state: runview.RunState) -> runview.RunState:
    """Fold every event ``run`` has logged so far into ``state`` (and its output once it ended)."""
    events = run.events.snapshot()
    for event in events[state.seen :]:
        state.apply(event)
    if state.finished and state.output is None and state.output_expected:
        state.set_output(run.result)
    return state


def snapshot_bundle(run: Any, stages: Sequence[str] | None = None) -> dict[str, str]:
    """``text/html`` + ``text/plain`` of ``run`` as it is now (its display in a notebook)."""
    state = follow(run, new_state(run, stages))
    return {"text/html": runview.snapshot_html(state), "text/plain": runview.snapshot_text(state)}


class RunWidget(_VBox):
    """A live view of a :class:`~lev_nb.engine.handle.Run` (requires ipywidgets).

    ``stages`` names the blueprint's stages for the strip (by default they come from the run's
    blueprint). Child widgets: ``header``, ``progress``, ``warnings`` (the call-out of what the run
    told), ``requests`` (a VBox, one
    :class:`~lev_nb.notebook.requests.RequestForm` per pending request), ``visits`` (a VBox, one
    HTML per stage visit), ``kids`` (a VBox: a heading, then one row per child run, up to
    runview.CHILD_ROWS: ``kid_rows[run_id]`` is ``(row HTML, show Button, holder VBox)``),
    ``output`` and ``error``.
    """

    def __init__(self, run: Any, stages: Sequence[str] | None = None) -> None:
        if _widgets is None:
            raise ImportError("RunWidget needs ipywidgets; install it, or use lev_nb.notebook.watch()")
        self._run = run
        self._state = new_state(run, stages)
        self._lock = threading.RLock()
        self._timer: threading.Timer | None = None
        self._timer_due = 0.0
        self._last_draw = 0.0
        self._displays: list[tuple[str, Any]] = []  # (display id, parent message header)
        self._published = False
        self.header = _widgets.HTML()
        self.progress = _widgets.HTML()
        self.warnings = _widgets.HTML()
        self.visits = _widgets.VBox()
        self.kids = _widgets.VBox()
        self.kid_rows: dict[str, tuple[Any, Any, Any]] = {}
        self._kid_boxes: list[Any] = []
        self._kids_head = _widgets.HTML()
        self._kids_tail = _widgets.HTML()
        self.output = _widgets.HTML()
        self.error = _widgets.HTML()
        self.requests = _widgets.VBox()
        self._forms: dict[str, Any] = {}
        super().__init__(
            children=[self.header, self.progress, self.warnings, self.requests, self.visits, self.kids, self.output,
                      self.error]
        )
        self.add_class("lev-run-widget")
        with self._lock:
            self._fold()
            self._draw()
        run.subscribe(self._on_event, replay=False)
        if hasattr(run, "attend") and not self._state.finished:
            run.attend()  # this view's forms can answer the run's requests
        self._on_event(None)  # events logged between the fold above and the subscription

    @property
    def run(self) -> Any:
        """The run this widget follows."""
        return self._run

    @property
    def status(self) -> str:
        """The status as the widget last saw it."""
        return self._state.status

    @property
    def state(self) -> runview.RunState:
        """The view state (read it from the thread that owns the widget only once the run ended)."""
        return self._state

    # -- following the run (engine thread) ------------------------------------------------------
    def _fold(self) -> None:
        follow(self._run, self._state)

    def _on_event(self, _event: Any) -> None:
        # On the engine thread. Events are read from the log in order from where the state
        # stopped, so a replay racing live events never folds one twice.
        with self._lock:
            self._fold()
            now = time.monotonic()
            if self._state.finished or now - self._last_draw >= MIN_INTERVAL_S:
                self._draw()
            else:
                self._schedule(MIN_INTERVAL_S - (now - self._last_draw))
        if self._state.finished:
            self._publish_final()

    def _schedule(self, delay: float) -> None:
        """Draw in ``delay`` seconds, unless a draw is already due sooner."""
        due = time.monotonic() + delay
        if self._timer is not None:
            if self._timer_due <= due:
                return
            self._timer.cancel()
        self._timer_due = due
        self._timer = threading.Timer(max(delay, 0.01), self._on_timer)
        self._timer.daemon = True
        self._timer.start()

    def _on_timer(self) -> None:
        with self._lock:
            if self._timer is not threading.current_thread():
                return  # replaced by a sooner one
            self._timer = None
            if not self._state.finished:
                self._fold()
                self._draw()

    def _draw(self) -> None:
        """Assign the parts' values (only changed values are sent to the frontend)."""
        state = self._state
        self._last_draw = time.monotonic()
        self.header.value = _part(runview.header_html(state))
        self.progress.value = _part(runview.progress_html(state) + runview.mcp_html(state))
        self.warnings.value = _part(runview.warnings_html(state))
        parts = list(self.visits.children)
        while len(parts) < len(state.visits):
            parts.append(_widgets.HTML())
        for index, widget in enumerate(parts):
            widget.value = _part(runview.visit_html(state, index))
        if len(parts) != len(self.visits.children):
            self.visits.children = tuple(parts)
        self._draw_kids()
        self.output.value = _part(runview.output_html(state))
        self.error.value = _part(runview.error_html(state))
        if hasattr(self._run, "pending"):
            from lev_nb.notebook.requests import sync_forms

            sync_forms(self.requests, self._run, self._forms)
        if state.finished:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        elif self._timer is None:
            self._schedule(TICK_S)  # keep the elapsed time moving while nothing happens

    def _draw_kids(self) -> None:
        """The child runs: a heading, then a row each (status, agent, id, a show/hide button)."""
        state = self._state
        if not state.children:
            return
        for child in list(state.children.values())[: runview.CHILD_ROWS]:
            row = self.kid_rows.get(child.run_id)
            if row is None:
                html = _widgets.HTML()
                button = _widgets.Button(description="show", tooltip="show this run's own view",
                                         layout=_widgets.Layout(width="auto"))
                holder = _widgets.VBox()
                button.on_click(lambda _b, run_id=child.run_id: self.toggle_child(run_id))
                row = self.kid_rows[child.run_id] = (html, button, holder)
                self._kid_boxes.append(_widgets.VBox([_widgets.HBox([html, button]), holder]))
            row[0].value = _part(f"<div class='lev-child'>{runview.child_row_html(child)}</div>")
        more = len(state.children) - runview.CHILD_ROWS
        self._kids_head.value = _part(runview.children_head_html(state))
        self._kids_tail.value = _part(f"<div class='lev-id'>… and {more} more (run.children lists them all)</div>") if more > 0 else ""
        if len(self.kids.children) != len(self._kid_boxes) + 2:
            self.kids.children = (self._kids_head, *self._kid_boxes, self._kids_tail)

    def toggle_child(self, run_id: str) -> None:
        """Show (or hide again) the own view of the child run ``run_id`` under its row."""
        row = self.kid_rows.get(run_id)
        if row is None:
            return
        _, button, holder = row
        if holder.children:
            holder.children = ()
            button.description = "show"
            return
        child = next((c for c in getattr(self._run, "children", []) if c.run_id == run_id), None)
        if child is None:
            return
        holder.children = (RunWidget(child),)
        button.description = "hide"

    # -- displaying -----------------------------------------------------------------------------
    def snapshot(self) -> dict[str, str]:
        """``text/html`` and ``text/plain`` of the view as it is now."""
        with self._lock:
            return {
                "text/html": runview.snapshot_html(self._state),
                "text/plain": runview.snapshot_text(self._state),
            }

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        bundle = dict(super()._repr_mimebundle_(include=include, exclude=exclude) or {})
        bundle.update(self.snapshot())
        return bundle

    def _ipython_display_(self) -> None:
        """Show the live view with its snapshot; remember the display so the run's end can
        replace it with the final snapshot. A finished run shows the snapshot alone."""
        from IPython.display import display

        with self._lock:
            if self._state.finished:
                display(self.snapshot(), raw=True)
                return
            _follow_cells()
            handle = display(self._repr_mimebundle_(), raw=True, display_id=True)
            if handle is not None:
                self._displays.append((handle.display_id, _parent_header()))
                _LIVE.add(self)

    def _publish_final(self) -> None:
        """Replace every live display of this view by the final snapshot (once)."""
        with self._lock:
            if self._published or not self._state.finished:
                return
            self._published = True
            _LIVE.discard(self)
            displays, self._displays = list(self._displays), []
            bundle = self.snapshot()
        for display_id, parent in displays:
            _update_display(bundle, display_id, parent)

    def __repr__(self) -> str:
        return f"<RunWidget {self._run.run_id} {self._state.status}>"


def is_shown(run: Any) -> bool:
    """Whether a live view of ``run`` is displayed in the notebook (its forms can answer)."""
    return any(view.run is run for view in list(_LIVE))


def _part(body: str) -> str:
    from lev_nb.notebook.viewstyle import inline

    return inline(f"<div class='lev-run'>{body}</div>") if body else ""


def _parent_header() -> Any:
    """The message header of the cell being executed (ipykernel), or None."""
    try:
        from IPython import get_ipython

        shell = get_ipython()
        return dict(shell.display_pub.parent_header) if shell is not None else None
    except Exception:  # not a kernel, or a display publisher without headers
        return None


def _update_display(bundle: dict[str, str], display_id: str, parent: Any) -> None:
    """``update_display`` sent as part of the message ``parent`` (the cell that showed the view),
    so JupyterLab updates that cell's output even when the run ends after the cell finished; and
    again as part of the cell executing now, if another: nbclient (nbconvert --execute, nbval,
    papermill) reads only the executing cell's messages, and updates the display wherever it is.
    Sent from another thread (a run's end), it may go out between two cells and reach no cell
    nbclient reads: the next cell sends it again. The main thread sends only during a cell."""
    with _cells_lock:
        current = _cell[0]
        if threading.current_thread() is not threading.main_thread():
            _late[display_id] = bundle
    parents = [parent]
    if current is not None and _msg_id(current) != _msg_id(parent):
        parents.append(current)
    for one in parents:
        _send_update(bundle, display_id, one)


def _send_update(bundle: dict[str, str], display_id: str, parent: Any) -> None:
    """One ``update_display`` of ``display_id``, sent as part of the message ``parent``."""
    from IPython import get_ipython
    from IPython.display import update_display

    shell = get_ipython()
    publisher = getattr(shell, "display_pub", None) if shell is not None else None
    token = None
    if parent and hasattr(publisher, "set_thread_parent"):
        token = publisher.set_thread_parent(parent)  # type: ignore[union-attr]
    try:
        update_display(bundle, raw=True, display_id=display_id)
    except Exception:  # the kernel went away: nothing to update
        pass
    finally:
        if token is not None:
            publisher.reset_thread_parent(token)  # type: ignore[union-attr]


_cells_lock = threading.Lock()
_cell: list[Any] = [None]  # the header of the cell the kernel executes now (see _follow_cells)
_late: dict[str, dict[str, str]] = {}  # display id -> the bundle last sent since the last cell started


def _follow_cells() -> None:
    """Keep the header of each cell as it starts executing (read on the main thread, where it is
    the cell's own; a run's thread would read the header of the cell that started the run), and
    send again, as part of it, each display update sent since the cell before started."""
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None or getattr(shell, "_lev_follows_cells", False):
        return

    def started(*_args: Any) -> None:
        header = dict(getattr(shell.display_pub, "parent_header", None) or {}) or None
        with _cells_lock:  # an update sent from now on goes to this cell too; one sent before is here
            _cell[0] = header
            late = list(_late.items())
            _late.clear()
        for display_id, bundle in late:
            _send_update(bundle, display_id, header)

    shell.events.register("pre_run_cell", started)
    shell._lev_follows_cells = True
    started()


def _msg_id(message: Any) -> Any:
    if not isinstance(message, dict):
        return None
    return (message.get("header") or message).get("msg_id")


class RunText:
    """The view :func:`watch` returns without ipywidgets: the run's snapshot, drawn when shown."""

    def __init__(self, run: Any, stages: Sequence[str] | None = None) -> None:
        self.run = run
        self._stages = list(stages or [])

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return snapshot_bundle(self.run, self._stages)

    def __repr__(self) -> str:
        return repr(self.run)


def watch(run: Any, stages: Sequence[str] | None = None, display: bool = True) -> Any:
    """Show ``run`` live in the notebook and return the view (a RunWidget, or RunText without ipywidgets)."""
    view: Any = RunWidget(run, stages) if _widgets is not None else RunText(run, stages)
    if display:
        from IPython.display import display as show

        show(view)
    return view
