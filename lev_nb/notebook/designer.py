"""``lev_nb.designer(...)``: a blueprint editor that judges and draws the text as you type.

A :class:`Designer` is an ipywidgets ``VBox``: on the left the agent.leviath text (a ``Textarea``,
which needs nothing from the network), on the right the verdict (what ``lev validate`` finds, each
finding with its line, and the numbers of those lines in colour) and the stage graph; below, a
task and a "Dry run (mock)" button that runs the current text on the mock model (in the workdir a
run gets when none is given, inside its record) and shows the run's live view.

Typing does not block the kernel: each change restarts a timer (``delay``, 0.5 s by default) and
only the last text is checked, on the timer's thread; a check overtaken by a newer change draws
nothing. :meth:`Designer.settle` waits until the latest text is judged (for scripts and tests).

A display of the designer also carries a static copy (``text/html`` with inline styles only, and
``text/plain``): the numbered text, the findings and the graph as Graphviz drew it, which an
untrusted notebook, nbconvert and GitHub show; after each cell the kernel runs, the copy in every
display of the editor is brought up to date if the design changed, so a saved or nbconvert-executed
notebook carries the design as it ended. JupyterLab itself, reopening a notebook it trusts (one its
user ran), prefers the widget to the copy and shows "model not found" with no kernel:
:meth:`Designer.freeze` replaces every display of the live editor by the copy alone, as the run
view does when its run ends.
"""

from __future__ import annotations

import base64
import html
import os
import threading
import weakref
from pathlib import Path
from typing import Any

import ipywidgets as widgets

from lev_nb.blueprint import Blueprint, BlueprintError
from lev_nb.notebook.design_check import COLOURS, Verdict, check_text, diagram_of, line_marks, source_html

DELAY_S = 0.5  # a pause in typing this long gets the text checked
DEFAULT_TASK = "A dry run of the design"
VIEW_MIME = "application/vnd.jupyter.widget-view+json"
_LINE_PX = 17  # the editor and its gutter share one line height, so the numbers sit by their lines
_STYLE = f"""<style>
.lev-designer-editor textarea {{ font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
  font-size: 12px; line-height: {_LINE_PX}px; padding: 6px 8px; white-space: pre; overflow-x: auto;
  overflow-y: hidden; resize: none; tab-size: 4; }}
.lev-designer-gutter pre {{ font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
  font-size: 12px; line-height: {_LINE_PX}px; margin: 0; padding: 7px 6px 6px 0; text-align: right;
  user-select: none; }}
</style>"""


class Designer(widgets.VBox):
    """The live blueprint editor (see the module's docstring).

    ``text`` is the current text (settable), ``blueprint`` the latest Blueprint that loaded without
    errors (None before one did), ``verdict`` the latest check, ``dry_run`` the last dry run's
    :class:`~lev_nb.engine.handle.Run`. Child widgets: ``editor`` (Textarea), ``findings`` (HTML),
    ``graph`` (Output), ``task`` (Text), ``dry_button`` (Button) and ``dry_view`` (VBox).
    """

    def __init__(self, text: str, folder: str | os.PathLike[str] | None = None, *, delay: float = DELAY_S) -> None:
        self.folder = Path(folder).resolve() if folder is not None else None
        self.delay = delay
        self.checks = 0  # how many texts were judged (a burst of typing is one)
        self.dry_run: Any = None
        self._lock = threading.RLock()
        self._timer: threading.Timer | None = None
        self._generation = 0
        self._settled = threading.Event()
        self._verdict: Verdict | None = None
        self._blueprint: Blueprint | None = None
        self._picture: str | None = None
        self._displays: list[tuple[str, Any]] = []
        self._copy_shown: str | None = None  # the static copy the displays carry now
        self._follows_cells = False
        self.editor = widgets.Textarea(value=text, continuous_update=True, rows=_rows(text),
                                       layout=widgets.Layout(flex="1 1 auto", width="auto"))
        self.editor.add_class("lev-designer-editor")
        self.gutter = widgets.HTML(layout=widgets.Layout(flex="0 0 auto", margin="0"))
        self.gutter.add_class("lev-designer-gutter")
        self.findings = widgets.HTML()
        self.findings.add_class("lev-designer-findings")
        self.graph = widgets.Output(layout=widgets.Layout(width="100%"))
        self.graph.add_class("lev-designer-graph")
        self.task = widgets.Text(value=DEFAULT_TASK, description="task", layout=widgets.Layout(width="60%"))
        self.dry_button = widgets.Button(description="Dry run (mock)", button_style="primary",
                                         tooltip="run the current text on the mock model")
        self.dry_view = widgets.VBox()
        left = widgets.VBox([widgets.HTML(_STYLE), widgets.HBox([self.gutter, self.editor])],
                            layout=widgets.Layout(width="50%"))
        right = widgets.VBox([self.findings, self.graph], layout=widgets.Layout(width="50%", padding="0 0 0 12px"))
        super().__init__(children=[widgets.HBox([left, right]), widgets.HBox([self.task, self.dry_button]),
                                   self.dry_view])
        self.add_class("lev-designer")
        self._judge(self._generation)
        self.editor.observe(self._on_change, names="value")
        self.dry_button.on_click(lambda _button: self.start_dry_run())

    # -- what it holds ---------------------------------------------------------------------------
    @property
    def text(self) -> str:
        """The text in the editor."""
        return str(self.editor.value)

    @text.setter
    def text(self, value: str) -> None:
        self.editor.value = value

    @property
    def blueprint(self) -> Blueprint | None:
        """The latest Blueprint that loaded with no errors (warnings allowed); None before one did."""
        return self._blueprint

    @property
    def verdict(self) -> Verdict | None:
        """The latest check of the text."""
        return self._verdict

    def settle(self, timeout: float | None = 30) -> bool:
        """Wait until the text as it is now has been judged and drawn; False on timeout."""
        return self._settled.wait(timeout)

    # -- typing ----------------------------------------------------------------------------------
    def _on_change(self, _change: Any) -> None:
        rows = _rows(self.text)
        if rows != self.editor.rows:  # the editor grows with the text, so the gutter stays beside its lines
            self.editor.rows = rows
        with self._lock:
            self._generation += 1
            self._settled.clear()
            if self._timer is not None:
                self._timer.cancel()
            self._timer = threading.Timer(self.delay, self._judge, args=(self._generation,))
            self._timer.daemon = True
            self._timer.start()

    def _judge(self, generation: int) -> None:
        """Check the text (on the timer's thread) and draw it, unless a newer change came in."""
        with self._lock:
            if generation != self._generation:
                return
            text = self.text
        graph: dict[str, str] = {}
        try:
            verdict = check_text(text, self.folder)
            if verdict.blueprint is not None:
                graph = diagram_of(verdict.blueprint)._repr_mimebundle_()
        except Exception as exc:  # a check must never take the editor down
            verdict = None
            problem = f"the check failed: {type(exc).__name__}: {exc}"
        with self._lock:
            if generation != self._generation:
                return
            self.checks += 1
            if verdict is None:
                self.findings.value = f"<div style='color:#c62828'>{html.escape(problem)}</div>"
            else:
                self._draw(verdict, graph)
            self._settled.set()

    def _draw(self, verdict: Verdict, graph: dict[str, str]) -> None:
        self._verdict = verdict
        note = ""
        if verdict.usable:
            self._blueprint = verdict.blueprint
        elif self._blueprint is not None:
            note = ("<div style='opacity:0.75;margin-top:4px'>designer.blueprint is still the last version "
                    "with no errors</div>")
        if verdict.blueprint is not None:
            self._picture = graph.get("image/svg+xml")
            self.graph.outputs = ({"output_type": "display_data", "metadata": {}, "data": graph},)
        elif self.graph.outputs:
            note += "<div style='opacity:0.75'>the graph shows the last text that loaded</div>"
        self.findings.value = verdict.findings_html() + note
        self.gutter.value = _gutter(verdict)

    # -- the dry run -----------------------------------------------------------------------------
    def start_dry_run(self) -> Any:
        """Run the current text on the mock model and show its view below the editor; returns the
        Run (also ``dry_run``), or None when the text cannot run. Its workdir is the one a run
        gets when none is given, inside its own record, so a dry run's files go where its record
        goes (``lev rm``, ``lev gc``) rather than piling up as folders in the system's temp dir."""
        from lev_nb.notebook.widget import RunWidget
        from lev_nb.scripting import ScriptError

        with self._lock:
            self._generation += 1  # judge the text as it is now, whatever a timer is doing
            if self._timer is not None:
                self._timer.cancel()
            generation = self._generation
        self._judge(generation)
        verdict = self._verdict
        if verdict is None or not verdict.usable or verdict.text != self.text:
            self.dry_view.children = (_note("Fix the errors above first: a dry run needs a blueprint with no errors."),)
            return None
        bp = verdict.blueprint
        assert bp is not None
        try:
            run = bp.run(self.task.value, model="mock", interactive=True)
        except (ValueError, TypeError, ScriptError) as exc:  # LaunchError is a ValueError
            self.dry_view.children = (_note(f"The dry run cannot start: {' '.join(str(exc).split())}"),)
            return None
        self.dry_run = run
        self.dry_view.children = (
            _note(f"Dry run on the mock model in {run.workdir}", colour="inherit"), RunWidget(run, bp.stage_names))
        return run

    # -- displaying ------------------------------------------------------------------------------
    def snapshot(self) -> dict[str, str]:
        """``text/html`` (inline styles only) and ``text/plain`` of the design as it is now."""
        with self._lock:
            verdict, picture, text = self._verdict, self._picture, self.text
        parts = ["<div class='lev-designer-static' style='display:flex;flex-wrap:wrap;gap:12px'>",
                 f"<div style='flex:1 1 420px;min-width:0'>{source_html(text, line_marks(verdict) if verdict else None)}</div>",
                 "<div style='flex:1 1 380px;min-width:0'>"]
        if verdict is not None:
            parts.append(verdict.findings_html())
        if picture:
            data = base64.b64encode(picture.encode("utf-8")).decode("ascii")
            parts.append(f"<img alt='stage graph' style='max-width:100%;margin-top:8px' "
                         f"src='data:image/svg+xml;base64,{data}'>")
        parts.append("</div></div>")
        plain = text.rstrip("\n") + "\n\n" + (verdict.plain() if verdict else "")
        bundle = {"text/html": "".join(parts), "text/plain": plain}
        if self.dry_run is not None:
            from lev_nb.notebook.widget import snapshot_bundle

            run = snapshot_bundle(self.dry_run)
            bundle["text/html"] += run["text/html"]
            bundle["text/plain"] += "\n\n" + run["text/plain"]
        return bundle

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        bundle = dict(super()._repr_mimebundle_(include=include, exclude=exclude) or {})
        bundle.update(self.snapshot())
        return bundle

    def _ipython_display_(self) -> None:
        """Show the live editor with its static copy; remember the display for :meth:`freeze`."""
        from IPython.display import display

        from lev_nb.notebook.widget import _parent_header

        bundle = self._repr_mimebundle_()
        handle = display(bundle, raw=True, display_id=True)
        if handle is not None:
            with self._lock:
                self._displays.append((handle.display_id, _parent_header()))
                self._copy_shown = bundle.get("text/html")
            self._follow_cells()

    def _follow_cells(self) -> None:
        """After each cell the kernel runs, bring the static copy in every display of the editor
        up to date when the design changed, so a notebook saved without :meth:`freeze` (or
        executed by nbconvert) still carries the design as it ended for viewers without the widget."""
        from IPython import get_ipython

        from lev_nb.notebook.widget import _follow_cells

        shell = get_ipython()
        if self._follows_cells or shell is None or not hasattr(shell, "events"):
            return
        _follow_cells()  # so an update also goes out as part of the cell running now (nbclient)
        ref = weakref.ref(self)  # the hook does not keep a designer alive

        def refresh(_result: Any = None) -> None:
            designer = ref()
            if designer is None:
                shell.events.unregister("post_run_cell", refresh)
            else:
                designer._refresh_copy()

        shell.events.register("post_run_cell", refresh)
        self._follows_cells = True

    def _refresh_copy(self) -> None:
        from lev_nb.notebook.widget import _update_display

        try:
            with self._lock:
                displays = list(self._displays)
            if not displays:
                return
            bundle = self._repr_mimebundle_()
            with self._lock:
                if bundle.get("text/html") == self._copy_shown:
                    return
                self._copy_shown = bundle.get("text/html")
            for display_id, parent in displays:
                _update_display(bundle, display_id, parent)
        except Exception:  # a hook after every cell must never get in the way of the next one
            return

    def freeze(self) -> None:
        """Replace every display of the live editor by its static copy as it is now (what a saved
        notebook keeps). The designer keeps working; display it again to edit on."""
        from IPython.display import update_display

        from lev_nb.notebook.widget import _parent_header, _update_display

        self.settle()
        bundle = self.snapshot()
        with self._lock:
            displays, self._displays = list(self._displays), []
            self._copy_shown = bundle["text/html"]
        here = _parent_header()
        for display_id, parent in displays:
            # JupyterLab takes the update as part of the cell that showed the editor; nbconvert
            # (nbclient) only from the cell running now, and finds the display by its id.
            _update_display(bundle, display_id, parent)
            if here is not None and parent != here:
                update_display(bundle, raw=True, display_id=display_id)

    def __repr__(self) -> str:
        name = self._blueprint.name if self._blueprint is not None else "no blueprint yet"
        counts = self._verdict.counts if self._verdict is not None and self._verdict.refusal is None else "not loaded"
        return f"<Designer {name}: {counts}>"


def designer(source: Any = "", folder: str | os.PathLike[str] | None = None, *, delay: float = DELAY_S) -> Designer:
    """A live editor for a blueprint: ``source`` is a Blueprint, an agent folder or its
    agent.leviath, or TOML text (empty: start from nothing). Scripts resolve against ``folder``,
    by default the blueprint's own folder, or the working directory for text."""
    from lev_nb.blueprint import load, resolve_manifest
    from lev_nb.blueprint.loader import looks_like_text

    if isinstance(source, Blueprint):
        text = source.source_text if source.source_text is not None else source.to_toml()
        base = folder if folder is not None else source.base_dir
    elif isinstance(source, os.PathLike) or (isinstance(source, str) and source and not looks_like_text(source)):
        manifest = resolve_manifest(source)
        if not manifest.is_file():
            load(manifest)  # says which file is missing, as one clean BlueprintError
        try:
            text = manifest.read_text(encoding="utf-8")  # a text with errors opens too: that is what it is for
        except (OSError, UnicodeDecodeError) as exc:
            raise BlueprintError(f"cannot read {manifest}: {exc}", path=manifest, kind="read") from None
        base = folder if folder is not None else manifest.parent
    elif isinstance(source, str):
        text, base = source, folder
    else:
        raise BlueprintError(f"lev_nb.designer takes a Blueprint, a path or TOML text, not {type(source).__name__}",
                             kind="read")
    return Designer(text, base, delay=delay)


def _rows(text: str) -> int:
    return max(12, text.count("\n") + 2)


def _gutter(verdict: Verdict) -> str:
    """The line numbers beside the editor, those a finding points at in its severity's colour."""
    marks = line_marks(verdict)
    numbers = []
    for number in range(1, verdict.text.count("\n") + 2):
        colour = COLOURS.get(marks.get(number, ""), "")
        style = f"color:{colour};font-weight:700" if colour else "opacity:0.5"
        numbers.append(f"<span style='{style}'>{number}</span>")
    return "<pre>" + "\n".join(numbers) + "</pre>"


def _note(text: str, colour: str = "#c62828") -> Any:
    return widgets.HTML(f"<div style='color:{colour};margin:4px 0'>{html.escape(text)}</div>")
