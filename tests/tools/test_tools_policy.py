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
    assert resolve_policy("write_file", REG, Policies(agent={"Write_File": "allow"})) == "allow"
    assert resolve_policy("WRITE_FILE", REG, Policies(agent={"write_file": "ALLOW"})) == "allow"


def test_aliases_share_a_policy_both_ways():
    assert resolve_policy("shell", REG, Policies(stage={"bash": "allow"})) == "allow"
    assert resolve_policy("bash", REG, Policies(agent={"shell": "deny"})) == "deny"


def auth(name: str, policies: Policies) -> str | None:
    return asyncio.run(authorise(ToolCall("c1", name, {}), REG, policies))


def test_allow_runs():
    assert auth("read_file", Policies()) is None


def test_deny_text():
    assert auth("write_file", Policies(stage={"write_file": "deny"})) == "[denied] Tool 'write_file' is not permitted."


def test_ask_without_a_person_is_a_denial_that_says_how_to_allow():
    text = auth("shell", Policies())
    assert text.startswith("[denied] Tool 'shell' needs a person's approval")
    assert 'tool_permissions.shell = "allow"' in text


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
