"""Clicking a run's form in a real JupyterLab (headless chromium) while a later cell waits for the
run (issue 27): the click moves the run on and the waiting cell ends by itself with the run's
final state, whether it waits in ``run.wait()``, in ``await run``, or after a ``%%lev`` cell; text
typed key by key into a form reaches the run whole; and a cell queued behind the waiting one runs
after it, in order. JupyterLab sends widget messages to a kernel subshell of its own by default;
with its "Kernel Comms over subshells" setting disabled it sends them to no subshell, and the
forms must answer either way."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import nbformat
import pytest
from lab_session import LabBrowser, LabServer
from support import PLAN_CHECKPOINT
from test_browser import lab  # noqa: F401  (the JupyterLab fixture)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TIMEOUT_MS = 120_000

PLAN = '[agent]\nname = "plan-review"\n\n' + PLAN_CHECKPOINT
TURNS = {"draft": [{"text": "1. Ship to 1%\n2. Watch\n3. Ship to all"}, {"text": "Done."}]}

ASKER = '''[agent]
name = "asker"

[stages.work]
available_tools = ["ask_user_text"]
allow_blocking_tools = true
nudge = { enabled = false }

[stages.work.transitions]
'''
ASKER_TURNS = {"work": [{"tool_calls": [{"name": "ask_user_text", "arguments": {"prompt": "Which colour?"}}]},
                        {"text": "Noted."}]}

# The last line a waiting cell prints: the run's final state and what the person answered.
REPORT = ("print('ENDED', run.status, [(e.outcome, e.answer) for e in run.events "
          "if e.kind == 'interaction_resolved'])")


KERNEL_SETTINGS = Path("settings") / "@jupyterlab" / "apputils-extension" / "kernels-settings.jupyterlab-settings"
COMMS = ["perCommTarget", "disabled"]  # JupyterLab's default, and widget messages to no subshell


@contextmanager
def comms_over_subshells(server: LabServer, mode: str) -> Iterator[None]:
    """JupyterLab's "Kernel Comms over subshells" setting, for the notebooks opened meanwhile."""
    path = server.state / KERNEL_SETTINGS
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"commsOverSubshells": mode}), encoding="utf-8")
    try:
        yield
    finally:
        path.unlink()


def agent(root: Path, name: str, toml: str, turns: dict[str, Any]) -> str:
    """An agent folder with a scripted transcript under the lab's root; its path from notebooks/."""
    folder = root / "agents" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "agent.leviath").write_text(toml, encoding="utf-8")
    (folder / "scripted.json").write_text(json.dumps(turns), encoding="utf-8")
    return f"../agents/{name}"


def notebook(root: Path, name: str, cells: list[str]) -> str:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, root / "notebooks" / name)
    return f"notebooks/{name}"


def start_all(browser: LabBrowser, relpath: str) -> None:
    """Open the notebook and run all its cells without waiting for them."""
    browser.open_notebook(relpath)
    browser.page.evaluate("() => { void window.jupyterapp.commands.execute('notebook:run-all-cells'); }")


def wait_running(browser: LabBrowser, cell: int) -> None:
    """Wait until code cell ``cell`` is the one executing (its prompt shows ``[*]``)."""
    browser.page.wait_for_function(
        """(i) => {
            const cell = window.jupyterapp.shell.currentWidget.content.widgets[i];
            const prompt = cell && cell.node.querySelector('.jp-InputPrompt');
            return prompt && prompt.innerText.includes('*');
        }""", arg=cell, timeout=TIMEOUT_MS)


def printed(browser: LabBrowser, cell: int) -> str:
    return "".join(o.get("text", "") for o in browser.notebook_outputs()
                   if o["cell"] == cell and o["output_type"] == "stream")


def wait_printed(browser: LabBrowser, cell: int, marker: str) -> str:
    """Wait (generously) until code cell ``cell`` printed ``marker``; everything it printed."""
    browser.page.wait_for_function(
        """([i, marker]) => {
            const o = window.jupyterapp.shell.currentWidget.content.widgets[i].model.outputs;
            for (let j = 0; j < o.length; j++) {
                const out = o.get(j).toJSON();
                if (out.output_type === 'stream' && String(out.text).includes(marker)) return true;
            }
            return false;
        }""", arg=[cell, marker], timeout=TIMEOUT_MS)
    return printed(browser, cell)


def click(browser: LabBrowser, label: str) -> None:
    button = browser.page.get_by_role("button", name=label, exact=True)
    button.wait_for(timeout=TIMEOUT_MS)
    button.click()


def plan_cells(plan: str) -> list[str]:
    return [f"import lev_nb\nrun = lev_nb.load({plan + '/agent.leviath'!r}).run('Roll out the index', "
            f"model='scripted:{plan}/scripted.json')\nrun.widget()"]


@pytest.mark.parametrize("comms", COMMS)
def test_a_click_while_the_next_cell_waits_in_run_wait_moves_the_run_on(comms: str, lab: tuple[LabServer, LabBrowser, Path]) -> None:
    server, browser, root = lab
    plan = agent(root, f"plan-wait-{comms}", PLAN, TURNS)
    relpath = notebook(root, f"wait-click-{comms}.ipynb",
                       [*plan_cells(plan), f"run.wait()\n{REPORT}", "print('AFTER', run.status)"])
    with comms_over_subshells(server, comms):
        start_all(browser, relpath)
    wait_running(browser, 1)
    click(browser, "Approve")
    said = wait_printed(browser, 1, "ENDED")
    assert said.split(" ", 2)[:2] == ["ENDED", "complete"], said
    assert "('answered', 'Approve')" in said, said
    assert wait_printed(browser, 2, "AFTER").strip() == "AFTER complete"  # the queued cell ran after


def test_a_click_while_a_cell_awaits_the_run_moves_the_run_on(lab: tuple[LabServer, LabBrowser, Path]) -> None:
    _, browser, root = lab
    plan = agent(root, "plan-await", PLAN, TURNS)
    relpath = notebook(root, "await-click.ipynb", [*plan_cells(plan), f"await run\n{REPORT}"])
    start_all(browser, relpath)
    wait_running(browser, 1)
    click(browser, "Approve")
    said = wait_printed(browser, 1, "ENDED")
    assert said.split(" ", 2)[:2] == ["ENDED", "complete"], said


def test_a_click_in_a_lev_cell_view_reaches_the_run_the_next_cell_waits_for(lab: tuple[LabServer, LabBrowser, Path]) -> None:
    _, browser, root = lab
    plan = agent(root, "plan-lev", PLAN, TURNS)
    relpath = notebook(root, "lev-click.ipynb", [
        "%load_ext lev_nb",
        f"%%lev {plan} run --model scripted:{plan}/scripted.json\nRoll out the index",
        f"run.wait()\n{REPORT}",
    ])
    start_all(browser, relpath)
    wait_running(browser, 2)
    click(browser, "Approve")
    said = wait_printed(browser, 2, "ENDED")
    assert said.split(" ", 2)[:2] == ["ENDED", "complete"], said


@pytest.mark.parametrize("comms", COMMS)
def test_text_typed_key_by_key_while_a_cell_waits_reaches_the_run_whole(comms: str, lab: tuple[LabServer, LabBrowser, Path]) -> None:
    server, browser, root = lab
    asker = agent(root, f"asker-{comms}", ASKER, ASKER_TURNS)
    relpath = notebook(root, f"typed-{comms}.ipynb", [
        f"import lev_nb\nrun = lev_nb.load({asker + '/agent.leviath'!r}).run('Ask me', "
        f"model='scripted:{asker}/scripted.json')",
        f"run.wait()\n{REPORT}",  # nobody saw the question: this cell shows the form
    ])
    with comms_over_subshells(server, comms):
        start_all(browser, relpath)
    wait_running(browser, 1)
    box = browser.page.get_by_placeholder("Your answer")
    box.wait_for(timeout=TIMEOUT_MS)
    box.press_sequentially("teal green", delay=40)
    click(browser, "Send")
    said = wait_printed(browser, 1, "ENDED")
    assert "('answered', 'teal green')" in said, said


# Characters the form may draw beyond ASCII: all in DejaVu, the fonts Debian's chromium falls back on.
SAFE_GLYPHS = set("–—…‘’“”•·×")


def test_the_checkpoint_form_says_what_each_button_does_and_fits_a_narrow_view(lab: tuple[LabServer, LabBrowser, Path]) -> None:
    _, browser, root = lab
    plan = agent(root, "plan-look", PLAN, TURNS)
    relpath = notebook(root, "form-look.ipynb", [*plan_cells(plan), f"run.wait()\n{REPORT}"])
    start_all(browser, relpath)
    wait_running(browser, 1)
    page = browser.page
    page.set_viewport_size({"width": 640, "height": 900})  # a narrow window: the buttons must wrap, not overflow
    form = page.locator(".lev-request").first
    form.wait_for(timeout=TIMEOUT_MS)
    look = form.evaluate("""(form) => {
        const area = form.closest('.jp-OutputArea-output') || form.parentElement;
        const buttons = [...form.querySelectorAll('button')].map(b => ({
            label: b.innerText.trim(), title: b.title, background: getComputedStyle(b).backgroundColor,
            right: b.getBoundingClientRect().right}));
        const note = form.querySelector('textarea').getBoundingClientRect().width;
        return {text: form.innerText, buttons, note, formWidth: form.getBoundingClientRect().width,
                formRight: form.getBoundingClientRect().right,
                areaRight: area.getBoundingClientRect().right, scroll: form.scrollWidth - form.clientWidth};
    }""")
    text = look["text"]
    assert "Roll out this plan?" in text and "approve_plan" not in text  # the prompt, not the point's name
    assert "approves it and moves on" in text and "ends the run" in text  # what each button does, in words
    by_label = {b["label"]: b for b in look["buttons"]}
    assert by_label["Approve"]["title"] == "approve and move on"
    assert by_label["End the run"]["title"] == "decline the checkpoint: the run stops"
    plain = by_label["Approve with this note"]["background"]
    assert by_label["Approve"]["background"] != plain  # the default action is coloured
    assert by_label["End the run"]["background"] not in (plain, by_label["Approve"]["background"])
    assert look["scroll"] <= 1 and look["formRight"] <= look["areaRight"] + 1  # nothing runs off the view
    assert all(b["right"] <= look["areaRight"] + 1 for b in look["buttons"])
    assert look["note"] >= 0.9 * look["formWidth"]  # the note box fills the form's width
    assert not [c for c in text if ord(c) > 127 and c not in SAFE_GLYPHS]
    click(browser, "Approve")
    assert wait_printed(browser, 1, "ENDED").split(" ", 2)[:2] == ["ENDED", "complete"]
