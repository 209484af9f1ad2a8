"""No Rhai script, value or limit can end the process (issue 12, items 1 and 2, and compile time).

Each case that used to crash the interpreter (a stack overflow, an allocation abort) runs in a
child process, so a regression fails its test instead of killing pytest; the child prints what
the evaluation returned or raised, and its peak memory.
"""

from __future__ import annotations

import contextvars
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from lev_nb.rhai import (
    DEFAULT_LIMITS,
    MAX_NESTING,
    STACK_SIZE,
    Engine,
    RhaiError,
    RhaiLimitError,
    RhaiRuntimeError,
)

ROOT = Path(__file__).resolve().parents[2]

# The child: evaluate one script and print a JSON line with the outcome and the peak memory.
CHILD = """
import json, resource, sys
from lev_nb.rhai import Engine, RhaiError, NotPlainDataError
printed = []
def sink(text):
    printed.append(text)
    print(text[:80], file=sys.stderr, flush=True)  # the last words of a child that dies
spec = json.loads(sys.argv[1])
engine = Engine(on_print=sink, on_debug=sink, **spec["limits"])
try:
    value = engine.eval(spec["source"], **spec.get("variables", {}))
    outcome = {"value": value if isinstance(value, (bool, int, float, str, type(None))) else repr(value)[:200]}
except (RhaiError, NotPlainDataError) as exc:
    outcome = {"error": type(exc).__name__, "message": str(exc)[:300]}
outcome["printed"] = [len(p) for p in printed]
# The peak RSS of this process image: VmHWM, since ru_maxrss keeps the parent's peak across
# fork and exec (a test suite that has grown big would look like a child that did).
hwm = [line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")]
outcome["maxrss_mb"] = int(hwm[0]) // 1024 if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
print(json.dumps(outcome))
"""


def run_isolated(source: str, timeout: float = 120, **limits: object) -> dict[str, object]:
    """Evaluate ``source`` on ``Engine(**limits)`` in a child process; fail if the child dies."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    spec = json.dumps({"source": source, "limits": limits})
    done = subprocess.run(
        [sys.executable, "-c", CHILD, spec], capture_output=True, text=True, timeout=timeout, env=env, check=False
    )
    assert done.returncode == 0, f"the interpreter died (status {done.returncode}): {done.stderr[-2000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


# Every operation that recursed on a value nested 5000 levels deep and overflowed an 8 MiB stack
# (comparison, printing, interpolation, conversion, hashing, cloning, dropping...), each run in
# one child on one deep value; each result, or the error it raised, is collected in a map.
DEEP_OPERATIONS = {
    "eq": "a == a",
    "ne": "a != a",
    "print": "print(a); true",
    "debug": "debug(a); true",
    "interpolate": "`${a}`.len()",
    "to_string": "a.to_string().len()",
    "to_debug": "a.to_debug().len()",
    "contains": "[a].contains(a)",
    "index_of": "[a].index_of(a)",
    "hash": "switch a { 1 => 1, _ => 2 }",
    "clone": "let b = a; b == a",
    "keep": "let b = a; let c = a; true",
    "to_json": "to_json(a).len()",
    "join": 'join([a], ",").len()',
}


def deep_script(build: str) -> str:
    """A script that builds ``a`` with ``build`` and applies every deep operation to it."""
    steps = "".join(
        f'print("{name}"); try {{ r["{name}"] = {{ {op} }}; }} catch (e) {{ r["{name}"] = `error: ${{e}}`; }}\n'
        for name, op in DEEP_OPERATIONS.items()
    )
    return f"{build}\nlet r = #{{}};\n{steps}to_json(r)"


@pytest.mark.parametrize(
    "build",
    ["let a = []; for i in 0..5000 { a = [a]; }", "let a = #{}; for i in 0..5000 { a = #{x: a}; }"],
    ids=["arrays", "maps"],
)
def test_operations_on_deeply_nested_values_do_not_crash(build: str) -> None:
    # Fourteen passes over a 5000-deep value take seconds; on a loaded machine the default 10 s
    # deadline could end the script first, which is not what this test is about.
    outcome = run_isolated(deep_script(build), timeout=300, timeout_ms=240_000)
    results = json.loads(str(outcome["value"]))
    assert results["eq"] is True and results["ne"] is False and results["clone"] is True
    assert results["print"] is True and results["debug"] is True and results["keep"] is True
    assert results["interpolate"] == results["to_string"] >= 10002
    assert results["to_debug"] >= 10002 and results["contains"] is True and results["index_of"] == 0
    assert results["hash"] == 2
    assert "nested deeper" in results["to_json"] and "nested deeper" in results["join"]
    assert outcome["printed"][:3] == [2, 2, 5]  # type: ignore[index]  # the markers "eq", "ne", "print"
    assert max(outcome["printed"]) >= 10002  # type: ignore[arg-type]  # ...and the deep value


@pytest.mark.parametrize(
    ("tail", "error"), [("a", "NotPlainDataError"), ("throw a", "RhaiRuntimeError")]
)
def test_deep_values_returned_or_thrown_reach_python_as_errors(tail: str, error: str) -> None:
    outcome = run_isolated(f"let a = []; for i in 0..2000 {{ a = [a]; }} {tail}")
    assert outcome.get("error") == error, outcome


def test_dropping_a_long_closure_chain_does_not_crash() -> None:
    # Each closure captures the previous one: dropping the chain recurses 200,000 levels.
    source = "let a = 0; for i in 0..200000 { let b = a; a = || b; } 1"
    assert run_isolated(source, max_operations=2_000_000)["value"] == 1


def test_deep_data_at_the_bottom_of_deep_recursion_at_default_limits() -> None:
    # Within the default limits: 60 calls, each inside an expression 40 additions deep, then a
    # comparison of 3000 nested arrays: more native stack than a Python thread has (segfault).
    nest = "n + (" * 40 + "f(n - 1)" + ")" * 40
    source = textwrap.dedent(
        f"""
        fn deep() {{ let a = []; for i in 0..3000 {{ a = [a]; }} if a == a {{ 0 }} else {{ -1 }} }}
        fn f(n) {{ if n == 0 {{ deep() }} else {{ {nest} }} }}
        f(60)
        """
    )
    assert run_isolated(source)["value"] == 40 * sum(range(1, 61))


def test_recursion_past_the_evaluation_stack_is_a_limit_error() -> None:
    # The most calls the limits allow, each inside a deep expression: far more stack than the
    # evaluation thread has, so the stack guard stops it.
    nest = "n + (" * 1000 + "f(n - 1)" + ")" * 1000
    source = f"fn f(n) {{ if n == 0 {{ 0 }} else {{ {nest} }} }} f(8000)"
    outcome = run_isolated(
        source, max_call_levels=8192, max_operations=0, timeout_ms=None, max_function_expr_depth=4096
    )
    assert outcome["error"] == "RhaiLimitError" and "Stack overflow" in outcome["message"], outcome


@pytest.mark.parametrize(
    "limits",
    [
        {"max_call_levels": 100_000},
        {"max_call_levels": -1},
        {"max_operations": -1},
        {"max_string_size": -5},
        {"max_array_size": 0},
        {"max_map_size": 10**30},
        {"max_expr_depth": 0},
        {"max_function_expr_depth": -1},
        {"timeout_ms": -1},
        {"timeout_ms": 2**64},
        {"max_memory": 10},
        {"max_script_size": 0},
        {"max_functions": -1},
        {"max_operations": 0, "max_memory": 1 << 30},  # closure chains could nest too deep
    ],
)
def test_absurd_limits_raise_value_error(limits: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="|".join(limits)):
        Engine(**limits)


def test_limits_must_be_ints_and_known() -> None:
    with pytest.raises(TypeError, match="max_operations must be an int"):
        Engine(max_operations="10")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be an int"):
        Engine(max_call_levels=True)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unexpected keyword argument .max_operation."):
        Engine(max_operation=10)  # type: ignore[call-arg]


def test_absurd_call_levels_do_not_crash_the_process() -> None:
    # Engine(max_call_levels=100000) used to segfault on the first deep recursion.
    child = "from lev_nb.rhai import Engine\ntry:\n    Engine(max_call_levels=100000)\nexcept ValueError as e:\n    print(e)"
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and "max_call_levels" in done.stdout


def test_new_limits_have_defaults_and_are_reported() -> None:
    assert DEFAULT_LIMITS["max_memory"] == 64 << 20
    assert DEFAULT_LIMITS["max_script_size"] == 1 << 20
    assert DEFAULT_LIMITS["max_functions"] == 1000
    custom = Engine(max_memory=8 << 20, max_functions=3, max_script_size=100)
    assert custom.limits["max_memory"] == 8 << 20
    assert STACK_SIZE >= 256 << 20 and MAX_NESTING == 256


# --- item 2: size limits hold before anything is allocated -----------------------------------

PAD_1MB = 'let s = ""; s.pad(999000, "x"); '


@pytest.mark.parametrize(
    ("source", "message"),
    [
        # join() of 10,000 items with a 1 MB separator tried to allocate 10 GB and aborted.
        ('let a = []; a.pad(10000, 1); join(a, s).len()', "Length of string too large"),
        # replace() built a 1 GB string before checking it.
        ('let r = ""; r.pad(1000, "y"); s.replace("x", r); s.len()', "Length of string too large"),
        ('s.replace(\'x\', "yy"); s.len()', "Length of string too large"),
        ('let c = ""; c.pad(999000, ","); split(c, ",").len()', "Size of array/BLOB too large"),
        # Strings as map keys are not counted by Rhai's size limits: 1 GB of keys.
        ("let m = #{}; for i in 0..2000 { m[s + i] = i; } m.len()", "max_memory"),
        # Closures capturing 1 MB strings: 1 GB held, no error.
        ("let fs = []; for i in 0..1000 { let t = s; t += i; fs.push(|| t); } fs.len()", "max_memory"),
    ],
)
def test_size_limits_hold_before_allocating(source: str, message: str) -> None:
    outcome = run_isolated(PAD_1MB + source)
    assert outcome.get("error") == "RhaiLimitError" and message in str(outcome["message"]), outcome
    assert int(outcome["maxrss_mb"]) < 400, outcome


def test_many_scope_variables_holding_big_strings_hit_the_memory_budget() -> None:
    lines = "\n".join(f"let v{i} = s + {i};" for i in range(200))
    outcome = run_isolated(PAD_1MB + lines + "\n1")
    assert outcome.get("error") == "RhaiLimitError" and "max_memory" in str(outcome["message"]), outcome


def test_memory_budget_is_a_limit() -> None:
    small = Engine(max_memory=2 << 20)
    with pytest.raises(RhaiLimitError, match="max_memory"):
        small.eval('let s = ""; s.pad(500000, "x"); let keep = []; for i in 0..10 { let t = s; t += i; keep.push(|| t); } 0')
    assert small.eval("40 + 2") == 42


def test_results_larger_than_the_limits_are_limit_errors() -> None:
    with pytest.raises(RhaiLimitError, match="Length of string too large"):
        Engine(max_string_size=10).eval("v", v="x" * 100)
    with pytest.raises(RhaiLimitError, match="Size of the result too large"):
        Engine(max_memory=1 << 20).eval("v", v={f"key-{i:06}-" + "k" * 1000: i for i in range(1100)})
    with pytest.raises(RhaiLimitError, match="Length of string too large"):
        Engine(max_string_size=1000).eval("let a = []; a.pad(500, 123); to_json(a)")


def test_thrown_values_too_large_to_return_still_raise() -> None:
    with pytest.raises(RhaiRuntimeError) as info:
        Engine(max_string_size=10).eval("throw v", v="x" * 100)
    assert info.value.value is None


# --- item 3: compile time is bounded ---------------------------------------------------------


def test_a_huge_script_is_refused_before_compiling() -> None:
    source = "".join(f"fn f{i}(x) {{ x + {i} }}\n" for i in range(40_000))
    start = time.monotonic()
    with pytest.raises(RhaiLimitError, match="max_script_size"):
        Engine().compile(source)
    assert time.monotonic() - start < 2


def test_too_many_functions_is_a_limit_error() -> None:
    source = "".join(f"fn f{i}(x) {{ x }}\n" for i in range(1001))
    start = time.monotonic()
    with pytest.raises(RhaiLimitError, match="Number of functions"):
        Engine().compile(source)
    assert time.monotonic() - start < 2
    assert Engine(max_functions=2000).compile(source).functions[0] == ("f0", 1)


def test_compilation_runs_under_the_deadline() -> None:
    # Declaring many variables compiles in time quadratic in their number.
    source = "".join(f"let v{i}=0;" for i in range(60_000))
    assert len(source) < DEFAULT_LIMITS["max_script_size"]  # type: ignore[operator]
    for attempt in (Engine(timeout_ms=200).compile, Engine(timeout_ms=200).eval):
        start = time.monotonic()
        with pytest.raises(RhaiLimitError, match="compiling"):
            attempt(source)
        assert time.monotonic() - start < 3


def test_compilation_is_bounded_even_without_a_deadline() -> None:
    # timeout_ms=None used to leave compiling unbounded: 40,000 functions (max_functions raised)
    # or 80,000 variables (1 MiB, inside the default size) compiled for 5 to 30 s. The compile
    # budget (max_compile_ms, 5 s by default) holds whatever the deadline says.
    assert DEFAULT_LIMITS["max_compile_ms"] == 5000
    functions = "".join(f"fn f{i}(x){{x}}\n" for i in range(40_000))
    variables = "".join(f"let v{i}=0;" for i in range(80_000))
    for source in (functions, variables):
        engine = Engine(timeout_ms=None, max_functions=100_000, max_script_size=1 << 21, max_compile_ms=100)
        with pytest.raises(RhaiLimitError, match="max_compile_ms"):
            engine.compile(source)
    with pytest.raises(ValueError, match="max_compile_ms"):
        Engine(max_compile_ms=0)


# --- callbacks still run on the calling thread -----------------------------------------------


def test_callbacks_and_sinks_run_on_the_calling_thread() -> None:
    local = threading.local()
    local.tag = "mine"
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    var.set("set here")
    seen: list[object] = []
    engine = Engine(on_print=lambda text: seen.append((threading.get_ident(), text)))
    engine.register_fn("probe", lambda: [threading.get_ident(), getattr(local, "tag", None), var.get()])
    result = engine.eval('print("hi"); probe()')
    assert result == [threading.get_ident(), "mine", "set here"]
    assert seen == [(threading.get_ident(), "hi")]


def test_a_nested_evaluation_never_outlives_the_outer_deadline() -> None:
    inner = Engine(max_operations=0, timeout_ms=None)
    outer = Engine(timeout_ms=200)
    outer.register_fn("spin", lambda: inner.eval("loop {}"))
    start = time.monotonic()
    with pytest.raises(RhaiError, match="timed out"):
        outer.eval("spin()")
    assert time.monotonic() - start < 5


# --- fuzzing: only a value or a RhaiError, never a crash -------------------------------------

# Runs in a child process (a crash fails the test, not pytest). Hypothesis builds scripts from
# pieces known to stress the engine (deep nesting, closure chains, big strings, size-changing
# helpers, recursion) and random limits within their ranges; every evaluation must return plain
# data or raise RhaiError / NotPlainDataError.
FUZZ_CHILD = r'''
import sys
from hypothesis import HealthCheck, given, settings, strategies as st
from lev_nb.rhai import Engine, NotPlainDataError, RhaiError

small_int = st.integers(min_value=-3, max_value=3)
count = st.sampled_from([0, 1, 2, 10, 300, 1500])
text = st.sampled_from(['""', '"x"', '","', '"ab,cd"', "s", "s + s", '"\\u{1F600}"'])

def exprs(depth):
    leaves = st.one_of(small_int.map(str), text, st.just("a"), st.just("()"), st.just("[]"),
                       st.just("#{}"), st.just("f"), st.just('Fn("g")'))
    if depth == 0:
        return leaves
    sub = exprs(depth - 1)
    return st.one_of(
        leaves,
        st.tuples(sub, sub).map(lambda t: f"[{t[0]}, {t[1]}]"),
        sub.map(lambda e: f"#{{k: {e}}}"),
        st.tuples(sub, sub).map(lambda t: f"({t[0]} == {t[1]})"),
        st.tuples(sub, sub).map(lambda t: f"({t[0]} + {t[1]})"),
        sub.map(lambda e: f"to_json({e})"),
        sub.map(lambda e: f"parse_json(to_json({e}))"),
        sub.map(lambda e: f"`${{{e}}}`"),
        sub.map(lambda e: f"{e}.to_string()"),
        sub.map(lambda e: f"{e}.to_debug()"),
        st.tuples(sub, text).map(lambda t: f"join([{t[0]}, {t[0]}], {t[1]})"),
        st.tuples(text, text).map(lambda t: f"split({t[0]}, {t[1]})"),
        sub.map(lambda e: f"(|| {e}).call()"),
        sub.map(lambda e: f'Fn("g").curry({e})'),
        sub.map(lambda e: f"[{e}].contains({e})"),
        sub.map(lambda e: f"switch {e} {{ 1 => 1, _ => 2 }}"),
        sub.map(lambda e: f"rec({e}, 3)"),
    )

# Options are drawn by index (Hypothesis favours low indexes and would switch some branches of a
# `one_of` off for a whole run): what recursed deepest before comes first, big sizes first.
OPTIONS = [
    st.sampled_from([60_000, 1000]).map(lambda n: f"for i in 0..{n} {{ let b = a; a = || b; }}"),
    st.sampled_from([6000, 100]).map(lambda n: f"let d = down({n});"),
    count.map(lambda n: f"for i in 0..{n} {{ a = [a]; }}"),
    count.map(lambda n: f"for i in 0..{n} {{ a = #{{x: a}}; }}"),
    count.map(lambda n: f"for i in 0..{n} {{ let b = a; a = || b; }}"),
    count.map(lambda n: f"for i in 0..{n} {{ f = Fn(\"g\").curry(f); }}"),
    count.map(lambda n: f"s.pad({n} * 700, \"xy\");"),
    st.tuples(text, text).map(lambda t: f"s.replace({t[0]}, {t[1]});"),
    exprs(2).map(lambda e: f"let v = {e}; a = [v];"),
    exprs(2).map(lambda e: f"print({e});"),
    exprs(2).map(lambda e: f"a = {e};"),
    exprs(1).map(lambda e: f"m[s + {e}.to_string()] = a;"),
    exprs(1).map(lambda e: f"throw {e};"),
]
statements = st.integers(min_value=0, max_value=len(OPTIONS) - 1).flatmap(lambda i: OPTIONS[i])

limits = st.fixed_dictionaries({
    "max_operations": st.sampled_from([0, 1000, 100_000, 1_000_000]),
    "max_call_levels": st.sampled_from([0, 64, 8192, 8192]),
}, optional={
    "max_string_size": st.sampled_from([1, 100, 1_000_000]),
    "max_array_size": st.sampled_from([1, 50, 10_000]),
    "max_map_size": st.sampled_from([1, 50, 10_000]),
    "max_memory": st.sampled_from([1 << 20, 64 << 20]),
    "timeout_ms": st.sampled_from([None, 0, 50, 2000]),
})

PRELUDE = "fn down(n) { if n <= 0 { 0 } else { 1 + down(n - 1) } } fn g(x) { x } fn rec(x, n) { if n <= 0 { x } else { [rec(x, n - 1)] } } let a = []; let s = \"s\"; let f = Fn(\"g\"); let m = #{};\n"

@settings(max_examples=int(sys.argv[1]), deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(st.lists(statements, max_size=6), exprs(3), limits)
def fuzz(body, result, limits):
    try:
        engine = Engine(on_print=lambda _: None, **limits)
    except ValueError:
        return  # a combination refused up front is fine
    try:
        engine.eval(PRELUDE + "\n".join(body) + "\n" + result)
    except (RhaiError, NotPlainDataError):
        pass

fuzz()
print("fuzzed")
'''


@pytest.mark.slow
def test_fuzzed_scripts_return_a_value_or_a_rhai_error() -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run(
        [sys.executable, "-c", FUZZ_CHILD, "400"], capture_output=True, text=True, timeout=300, env=env, check=False
    )
    assert done.returncode == 0 and "fuzzed" in done.stdout, (
        f"status {done.returncode}: {done.stdout[-2000:]} {done.stderr[-4000:]}"
    )


# Python values into scripts and back: any plain value (deep, large, odd floats, huge ints, lone
# surrogates, bytes) through the operations that recurse on values gives back a value or a
# RhaiError; a value that is not plain data (a set, a non-str key, nesting deeper than MAX_NESTING)
# is a TypeError at the boundary.
VALUES_CHILD = r'''
import math, sys
from hypothesis import HealthCheck, given, settings, strategies as st
from lev_nb.rhai import Engine, NotPlainDataError, RhaiError

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=40),
    st.sampled_from(["\ud800", "a\udfffb", "\U0001F600", "x" * 5000]), st.binary(max_size=40),
)
plain = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.tuples(inner, inner),
                            st.dictionaries(st.text(max_size=8), inner, max_size=5)),
    max_leaves=40,
)
OPERATIONS = ["v", "to_json(v)", "v == v", "`${v}`", "[v, v]", "#{k: v}", "v.to_debug()", "[v].contains(v)",
              "parse_json(to_json(v))", "let w = v; w"]
engines = [Engine(), Engine(max_string_size=100, max_array_size=10, max_map_size=10, max_memory=1 << 20)]

def nest(value, depth):
    for _ in range(depth):
        value = [value]
    return value

@settings(max_examples=int(sys.argv[1]), deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(plain, st.sampled_from(OPERATIONS), st.sampled_from([0, 1, 200, 5000]), st.integers(0, 1))
def fuzz(value, op, depth, which):
    try:
        engines[which].eval(op, v=nest(value, depth))
    except (RhaiError, NotPlainDataError):
        pass
    except TypeError as exc:  # deeper than MAX_NESTING: refused at the boundary, by contract
        if depth <= 200 or "nested deeper" not in str(exc):
            raise

fuzz()
for bad in ({1: 2}, {1, 2}, object()):
    try:
        engines[0].eval("v", v=bad)
        raise SystemExit(f"{bad!r} crossed into a script")
    except TypeError:
        pass
print("fuzzed")
'''


def test_fuzzed_values_return_a_value_or_a_rhai_error() -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run(
        [sys.executable, "-c", VALUES_CHILD, "1000"], capture_output=True, text=True, timeout=300, env=env, check=False
    )
    assert done.returncode == 0 and "fuzzed" in done.stdout, (
        f"status {done.returncode}: {done.stdout[-2000:]} {done.stderr[-4000:]}"
    )


# --- the capped first attempt on the calling thread -------------------------------------------


def test_scripts_past_the_first_attempts_caps_run_again_with_the_real_limits() -> None:
    # A pure engine first tries a script on the calling thread with capped operations and sizes;
    # a script past those caps runs again on an evaluation thread, with the same outcome.
    engine = Engine()
    assert engine.eval("let a = []; a.pad(5000, 1); a.len()") == 5000
    assert engine.eval("let n = 0; for i in 0..20000 { n += 1; } n") == 20000
    ast = engine.compile("fn count(k) { let n = 0; for i in 0..k { n += 1; } n }")
    assert [engine.call(ast, "count", k) for k in (10, 20000, 10, 20000)] == [10, 20000, 10, 20000]
    with pytest.raises(RhaiLimitError, match="Too many operations"):
        Engine(max_operations=50_000).eval("let n = 0; for i in 0..100000 { n += 1; } n")
    with pytest.raises(RhaiRuntimeError, match="boom"):
        engine.eval('throw "boom"')


def test_the_first_attempt_keeps_python_inputs_unchanged_for_the_second() -> None:
    # The script changes its inputs, then goes past the caps: the second run sees them intact.
    source = "v.push(1); let n = 0; for i in 0..5000 { n += 1; } v.len() + n"
    assert Engine().eval(source, v=[0, 0]) == 5003


# --- evaluation threads --------------------------------------------------------------------


def _worker_stack_rss_mib() -> list[int]:
    """Resident MiB of each evaluation-thread stack mapping (the 1 GiB ones) of this process."""
    sizes: list[int] = []
    size = 0
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0] if line else ""
        if "-" in head and ":" not in head:
            start, end = (int(x, 16) for x in head.split("-"))
            size = end - start
        elif line.startswith("Rss:") and size >= STACK_SIZE:
            sizes.append(int(line.split()[1]) >> 10)
    return sizes


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs Linux /proc")
def test_a_worker_gives_back_the_stack_a_deep_drop_took() -> None:
    engine = Engine(max_operations=2_000_000)
    engine.register_fn("nop", lambda: 0)  # callbacks: always on an evaluation thread
    assert engine.eval("let a = 0; for i in 0..200000 { let b = a; a = || b; } 1") == 1
    deadline = time.monotonic() + 5
    while max(_worker_stack_rss_mib(), default=0) > 8 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert max(_worker_stack_rss_mib(), default=0) <= 8, _worker_stack_rss_mib()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_forked_child_starts_its_own_evaluation_threads() -> None:
    child = textwrap.dedent(
        """
        import os
        from lev_nb.rhai import Engine
        engine = Engine()
        engine.register_fn("twice", lambda x: 2 * x)
        assert engine.eval("twice(20) + 1") == 41  # the parent's evaluation thread exists
        pid = os.fork()
        if pid == 0:
            os._exit(0 if engine.eval("twice(21)") == 42 and Engine().eval("1 + 1") == 2 else 1)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
        """
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60, env=env, check=False)
    assert done.returncode == 0 and "child 0" in done.stdout, done.stderr


def test_one_entry_point_past_the_caps_does_not_send_the_others_to_a_worker() -> None:
    # Remembered per function: the long one goes straight to an evaluation thread afterwards,
    # the short one keeps its attempt on the calling thread; both stay right.
    engine = Engine(max_operations=1_000_000)
    ast = engine.compile("fn short(s) { s.len() } fn long() { let n = 0; for i in 0..20000 { n += i; } n }")
    for _ in range(3):
        assert engine.call(ast, "long") == sum(range(20000))
        assert engine.call(ast, "short", "abc") == 3


def test_what_callbacks_hand_to_a_script_counts_against_its_memory() -> None:
    # Values a host function returns are allocated on the calling thread; they still count, so
    # dropping many of them cannot buy a script room beyond its budget.
    engine = Engine(max_operations=1_000_000)
    big = "x" * 900_000
    engine.register_fn("fetch", lambda: big)
    source = (
        "for i in 0..200 { let t = fetch(); } "
        'let a = []; let s = ""; s.pad(900000, "x"); for i in 0..100 { let t = s; t += i; a.push(|| t); } 1'
    )
    with pytest.raises(RhaiLimitError, match="max_memory"):
        engine.eval(source)


# --- a lone surrogate (a model's text may hold one) reaches a script as U+FFFD ------------------


def test_a_lone_surrogate_becomes_a_replacement_character() -> None:
    # It used to raise UnicodeEncodeError out of every call: a hook, a validator or a region
    # script given a model's text ended the run as an "internal error".
    engine = Engine()
    assert engine.eval("s", s="a\ud800b\udfff") == "a\ufffdb\ufffd"
    assert engine.eval("m.keys()", m={"k\udc00": 1}) == ["k\ufffd"]
    ast = engine.compile("fn f(x) { x.len() }")
    assert engine.call(ast, "f", "\ud83d") == 1
