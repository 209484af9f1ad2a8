"""lev_nb.evaluate end to end: runs in worker processes (run_many), every answer checked, the
record under LEV_HOME/evals read back, two evaluations compared, and a worker killed mid-way."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support import BLUEPRINTS, ROOT, CrashingModel

import lev_nb
from lev_nb.eval import Judge, contains, equals, list_evaluations, load_evaluation
from lev_nb.eval.record import EvaluationNotFound
from lev_nb.providers import ScriptedModel
from lev_nb.store import RunStore

DATASET = [{"task": "say: bug", "expected": "bug"}, {"task": "say: feature", "expected": "feature"},
           {"task": "say: question", "expected": "bug"}]


@pytest.fixture
def importable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Worker processes can import lev_nb and the tests' models (eval_models.EchoModel)."""
    paths = [str(ROOT / "tests"), str(ROOT), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))


@pytest.fixture
def echo() -> object:
    from eval_models import EchoModel

    return EchoModel()


def test_an_evaluation_runs_each_case_checks_its_answer_and_is_recorded(home: Path, importable: None, echo: object) -> None:
    ev = lev_nb.evaluate("triage", DATASET, checks=[equals(), contains("u")], model=echo, processes=2)
    assert [r.content for r in ev.results] == ["bug", "feature", "question"]
    assert [r.passed for r in ev.results] == [True, True, False]
    first = ev.results[0]
    assert first.status == "complete" and first.format == "csv" and first.stage_path == ["read", "check", "table"]
    assert first.tokens > 0 and first.duration_s is not None and first.run_id
    assert RunStore(first.run_id, home).read_meta()["task"] == "say: bug"  # a real run, in the caller's store
    assert [v.check for v in ev.results[2].verdicts] == ["equals", "contains"]
    assert ev.results[2].reason == "equals: expected 'bug', got 'question'"
    summary = ev.summary()
    assert (summary.cases, summary.passed) == (3, 2) and summary.ci_low < 2 / 3 < summary.ci_high
    assert summary.stage_paths == [("read → check → table", 3)]
    assert summary.failures == [("equals: expected …, got …", 1)]
    frame = ev.to_pandas()
    assert list(frame["passed"]) == [True, True, False] and "check:equals" in frame

    folder = home / "evals" / ev.id
    spec = json.loads((folder / "eval.json").read_text())
    assert spec["blueprint_hash"].startswith("sha256:") and spec["dataset_hash"].startswith("sha256:")
    assert spec["checks"][0] == {"kind": "equals", "value": None, "ignore_case": False} and spec["model"] == "echo"
    again = load_evaluation(ev.id[:-3])  # a unique prefix is enough
    assert [r.to_dict() for r in again.results] == [r.to_dict() for r in ev.results]
    assert [e["id"] for e in list_evaluations()] == [ev.id]
    assert not [p for p in (home / "evals").iterdir() if p.name.startswith(".")]  # nothing half-written


def test_compare_shows_case_by_case_what_changed(home: Path, importable: None, echo: object) -> None:
    old = [{"task": "say: bug", "expected": "bug"}, {"task": "say: feature", "expected": "bug"},
           {"task": "say: question", "expected": "question"}]
    new = [{"task": "say: bug", "expected": "bugs"}, {"task": "say: feature", "expected": "feature"},
           {"task": "say: new", "expected": "new"}]
    before = lev_nb.evaluate(BLUEPRINTS / "triage", old, checks=[equals()], model=echo, processes=1)
    after = lev_nb.evaluate(BLUEPRINTS / "triage", new, checks=[equals()], model=echo, processes=1, label="after")
    comparison = load_evaluation(before.id).compare(after)
    changes = {c.task: c.change for c in comparison.cases}
    assert changes == {"say: bug": "broken", "say: feature": "fixed", "say: question": "removed", "say: new": "added"}
    assert [c.task for c in comparison.fixed] == ["say: feature"] and [c.task for c in comparison.broken] == ["say: bug"]
    text = str(comparison)
    assert "pass rate 66.7% ⇒ 66.7% (+0.0%); 1 fixed, 1 broken" in text
    assert "[broken] 'say: bug': broken: equals: expected 'bugs', got 'bug'" in text
    frame = comparison.to_pandas()
    assert list(frame["change"]) == ["broken", "fixed", "removed", "added"]


def test_dataset_columns_fill_the_blueprints_inputs(home: Path, tmp_path: Path, importable: None, echo: object) -> None:
    text = (BLUEPRINTS / "triage" / "agent.leviath").read_text()
    text = text.replace("[context.regions]\n", '[context.regions]\naudience = { kind = "pinned", max_tokens = 500, '
                                                'seed = "input", required = true }\n', 1)
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "agent.leviath").write_text(text)
    ev = lev_nb.evaluate(tmp_path / "agent", [{"task": "say: a", "audience": "devs"}], model=echo, processes=1,
                         repeats=2)
    assert [r.repeat for r in ev.results] == [0, 1] and all(r.passed for r in ev.results)
    launch = RunStore(ev.results[0].run_id, home).read_launch()
    assert launch is not None and launch["inputs"] == {"audience": "devs"}
    with pytest.raises(lev_nb.eval.DatasetError, match="row 1: column 'audience' is empty"):
        lev_nb.evaluate(tmp_path / "agent", [{"task": "say: a"}], model=echo, processes=1)


def test_a_judge_model_judges_every_case_in_order_its_cost_apart(home: Path, importable: None, echo: object) -> None:
    judge_model = ScriptedModel({"judge": [{"text": '{"pass": true, "reason": ""}'},
                                           {"text": '{"pass": false, "reason": "not a bug"}'}]})
    ev = lev_nb.evaluate("triage", DATASET[:2], checks=[Judge("Is it a bug?", model=judge_model)], model=echo,
                         processes=1)
    assert [r.passed for r in ev.results] == [True, False] and ev.results[1].reason == "judge: not a bug"
    assert len(judge_model.requests) == 2 and "say: bug" in judge_model.requests[0].messages[0].content
    assert ev.checks == [{"kind": "judge", "rubric": "Is it a bug?", "model": "scripted"}]


def test_a_killed_worker_loses_no_case(home: Path, tmp_path: Path, importable: None) -> None:
    model = CrashingModel(str(tmp_path / "crashed-once"))
    ev = lev_nb.evaluate("triage", [{"task": f"R-{i}"} for i in range(4)], model=model, processes=2)
    assert (tmp_path / "crashed-once").exists()  # a worker did die mid-evaluation
    assert len(ev.results) == 4 and all(r.passed for r in ev.results), [r.reason for r in ev.results]
    assert max(r.attempts for r in ev.results) == 2  # its cases ran again


def test_cases_whose_worker_keeps_dying_are_reported_failed_with_the_reason(home: Path, importable: None) -> None:
    ev = lev_nb.evaluate("triage", [{"task": "R-1"}, {"task": "R-2"}], checks=[equals("x")],
                         model=CrashingModel("", always=True), processes=1)
    assert [r.status for r in ev.results] == ["failed", "failed"]
    assert all(r.reason.startswith("run failed: its worker failed") and r.verdicts == [] for r in ev.results)
    assert load_evaluation(ev.id).summary().by_status == {"failed": 2}


def test_an_unknown_evaluation_id_is_one_clear_error(home: Path) -> None:
    with pytest.raises(EvaluationNotFound, match="no evaluation 'nope'"):
        load_evaluation("nope")
