"""Tests of the public Rhai binding (lev_nb.rhai) and the native module under it."""

from __future__ import annotations

import json
import threading

import pytest

from lev_nb import _rhai
from lev_nb.rhai import (
    AST,
    DEFAULT_LIMITS,
    MAX_VARIADIC_ARITY,
    Engine,
    NotPlainDataError,
    RhaiError,
    RhaiLimitError,
    RhaiRuntimeError,
    RhaiSyntaxError,
    arities_of,
)


@pytest.fixture
def rhai_engine() -> Engine:
    """A Rhai engine with the default limits."""
    return Engine()


# --- construction and limits ---------------------------------------------------------------


def test_default_limits_are_the_upstream_numbers(rhai_engine: Engine) -> None:
    assert rhai_engine.limits == DEFAULT_LIMITS
    assert rhai_engine.limits["max_operations"] == 100_000
    assert rhai_engine.limits["max_string_size"] == 1_000_000
    assert rhai_engine.limits["max_call_levels"] == 64


def test_limits_are_keyword_arguments() -> None:
    custom = Engine(max_operations=500_000, timeout_ms=None, max_array_size=5)
    assert custom.limits["max_operations"] == 500_000
    assert custom.limits["timeout_ms"] is None
    with pytest.raises(RhaiLimitError):
        custom.eval("let a = []; a.pad(6, 0); a")
    with pytest.raises(TypeError):
        Engine(100)  # type: ignore[misc]  # positional limits are refused


def test_exception_hierarchy() -> None:
    for cls in (RhaiSyntaxError, RhaiRuntimeError, RhaiLimitError):
        assert issubclass(cls, RhaiError)
    assert issubclass(RhaiError, Exception)
    assert RhaiError.__module__ == "lev_nb.rhai"
    assert _rhai.RhaiError is RhaiError


# --- eval / compile / run / call -----------------------------------------------------------


def test_eval_with_variables(rhai_engine: Engine) -> None:
    assert rhai_engine.eval("40 + x", x=2) == 42
    assert rhai_engine.eval('"hello " + params.name', params={"name": "world"}) == "hello world"


def test_missing_map_property_reads_as_unit(rhai_engine: Engine) -> None:
    src = 'if params.count == () { "default" } else { "set" }'
    assert rhai_engine.eval(src, params={"query": "x"}) == "default"


def test_compile_run_and_call(rhai_engine: Engine) -> None:
    ast = rhai_engine.compile("fn add(a, b) { a + b }\nfn shout(s) { s.to_upper() }\nlet z = 3; z * base")
    assert isinstance(ast, AST)
    assert ast.functions == [("add", 2), ("shout", 1)]
    assert rhai_engine.run(ast, base=2) == 6
    lib = rhai_engine.compile("fn add(a, b) { a + b }\nfn shout(s) { s.to_upper() }")
    assert rhai_engine.call(lib, "add", 2, 3) == 5
    assert rhai_engine.call(lib, "shout", "hi") == "HI"


def test_call_runs_top_level_statements_first(rhai_engine: Engine) -> None:
    # As Rhai's call_fn (and the upstream) do: global constants are visible to functions.
    ast = rhai_engine.compile("const LIMIT = 7;\nfn limit() { global::LIMIT }")
    assert rhai_engine.call(ast, "limit") == 7


def test_call_unknown_function_is_runtime_error(rhai_engine: Engine) -> None:
    ast = rhai_engine.compile("fn f(x) { x }")
    with pytest.raises(RhaiRuntimeError, match="nope"):
        rhai_engine.call(ast, "nope", 1)


def test_exit_value_is_the_result(rhai_engine: Engine) -> None:
    assert rhai_engine.eval("exit(5); 6") == 5


def test_unit_result_is_none(rhai_engine: Engine) -> None:
    assert rhai_engine.eval("let x = 1;") is None


# --- errors ----------------------------------------------------------------------------------


def test_throw_keeps_message_line_and_value(rhai_engine: Engine) -> None:
    with pytest.raises(RhaiRuntimeError) as info:
        rhai_engine.eval('let x = 1;\nthrow "boom"')
    err = info.value
    assert err.message == "boom"
    assert err.line == 2
    assert err.position == 1
    assert err.value == "boom"
    assert "boom" in str(err) and "line 2" in str(err)


def test_thrown_map_is_available_as_value(rhai_engine: Engine) -> None:
    with pytest.raises(RhaiRuntimeError) as info:
        rhai_engine.eval('throw #{kind: "rate_limited", retry_after: 3}')
    assert info.value.value == {"kind": "rate_limited", "retry_after": 3}


def test_error_inside_function_reports_the_inner_line(rhai_engine: Engine) -> None:
    with pytest.raises(RhaiRuntimeError) as info:
        rhai_engine.eval('fn f() {\n  throw "deep"\n}\nf()')
    assert info.value.message == "deep"
    assert info.value.line == 2


def test_syntax_error_has_line_and_position(rhai_engine: Engine) -> None:
    with pytest.raises(RhaiSyntaxError) as info:
        rhai_engine.compile("let a = 1;\nlet = ;")
    assert info.value.line == 2
    assert info.value.position is not None
    assert info.value.message


def test_error_without_position_reports_none() -> None:
    err = RhaiError("plain")
    assert err.line is None and err.position is None and err.message is None


# --- sandbox ---------------------------------------------------------------------------------


def test_infinite_loop_hits_the_operation_budget(rhai_engine: Engine) -> None:
    with pytest.raises(RhaiLimitError, match="Too many operations"):
        rhai_engine.eval("loop {}")


def test_limits_cannot_be_caught_by_the_script(rhai_engine: Engine) -> None:
    with pytest.raises(RhaiLimitError):
        rhai_engine.eval('try { loop {} } catch (e) { "caught" }')


def test_deadline_stops_an_unbudgeted_loop() -> None:
    unbounded = Engine(max_operations=0, timeout_ms=50)
    with pytest.raises(RhaiLimitError, match="timed out") as info:
        unbounded.eval("loop {}")
    assert "50 ms" in info.value.message


@pytest.mark.parametrize(
    ("source", "text"),
    [
        ("let f = |n, f| f.call(n + 1, f); f.call(0, f)", "Stack overflow"),
        ("let s = \"\"; s.pad(1000001, 'x'); s", "Length of string too large"),
        ("let a = []; a.pad(10001, 0); a.len()", "Size of array/BLOB too large"),
        ("let m = #{}; for i in 0..10001 { m[`k${i}`] = i; } m.len()", "Size of object map too large"),
    ],
)
def test_size_and_depth_limits(source: str, text: str) -> None:
    rhai_engine = Engine(max_operations=500_000)
    with pytest.raises(RhaiLimitError, match=text):
        rhai_engine.eval(source)
    with pytest.raises(RhaiLimitError):
        rhai_engine.eval(f"try {{ {source} }} catch (e) {{ 0 }}")


def test_deep_expression_fails_to_compile(rhai_engine: Engine) -> None:
    with pytest.raises(RhaiSyntaxError):
        rhai_engine.compile("(" * 300 + "1" + ")" * 300)


def test_eval_is_refused_at_compile_time(rhai_engine: Engine) -> None:
    with pytest.raises(RhaiSyntaxError, match="eval"):
        rhai_engine.compile('eval("1+1")')


def test_import_is_refused(rhai_engine: Engine) -> None:
    with pytest.raises(RhaiRuntimeError, match="Module not found"):
        rhai_engine.eval('import "m" as m; 1')


def test_sleep_is_disabled(rhai_engine: Engine) -> None:
    for src in ("sleep(1000)", "sleep(1e9)"):
        with pytest.raises(RhaiRuntimeError, match="sleep is disabled"):
            rhai_engine.eval(src)


@pytest.mark.parametrize(
    "call",
    ['open_file("/etc/passwd")', 'read_file("x")', 'shell("ls")', 'env_var("HOME")', 'http_get("http://x")'],
)
def test_no_host_io_exists(rhai_engine: Engine, call: str) -> None:
    with pytest.raises(RhaiRuntimeError, match="Function not found"):
        rhai_engine.eval(call)


def test_print_and_debug_are_dropped_by_default(rhai_engine: Engine, capfd: pytest.CaptureFixture[str]) -> None:
    assert rhai_engine.eval('print("p"); debug("d"); "done"') == "done"
    captured = capfd.readouterr()
    assert captured.out == "" and captured.err == ""


def test_print_and_debug_go_to_callbacks() -> None:
    printed: list[str] = []
    debugged: list[str] = []
    rhai_engine = Engine(on_print=printed.append, on_debug=debugged.append)
    assert rhai_engine.eval('print("p"); debug("d"); "done"') == "done"
    assert printed == ["p"]
    assert debugged == ['"d"']


# --- registered Python functions -----------------------------------------------------------


def test_register_fn_with_declared_arities(rhai_engine: Engine) -> None:
    rhai_engine.register_fn("greet", lambda name, punct="!": f"hi {name}{punct}")
    assert rhai_engine.eval('greet("bo")') == "hi bo!"
    assert rhai_engine.eval('greet("bo", "?")') == "hi bo?"
    with pytest.raises(RhaiRuntimeError, match="Function not found"):
        rhai_engine.eval("greet()")


def test_register_variadic(rhai_engine: Engine) -> None:
    rhai_engine.register_fn("total", lambda *xs: sum(xs))
    assert rhai_engine.eval("total()") == 0
    assert rhai_engine.eval("total(1, 2, 3)") == 6
    assert arities_of(lambda *xs: 0) == list(range(0, MAX_VARIADIC_ARITY + 1))


def test_register_explicit_arity(rhai_engine: Engine) -> None:
    rhai_engine.register_fn("pick", lambda *xs: len(xs), arity=[2])
    assert rhai_engine.eval("pick(1, 2)") == 2
    with pytest.raises(RhaiRuntimeError):
        rhai_engine.eval("pick(1)")


def test_registered_function_receives_and_returns_data(rhai_engine: Engine) -> None:
    seen: list[object] = []

    def inspect_it(value: object) -> object:
        seen.append(value)
        return {"echo": value, "n": 1}

    rhai_engine.register_fn("inspect_it", inspect_it)
    out = rhai_engine.eval("inspect_it(#{a: [1, 2.5, (), true, \"s\", 'c']}).echo.a[5]")
    assert out == "c"
    assert seen == [{"a": [1, 2.5, None, True, "s", "c"]}]


def test_method_call_on_registered_function(rhai_engine: Engine) -> None:
    rhai_engine.register_fn("double", lambda s: s * 2)
    assert rhai_engine.eval('let s = "ab"; let d = s.double(); s + d') == "ababab"


def test_python_exception_is_catchable(rhai_engine: Engine) -> None:
    def refuse(url: str) -> str:
        raise PermissionError(f"[denied] {url}")

    rhai_engine.register_fn("fetch", refuse)
    src = 'let r = ""; try { fetch("http://x") } catch (e) { r = `caught: ${e}`; } r'
    assert rhai_engine.eval(src) == "caught: [denied] http://x"
    with pytest.raises(RhaiRuntimeError) as info:
        rhai_engine.eval('fetch("u")')
    assert info.value.message == "[denied] u"


def test_unconvertible_callback_result_is_a_script_error(rhai_engine: Engine) -> None:
    rhai_engine.register_fn("weird", lambda: object())
    with pytest.raises(RhaiRuntimeError, match="weird returned an unusable value"):
        rhai_engine.eval("weird()")


def test_keyboard_interrupt_in_callback_propagates(rhai_engine: Engine) -> None:
    def stop() -> None:
        raise KeyboardInterrupt

    rhai_engine.register_fn("stop", stop)
    with pytest.raises(KeyboardInterrupt):
        rhai_engine.eval('try { stop() } catch (e) { "swallowed" }')
    assert rhai_engine.eval("1") == 1  # the rhai_engine is still usable


def test_reentrant_eval_from_a_callback(rhai_engine: Engine) -> None:
    inner = Engine()
    rhai_engine.register_fn("inner", lambda x: inner.eval("x * 10", x=x))
    assert rhai_engine.eval("inner(4) + 1") == 41


def test_register_rejects_bad_names(rhai_engine: Engine) -> None:
    with pytest.raises(ValueError):
        rhai_engine.register_fn("not a name", lambda: 1)
    with pytest.raises(TypeError):
        rhai_engine.register_fn("x", 42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="keyword-only"):
        rhai_engine.register_fn("kw", lambda *, must: must)


def test_engine_stays_usable_after_many_errors(rhai_engine: Engine) -> None:
    rhai_engine.register_fn("bad", lambda: 1 / 0)
    for _ in range(50):
        with pytest.raises(RhaiRuntimeError, match="division by zero"):
            rhai_engine.eval("bad()")
    assert rhai_engine.eval("2 + 2") == 4


# --- value conversion ------------------------------------------------------------------------


NESTED = {
    "none": None,
    "flag": True,
    "int": -(2**63),
    "float": 1.5,
    "text": "a\u202fb\u200bc",
    "list": [1, [2, [3, {"deep": "yes"}]], []],
    "map": {"inner": {"x": 1}, "empty": {}},
}


def test_nested_round_trip(rhai_engine: Engine) -> None:
    assert rhai_engine.eval("v", v=NESTED) == NESTED
    ast = rhai_engine.compile("fn id(v) { v }")
    assert rhai_engine.call(ast, "id", NESTED) == NESTED


def test_tuple_becomes_list_and_bytes_become_blob(rhai_engine: Engine) -> None:
    assert rhai_engine.eval("v", v=(1, "a")) == [1, "a"]
    assert rhai_engine.eval("type_of(v)", v=b"ab") == "blob"
    assert rhai_engine.eval("v", v=b"ab") == b"ab"


def test_int_beyond_i64_becomes_float(rhai_engine: Engine) -> None:
    assert rhai_engine.eval("type_of(v)", v=2**70) == "f64"
    assert rhai_engine.eval("v", v=2**70) == float(2**70)


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ({1: "x"}, "key 1 (type int) is not a str"),
        (object(), "(type object)"),
        ({1, 2}, "(type set)"),
        (10**400, "too large"),
    ],
)
def test_unconvertible_input_raises_type_error(rhai_engine: Engine, value: object, fragment: str) -> None:
    with pytest.raises(TypeError, match="cannot convert") as info:
        rhai_engine.eval("v", v=value)
    assert fragment in str(info.value)


def test_self_referencing_list_is_refused(rhai_engine: Engine) -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(TypeError, match="nested deeper"):
        rhai_engine.eval("v", v=loop)


def test_unconvertible_result_raises_type_error(rhai_engine: Engine) -> None:
    with pytest.raises(NotPlainDataError, match="'Fn'"):
        rhai_engine.eval("|| 1")
    assert issubclass(NotPlainDataError, TypeError)


def test_char_result_is_str(rhai_engine: Engine) -> None:
    assert rhai_engine.eval("'x'") == "x"


# --- shared helpers: spec §4 cases 9, 10, 13, 31, 32, 33 -------------------------------------


def test_case_9_parse_json_and_to_json(rhai_engine: Engine) -> None:
    assert rhai_engine.eval('let d = parse_json("{\\"a\\": 1}"); to_json(d)') == '{"a":1}'
    assert rhai_engine.eval('let d = parse_json("{\\"k\\":\\"v\\"}"); d.k') == "v"
    assert rhai_engine.eval('parse_json("[1,2]")') == [1, 2]
    assert rhai_engine.eval('parse_json("null")') is None
    with pytest.raises(RhaiRuntimeError) as info:
        rhai_engine.eval('parse_json("not json")')
    assert info.value.message.startswith("parse_json:")


def test_case_10_to_json_is_valid_for_invisible_characters(rhai_engine: Engine) -> None:
    out = rhai_engine.eval('to_json(#{ s: "a\\u202Fb\\u200Bc" })')
    assert "\\u{" not in out
    assert json.loads(out) == {"s": "a\u202fb\u200bc"}
    assert rhai_engine.eval('to_json([1, "x", ()])') == '[1,"x",null]'
    with pytest.raises(RhaiRuntimeError, match="to_json"):
        rhai_engine.eval('to_json(Fn("f"))')


def test_case_13_print_and_debug_are_silent(rhai_engine: Engine, capfd: pytest.CaptureFixture[str]) -> None:
    assert rhai_engine.eval('print("p"); debug("d"); "done"') == "done"
    assert capfd.readouterr() == ("", "")


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('count_tokens("hello world")', 3),
        ('count_tokens("")', 0),
        ('is_json("[1,2,3]")', True),
        ('is_json("{nope")', False),
        ('is_mermaid("flowchart LR")', True),
        ('is_mermaid("plain")', False),
        ('is_markdown("just plain text")', True),
        ('is_markdown("")', False),
        ('is_empty("   ")', True),
        ('is_empty(" x ")', False),
        ('join(["a","b","c"], ",")', "a,b,c"),
        ('join([1, 2], "-")', "1-2"),
        ('split("abc", ",")', ["abc"]),
        ('split("a,b", ",")', ["a", "b"]),
        ('"  hello  ".trim() == "hello"', True),
        ('trim("  x ")', "x"),
        ('contains("haystack", "st")', True),
        ('starts_with("haystack", "hay")', True),
        ('ends_with("haystack", "hay")', False),
        ("[1, 2].is_empty()", False),
    ],
)
def test_case_31_text_helpers(rhai_engine: Engine, source: str, expected: object) -> None:
    assert rhai_engine.eval(source) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("tokens_remaining(100, 30)", 70),
        ("tokens_remaining(-9223372036854775807 - 1, 1)", -(2**63)),
        ("usage_ratio(0, 50)", 1.0),
        ("usage_ratio(100, 25)", 0.25),
        ("needs_eviction(100, 80, 0.8)", True),
        ("needs_eviction(100, 10, 0.8)", False),
        ('content_format("bogus")', "text"),
        ('content_format("json")', "json"),
        ("region_sliding_window(10)", {"kind": "sliding_window", "max_items": 10}),
        ("region_compacting(500)", {"kind": "compacting", "threshold_tokens": 500}),
        ('region_custom("x.rhai", true)', {"kind": "custom", "script": "x.rhai", "persistent": True}),
        ('region_entry("c", 2)', {"content": "c", "tokens": 2}),
        ("region_pinned()", "pinned"),
        ("region_temporary()", "temporary"),
        ("region_clearable()", "clearable"),
    ],
)
def test_case_32_region_helpers(rhai_engine: Engine, source: str, expected: object) -> None:
    assert rhai_engine.eval(source) == expected


def test_case_33_budget_stops_a_long_loop(rhai_engine: Engine) -> None:
    with pytest.raises(RhaiLimitError):
        rhai_engine.eval("let n = 0; for i in 0..250000 { n += 1; } n")
    assert Engine(max_operations=2_000_000).eval("let n = 0; for i in 0..250000 { n += 1; } n") == 250_000


# --- concurrency -----------------------------------------------------------------------------


def test_same_ast_from_eight_threads() -> None:
    rhai_engine = Engine()
    rhai_engine.register_fn("py_square", lambda x: x * x)
    ast = rhai_engine.compile("fn work(n, tag) { let s = 0; for i in 0..n { s += py_square(i); } `${tag}:${s}` }")
    results: dict[int, str] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def worker(k: int) -> None:
        try:
            barrier.wait()
            for _ in range(20):
                results[k] = rhai_engine.call(ast, "work", 50 + k, f"t{k}")
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for k in range(8):
        n = 50 + k
        assert results[k] == f"t{k}:{sum(i * i for i in range(n))}"


@pytest.mark.slow
def test_long_script_does_not_block_other_python_threads() -> None:
    ticks = 0
    stop = threading.Event()
    ticks_during_script: list[int] = []

    def counter() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1

    def on_print(_: str) -> None:
        ticks_during_script.append(ticks)

    rhai_engine = Engine(max_operations=0, timeout_ms=None, on_print=on_print)
    thread = threading.Thread(target=counter)
    thread.start()
    try:
        # Prints a marker, burns CPU inside Rhai (no GIL held), then prints again.
        rhai_engine.eval('print("start"); let n = 0; for i in 0..3000000 { n += i; } print("end"); n')
    finally:
        stop.set()
        thread.join()
    start, end = ticks_during_script
    assert end > start, "the counter thread made no progress while Rhai ran"


def test_deep_recursion_stops_and_is_uncatchable(rhai_engine: Engine) -> None:
    with pytest.raises(RhaiLimitError, match="Stack overflow"):
        rhai_engine.eval("fn f(n) { f(n + 1) } f(0)")
    with pytest.raises(RhaiLimitError, match="Stack overflow"):
        rhai_engine.eval('fn f(n) { f(n + 1) } try { f(0) } catch (e) { "caught" }')


def test_reference_cycle_through_a_callback_is_collected() -> None:
    import gc
    import weakref

    class Marker:
        pass

    class Callback:
        def __init__(self, *refs: object) -> None:
            self.refs = refs

        def __call__(self) -> int:
            return 1

    collected: list[int] = []
    marker = Marker()
    weakref.finalize(marker, collected.append, 1)
    rhai_engine = Engine()
    rhai_engine.register_fn("me", Callback(rhai_engine, marker))  # the rhai_engine now refers to itself
    assert rhai_engine.eval("me()") == 1
    del rhai_engine, marker
    assert collected == []  # only the cycle collector can free it
    gc.collect()
    assert collected == [1]


# -- values converted once ------------------------------------------------------------------------
def test_a_value_converted_once_is_handed_to_scripts_as_its_data() -> None:
    from lev_nb.rhai import Value

    engine = Engine()
    held = Value({"role": "user", "content": [{"type": "text", "text": "hi"}], "n": 3})
    assert held.to_python() == {"role": "user", "content": [{"type": "text", "text": "hi"}], "n": 3}
    ast = engine.compile("fn first(r) { r.messages[0].content[0].text + r.messages.len() }")
    assert engine.call(ast, "first", {"messages": [held, held, held]}) == "hi3"
    assert engine.call(ast, "first", {"messages": (held,)}) == "hi1"
    # A script changing what it was handed changes its own copy, never the held value.
    change = engine.compile("fn change(r) { r.content[0].text = \"changed\"; r.content[0].text }")
    assert engine.call(change, "change", held) == "changed"
    assert engine.call(ast, "first", {"messages": [held]}) == "hi1"


def test_values_nested_in_values_stay_within_the_nesting_limit() -> None:
    from lev_nb.rhai import MAX_NESTING, Value

    deep: object = 1
    for _ in range(MAX_NESTING - 10):
        deep = [deep]
    held = Value(deep)
    Value([[held]])  # within the limit in all
    wrapped: object = held
    for _ in range(20):
        wrapped = [wrapped]
    with pytest.raises(TypeError, match="nested deeper than"):
        Value(wrapped)
    with pytest.raises(TypeError, match="cannot convert"):
        Value({"a": object()})
