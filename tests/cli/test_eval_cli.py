"""lev eval (a table, a results file, exit 1 under --min-pass), lev evals (the listing, a comparison)
and lev test on upstream-style cases (tests/*.toml, tests/*.rhai; one inference, nothing run)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from support import BLUEPRINTS, ROOT

SCRIPT = f"scripted:{BLUEPRINTS / 'triage' / 'scripted.json'}"
DATASET = BLUEPRINTS / "triage" / "datasets" / "reports.jsonl"


@pytest.fixture
def importable(monkeypatch: pytest.MonkeyPatch) -> None:
    paths = [str(ROOT / "tests"), str(ROOT), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))


def test_lev_eval_prints_a_table_records_it_and_writes_the_results(lev, home: Path, tmp_path: Path,
                                                                    importable: None) -> None:
    out = tmp_path / "results.jsonl"
    done = lev("eval", "triage", str(DATASET), "--check", "contains", "--model", SCRIPT, "--workers", "2",
               "--min-pass", "1", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "CASE  RESULT" in done.stdout and "pass rate 100.0% (6/6)" in done.stdout
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["passed"] for r in lines] == [True] * 6 and lines[0]["verdicts"][0]["check"] == "contains"
    eval_id = done.stdout.split("recorded as ")[1].split(";")[0].strip()
    assert (home / "evals" / eval_id / "eval.json").is_file()
    listed = lev("evals")
    assert listed.returncode == 0 and eval_id in listed.stdout and "100.0%" in listed.stdout
    assert json.loads(lev("evals", "--json").stdout)[0]["summary"]["cases"] == 6


def test_lev_eval_exits_1_under_min_pass_and_writes_a_json_document(lev, home: Path, tmp_path: Path,
                                                                     importable: None) -> None:
    out = tmp_path / "results.json"
    done = lev("eval", str(BLUEPRINTS / "triage"), str(DATASET), "--check", "regex:R-[12],", "--model", SCRIPT,
               "--workers", "1", "--min-pass", "0.9", "--out", str(out))
    assert done.returncode == 0  # every answer holds the whole table, so match
    assert "pass rate 100.0%" in done.stdout
    doc = json.loads(out.read_text())
    assert doc["checks"] == [{"kind": "regex", "value": "R-[12],"}] and len(doc["results"]) == 6
    failing = lev("eval", "triage", str(DATASET), "--check", "equals", "--model", SCRIPT, "--workers", "1",
                  "--min-pass", "0.9")
    assert failing.returncode == 1 and "is under --min-pass 90.0%" in failing.stderr
    assert "FAIL" in failing.stdout and "equals: expected 'R-1,bug'" in failing.stdout


def test_lev_eval_refuses_a_bad_command_line_with_2_and_a_bad_dataset_with_1(lev, home: Path, tmp_path: Path) -> None:
    bad_check = lev("eval", "triage", str(DATASET), "--check", "sounds-right", "--model", "mock")
    assert bad_check.returncode == 2 and "'sounds-right' is not a check" in bad_check.stderr
    assert lev("eval", "triage", str(DATASET), "--min-pass", "90").returncode == 2
    (tmp_path / "d.jsonl").write_text('{"task": "x"}\n{oops\n')
    bad_data = lev("eval", "triage", str(tmp_path / "d.jsonl"), "--model", "mock")
    assert bad_data.returncode == 1 and "d.jsonl:2: not valid JSON" in bad_data.stderr
    no_key = lev("eval", "triage", str(DATASET))
    assert no_key.returncode == 2 and "no API key for anthropic" in no_key.stderr
    assert "Traceback" not in bad_check.stderr + bad_data.stderr + no_key.stderr
    assert not (home / "evals").exists()  # nothing recorded for a refused evaluation


def test_lev_evals_compares_two_recorded_evaluations(lev, home: Path, importable: None) -> None:
    first = lev("eval", "triage", str(DATASET), "--check", "contains", "--model", SCRIPT, "--workers", "1")
    second = lev("eval", "triage", str(DATASET), "--check", "equals", "--model", SCRIPT, "--workers", "1")
    ids = [d.stdout.split("recorded as ")[1].strip() for d in (first, second)]
    compared = lev("evals", ids[0], "--compare", ids[1])
    assert compared.returncode == 0
    assert "pass rate 100.0% ⇒ 0.0%" in compared.stdout and "6 broken" in compared.stdout
    assert lev("evals", "nope").returncode == 1


UPSTREAM_CASES = """
[[test]]
name = "greeting"
input = "Say hello"
expect_contains = "LABELLING"

[[test]]
name = "labels with a tool"
input = "R-9: crash"
expect_tool_call = "context_write"
max_tokens = 500

[[test]]
name = "would write a file"
input = "R-9: crash"
expect_tool_call = "context_list"
"""


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    folder = tmp_path / "triage"
    shutil.copytree(BLUEPRINTS / "triage", folder)
    shutil.rmtree(folder / "tests")
    (folder / "tests").mkdir()
    (folder / "tests" / "cases.toml").write_text(UPSTREAM_CASES)
    (folder / "tests" / "ok.rhai").write_text("40 + 2 == 42")
    (folder / "tests" / "no.rhai").write_text('let labels = ["bug"]; labels.contains("feature")')
    return folder


def test_lev_test_runs_each_case_as_one_inference_and_executes_nothing(lev, home: Path, agent: Path) -> None:
    done = lev("test", str(agent), "--model", SCRIPT)
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines() == [
        "ok   greeting",  # case-insensitive, as the upstream's expect_contains
        "ok   labels with a tool",
        "FAIL would write a file: expected a call to context_list, the model called context_write, context_write, "
        "context_write, context_write, context_write, context_write",
        "FAIL no.rhai: the script returned false",
        "ok   ok.rhai",
        "3 of 5 passed, 2 failed",
    ]
    assert not (home / "runs").exists()  # the one-inference runs never touch the user's store
    only = lev("test", str(agent), "--model", SCRIPT, "--filter", "tool")
    assert only.returncode == 0 and only.stdout.splitlines()[-1] == "1 of 1 passed"


def test_lev_test_dry_run_reads_the_cases_and_calls_nothing(lev, home: Path, agent: Path) -> None:
    done = lev("test", str(agent / "agent.leviath"), "--dry-run")  # no key: nothing is called
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok   greeting (cases.toml): 'Say hello'; contains='LABELLING'" in done.stdout
    assert done.stdout.splitlines()[-1] == "5 of 5 checked (dry run: no provider called)"


def test_lev_test_names_a_bad_key_and_a_tool_the_stage_does_not_offer(lev, home: Path, agent: Path) -> None:
    (agent / "tests" / "cases.toml").write_text('[[test]]\nname = "x"\ninput = "y"\nexpect_contain = "z"\n')
    bad = lev("test", str(agent), "--dry-run")
    assert bad.returncode == 1
    assert "cases.toml: test[0].expect_contain: unknown key (did you mean 'expect_contains'?)" in bad.stderr
    (agent / "tests" / "cases.toml").write_text('[[test]]\nname = "x"\ninput = "y"\nexpect_tool_call = "write_file"\n')
    offered = lev("test", str(agent), "--dry-run")
    assert offered.returncode == 1
    assert "FAIL x (cases.toml): 'y'; expect_tool_call 'write_file' is not in the available_tools of stage 'read'" \
        in offered.stdout


def test_every_bundled_agent_has_prompt_tests_that_a_dry_run_accepts(lev, home: Path) -> None:
    for folder in sorted(p for p in BLUEPRINTS.iterdir() if (p / "agent.leviath").is_file()):
        done = lev("test", str(folder), "--dry-run")
        assert done.returncode == 0 and "checked (dry run" in done.stdout, (folder.name, done.stdout, done.stderr)
