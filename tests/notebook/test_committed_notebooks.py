"""The example notebooks are committed fully executed, in order, by JupyterLab (the browser test
with LEV_UPDATE_NOTEBOOKS=1 writes them): a reader of the file, on GitHub or in nbconvert, sees
every output, every run at its final state, and nothing of the machine they were run on."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
MACHINE_PATH = re.compile(r"(/tmp/|/home/|/root/|/Users/|[A-Z]:\\\\)")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_committed_executed_and_clean(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    nb = json.loads(text)
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1)), "run all cells in order"
    assert nb["metadata"].get("kernelspec", {}).get("name") == "python3"
    for cell in code:
        for output in cell["outputs"]:
            assert output["output_type"] != "error", f"an error output in {path.name}"
            data = output.get("data", {})
            assert WIDGET_VIEW not in data or "text/html" in data, "a widget output with no static snapshot"
    assert not MACHINE_PATH.search(text), f"a path of the machine in {path.name}: {MACHINE_PATH.search(text)}"
    runs = [o for c in code for o in c["outputs"] if "class='lev-run'" in "".join(o.get("data", {}).get("text/html", ""))]
    for output in runs:
        snapshot = "".join(output["data"]["text/html"])
        assert "data-status='complete'" in snapshot and "Final output" in snapshot


def test_the_readme_lists_every_notebook() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = [p.name for p in NOTEBOOKS if f"| `{p.name}` |" not in readme]
    assert missing == [], f"add these to the README's table of notebooks: {missing}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_every_notebook_can_switch_to_claude_or_openai_and_stays_offline_without_a_key(path: Path) -> None:
    nb = json.loads(path.read_text(encoding="utf-8"))
    cells = [c for c in nb["cells"] if c["cell_type"] == "code" and "ANTHROPIC_API_KEY" in "".join(c["source"])]
    assert cells, f"{path.name} has no cell showing how to switch to Claude"
    source = "".join(cells[-1]["source"])
    assert 'os.environ.get("OPENAI_API_KEY")' in source and '"openai/' in source, \
        f"{path.name} shows Claude but not how to run the same on OpenAI"
    shown = "".join(o.get("text", "") if isinstance(o.get("text"), str) else "".join(o.get("text", []))
                    for o in cells[-1]["outputs"])
    assert "skipped" in shown
