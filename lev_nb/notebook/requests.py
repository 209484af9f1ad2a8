"""The forms of the run view: each request a run waits on (docs/runs.md#a-person-in-the-loop),
answered in place.

:class:`RequestForm` is a small ipywidgets box for one request, by kind:

- approval: the tool and its arguments, and buttons ``allow_once``, ``allow_stage``, ``allow_run``
  and ``deny``;
- text: a ``text`` box and ``send``;
- choice: one button per option (``choices``);
- confirm: ``yes`` and ``no``;
- review: the document, a ``feedback`` box, ``acknowledge`` and ``send``;
- edit: an ``editor`` holding the document, ``save`` (use the edited text) and ``keep`` (no changes);
- checkpoint: its prompt, the stage's answer, what each option does, one button per option
  (``choices``; the first approving one coloured as the default, one that ends the run red), a
  ``text`` box and ``send`` (approve with that note), and ``decline`` (end the run).

Every form but the approval also has ``decline``. Pressing a button calls ``run.respond``; an
answer the run refuses shows its message in the form (``message``), and an answered form is
disabled. :func:`sync_forms` keeps a box of forms in step with ``run.pending``. Everything is
driven through the widget model (``button.click()``, ``text.value = ...``), so it is testable
without a browser.
"""

from __future__ import annotations

import html
import json
from typing import Any

import ipywidgets as widgets

from lev_nb.engine.interaction import is_taint_gate
from lev_nb.notebook import runview
from lev_nb.text import clip_shown

__all__ = ["RequestForm", "sync_forms"]

ARG_CHARS = 2000  # how much of one tool argument the form shows
# What a checkpoint's option does, said beside it and on its button's tooltip.
ROLE_WORDS = {"approve": "approves it and moves on", "revise": "sends it back to the stage with that instruction",
              "edit": "lets you edit the text first", "end": "ends the run"}
ROLE_TIPS = {"approve": "approve and move on", "revise": "send it back to the stage with this instruction",
             "edit": "edit the text, then approve it", "end": "end the run here"}


# A widget's width is "auto" where it should fill the form: each widget has a margin, so "100%"
# ran 4 px past the right edge of a narrow view.
FILL = "auto"


def ROW_LAYOUT() -> widgets.Layout:  # noqa: N802 - a fresh layout per row (widgets do not share one)
    """Buttons wrap onto more lines in a narrow view instead of running off its edge."""
    return widgets.Layout(flex_flow="row wrap", width=FILL)


def _e(text: Any) -> str:
    return html.escape(str(text))


def _document_html(text: str) -> str:
    rendered = runview.markdown_html(text)
    body = rendered if rendered is not None else f"<pre style='white-space:pre-wrap'>{_e(text)}</pre>"
    return f"<div class='lev-request-doc' style='border-left:3px solid #ccc;padding-left:8px'>{body}</div>"


class RequestForm(widgets.VBox):
    """The form for one pending ``request`` of ``run`` (see the module docstring)."""

    def __init__(self, run: Any, request: Any) -> None:
        self.run = run
        self.request = request
        self.answered = False
        self.title = widgets.HTML(self._title_html())
        self.message = widgets.HTML("")
        self.buttons: list[widgets.Button] = []
        parts: list[widgets.Widget] = [self.title]
        kind = request.kind
        if kind == "approval":
            parts.append(widgets.HTML(self._arguments_html()))
            self.allow_once = self._button("Allow once", lambda: self._respond(True, scope="once"), "success")
            self.allow_stage = self._button("Allow for this stage", lambda: self._respond(True, scope="stage"))
            self.allow_run = self._button("Allow for this run", lambda: self._respond(True, scope="run"))
            self.deny = self._button("Deny", lambda: self._respond(False), "danger")
            parts.append(widgets.HBox([self.allow_once, self.allow_stage, self.allow_run, self.deny], layout=ROW_LAYOUT()))
        else:
            if request.document is not None and kind != "edit":
                parts.append(widgets.HTML(_document_html(request.document)))
            row: list[widgets.Widget] = []
            if kind == "checkpoint":
                parts.append(widgets.HTML(self._roles_html()))
            if kind in ("choice", "checkpoint"):
                self.choices = [
                    self._button(option, lambda i=i: self._respond(None, choice=i), self._option_style(i),
                                 tooltip=ROLE_TIPS.get(self._role(i), option))
                    for i, option in enumerate(request.options)
                ]
                row.extend(self.choices)
            if kind == "confirm":
                self.yes = self._button("Yes", lambda: self._respond(True), "success")
                self.no = self._button("No", lambda: self._respond(False))
                row.extend([self.yes, self.no])
            if kind == "text":
                self.text = widgets.Textarea(placeholder="Your answer", layout=widgets.Layout(width=FILL))
                self.send = self._button("Send", lambda: self._respond(self.text.value), "primary")
                parts.append(self.text)
                row.append(self.send)
            if kind == "checkpoint":
                # Free text approves, with the note added for the stage (points.py's rule).
                self.text = widgets.Textarea(placeholder="A note for the stage (optional)",
                                             layout=widgets.Layout(width=FILL))
                self.send = self._button("Approve with this note", lambda: self._respond(self.text.value),
                                         tooltip="approve, and give the stage this note")
                parts.append(self.text)
                row.append(self.send)
            if kind == "review":
                self.feedback = widgets.Textarea(placeholder="Feedback (optional)", layout=widgets.Layout(width=FILL))
                self.acknowledge = self._button("Acknowledge", lambda: self._respond(None), "success")
                self.send = self._button("Send feedback", lambda: self._respond(self.feedback.value or None), "primary")
                parts.append(self.feedback)
                row.extend([self.acknowledge, self.send])
            if kind == "edit":
                self.editor = widgets.Textarea(
                    value=request.document or "", layout=widgets.Layout(width=FILL, height="12em")
                )
                self.save = self._button("Use this text", lambda: self._respond(self.editor.value), "primary")
                self.keep = self._button("No changes", lambda: self._respond(request.document or ""))
                parts.append(self.editor)
                row.extend([self.save, self.keep])
            if kind == "checkpoint":
                self.decline = self._button("End the run", lambda: self._respond(None, decline=True), "danger",
                                            tooltip="decline the checkpoint: the run stops")
            else:
                self.decline = self._button("Decline", lambda: self._respond(None, decline=True))
            row.append(self.decline)
            parts.append(widgets.HBox(row, layout=ROW_LAYOUT()))
        parts.append(self.message)
        super().__init__(children=parts)
        self.add_class("lev-request")
        from lev_nb.notebook.asking import answer_off_main

        answer_off_main(self)  # a click reaches the run while a cell waits in run.wait()

    def _role(self, index: int) -> str:
        roles = self.request.roles or ()
        return roles[index] if index < len(roles) else ""

    def _option_style(self, index: int) -> str:
        """A checkpoint colours what its options do: the first approving one is the default."""
        role = self._role(index)
        if role == "end":
            return "danger"
        if role == "approve" and index == next((i for i, r in enumerate(self.request.roles) if r == "approve"), -1):
            return "success"
        return "info" if role == "edit" else ""

    def _roles_html(self) -> str:
        """One sentence per option of a checkpoint: what pressing it does."""
        said = []
        for i, option in enumerate(self.request.options):
            role = self._role(i)
            if role in ROLE_WORDS:
                said.append(f"<b>{_e(option)}</b> {ROLE_WORDS[role]}")
        said.append("or write a note and <b>Approve with this note</b>; <b>End the run</b> stops it here")
        return f"<div class='lev-request-roles' style='margin:.2em 0'>{'; '.join(said)}.</div>"

    def _button(self, label: str, action: Any, style: str = "", tooltip: str = "") -> widgets.Button:
        button = widgets.Button(description=label, button_style=style, tooltip=tooltip or label,
                                layout=widgets.Layout(width="auto", min_width="6em"))
        button.on_click(lambda _b: action())
        self.buttons.append(button)
        return button

    def _title_html(self) -> str:
        request = self.request
        where = f" <span style='opacity:.75;font-weight:normal'>(stage {_e(request.stage)})</span>" if request.stage else ""
        if request.kind == "approval":
            head = f"The agent wants to run <code>{_e(request.tool)}</code>"
            if is_taint_gate(request):  # the gate says what data would leave, and where
                head += f"<div class='lev-taint-gate' style='color:#a60'>{_e(request.prompt)}</div>"
        elif request.kind == "checkpoint":
            head = f"Checkpoint: <b>{_e(request.prompt or request.point)}</b>"
        elif request.kind == "review":
            head = f"Please review: <b>{_e(request.title or request.prompt)}</b>"
        else:
            head = f"The agent asks: {_e(request.prompt)}"
        return f"<div class='lev-request-title' style='font-weight:600;margin:.3em 0'>{head}{where}</div>"

    def _arguments_html(self) -> str:
        rows = []
        for key, value in (self.request.arguments or {}).items():
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1)
            text = clip_shown(text, ARG_CHARS)
            rows.append(f"<tr><th style='text-align:left;vertical-align:top'>{_e(key)}</th>"
                        f"<td><pre style='white-space:pre-wrap;margin:0'>{_e(text)}</pre></td></tr>")
        return f"<table class='lev-request-args'>{''.join(rows)}</table>" if rows else ""

    def _respond(self, answer: Any, **kwargs: Any) -> None:
        """Answer the request; a refused answer is shown in the form, which stays open."""
        from lev_nb.engine.interaction import InteractionError

        if self.answered:
            return
        try:
            taken = self.run.respond(self.request.id, answer, source="notebook", **kwargs)
        except InteractionError as exc:
            self.message.value = f"<span style='color:#b00'>{_e(exc)}</span>"
            if "no open request" not in str(exc):
                return
            taken = None
        self.answered = True
        for button in self.buttons:
            button.disabled = True
        said = taken.summary() or taken.outcome if taken is not None else "answered elsewhere"
        self.message.value = f"<span style='color:#080'>✓ {_e(said)}</span>"


def sync_forms(box: widgets.VBox, run: Any, forms: dict[str, RequestForm]) -> None:
    """Make ``box`` show one form per pending request of ``run`` (``forms`` keeps them by id)."""
    pending = {request.id: request for request in run.pending}
    for rid in list(forms):
        if rid not in pending:
            del forms[rid]
    for rid, request in pending.items():
        if rid not in forms:
            forms[rid] = RequestForm(run, request)
    children = tuple(forms[rid] for rid in pending)
    if children != tuple(box.children):
        box.children = children
