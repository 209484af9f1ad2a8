"""JSON-Schema argument validation messages."""

from __future__ import annotations

from lev_nb.tools import default_registry, validate_arguments

SCHEMA = default_registry().get("write_file").parameters


def test_valid_arguments_pass():
    assert validate_arguments("write_file", SCHEMA, {"path": "a", "content": "b"}) is None


def test_null_arguments_count_as_empty_object():
    assert validate_arguments("list_dir", {"type": "object", "properties": {}}, None) is None
    assert validate_arguments("write_file", SCHEMA, None) == (
        "[error] invalid arguments for 'write_file': 'content' is a required property; 'path' is a required property"
    )


def test_wrong_type_names_the_field():
    assert validate_arguments("write_file", SCHEMA, {"path": 3, "content": "x"}) == (
        "[error] invalid arguments for 'write_file': /path: 3 is not of type 'string'"
    )


def test_at_most_three_violations_then_a_count():
    schema = {"type": "object", "required": ["a", "b", "c", "d", "e"]}
    text = validate_arguments("t", schema, {})
    assert text.count("is a required property") == 3
    assert text.endswith("; (and 2 more)")


def test_each_violation_is_cut_to_256_bytes():
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
    text = validate_arguments("t", schema, {"x": "é" * 500})
    violation = text.split(": ", 1)[1]
    assert len(violation.encode("utf-8")) <= 256
    violation.encode("utf-8").decode("utf-8")  # still valid UTF-8 after the cut


def test_uncompilable_schema_skips_validation():
    assert validate_arguments("t", {"type": "not-a-type"}, {"anything": 1}) is None


def test_non_object_arguments_are_reported():
    assert validate_arguments("write_file", SCHEMA, ["a"]).startswith("[error] invalid arguments for 'write_file': ['a'] is not of type 'object'")


# -- the quick check that spares a tool call jsonschema (lev_nb.schemas.certainly_valid) --------
from hypothesis import given, settings as hsettings, strategies as st  # noqa: E402

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=False, allow_infinity=False, width=16)
    | st.sampled_from(["", "a", "path.txt", "notes"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["path", "paths", "content", "region", "id", "key", "x"]), inner, max_size=4),
    max_leaves=8,
)


def _builtin_schemas() -> list[dict]:
    from lev_nb.tools.builtin import default_registry

    registry = default_registry()
    return [registry.get(n).parameters for n in registry.names() if registry.get(n).parameters] + [
        {"type": "object", "properties": {"n": {"type": "integer", "minimum": 3}}},
        {"type": "object", "properties": {"e": {"enum": [1, "a", True]}}, "additionalProperties": False},
        {"type": "array", "items": {"type": "number"}},
        {},
    ]


@hsettings(max_examples=300, deadline=None)
@given(schema=st.sampled_from(_builtin_schemas()), value=_JSON)
def test_the_quick_check_never_passes_what_jsonschema_refuses(schema, value) -> None:
    import jsonschema

    from lev_nb.schemas import certainly_valid

    if certainly_valid(schema, value):
        assert not list(jsonschema.validators.validator_for(schema)(schema).iter_errors(value))


def test_the_quick_check_passes_plain_tool_arguments() -> None:
    from lev_nb.schemas import certainly_valid
    from lev_nb.tools.builtin import default_registry

    registry = default_registry()
    assert certainly_valid(registry.get("write_file").parameters, {"path": "a.txt", "content": "hi"})
    assert certainly_valid(registry.get("read_files").parameters, {"paths": ["a", "b"]})
    assert not certainly_valid(registry.get("write_file").parameters, {"path": "a.txt"})  # jsonschema says why
