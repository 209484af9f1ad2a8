"""The three bundled agents (blueprints/) end to end: they validate cleanly, survive a TOML round
trip, and walk to a complete run on the offline mock model.

Between them they use fan-out with a merge stage, output stages with markdown / JSON (schema and
Rhai validator) / CSV answers, gates of every kind, stuck, error, max_iterations and dead_end
edges, self-loops bounded by max_revisits, and Rhai tools.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import BLUEPRINTS

import lev_nb

AGENTS = ["code-fixer", "research-brief", "triage"]


@pytest.mark.parametrize("name", AGENTS)
def test_validates_with_no_findings(name: str) -> None:
    report = lev_nb.validate(BLUEPRINTS / name)
    assert report.valid
    assert report.findings == [], [f.code for f in report.findings]


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


def test_features_the_agents_are_meant_to_show() -> None:
    bps = {name: lev_nb.load(BLUEPRINTS / name) for name in AGENTS}
    edges = [e for bp in bps.values() for st in bp.stages.values() for e in st.edges]
    conditions = {e.condition for e in edges}
    assert {"stuck", "error", "dead_end", "max_iterations"} <= conditions
    gates = [e.gate for e in edges if e.gate is not None]
    assert any(g.require_modifications for g in gates)
    assert any(g.require_regions for g in gates)
    assert any(g.require_region_updated for g in gates)
    assert any(g.require_no_open_items for g in gates)
    assert any(st.mode == "fan_out" and st.merge_stage for bp in bps.values() for st in bp.stages.values())
    assert all(bp.output_stages for bp in bps.values())
    assert all(list((BLUEPRINTS / n / "tools").glob("*.rhai")) for n in ("code-fixer", "research-brief"))


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
