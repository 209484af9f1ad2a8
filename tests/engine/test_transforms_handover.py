"""``[[transforms]]`` (issue 24; upstream agents.md "Handing context to a sub-agent"): a parent of
one blueprint that spawns a child of another hands its regions over as the child's blueprint
maps them - direct, extract (named fields of a JSON object) and summarize (by the child's
summariser before its first turn) - after the child's own seeds; the child's first request shows
them. Run end to end with ``lev run`` on a scripted model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RESEARCHER = """
[agent]
name = "researcher"

[context.regions.findings]
kind = "pinned"
max_tokens = 2000
[context.regions.notes]
kind = "pinned"
max_tokens = 2000
[context.regions.log]
kind = "pinned"
max_tokens = 2000
[context.regions.conversation]
kind = "sliding_window"
max_tokens = 8000

[stages.research]
available_tools = ["context_write", "spawn_agent"]
nudge = { enabled = false }
[stages.research.transitions]
"""

REVIEWER = """
[agent]
name = "reviewer"

[context.regions.task]
kind = "pinned"
max_tokens = 500
[context.regions.source_material]
kind = "pinned"
max_tokens = 2000
seed = { literal = "OWN-SEED" }
[context.regions.brief]
kind = "pinned"
max_tokens = 2000
[context.regions.digest]
kind = "pinned"
max_tokens = 2000
[context.regions.conversation]
kind = "sliding_window"
max_tokens = 8000

[[transforms]]
from_blueprint = "researcher"
to_blueprint = "reviewer"
[[transforms.mappings]]
from_region = "findings"
to_region = "source_material"
transform = "direct"
[[transforms.mappings]]
from_region = "notes"
to_region = "brief"
transform = "extract"
fields = ["claim", "source"]
[[transforms.mappings]]
from_region = "log"
to_region = "digest"
transform = "summarize"
[[transforms.mappings]]
from_region = "findings"
to_region = "nowhere"

[stages.review]
available_tools = []
nudge = { enabled = false }
[stages.review.transitions]
"""

NOTES = {"claim": "tides follow the moon", "source": "almanac p.4", "noise": "SECRET-SCRATCH"}


def _write(folder: Path, text: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "agent.leviath").write_text(text, encoding="utf-8")


def _setup(tmp_path: Path, reviewer: str = REVIEWER) -> tuple[Path, Path, Path]:
    parent = tmp_path / "researcher"
    _write(parent, RESEARCHER)
    _write(parent / "reviewer", reviewer)
    work = tmp_path / "work"
    work.mkdir()
    return parent, tmp_path / "turns.json", work


def _calls(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": args} for name, args in calls]}


def _parent_turns() -> list[dict[str, Any]]:
    return [
        _calls(("context_write", {"region": "findings", "content": "FINDING: the tide tables"}),
               ("context_write", {"region": "notes", "content": json.dumps(NOTES)}),
               ("context_write", {"region": "log", "content": "a long log of everything tried"})),
        _calls(("spawn_agent", {"blueprint": "reviewer/agent.leviath", "task": "review it", "wait": True})),
        {"text": "reviewed"},
    ]


def _system(home: Path, run_id: str) -> dict[str, str]:
    """Region -> the text of its block in the run's first stage request, as the transcript keeps it."""
    entries = [json.loads(line) for line in (home / "runs" / run_id / "transcript.jsonl").read_text().splitlines()]
    first = next(e for e in entries if e.get("purpose") == "stage" and e.get("system"))
    return dict(zip(first["system_regions"], first["system"]))


def test_the_child_sees_what_the_transforms_hand_it(lev, home: Path, tmp_path: Path) -> None:
    parent, script, work = _setup(tmp_path)
    script.write_text(json.dumps({
        "research": _parent_turns(),
        "review": [{"text": "DIGEST-BY-SUMMARISER"}, {"text": "looks right"}],
    }))
    done = lev("run", str(parent), "--task", "study tides", "--model", f"scripted:{script}", "--workdir", str(work))
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.strip().splitlines()[-1]
    [child_id] = json.loads((home / "runs" / run_id / "meta.json").read_text())["children"]
    seen = _system(home, child_id)
    # direct: after the child's own seed
    assert seen["source_material"].endswith("OWN-SEED\n\nFINDING: the tide tables")
    # extract: the named fields only
    brief = seen["brief"].split("\n", 1)[1]
    assert json.loads(brief) == {"claim": "tides follow the moon", "source": "almanac p.4"}
    assert "SECRET-SCRATCH" not in json.dumps(seen)
    # summarize: the child's summariser replaced the copy before the first turn
    assert "DIGEST-BY-SUMMARISER" in seen["digest"] and "long log" not in seen["digest"]
    child = json.loads((home / "runs" / child_id / "meta.json").read_text())
    assert child["status"] == "complete"
    told = [w["message"] for w in child["warnings"]]
    assert any("no region 'nowhere'" in m for m in told), told
    shown = lev("context", child_id, "--full").stdout
    assert "FINDING: the tide tables" in shown


def test_nothing_is_handed_over_without_a_matching_transform(lev, home: Path, tmp_path: Path) -> None:
    parent, script, work = _setup(tmp_path, REVIEWER.replace('from_blueprint = "researcher"',
                                                             'from_blueprint = "someone-else"'))
    script.write_text(json.dumps({"research": _parent_turns(), "review": [{"text": "looks right"}]}))
    done = lev("run", str(parent), "--task", "study tides", "--model", f"scripted:{script}", "--workdir", str(work))
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.strip().splitlines()[-1]
    [child_id] = json.loads((home / "runs" / run_id / "meta.json").read_text())["children"]
    seen = _system(home, child_id)
    assert seen["source_material"].endswith("OWN-SEED")
    assert "brief" not in seen and "digest" not in seen


def test_extract_of_text_that_is_not_json_hands_it_over_whole_and_says_so(lev, home: Path, tmp_path: Path) -> None:
    parent, script, work = _setup(tmp_path)
    turns = _parent_turns()
    turns[0]["tool_calls"][1]["arguments"]["content"] = "plain words, no JSON"
    script.write_text(json.dumps({"research": turns, "review": [{"text": "DIGEST"}, {"text": "ok"}]}))
    done = lev("run", str(parent), "--task", "study tides", "--model", f"scripted:{script}", "--workdir", str(work))
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.strip().splitlines()[-1]
    [child_id] = json.loads((home / "runs" / run_id / "meta.json").read_text())["children"]
    assert _system(home, child_id)["brief"].endswith("plain words, no JSON")
    told = [w["message"] for w in json.loads((home / "runs" / child_id / "meta.json").read_text())["warnings"]]
    assert any("not a JSON object" in m for m in told), told
