"""The bundled agents (blueprints/) end to end: they validate cleanly, survive a TOML round
trip, walk to a complete run on the offline mock model, and replay their recorded transcript
(``scripted.json``, on a copy of their ``sample/`` working folder) to the answer it ends with.

Between them they use fan-out with a merge stage, output stages with markdown / JSON (schema and
Rhai validator) / CSV answers, gates of every kind, stuck, error, max_iterations and dead_end
edges, custom transforms, self-loops bounded by max_revisits, Rhai tools that read and write
files, and artifacts.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import BLUEPRINTS, RUN_TIMEOUT_S

import lev_nb
from lev_nb.providers.scripted import ScriptedModel

AGENTS = ["code-fixer", "data-extractor", "notebook-editor", "planner-implementer", "research-brief", "triage"]
# The task each recorded transcript answers (a file of the agent's folder).
TASK_FILES = {"triage": "reports.txt"}


@pytest.mark.parametrize("name", AGENTS)
def test_validates_with_no_findings(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")  # a reachable provider: no-reachable-provider is not tested here
    report = lev_nb.validate(BLUEPRINTS / name)
    assert report.valid
    # The one note a default configuration gives: a file tool the blueprint allows still asks here.
    capped = [f for f in report.findings if f.code == "permission-capped"]
    assert all(f.severity == "note" for f in capped)
    assert [f for f in report.findings if f not in capped] == [], [f.code for f in report.findings]


@pytest.mark.parametrize("name", AGENTS)
def test_round_trips_through_toml(name: str) -> None:
    bp = lev_nb.load(BLUEPRINTS / name)
    assert lev_nb.load(bp.to_toml()) == bp


@pytest.mark.parametrize("name", AGENTS)
def test_mock_model_walks_it_to_completion(name: str, tmp_path: Path) -> None:
    run = lev_nb.load(BLUEPRINTS / name).run("a task for the dry run", model="mock", home=tmp_path)
    run.wait(60)
    assert run.status == "complete", run.error
    assert run.result is not None
    assert run.stage_history[-1] == lev_nb.load(BLUEPRINTS / name).output_stages[-1]


def _final_submission(script: dict[str, list[dict]]) -> dict:
    """The arguments of the last submit_output call of the transcript's last output stage."""
    submits = [c["arguments"] for turns in script.values() for t in turns for c in t.get("tool_calls", [])
               if c["name"] == "submit_output"]
    return submits[-1]


def _replay(name: str, home: Path, tmp_path: Path) -> tuple[lev_nb.Run, Path, ScriptedModel]:
    """Run the agent's recorded transcript on a copy of its sample folder, unattended, with the
    file edits it makes allowed at launch (``--allow write_file --allow edit_file``)."""
    folder = BLUEPRINTS / name
    workdir = tmp_path / "sample"
    if (folder / "sample").is_dir():
        shutil.copytree(folder / "sample", workdir)
    else:
        workdir.mkdir()
    task = (folder / TASK_FILES.get(name, "task.txt")).read_text(encoding="utf-8")
    model = ScriptedModel.from_file(folder / "scripted.json")
    run = lev_nb.load(folder).run(task, model=model, workdir=workdir, home=home,
                                  allow=["write_file", "edit_file"]).wait(RUN_TIMEOUT_S)
    return run, workdir, model


@pytest.mark.parametrize("name", AGENTS)
def test_the_recorded_transcript_replays_to_its_answer(name: str, home: Path, tmp_path: Path) -> None:
    run, _, model = _replay(name, home, tmp_path)
    assert run.status == "complete", run.error
    script = json.loads((BLUEPRINTS / name / "scripted.json").read_text(encoding="utf-8"))
    # Every recorded turn was used, by the stage it was recorded for: the transcript is the run.
    assert {stage: model.remaining(stage) for stage in script} == {stage: 0 for stage in script}
    assert run.stage_history[-1] in lev_nb.load(BLUEPRINTS / name).output_stages
    final = _final_submission(script)
    assert run.result.content == final["content"]
    assert list(run.result.artifacts) == final.get("artifacts", [])
    assert run.flags["gates_forced"] == 0 and run.flags["output_forced"] == 0
    # No tool call was refused or failed, except answers the output checks sent back.
    failed = [e.summary for e in run.events if e.kind == "tool_finished" and not e.ok and e.tool != "submit_output"]
    assert failed == []


def test_the_planner_implementer_transcript_leaves_working_code(home: Path, tmp_path: Path) -> None:
    run, workdir, _ = _replay("planner-implementer", home, tmp_path)
    assert run.stage_history == ["plan", "implement", "verify", "report"]
    check = "import shopping; l = open('list.txt').read().splitlines(); print(shopping.total(l), shopping.cheapest(l))"
    out = subprocess.run([sys.executable, "-c", check], cwd=workdir, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["5.6", "apples"]
    transitions = [e for e in run.events if e.kind == "transition"]
    assert [t.transform for t in transitions][:1] == ["custom"]


def test_the_code_fixer_transcript_makes_the_tests_pass(home: Path, tmp_path: Path) -> None:
    run, workdir, _ = _replay("code-fixer", home, tmp_path)
    check = "import test_calc; test_calc.test_percent(); test_calc.test_clamp()"
    subprocess.run([sys.executable, "-c", check], cwd=workdir, check=True)
    assert run.flags["modified_files"] == ["calc.py"]


def test_the_data_extractor_transcript_writes_the_csv_and_is_corrected_once(home: Path, tmp_path: Path) -> None:
    run, workdir, _ = _replay("data-extractor", home, tmp_path)
    rows = (workdir / "orders.csv").read_text(encoding="utf-8").splitlines()
    assert rows[0] == "order_id,date,customer,item,quantity,unit_price,total"
    assert rows[1:] == [
        "A-1041,2026-03-02,Harbour Cafe,Ethiopia beans,3,12.5,37.5",
        "A-1041,2026-03-02,Harbour Cafe,Decaf beans,2,11.0,22.0",
        "A-1042,2026-03-03,North Deli,Paper filters (pack),10,4.2,42.0",
    ]
    rejected = [e for e in run.events if e.kind == "output_rejected"]
    assert len(rejected) == 1 and "total 40.2 is not quantity x unit_price (42.0)" in rejected[0].reason
    assert json.loads(run.result.content)["count"] == 3


def test_the_notebook_editor_transcript_leaves_a_valid_notebook(home: Path, tmp_path: Path) -> None:
    import nbformat

    run, workdir, _ = _replay("notebook-editor", home, tmp_path)
    text = (workdir / "readings.ipynb").read_text(encoding="utf-8")
    assert run.result.content == text
    nb = nbformat.reads(text, as_version=4)
    nbformat.validate(nb)
    assert [c.cell_type for c in nb.cells] == ["markdown", "code", "code", "code"]
    assert nb.cells[0].source.startswith("# Daily readings")
    namespace: dict = {}
    for cell in nb.cells[1:]:
        exec(cell.source, namespace)
    assert namespace["mean"]([]) is None and namespace["mean"]([1, 3]) == 2


def test_a_transcript_runs_from_the_command_line(lev, home: Path, tmp_path: Path) -> None:
    folder = BLUEPRINTS / "data-extractor"
    workdir = tmp_path / "w"
    shutil.copytree(folder / "sample", workdir)
    done = lev("run", str(folder), "--task", f"@{folder / 'task.txt'}", "--model", f"scripted:{folder / 'scripted.json'}",
               "--workdir", str(workdir))
    assert done.returncode == 0, done.stderr
    result = lev("result", done.stdout.strip(), "--raw")
    assert json.loads(result.stdout)["count"] == 3
    assert (workdir / "orders.csv").is_file()


def test_features_the_agents_are_meant_to_show() -> None:
    bps = {name: lev_nb.load(BLUEPRINTS / name) for name in AGENTS}
    edges = [e for bp in bps.values() for st in bp.stages.values() for e in st.edges]
    conditions = {e.condition for e in edges}
    assert {"stuck", "error", "dead_end", "max_iterations", "always"} <= conditions
    gates = [e.gate for e in edges if e.gate is not None]
    assert any(g.require_modifications for g in gates)
    assert any(g.require_regions for g in gates)
    assert any(g.require_region_updated for g in gates)
    assert any(g.require_no_open_items for g in gates)
    assert any(g.require_modifications and g.require_no_open_items for g in gates)
    assert any(g.tools for g in gates)
    assert any(e.transform == "custom" and e.transform_config and e.transform_config.compact for e in edges)
    assert any(st.transition_prompt for bp in bps.values() for st in bp.stages.values())
    assert any(st.mode == "fan_out" and st.merge_stage for bp in bps.values() for st in bp.stages.values())
    assert all(bp.output_stages for bp in bps.values())
    assert all(list((BLUEPRINTS / n / "tools").glob("*.rhai"))
               for n in ("code-fixer", "research-brief", "data-extractor", "notebook-editor"))
    assert all(list((BLUEPRINTS / n / "validators").glob("*.rhai"))
               for n in ("research-brief", "data-extractor", "notebook-editor"))
    for name in AGENTS:  # every agent ships a recorded transcript
        assert (BLUEPRINTS / name / "scripted.json").is_file()


def test_the_readme_lists_every_bundled_agent() -> None:
    readme = (BLUEPRINTS.parent / "README.md").read_text(encoding="utf-8")
    assert [name for name in AGENTS if f"| `{name}` |" not in readme] == []


def test_the_bundled_agents_are_package_data_found_by_name() -> None:
    from lev_nb.blueprint.bundled import bundled_agent, bundled_agent_names, bundled_agents_dir

    assert bundled_agent_names() == AGENTS
    assert bundled_agents_dir().parent == Path(lev_nb.__file__).parent  # inside the package, not the repo
    assert bundled_agent("triage") == bundled_agents_dir() / "triage" / "agent.leviath"
    for hostile in ("", ".", "..", "../triage", "triage/../triage", "nosuch"):
        assert bundled_agent(hostile) is None


def test_a_fan_out_outside_the_source_tree_finds_a_bundled_worker_agent(tmp_path: Path, home: Path) -> None:
    folder = tmp_path / "elsewhere" / "parent"
    folder.mkdir(parents=True)
    (folder / "agent.leviath").write_text(
        '[agent]\nname = "parent"\n'
        '[stages.split]\nmode = "fan_out"\nworker_agent = "triage"\nmerge_stage = "merge"\n'
        'system_prompt = "split the work"\n'
        '[stages.merge]\nsystem_prompt = "merge the reports"\n',
        encoding="utf-8",
    )
    run = lev_nb.run(folder, "two bug reports", model="mock", home=home).wait(60)
    assert run.status == "complete", run.error
    children = run.meta["children"]
    assert children and all(child.startswith("triage-") for child in children)
