"""The tool registry's copies: each run's registry reads the built-in tools from a shared snapshot
and keeps only what it registers itself, and behaves exactly as an independent copy would."""

from __future__ import annotations

from lev_nb.tools import default_registry
from lev_nb.tools.registry import ToolDef, ToolRegistry


def _tool(name: str, description: str = "d") -> ToolDef:
    return ToolDef(name=name, description=description)


def test_a_copy_and_its_original_never_see_each_others_registrations() -> None:
    original = ToolRegistry([_tool("a"), _tool("b")])
    copy = original.copy()
    copy.register(_tool("mine"))
    original.register(_tool("theirs"))
    assert "mine" in copy and "mine" not in original
    assert "theirs" in original and "theirs" not in copy
    later = original.copy()  # made after the original changed: it sees the change
    assert later.names() == ["a", "b", "theirs"]


def test_a_replaced_tool_shadows_the_shared_one_and_keeps_its_place() -> None:
    original = ToolRegistry([_tool("Alpha"), _tool("beta"), _tool("gamma")])
    copy = original.copy()
    copy.with_description("beta", "changed")
    copy.register(_tool("delta"))
    assert copy.get("BETA").description == "changed" and original.get("beta").description == "d"
    assert copy.names() == ["Alpha", "beta", "delta", "gamma"]
    assert list(copy._known()) == ["Alpha", "beta", "gamma", "delta"]  # one merged table's order
    assert copy.canonical("alpha") == "Alpha" and copy.canonical("bash") == "shell"


def test_every_runs_copy_of_the_builtins_shares_one_table() -> None:
    first, second = default_registry(), default_registry()
    first.register(_tool("runtime_info_like"))
    assert first._base is second._base and not second._defs
    assert "runtime_info_like" not in second and "shell" in first and "bash" in second
    assert first.names() == sorted([*second.names(), "runtime_info_like"])


def test_canonical_names_are_worked_out_again_when_the_list_or_the_tools_change() -> None:
    registry = default_registry().copy()
    offered = ["Read_File", "bash", "list_dir"]
    names = registry.canonical_names(offered)
    assert names == {"read_file", "shell", "list_dir"}
    assert registry.canonical_names(offered) is names  # the same list, nothing registered: kept
    offered.append("write_file")  # grown in place: seen
    assert registry.canonical_names(offered) == names | {"write_file"}
    assert registry.canonical_names(["Brand_New"]) == {"brand_new"}  # another list
    kept = ["Brand_New", "list_dir"]
    assert registry.canonical_names(kept) == {"brand_new", "list_dir"}
    registry.register(ToolDef("Brand_New", "a tool registered later", {"type": "object"}))
    assert registry.canonical_names(kept) == {"Brand_New", "list_dir"}  # a registration makes it stale
