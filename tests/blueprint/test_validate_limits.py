"""Issue 12 items 3 and 10: counts no plan needs are refused by validation (constants.MAX_*), with
one message naming the key and the bound."""

from __future__ import annotations

import pytest
from support import blueprint

from lev_nb.blueprint import BlueprintError, check

BASE = """
[stages.work]
available_tools = ["list_dir"]
max_iterations = {iterations}
max_revisits = {revisits}
[stages.work.transitions.done]
gate = {{ require_regions = ["notes"], max_attempts = {attempts} }}
[stages.done]
[stages.done.transitions]
"""


def body(iterations: int = 10, revisits: int = 2, attempts: int = 3) -> str:
    return BASE.format(iterations=iterations, revisits=revisits, attempts=attempts)


def test_ordinary_counts_pass() -> None:
    check(blueprint(body(iterations=10_000, revisits=1_000, attempts=100)))


@pytest.mark.parametrize(
    ("kwargs", "key", "bound"),
    [
        ({"attempts": 1_000_000}, "stages.work.transitions.done.gate.max_attempts", 100),
        ({"iterations": 10_001}, "stages.work.max_iterations", 10_000),
        ({"revisits": 5_000}, "stages.work.max_revisits", 1_000),
    ],
)
def test_absurd_counts_are_refused(kwargs: dict[str, int], key: str, bound: int) -> None:
    with pytest.raises(BlueprintError) as info:
        check(blueprint(body(**kwargs)))
    exc = info.value
    assert exc.kind == "validation" and exc.key_path == key
    assert f"more than the {bound} lev_nb allows" in exc.message


def test_a_region_with_no_room_is_refused() -> None:
    toml = """
[context.regions.system]
kind = "pinned"
max_tokens = 0
[context.regions.conversation]
kind = "sliding_window"
max_tokens = 8000
[stages.work]
[stages.work.transitions]
"""
    with pytest.raises(BlueprintError) as info:
        check(blueprint(toml))
    assert info.value.key_path == "context.regions.system.max_tokens"
    assert "max_tokens = 0 leaves it no room" in info.value.message


def test_deeply_nested_toml_is_a_blueprint_error_not_a_recursion_error() -> None:
    with pytest.raises(BlueprintError, match="nested too deeply"):
        blueprint("[stages.work]\nz = " + "[" * 5000 + "]" * 5000 + "\n")
