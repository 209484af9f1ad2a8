"""The repetition detector: nudges for the same call over and over, and long read-only streaks."""

from __future__ import annotations

from pathlib import Path

import lev_nb
from lev_nb.engine.pipeline.repetition import RepetitionWatch
from lev_nb.engine.plan.types import RepetitionPolicy
from lev_nb.providers import ScriptedModel

AGENT = """
[agent]
name = "rep"
{extra}
[tool_permissions]
write_file = "allow"
[stages.only]
mode = "autonomous"
model = {{ provider = "anthropic", model = "claude-sonnet-4-6" }}
available_tools = ["list_dir", "current_time", "write_file"]
max_iterations = 20
[stages.only.transitions]
"""


def run(tmp_path: Path, turns: list[dict], extra: str = "") -> object:
    work = tmp_path / "w"
    work.mkdir(exist_ok=True)
    bp = lev_nb.load(AGENT.format(extra=extra))
    return bp.run("t", model=ScriptedModel(turns), workdir=work, home=tmp_path / "h").wait(30)


def same(n: int) -> list[dict]:
    return [{"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]} for _ in range(n)]


def nudges(r: object) -> list[str]:
    return [e.text for e in r.events if e.kind == "nudge" and e.reason == "repetition"]


def test_third_identical_call_is_nudged(tmp_path: Path) -> None:
    r = run(tmp_path, same(3) + [{"text": "done"}])
    found = nudges(r)
    assert len(found) == 1 and "list_dir with the same arguments 3 times" in found[0]


def test_different_arguments_are_not_a_loop(tmp_path: Path) -> None:
    turns = [{"tool_calls": [{"name": "list_dir", "arguments": {"path": p}}]} for p in (".", "./", "a")]
    (tmp_path / "w" / "a").mkdir(parents=True)
    assert nudges(run(tmp_path, turns + [{"text": "done"}])) == []


def test_a_productive_call_resets_the_count(tmp_path: Path) -> None:
    write = {"tool_calls": [{"name": "write_file", "arguments": {"path": "x", "content": "1"}}]}
    r = run(tmp_path, same(2) + [write] + same(2) + [{"text": "done"}])
    assert nudges(r) == []


def test_thresholds_come_from_the_blueprint(tmp_path: Path) -> None:
    extra = "[repetition_detection]\nmax_repeat_calls = 2\n"
    assert len(nudges(run(tmp_path, same(2) + [{"text": "done"}], extra))) == 1
    off = "[repetition_detection]\nenabled = false\n"
    assert nudges(run(tmp_path, same(5) + [{"text": "done"}], off)) == []


def test_readonly_streak() -> None:
    watch = RepetitionWatch(RepetitionPolicy(max_repeat_calls=0, max_readonly_streak=3))
    assert watch.observe("read_file", {"path": "a"}) == []
    assert watch.observe("read_file", {"path": "b"}) == []
    [text] = watch.observe("list_dir", {})
    assert "3 read-only tool calls in a row" in text
    assert watch.observe("read_file", {"path": "c"}) == []  # the streak starts again after a nudge

