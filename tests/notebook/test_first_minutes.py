"""The first minutes in a kernel (issue 27): Tab completes lev_nb's API and a blueprint's own
methods (not pydantic's deprecated ones), an unknown %%lev option gets a "did you mean", and
``run.result`` of a run still going says to wait; in a real Jupyter kernel."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from kernel_session import execute as run_code
from kernel_session import python_kernel
from support import ROOT

TRIAGE = str(ROOT / "blueprints" / "triage")
DEPRECATED = {"dict", "json", "parse_obj", "parse_raw", "copy", "schema", "schema_json", "construct", "from_orm",
              "update_forward_refs", "validate", "parse_file"}


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A python3 kernel loading this tree, with a private LEV_HOME; yields its blocking client."""
    with python_kernel(tmp_path_factory.mktemp("home")) as kc:
        yield kc


def execute(kc: Any, code: str) -> list[dict[str, Any]]:
    """Run ``code`` in the kernel; return its iopub outputs (streams, results, errors)."""
    return run_code(kc, code, kinds=("stream", "execute_result", "display_data", "error"))


def completions(kc: Any, code: str) -> list[str]:
    reply = kc.complete(code, len(code), reply=True, timeout=120)
    return [m.rpartition(".")[2] for m in reply["content"]["matches"]]


def test_tab_completes_the_api_of_lev_nb_and_of_a_blueprint(kernel: Any) -> None:
    execute(kernel, f"import lev_nb\nbp = lev_nb.load({TRIAGE!r})")
    offered = set(completions(kernel, "lev_nb."))
    assert {"load", "validate", "run", "Blueprint", "Run", "run_many", "resume", "config", "RunNotFinished"} <= offered
    offered = set(completions(kernel, "bp."))
    assert {"run", "mermaid", "stages", "stage_names", "validate_report", "to_toml", "model_dump"} <= offered
    assert not offered & DEPRECATED


def test_an_unknown_lev_option_gets_the_command_lines_did_you_mean(kernel: Any) -> None:
    execute(kernel, "%load_ext lev_nb")
    outputs = execute(kernel, f"%%lev {TRIAGE} --modle mock\nR-1: the app crashes")
    # IPython shows a UsageError as one line on stderr, no traceback.
    shown = "".join(o.get("text", "") for o in outputs if o["type"] == "stream" and o["name"] == "stderr")
    assert shown.strip() == "UsageError: %%lev: unrecognized arguments: --modle mock (did you mean --model?)"


def test_result_of_a_run_still_going_says_to_wait(kernel: Any) -> None:
    code = (
        "import asyncio, threading, lev_nb\n"
        "called = threading.Event()\n"
        "class Blocking:\n"
        "    name = 'blocking'\n"
        "    async def complete(self, request):\n"
        "        called.set()\n"
        "        await asyncio.sleep(3600)\n"
        f"run = lev_nb.load({TRIAGE!r}).run('R-1: crash', model=Blocking())\n"
        "assert called.wait(60)\n"
        "run.result"
    )
    outputs = execute(kernel, code)
    errors = [o for o in outputs if o["type"] == "error"]
    assert len(errors) == 1 and errors[0]["ename"] == "RunNotFinished"
    shown = "\n".join(errors[0]["traceback"])
    assert "still running, with no result yet; run.wait() or await run" in shown
    assert "Traceback" not in shown  # one clean block
    assert not any("AttributeError" in line for line in errors[0]["traceback"])
    execute(kernel, "run.cancel(); run.wait(60)")


def test_a_blueprint_shows_a_picture_beside_its_mermaid_in_a_kernel(kernel: Any) -> None:
    # VS Code, Colab, the classic Notebook and GitHub draw the SVG; JupyterLab the Mermaid text.
    pytest.importorskip("graphviz")
    from lev_nb.blueprint.picture import dot_available

    if not dot_available():
        pytest.skip("Graphviz's dot is not installed")
    outputs = execute(kernel, f"import lev_nb\nlev_nb.load({TRIAGE!r})")
    (shown,) = [o for o in outputs if o["type"] == "execute_result"]
    assert {"text/vnd.mermaid", "image/svg+xml", "text/plain"} == set(shown["data"])
    assert "<title>s_read</title>" in shown["data"]["image/svg+xml"]


def test_dir_of_lev_nb_lists_the_api_without_importing_it() -> None:
    code = (
        "import json, sys\n"
        "import lev_nb\n"
        "before = set(sys.modules)\n"
        "names = dir(lev_nb)\n"
        "print(json.dumps({'names': names, 'all': lev_nb.__all__, 'imported': sorted(set(sys.modules) - before),"
        " 'heavy': [m for m in ('pydantic', 'lev_nb.blueprint.model', 'lev_nb.engine.runner') if m in sys.modules]}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(found["all"]) <= set(found["names"]) and "load_ipython_extension" in found["names"]
    assert found["imported"] == [] and found["heavy"] == []
