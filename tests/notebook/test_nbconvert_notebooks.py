"""Every committed example notebook executed headless with ``jupyter nbconvert --execute`` (the
person-in-the-loop and the designer notebooks included) saves the final state of every view: each
run view is complete (never "running" or "waiting_input"), each widget output carries its static
snapshot, and no cell fails. Runs the real command in a copy of notebooks/ and the bundled agents,
with LEV_HOME in a temporary folder."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import ROOT

pytestmark = pytest.mark.slow

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
FINAL = {"complete", "error", "cancelled"}
EXECUTE_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("nbconvert")
    shutil.copytree(ROOT / "notebooks", root / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    shutil.copytree(ROOT / "blueprints", root / "blueprints", symlinks=False)
    return root


def _html(output: dict[str, Any]) -> str:
    html = output.get("data", {}).get("text/html", "")
    return html if isinstance(html, str) else "".join(html)


def _plain(output: dict[str, Any]) -> str:
    text = output.get("data", {}).get("text/plain", "")
    return text if isinstance(text, str) else "".join(text)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_nbconvert_execute_saves_every_view_in_its_final_state(notebook: Path, folder: Path) -> None:
    pytest.importorskip("nbconvert")
    out = folder / "executed"
    env = dict(os.environ, LEV_HOME=str(folder / "lev-home"),
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"):
        env.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
         f"--ExecutePreprocessor.timeout={EXECUTE_TIMEOUT_S}", "--output-dir", str(out), notebook.name],
        cwd=folder / "notebooks", env=env, capture_output=True, text=True, timeout=EXECUTE_TIMEOUT_S + 60,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    nb = json.loads((out / notebook.name).read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(c["execution_count"] for c in code)
    statuses: list[str] = []
    for cell in code:
        for output in cell["outputs"]:
            assert output["output_type"] != "error", f"{notebook.name}: {output.get('ename')}: {output.get('evalue')}"
            data = output.get("data", {})
            assert WIDGET_VIEW not in data or "text/html" in data, f"{notebook.name}: a widget with no static snapshot"
            html = _html(output)
            if "lev-run" in html or "lev-designer-static" in html:
                statuses += re.findall(r"data-status='(\w+)'", html)
            if "lev-batch-view" in html:
                assert "100% · " in _plain(output), f"{notebook.name}: a batch view saved before its end"
    # Every run view the notebook shows (a checkpoint answered from a cell included) saved as it ended.
    assert not set(statuses) - FINAL, f"{notebook.name}: views saved as {sorted(set(statuses) - FINAL)}"
    expected_views = sum("lev-run" in _html(o) for c in json.loads(notebook.read_text(encoding="utf-8"))["cells"]
                         if c["cell_type"] == "code" for o in c["outputs"])
    shown = sum("lev-run" in _html(o) for c in code for o in c["outputs"])
    assert shown == expected_views, f"{notebook.name}: {shown} run views, the committed copy has {expected_views}"
