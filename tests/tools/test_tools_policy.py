"""Tool permission policies: precedence, case, aliases, and ask without a person."""

from __future__ import annotations

import asyncio

from lev_nb.messages import ToolCall
from lev_nb.tools import Policies, authorise, default_registry, resolve_policy

REG = default_registry()


def test_builtin_defaults():
    none = Policies()
    assert [resolve_policy(n, REG, none) for n in ("read_file", "list_dir", "context_write", "write_file", "edit_file", "shell")] == [
        "allow", "allow", "allow", "ask", "ask", "ask",
    ]


def test_unknown_tool_defaults_to_ask():
    assert resolve_policy("mystery", REG, Policies()) == "ask"


def test_stage_beats_agent_beats_default():
    policies = Policies(stage={"write_file": "deny"}, agent={"write_file": "allow", "read_file": "deny"})
    assert resolve_policy("write_file", REG, policies) == "deny"
    assert resolve_policy("read_file", REG, policies) == "deny"
    assert resolve_policy("edit_file", REG, policies) == "ask"


def test_names_match_case_insensitively():
    loosen = {"blueprint_may_loosen": True}
    assert resolve_policy("write_file", REG, Policies(agent={"Write_File": "allow"}, **loosen)) == "allow"
    assert resolve_policy("WRITE_FILE", REG, Policies(agent={"write_file": "ALLOW"}, **loosen)) == "allow"
    assert resolve_policy("write_file", REG, Policies(ceiling={"WRITE_FILE": "Allow"})) == "allow"


def test_aliases_share_a_policy_both_ways():
    assert resolve_policy("shell", REG, Policies(stage={"bash": "allow"}, blueprint_may_loosen=True)) == "allow"
    assert resolve_policy("bash", REG, Policies(agent={"shell": "deny"})) == "deny"
    assert resolve_policy("bash", REG, Policies(ceiling={"shell": "allow"})) == "allow"


def test_a_blueprint_may_only_tighten_the_ceiling():
    # The ceiling is the tool's built-in default (ask for write_file) unless the configuration sets one.
    assert resolve_policy("write_file", REG, Policies(stage={"write_file": "allow"})) == "ask"
    assert resolve_policy("write_file", REG, Policies(stage={"write_file": "deny"})) == "deny"
    assert resolve_policy("read_file", REG, Policies(agent={"read_file": "ask"})) == "ask"
    # A configured ceiling raises or lowers what the blueprint can reach, never past its own word.
    assert resolve_policy("write_file", REG, Policies(ceiling={"write_file": "allow"})) == "allow"
    assert resolve_policy("write_file", REG, Policies(stage={"write_file": "ask"}, ceiling={"write_file": "allow"})) == "ask"
    assert resolve_policy("read_file", REG, Policies(agent={"read_file": "allow"}, ceiling={"read_file": "deny"})) == "deny"
    # [security] allow_blueprint_permissions lets the blueprint's word stand either way.
    loosen = Policies(stage={"write_file": "allow"}, ceiling={"write_file": "deny"}, blueprint_may_loosen=True)
    assert resolve_policy("write_file", REG, loosen) == "allow"
    # An unknown tool's ceiling is ask.
    assert resolve_policy("mystery", REG, Policies(stage={"mystery": "allow"})) == "ask"


def auth(name: str, policies: Policies) -> str | None:
    return asyncio.run(authorise(ToolCall("c1", name, {}), REG, policies))


def test_allow_runs():
    assert auth("read_file", Policies()) is None


def test_deny_text():
    assert auth("write_file", Policies(stage={"write_file": "deny"})) == "[denied] Tool 'write_file' is not permitted."


def test_ask_without_a_person_is_a_denial_that_says_how_to_allow():
    text = auth("shell", Policies())
    assert text.startswith("[denied] Tool 'shell' needs a person's approval")
    assert '[tool_permissions] shell = "allow"' in text and "config.toml" in text


def test_ask_with_an_approver_that_agrees():
    seen = []

    def approver(call):
        seen.append(call.name)
        return True

    assert auth("write_file", Policies(approver=approver)) is None
    assert seen == ["write_file"]


def test_ask_with_an_async_approver_that_declines():
    async def approver(call):
        return False

    assert auth("write_file", Policies(approver=approver)) == "[denied] The user declined the call to 'write_file'."


def test_approver_is_not_consulted_for_deny():
    calls = []
    text = auth("shell", Policies(stage={"shell": "deny"}, approver=lambda c: calls.append(c) or True))
    assert text.startswith("[denied] Tool 'shell' is not permitted") and calls == []


def test_approver_taking_name_and_arguments():
    seen = []

    def approver(name, arguments):
        seen.append((name, arguments))
        return False

    assert auth("shell", Policies(approver=approver)).startswith("[denied] The user declined")
    assert seen == [("shell", {})]


# -- launch permissions: --allow first, --yolo last (spec/runtime.md §4.1) -------------------------
def test_launch_allow_beats_every_other_source():
    policies = Policies(stage={"write_file": "deny"}, agent={"write_file": "deny"}, ceiling={"write_file": "deny"},
                        launch_allow=frozenset({"write_file"}))
    assert resolve_policy("write_file", REG, policies) == "allow"
    assert resolve_policy("edit_file", REG, policies) == "ask"  # only the tools it names


def test_launch_allow_follows_aliases_and_case():
    assert resolve_policy("shell", REG, Policies(launch_allow=frozenset({"BASH"}))) == "allow"
    assert resolve_policy("bash", REG, Policies(launch_allow=frozenset({"shell"}))) == "allow"


def test_yolo_lifts_ask_but_never_deny():
    yolo = {"yolo": True}
    assert resolve_policy("write_file", REG, Policies(**yolo)) == "allow"  # built-in ask
    assert resolve_policy("mystery", REG, Policies(**yolo)) == "allow"  # unknown: ask
    assert resolve_policy("write_file", REG, Policies(ceiling={"write_file": "ask"}, **yolo)) == "allow"
    assert resolve_policy("write_file", REG, Policies(ceiling={"write_file": "deny"}, **yolo)) == "deny"
    assert resolve_policy("write_file", REG, Policies(stage={"write_file": "deny"}, **yolo)) == "deny"
    # The blueprint tightening allow to ask is lifted again; its deny is kept.
    assert resolve_policy("read_file", REG, Policies(agent={"read_file": "ask"}, **yolo)) == "allow"


def test_an_approver_may_answer_with_the_denial_text():
    text = "[denied] Nobody answered in time."
    assert auth("write_file", Policies(approver=lambda call: text)) == text
    # Any other string is a plain yes, as before.
    assert auth("write_file", Policies(approver=lambda call: "sure")) is None
