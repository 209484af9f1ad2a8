"""Issue 25: ``[title]`` gives each run a short title once it has started (upstream
configuration.md), shown by ``lev ps``, ``lev show`` and the run view. On the mock or a scripted
model it is taken from the task (no call); otherwise one call to the ``[title]`` model (else the
first stage's) writes it, beside the run. A title that cannot be made leaves none, told only when
``[title]`` is configured."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from standin import API_KEY, Recorded, Reply, StandIn, error_body, message, serve, text
from support import say

import lev_nb
from lev_nb.engine.title import MAX_TITLE_CHARS, title_from_task
from lev_nb.providers import ScriptedModel

TRIAGE = str(Path(__file__).resolve().parents[2] / "blueprints" / "triage")
AGENT = """
[agent]
name = "titled"
[context.regions]
system = { kind = "pinned", max_tokens = 1000 }
task = { kind = "pinned", max_tokens = 1000, seed = "task_input" }
conversation = { kind = "sliding_window", max_items = 10, max_tokens = 4000 }
[stages.only]
max_iterations = 2
nudge = { enabled = false }
[stages.only.model]
provider = "anthropic"
model = "claude-sonnet-4-6"
[stages.only.transitions]
"""


@pytest.fixture(autouse=True)
def titles_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEV_TITLE_ENABLED")  # the suite runs without titles (tests/conftest.py)


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> Iterator[StandIn]:
    for server in serve():
        monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        yield server


def _config(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text)


def test_a_title_from_the_task_is_one_line_and_short() -> None:
    assert title_from_task("\n  Fix the   failing test\nin module x") == "Fix the failing test"
    long = title_from_task("word " * 40)
    assert long == "word word word word word word word word"
    assert len(title_from_task("x" * 200)) == MAX_TITLE_CHARS and title_from_task("") == ""


def test_a_mock_run_is_titled_from_its_task_and_every_view_shows_it(lev, home: Path) -> None:
    done = lev("run", TRIAGE, "--task", "disk full on db1\nmore detail", "--model", "mock", "--quiet")
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.strip()
    meta = json.loads((home / "runs" / run_id / "meta.json").read_text())
    assert meta["title"] == "disk full on db1"
    header, row = lev("ps").stdout.splitlines()[:2]
    assert header.split()[:4] == ["RUN", "ID", "AGENT", "TITLE"] and "disk full on db1" in row
    assert "title: disk full on db1" in lev("show", run_id).stdout.splitlines()[1]
    events = [json.loads(line) for line in (home / "runs" / run_id / "events.jsonl").read_text().splitlines()]
    assert [e["title"] for e in events if e["type"] == "run_titled"] == ["disk full on db1"]

    from lev_nb.explain.record import open_run
    from lev_nb.notebook import runview

    state = open_run(run_id, home=home).story()  # what the run view draws
    assert "<div class='lev-title'>disk full on db1</div>" in runview.header_html(state)
    assert "title: disk full on db1" in runview.snapshot_text(state)


def test_titles_can_be_turned_off(lev, home: Path) -> None:
    _config(home, "[title]\nenabled = false\n")
    run_id = lev("run", TRIAGE, "--task", "disk full", "--model", "mock", "--quiet").stdout.strip()
    assert json.loads((home / "runs" / run_id / "meta.json").read_text())["title"] is None
    assert "TITLE" not in lev("ps").stdout


def test_the_configured_model_writes_the_title_beside_a_scripted_run(home: Path, standin: StandIn, tmp_path: Path) -> None:
    _config(home, '[title]\nprovider = "anthropic"\nmodel = "claude-haiku-4-5"\n')
    standin.queue(Reply(body=message(text('"Disk Full On Db1."'), model="claude-haiku-4-5")))
    model = ScriptedModel([say("done")])
    run = lev_nb.load(AGENT).run("the disk of db1 is full, find out why", model=model,
                                 workdir=tmp_path / "w", home=home)
    run.wait(60)
    assert run.status == "complete", run.error
    assert len(model.requests) == 1  # the script's turns are all the stage's
    [asked] = standin.requests
    assert asked.body["model"] == "claude-haiku-4-5" and "title" in json.dumps(asked.body["system"])
    assert "the disk of db1 is full" in json.dumps(asked.body["messages"])
    meta = json.loads((Path(run.run_dir) / "meta.json").read_text())
    assert meta["title"] == "Disk Full On Db1"
    assert meta["usage"]["total"]["calls"] == 2  # the title's call is counted with the stage's
    assert [w.code for w in run.warnings if w.code == "title-failed"] == []


@pytest.mark.parametrize("configured", [True, False])
def test_a_title_that_cannot_be_made_leaves_none(home: Path, standin: StandIn, tmp_path: Path, configured: bool) -> None:
    _config(home, "[title]\nenabled = true\n" if configured else "")

    def answer(request: Recorded) -> Reply:
        if "title" in json.dumps(request.body.get("system")):
            return Reply(400, error_body("invalid_request_error", "no titles today"))
        return Reply(body=message(text("done")))

    standin.responder = answer
    run = lev_nb.load(AGENT).run("the disk of db1 is full", workdir=tmp_path / "w", home=home)
    run.wait(60)
    assert run.status == "complete", run.error  # the run never depends on its title
    assert len(standin.requests) == 2  # the stage's call and the title's (the first stage's model)
    assert json.loads((Path(run.run_dir) / "meta.json").read_text())["title"] is None
    told = [w for w in run.warnings if w.code == "title-failed"]
    if configured:
        assert len(told) == 1 and "no titles today" in told[0].message
    else:
        assert told == []
