"""Asking a person in a real Jupyter kernel, the documented default way (issue 27): a run started
in a kernel asks from its start, with no race against its view; a cell blocked in ``run.wait()``
or ``await run`` still gets the view's clicks and typed text (sent here as a frontend sends them: comm
messages to the widgets' models, on the shell channel, addressed to no subshell), while cells queued
behind it keep their order and Ctrl-C still interrupts it; and a notebook executed headless
(nbclient, what nbconvert and nbval use) saves the final state of a view whose run ended during a
later cell."""

from __future__ import annotations

import json
import os
import queue
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kernel_session import python_kernel
from support import QUIET_WORK_STAGE, ROOT

TIMEOUT_S = 120

SETUP = '''
import lev_nb
TOML = """
[agent]
name = "asker"
[stages.work]
available_tools = ["write_file", "ask_user_text"]
allow_blocking_tools = true
nudge = { enabled = false }
[stages.work.transitions]
"""
def call(name, **arguments):
    return {"tool_calls": [{"name": name, "arguments": arguments}]}
'''


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[Any]:
    """A python3 kernel loading this tree, with a private LEV_HOME; yields its blocking client."""
    with python_kernel(tmp_path / "home", tmp_path) as kc:
        run_cell(kc, SETUP + f"import os\nos.chdir({str(tmp_path)!r})")
        yield kc


def run_cell(kc: Any, code: str) -> str:
    """Run ``code``; return what it printed (raising on an error)."""
    printed: list[str] = []

    def keep(msg: dict[str, Any]) -> None:
        note_button(kc, msg)
        if msg["msg_type"] == "stream":
            printed.append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            raise AssertionError("\n".join(msg["content"]["traceback"]))

    kc.execute_interactive(code, timeout=TIMEOUT_S, output_hook=keep)
    return "".join(printed)


def note_button(kc: Any, msg: dict[str, Any]) -> None:
    """Remember each button the kernel opened, by its label, and each text box, by its
    placeholder (the last one of a label wins)."""
    state = msg["content"].get("data", {}).get("state", {}) if msg["msg_type"] == "comm_open" else {}
    label = {"ButtonModel": "description", "TextareaModel": "placeholder"}.get(state.get("_model_name", ""))
    if label is not None:
        kc.buttons = {**getattr(kc, "buttons", {}), state.get(label, ""): msg["content"]["comm_id"]}


def send_to_widget(kc: Any, comm_id: str, data: dict[str, Any]) -> None:
    """A comm message to a widget's model as a frontend sends it: on the shell channel, with no
    subshell in its header (the kernel decides which shell handles it)."""
    comm = kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
    assert "subshell_id" not in comm["header"]
    kc.shell_channel.send(comm)


CLICK = {"method": "custom", "content": {"event": "click"}}


def click_while_busy(kc: Any, code: str, label: str, typed: tuple[str, list[str]] | None = None,
                     then: str | None = None) -> tuple[str, list[dict[str, Any]]]:
    """Start ``code`` (a cell that blocks), click the button ``label`` once its widget appears,
    as the browser does, and return what the cell printed and the displays it made. ``typed``
    (a text box's placeholder, the values it takes key by key) is typed first, each value once
    the kernel echoed the one before, as it does between a person's keys; ``then`` is a cell
    queued right behind the blocking one."""
    msg_id = kc.execute(code)
    if then is not None:
        kc.execute(then)
    printed: list[str] = []
    displays: list[dict[str, Any]] = []
    buttons: dict[str, str] = dict(getattr(kc, "buttons", {}))  # a form shown by an earlier cell
    box, values = typed or ("", [])
    actions: list[tuple[str, Any]] = [*((box, {"method": "update", "state": {"value": v}, "buffer_paths": []})
                                        for v in values), (label, CLICK)]
    echo: str | None = None  # the text box whose echo the next key waits for
    placed = label in buttons
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            msg = kc.get_iopub_msg(timeout=1)
        except queue.Empty:
            continue
        kind, content = msg["msg_type"], msg["content"]
        note_button(kc, msg)
        if kind == "comm_open":
            buttons.update(getattr(kc, "buttons", {}))
        elif kind == "comm_msg" and label in buttons and "children" in content.get("data", {}).get("state", {}):
            placed = True  # the form is built and placed in its view: a person can see it now
        elif kind == "comm_msg" and content["comm_id"] == echo and content["data"].get("method") == "echo_update":
            echo = None
        elif kind == "stream" and msg["parent_header"].get("msg_id") == msg_id:
            printed.append(content["text"])
        elif kind == "display_data" and msg["parent_header"].get("msg_id") == msg_id:
            displays.append(content)
        elif kind == "error":
            raise AssertionError("\n".join(content["traceback"]))
        elif kind == "status" and content["execution_state"] == "idle" and msg["parent_header"].get("msg_id") == msg_id:
            assert not actions, f"the cell ended before it was answered: {actions}"
            return "".join(printed), displays
        if placed and echo is None and actions:
            target, data = actions.pop(0)
            send_to_widget(kc, buttons[target], data)
            echo = buttons[target] if data["method"] == "update" else None
    raise AssertionError(f"the cell did not finish; buttons seen: {sorted(buttons)}")


def test_a_run_started_in_a_kernel_asks_from_its_start_without_a_view(kernel: Any) -> None:
    """The first model request already offers the question tool, and an approval waits (it is
    not denied) though no view is open yet."""
    printed = run_cell(kernel, (
        "model = lev_nb.ScriptedModel([call('write_file', path='a.txt', content='hi'), {'text': 'ok'}])\n"
        "run = lev_nb.run(TOML, task='write it', model=model)\n"
        "request = run.next_request(60)\n"
        "offered = sorted(t.name for t in model.requests[0].tools)\n"
        "print(run.interactive, run.status, request.kind, request.tool, 'ask_user_text' in offered)"
    ))
    assert printed.split() == ["True", "waiting_input", "approval", "write_file", "True"]


def test_run_wait_in_the_next_cell_shows_the_form_and_takes_its_click(kernel: Any) -> None:
    run_cell(kernel, (
        "model = lev_nb.ScriptedModel([call('write_file', path='a.txt', content='hi'), {'text': 'ok'}])\n"
        "run = lev_nb.run(TOML, task='write it', model=model)"
    ))
    printed, displays = click_while_busy(
        kernel, "run.wait(60)\nprint(run.status)",
        "Allow for this run")
    assert printed.split()[0] == "complete"
    # Nobody saw the request, so the waiting cell showed the run's view with its form.
    assert any("application/vnd.jupyter.widget-view+json" in d["data"] for d in displays)
    said = run_cell(kernel, "print([(e.outcome, e.source, e.answer) for e in run.events "
                            "if e.kind == 'interaction_resolved'])")
    assert said.strip().startswith("[('answered', 'notebook', ")


def test_a_click_in_the_view_of_an_earlier_cell_reaches_a_run_blocked_in_wait(kernel: Any) -> None:
    run_cell(kernel, (
        "model = lev_nb.ScriptedModel([call('ask_user_text', prompt='Which colour?'), {'text': 'ok'}])\n"
        "run = lev_nb.run(TOML, task='ask me', model=model)\n"
        "run.widget()"
    ))
    run_cell(kernel, "run.next_request(60)")  # the form is in the first cell's view now
    printed, displays = click_while_busy(kernel, "run.wait(60)\nprint(run.status)", "Decline")
    assert printed.strip() == "complete"
    assert not any("application/vnd.jupyter.widget-view+json" in d["data"] for d in displays)  # one view is enough


def test_await_run_keeps_the_forms_answering(kernel: Any) -> None:
    run_cell(kernel, (
        "model = lev_nb.ScriptedModel([call('write_file', path='c.txt', content='hi'), {'text': 'ok'}])\n"
        "run = lev_nb.run(TOML, task='write it', model=model)"
    ))
    printed, _ = click_while_busy(kernel, "await run\nprint(run.status)", "Allow for this stage")
    assert printed.strip() == "complete"


def test_text_typed_while_a_cell_waits_reaches_the_run_whole(kernel: Any) -> None:
    """Each key a person types is a message to the text box's model, and the kernel echoes it
    back; every one of them, and the click that sends the text, is handled while the cell waits."""
    run_cell(kernel, (
        "model = lev_nb.ScriptedModel([call('ask_user_text', prompt='Which colour?'), {'text': 'ok'}])\n"
        "run = lev_nb.run(TOML, task='ask me', model=model)"
    ))
    typed = ["t", "te", "teal", "teal ", "teal gr", "teal green"]
    printed, _ = click_while_busy(kernel, "run.wait(60)\nprint(run.status)", "Send", typed=("Your answer", typed))
    assert printed.strip() == "complete"
    said = run_cell(kernel, "print([e.answer for e in run.events if e.kind == 'interaction_resolved'])")
    assert said.strip() == "['teal green']"


def test_a_cell_queued_behind_a_waiting_cell_runs_after_it(kernel: Any) -> None:
    run_cell(kernel, (
        "model = lev_nb.ScriptedModel([call('write_file', path='e.txt', content='hi'), {'text': 'ok'}])\n"
        "run = lev_nb.run(TOML, task='write it', model=model)\n"
        "order = []"
    ))
    printed, _ = click_while_busy(kernel, "run.wait(60)\norder.append(run.status)", "Allow once",
                                  then="order.append('queued')")
    assert run_cell(kernel, "print(order)").strip() == "['complete', 'queued']"


def test_ctrl_c_interrupts_a_cell_waiting_for_a_run_and_the_forms_answer_after(kernel: Any) -> None:
    run_cell(kernel, (
        "model = lev_nb.ScriptedModel([call('ask_user_text', prompt='Which colour?'), {'text': 'ok'}])\n"
        "run = lev_nb.run(TOML, task='ask me', model=model)\n"
        "run.next_request(60)"
    ))
    msg_id = kernel.execute("print('waiting', flush=True)\nrun.wait()")
    errors: list[str] = []
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            msg = kernel.get_iopub_msg(timeout=1)
        except queue.Empty:
            continue
        note_button(kernel, msg)
        mine = msg["parent_header"].get("msg_id") == msg_id
        if mine and msg["msg_type"] == "stream" and "waiting" in msg["content"]["text"]:
            kernel.manager.interrupt_kernel()
        elif mine and msg["msg_type"] == "error":
            errors.append(msg["content"]["ename"])
        elif mine and msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    assert errors == ["KeyboardInterrupt"]
    assert run_cell(kernel, "print(run.status)").strip() == "waiting_input"  # the run itself goes on
    printed, _ = click_while_busy(kernel, "run.wait(60)\nprint(run.status)", "Decline")
    assert printed.strip() == "complete"


def test_a_kernel_that_cannot_route_the_forms_says_so_in_the_waiting_cell(kernel: Any) -> None:
    printed = run_cell(kernel, (
        "import lev_nb.notebook.asking as asking\n"
        "asking._forms_subshell = lambda: None  # a kernel without subshells\n"
        "model = lev_nb.ScriptedModel([call('write_file', path='f.txt', content='hi'), {'text': 'ok'}])\n"
        "run = lev_nb.run(TOML, task='write it', model=model)\n"
        "run.next_request(60)\n"
        "try:\n"
        "    run.wait(1)\n"
        "except TimeoutError:\n"
        "    print('still waiting')"
    ))
    assert "cannot take a form's click while a cell waits" in printed and "still waiting" in printed, printed


def test_nbclient_saves_the_final_state_of_a_view_whose_run_ends_in_a_later_cell(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    nbclient = pytest.importorskip("nbclient")
    import nbformat

    monkeypatch.setenv("LEV_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(SETUP),
        nbformat.v4.new_code_cell(
            "model = lev_nb.ScriptedModel([call('write_file', path='d.txt', content='hi'), {'text': 'ok'}])\n"
            "run = lev_nb.run(TOML, task='write it', model=model)\n"
            "request = run.next_request(60)\n"
            "run.widget()"),
        nbformat.v4.new_code_cell("run.respond(request.id, 'allow')\nrun.wait(60).status"),
    ]
    nbclient.NotebookClient(nb, timeout=TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    [view] = nb.cells[1].outputs
    assert view["data"]["text/plain"].splitlines()[0].endswith(" · complete"), view["data"]["text/plain"]
    assert "application/vnd.jupyter.widget-view+json" not in view["data"]  # the snapshot alone
    assert json.loads(json.dumps(nb.cells[2].outputs[0]["data"]))["text/plain"] == "'complete'"


GATED_TOML = '[agent]\nname = "gated"\n' + QUIET_WORK_STAGE
GATED = f'''
import threading, time
from lev_nb.messages import ModelResponse
PLAIN = {GATED_TOML!r}
release = threading.Event()
class Gate:
    """A model whose one answer waits for the release."""
    name = "gate"
    def complete(self, request):
        release.wait(60)
        return ModelResponse(text="done")
runs = []
def end_the_run_between_cells(*_):
    # Registered before lev_nb's own pre_run_cell hook, so this runs first: the run ends after the
    # cell that showed its view is over and before lev_nb sees the next cell start.
    if runs and not release.is_set():
        release.set()
        deadline = time.monotonic() + 60
        while not runs[0].done() and time.monotonic() < deadline:
            time.sleep(0.01)
get_ipython().events.register("pre_run_cell", end_the_run_between_cells)
'''


def test_nbclient_saves_the_final_state_of_a_view_whose_run_ends_between_two_cells(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The window nbclient cannot see: the run ends after the cell that showed its view went idle
    and before the next cell started; the final snapshot still reaches the saved notebook."""
    nbclient = pytest.importorskip("nbclient")
    import nbformat

    monkeypatch.setenv("LEV_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(SETUP + GATED),
        nbformat.v4.new_code_cell("run = lev_nb.run(PLAIN, task='go', model=Gate())\nruns.append(run)\nrun.widget()"),
        nbformat.v4.new_code_cell("run.status"),
    ]
    nbclient.NotebookClient(nb, timeout=TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert nb.cells[2].outputs[0]["data"]["text/plain"] == "'complete'"
    [view] = nb.cells[1].outputs
    assert view["data"]["text/plain"].splitlines()[0].endswith(" · complete"), view["data"]["text/plain"]
    assert "data-status='complete'" in view["data"]["text/html"]
