"""The checks of an evaluation, one kind at a time: built in, Rhai scorers (on the hardened engine
and budget), Python callables, and a model as judge (a scripted model answering as the judge)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from lev_nb.errors import UsageError
from lev_nb.eval import Answer, Case, Judge, contains, equals, json_field, json_schema, parse_check, regex, scorer
from lev_nb.eval.checks import as_check
from lev_nb.providers import ScriptedModel
from lev_nb.scripting import ScriptError


def case(expected: object = None, **row: object) -> Case:
    return Case(0, "label R-1", {}, expected, {"task": "label R-1", "expected": expected, **row})


def ok(check: object, content: str, c: Case | None = None) -> tuple[bool, str]:
    verdict = as_check(check)(Answer(content, "text"), c or case())
    return verdict.passed, verdict.reason


def test_equals_compares_the_trimmed_answer_with_the_expected_value_or_its_own() -> None:
    assert ok(equals(), " bug \n", case("bug")) == (True, "")
    assert ok(equals(), "feature", case("bug")) == (False, "expected 'bug', got 'feature'")
    assert ok(equals("Bug", ignore_case=True), "bug") == (True, "")
    assert ok(equals(), "bug", case(None)) == (False, "equals: row 1 has no 'expected' value to compare with")


def test_contains_ignores_case_like_the_upstream_and_takes_a_list() -> None:
    assert ok(contains(), "R-1,BUG,crash", case("r-1,bug"))[0]
    assert ok(contains(["bug", "crash"]), "a bug") == (False, "does not contain 'crash'")
    assert not ok(contains("BUG", case_sensitive=True), "bug")[0]


def test_regex_searches_and_a_bad_pattern_is_refused_at_once() -> None:
    assert ok(regex(r"R-\d+,(bug|feature)"), "id\nR-7,feature")[0]
    assert ok(regex(r"^\d+$"), "twelve") == (False, r"does not match /^\d+$/")
    with pytest.raises(UsageError, match="does not compile"):
        regex("(")


def test_json_schema_names_the_field_that_breaks_it(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"total": {"type": "number"}}, "required": ["total"]}
    assert ok(json_schema(schema), '{"total": 3}')[0]
    assert ok(json_schema(schema), '{"total": "3"}') == (False, "total: '3' is not of type 'number'")
    assert ok(json_schema(schema), "total: 3")[1].startswith("the answer is not JSON")
    (tmp_path / "s.json").write_text(json.dumps(schema))
    assert not ok(parse_check(f"schema:{tmp_path / 's.json'}"), "{}")[0]


def test_json_field_follows_a_dotted_path_to_the_expected_value() -> None:
    answer = '{"orders": [{"id": "A-1", "total": 12.5}]}'
    assert ok(json_field("orders.0.id"), answer, case("A-1"))[0]
    assert ok(json_field("orders.0.total", 12.5), answer)[0]
    assert ok(parse_check("field:orders.0.total=12.5"), answer)[0]  # a text value read as JSON
    assert ok(json_field("orders.1.id"), answer, case("A-2")) == (False, "no field 'orders.1.id' in the answer")
    assert ok(json_field("orders.0.id", "B"), answer) == (False, "orders.0.id: expected 'B', got 'A-1'")


def test_a_rhai_scorer_returns_a_bool_a_number_or_a_reason(tmp_path: Path) -> None:
    source = """
    fn score(answer, row) {
        if row.kind == "bool" { return answer.contains(row.expected); }
        if row.kind == "number" { return answer.len() / 10.0; }
        if answer.contains(row.expected) { "" } else { `wanted ${row.expected}` }
    }
    """
    check = scorer(source=source, label="label.rhai")
    assert ok(check, "R-1,bug", case("bug", kind="bool")) == (True, "")
    assert ok(check, "R-1,feature", case("bug", kind="bool")) == (False, "label.rhai: score returned false")
    assert ok(check, "0123456789", case("bug", kind="number"))[0]
    assert ok(check, "0123", case("bug", kind="number")) == (False, "label.rhai: score 0.4 is below 0.5")
    assert ok(check, "R-1,feature", case("bug", kind="reason")) == (False, "wanted bug")
    (tmp_path / "s.rhai").write_text(source)
    assert parse_check(str(tmp_path / "s.rhai")).name == "rhai:s.rhai"


def test_a_scorer_runs_on_the_hardened_engine_and_its_budget() -> None:
    looping = scorer(source="fn score(answer, row) { loop { } }", label="loop.rhai")
    passed, reason = ok(looping, "x")
    assert not passed and "Too many operations" in reason  # stopped by the operation budget
    with pytest.raises(ScriptError, match="fn score must take two parameters"):
        scorer(source="fn score(answer) { true }")
    with pytest.raises(ScriptError, match="line 1"):
        scorer(source="fn score(a, b) { 1 +* }")


def test_a_python_callable_may_return_a_bool_a_number_a_reason_or_a_pair() -> None:
    def short(answer: Answer, c: Case) -> tuple[bool, str]:
        return len(answer.content or "") < 5, "too long"

    assert ok(short, "abc") == (True, "")
    assert ok(short, "abcdef") == (False, "too long")
    assert ok(lambda a, c: 0.9, "x")[0]
    assert ok(lambda a, c: "no", "x") == (False, "no")
    assert ok(lambda a, c: a.format == "text", "x")[0]


def test_a_string_that_names_no_check_says_which_forms_exist() -> None:
    with pytest.raises(UsageError, match="regex:PATTERN"):
        parse_check("regexp:x")


def test_a_model_judges_with_a_rubric_and_its_cost_is_counted_apart() -> None:
    model = ScriptedModel({"judge": [
        {"text": '{"pass": true, "reason": "labels the crash a bug"}', "usage": {"prompt_tokens": 90, "completion_tokens": 10}},
        {"text": "FAIL: calls a crash a feature"},
        {"text": "I think it is fine"},
    ]})
    judge = Judge("The label must be right for the report.", model=model)
    first = judge(Answer("R-1,bug"), case("bug"))
    assert (first.passed, first.tokens) == (True, 100)
    assert judge(Answer("R-1,feature"), case("bug")).reason == "calls a crash a feature"
    unreadable = judge(Answer("R-1,bug"), case("bug"))
    assert not unreadable.passed and "could not be read" in unreadable.reason  # never taken for a pass
    request = model.requests[0]
    assert request.stage == "judge" and "The label must be right" in request.messages[0].content
    assert "Expected answer:\nbug" in request.messages[0].content and "R-1,bug" in request.messages[0].content


def test_a_priced_judge_reports_what_its_calls_cost() -> None:
    from lev_nb.messages import ModelResponse, Usage

    class Priced:
        name = "anthropic/claude-haiku-4-5"

        async def complete(self, request: object) -> ModelResponse:
            return ModelResponse(text='{"pass": false, "reason": "wrong"}',
                                 usage=Usage(prompt_tokens=1_000_000, completion_tokens=0))

    verdict = asyncio.run(Judge("rubric", model=Priced()).ajudge(Answer("x"), case("y")))
    assert (verdict.passed, verdict.reason) == (False, "wrong") and verdict.cost_usd > 0


def test_a_judge_without_its_providers_key_is_refused_before_any_run(home: object) -> None:
    import lev_nb

    judge = Judge("rubric")  # Claude Haiku by default; the tests have no key
    assert judge.missing_key() == ("the judge's model anthropic/claude-haiku-4-5 needs an API key: "
                                   "ANTHROPIC_API_KEY is not set")
    with pytest.raises(UsageError, match="needs an API key"):
        lev_nb.evaluate("triage", ["R-1"], checks=[judge], model="mock", processes=1)
