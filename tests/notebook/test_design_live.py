"""Designing a blueprint live (issue 27), in a real Jupyter kernel: ``%%blueprint NAME`` judges the
cell as ``lev validate`` does with each finding at its line, draws it and binds it (not with
errors); a TOML mistake shows its line, column and the offending line; ``lev_nb.designer`` judges
again after a pause in typing (a burst of changes is one check), keeps ``.blueprint`` at the last
text with no errors, runs the text on the mock model at a click, and carries a static copy that
:meth:`freeze` puts in place of the live editor."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kernel_session import execute as run_code
from kernel_session import python_kernel
from support import ROOT

pytest.importorskip("ipywidgets")

DRAFT = '''\
[agent]
name = "notes"
description = "Writes release notes."
entry_stage = "collect"

[stages.collect]
mode = "autonomous"
available_tools = ["reed_file", "context_write"]
system_prompt = "Read CHANGES.txt."
max_iterations = 4

[stages.collect.transitions.write]
hint = "Every change is noted"

[stages.write]
mode = "output"
system_prompt = "Write the notes."
max_iterations = 4

[stages.write.transitions]
'''
FIXED = DRAFT.replace('"reed_file"', '"read_file"')


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A python3 kernel loading this tree, with a private LEV_HOME and the magics loaded."""
    with python_kernel(tmp_path_factory.mktemp("home")) as kc:
        execute(kc, "%load_ext lev_nb\nimport lev_nb")
        yield kc


def execute(kc: Any, code: str) -> list[dict[str, Any]]:
    """Run ``code`` in the kernel; its iopub outputs (streams, results, displays, updates, errors)."""
    outputs = run_code(kc, code)
    errors = [o for o in outputs if o["type"] == "error"]
    assert not errors, "\n".join(errors[0]["traceback"])
    return outputs


def value(kc: Any, expression: str) -> Any:
    """``expression`` evaluated in the kernel, as JSON."""
    outputs = execute(kc, f"import json as _json\nprint(_json.dumps({expression}))")
    return json.loads("".join(o["text"] for o in outputs if o["type"] == "stream" and o["name"] == "stdout"))


def cell(kc: Any, line: str, body: str) -> list[dict[str, Any]]:
    return execute(kc, f"%%blueprint {line}\n{body}")


def shown(outputs: list[dict[str, Any]], mime: str) -> list[str]:
    return [o["data"][mime] for o in outputs if o["type"] == "display_data" and mime in o.get("data", {})]


# -- %%blueprint -----------------------------------------------------------------------------
def test_a_cell_with_an_error_binds_nothing_and_points_at_the_line(kernel: Any) -> None:
    execute(kernel, "draft = 'something else'")
    outputs = cell(kernel, "draft", DRAFT)
    (page,) = shown(outputs, "text/html")
    (text,) = [t for t in shown(outputs, "text/plain") if "unknown-tool" in t]
    # The same finding `lev validate` gives, at the line that grants the tool (line 8 of the cell).
    assert re.search(r"error\s+line 8: stage 'collect': grants 'reed_file'.*\[unknown-tool\]", text)
    assert "line 8" in page and "reed_file" in page and "<style" not in page
    assert "`draft` is not bound" in text
    assert value(kernel, "draft") == "something else"  # not a blueprint: left as it was
    # The graph is drawn even so (the text loaded).
    assert any("s_collect" in m for m in shown(outputs, "text/vnd.mermaid"))


def test_a_cell_with_only_warnings_is_bound_and_drawn(kernel: Any) -> None:
    outputs = cell(kernel, "draft", FIXED.replace("max_iterations = 4\n", "", 1))
    (text,) = [t for t in shown(outputs, "text/plain") if "bound" in t]
    assert re.search(r"warning\s+line 6: stage 'collect': no max_iterations", text)
    assert "→ bound to `draft` (mind the warnings)" in text
    assert value(kernel, "type(draft).__name__") == "Blueprint"
    assert value(kernel, "draft.stage_names") == ["collect", "write"]
    (mermaid,) = shown(outputs, "text/vnd.mermaid")
    assert "Every change is noted" in mermaid
    # An error later removes the earlier blueprint, so the next cell cannot run a stale design.
    (text,) = [t for t in shown(cell(kernel, "draft", DRAFT), "text/plain") if "bound" in t]
    assert "earlier blueprint was removed" in text
    assert value(kernel, "'draft' in globals()") is False


def test_the_default_name_is_bp_and_the_next_cell_runs_it(kernel: Any) -> None:
    cell(kernel, "", FIXED)
    result = value(kernel, "(lambda r: [r.status, r.stage_history])(bp.run('notes for 2.4', model='mock').wait(60))")
    assert result == ["complete", ["collect", "write"]]


def test_a_toml_mistake_shows_line_column_and_the_offending_line(kernel: Any) -> None:
    broken = FIXED.replace('mode = "output"', 'mode = "output', 1)
    outputs = cell(kernel, "broken", broken)
    (text,) = shown(outputs, "text/plain")
    assert text.splitlines()[:3] == [
        "✗ line 16, column 15: not valid TOML: Illegal character '\\n'",
        '    16 | mode = "output',
        "       |               ^",
    ]
    (page,) = shown(outputs, "text/html")
    assert "line 16, column 15" in page and "16 | mode = &quot;output" in page
    assert not shown(outputs, "text/vnd.mermaid")  # nothing to draw
    assert value(kernel, "'broken' in globals()") is False


def test_scripts_resolve_against_dir(kernel: Any, tmp_path: Path) -> None:
    shutil.copytree(ROOT / "blueprints" / "code-fixer" / "tools", tmp_path / "tools")
    uses = FIXED.replace('"read_file", "context_write"', '"read_file", "count_todos"')
    (text,) = [t for t in shown(cell(kernel, "counted", uses), "text/plain") if "bound" in t]
    assert "grants 'count_todos'" in text  # the kernel's working folder has no tools/
    (text,) = [t for t in shown(cell(kernel, f"counted --dir {tmp_path}", uses), "text/plain") if "bound" in t]
    assert "count_todos" not in text and "→ bound to `counted`" in text
    assert value(kernel, "str(counted.base_dir)") == str(tmp_path.resolve())


# -- lev_nb.designer -------------------------------------------------------------------------
def test_the_designer_judges_again_after_a_pause_in_typing(kernel: Any) -> None:
    execute(kernel, f"ed = lev_nb.designer({DRAFT!r}, delay=0.3)")
    assert value(kernel, "[ed.checks, ed.blueprint is None, 'line 8' in ed.findings.value]") == [1, True, True]
    # Five edits in a burst, as typing sends them: one check, of the last text.
    execute(kernel, "\n".join(f"ed.editor.value = {FIXED[:len(FIXED) - n]!r}" for n in (4, 3, 2, 1, 0)))
    assert value(kernel, "ed.settle(30)") is True
    assert value(kernel, "[ed.checks, ed.text == ed.verdict.text, ed.blueprint.name]") == [2, True, "notes"]
    assert value(kernel, "'✓ usable' in ed.findings.value and 'reed_file' not in ed.findings.value") is True
    graph = value(kernel, "ed.graph.outputs[0]['data']['text/vnd.mermaid']")
    assert "s_collect" in graph and "s_write" in graph
    # A stage added is drawn; a text that breaks keeps the last good blueprint and says so.
    execute(kernel, "ed.text = ed.text + '\\n[stages.review]\\nmode = \"autonomous\"\\nmax_iterations = 2\\n'")
    assert value(kernel, "ed.settle(30)") is True
    assert "s_review" in value(kernel, "ed.graph.outputs[0]['data']['text/vnd.mermaid']")
    assert "unreachable-stage" in value(kernel, "ed.findings.value")
    execute(kernel, "ed.text = ed.text.replace('[stages.review]', '[stages.review')")
    assert value(kernel, "ed.settle(30)") is True
    assert value(kernel, "[ed.blueprint.stage_names, 'not valid TOML' in ed.findings.value, "
                         "'still the last version' in ed.findings.value]") == [["collect", "write", "review"], True, True]


def test_the_dry_run_button_runs_the_text_on_the_mock_model(kernel: Any) -> None:
    execute(kernel, f"ed2 = lev_nb.designer({FIXED!r}, delay=0.3)\ned2.task.value = 'notes for 2.5'\ned2.dry_button.click()")
    run = value(kernel, "(lambda r: [r.status, r.stage_history, r.meta['task'], r.workdir, r.run_dir])"
                        "(ed2.dry_run.wait(60))")
    assert run[:3] == ["complete", ["collect", "write"], "notes for 2.5"]
    assert Path(run[3]) == Path(run[4]) / "workdir"  # in its record, not a folder left in the temp dir
    assert value(kernel, "type(ed2.dry_view.children[1]).__name__") == "RunWidget"
    # A text with errors does not run: the view says why.
    execute(kernel, f"ed2.text = {DRAFT!r}\ned2.dry_button.click()")
    assert "Fix the errors above first" in value(kernel, "ed2.dry_view.children[0].value")


def test_the_designer_display_carries_a_static_copy_and_freezes_to_it(kernel: Any) -> None:
    # (freeze sends its update as part of the cell that showed the editor, so one cell does both here)
    outputs = execute(kernel, f"ed3 = lev_nb.designer({DRAFT!r})\ndisplay(ed3)\ned3.text = {FIXED!r}\ned3.freeze()")
    (data,) = [o["data"] for o in outputs if o["type"] == "display_data"]
    assert "application/vnd.jupyter.widget-view+json" in data
    page = data["text/html"]
    # Inline styles only: an untrusted notebook, nbconvert and GitHub drop <style> and classes' CSS.
    assert "<style" not in page and "<script" not in page
    assert re.search(r"<span style='color:#c62828;font-weight:700[^']*'>\s*8</span>", page)  # line 8 marked
    assert "reed_file" in page and "unknown-tool" in page
    assert 'name = "notes"' in data["text/plain"]
    (update,) = [o for o in outputs if o["type"] == "update_display_data"]
    assert set(update["data"]) == {"text/html", "text/plain"}
    assert "✓ usable" in update["data"]["text/html"] and "data:image/svg+xml;base64," in update["data"]["text/html"]


def test_the_designer_opens_a_folder_and_refuses_what_is_not_a_blueprint(kernel: Any) -> None:
    triage = ROOT / "blueprints" / "triage"
    assert value(kernel, f"[lev_nb.designer({str(triage)!r}).blueprint.name, str(lev_nb.designer({str(triage)!r}).folder)]") == [
        "triage", str(triage.resolve())]
    outputs = execute(kernel, "try:\n    lev_nb.designer('nowhere/at-all')\nexcept lev_nb.BlueprintError as e:\n    print(e)")
    assert "No agent.leviath found" in outputs[0]["text"]


def test_a_notebook_saved_without_freeze_carries_the_design_as_it_ended(tmp_path: Path) -> None:
    """nbconvert --execute (nbclient) of a notebook that edits the design in later cells and never
    calls freeze(): the editor's output keeps its widget and a static copy of the final design."""
    nbclient = pytest.importorskip("nbclient")
    import nbformat

    env_path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    cells = [
        f"import os\nos.environ['LEV_HOME'] = {str(tmp_path / 'home')!r}\nimport lev_nb\ned = lev_nb.designer({DRAFT!r})\ned",
        f"ed.text = {FIXED!r}\ned.settle()",
        "print('the next cell')",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = env_path
    try:
        nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
    (data,) = [o["data"] for o in nb.cells[0].outputs if o.get("output_type") == "display_data"]
    assert "application/vnd.jupyter.widget-view+json" in data  # still the live editor while the kernel runs
    page = data["text/html"]
    assert "✓ usable" in page and "unknown-tool" not in page and '"read_file"' in html_unescape(page)
    assert '"read_file"' in data["text/plain"]


def html_unescape(text: str) -> str:
    import html

    return html.unescape(text)
