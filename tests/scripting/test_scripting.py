"""Tests of the script kinds (lev_nb.scripting): spec/rhai.md §4 cases 1-8 and 16-30."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from lev_nb.scripting import (
    HOOK_NAMES,
    HOST_RESULT_LIMIT,
    Allow,
    Cancel,
    DenyAllHost,
    Invalid,
    Modify,
    Retry,
    ScriptError,
    ToolHost,
    Unusable,
    Valid,
    compile_hooks,
    compile_region_script,
    compile_validator,
    discover_tools,
    parse_tool_script,
    run_tool,
)


class FakeHost:
    """Returns canned answers and records what it was asked."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def http_get(self, url: str, headers: dict[str, str]) -> str:
        self.calls.append(("http_get", (url, headers)))
        return "GET-OK"

    def http_post(self, url: str, body: str, headers: dict[str, str]) -> str:
        self.calls.append(("http_post", (url, body, headers)))
        return "POST-OK"

    def shell(self, command: str) -> str:
        self.calls.append(("shell", (command,)))
        return "SHELL-OK"

    def read_file(self, path: str) -> str:
        self.calls.append(("read_file", (path,)))
        return "READ-OK"

    def write_file(self, path: str, content: str) -> str:
        self.calls.append(("write_file", (path, content)))
        return f"WROTE:{path}={content}"

    def env_var(self, name: str) -> str:
        self.calls.append(("env_var", (name,)))
        return "ENV-OK"


def tool(body: str, name: str = "t") -> Any:
    return parse_tool_script(source=f"// @tool {name}\n{body}", label="t.rhai")


def execute(body: str, params: Any = None, host: ToolHost | None = None) -> str:
    return run_tool(tool(body), {} if params is None else params, host or FakeHost(), validate_arguments=False)


# --- tools: execution (cases 1-8) ------------------------------------------------------------


def test_case_1_params_in_scope() -> None:
    assert execute('"hello " + params.name', {"name": "world"}) == "hello world"


def test_case_2_result_to_text() -> None:
    assert execute("[1, 2, 3]") == "[1,2,3]"
    assert execute("let x = 1;") == ""
    assert execute('#{b: 1, a: "é"}') == '{"a":"é","b":1}'
    assert execute("|| 1").startswith("[error] cannot serialize result")


def test_case_3_missing_optional_param_is_unit() -> None:
    assert execute('if params.count == () { "default" } else { "set" }', {"query": "x"}) == "default"


def test_case_4_throw_becomes_error_text() -> None:
    out = execute('throw "boom"')
    assert out.startswith("[error] t:")
    assert "boom" in out
    assert out == "[error] t: Runtime error: boom (line 2, position 1)"


def test_case_5_http_get_headers() -> None:
    host = FakeHost()
    assert execute('http_get("http://x")', host=host) == "GET-OK"
    assert execute('http_get("http://x", #{ "K": "V" })', host=host) == "GET-OK"
    assert execute('http_get("http://x", #{ n: 42, b: true })', host=host) == "GET-OK"
    assert host.calls == [
        ("http_get", ("http://x", {})),
        ("http_get", ("http://x", {"K": "V"})),
        ("http_get", ("http://x", {"b": "true", "n": "42"})),
    ]


def test_case_6_every_host_function() -> None:
    host = FakeHost()
    assert execute('http_post("http://x", "b", #{ "H": "1" })', host=host) == "POST-OK"
    assert host.calls[-1] == ("http_post", ("http://x", "b", {"H": "1"}))
    assert execute('http_post("http://x", "b")', host=host) == "POST-OK"
    assert execute('shell("ls")', host=host) == "SHELL-OK"
    assert execute('read_file("a")', host=host) == "READ-OK"
    assert execute('env_var("A")', host=host) == "ENV-OK"
    assert execute('write_file("out.txt", "body")', host=host) == "WROTE:out.txt=body"


def test_case_7_denial_is_visible_and_catchable() -> None:
    assert "[denied]" in execute('http_get("http://x")', host=DenyAllHost())
    assert "http_get" in execute('http_get("http://x")', host=DenyAllHost())
    caught = execute('let r = ""; try { env_var("X") } catch (e) { r = `${e}`; } r', host=DenyAllHost())
    assert caught.startswith("[denied]") and "env_var" in caught


def test_case_8_host_failure_is_contained() -> None:
    class BrokenHost(FakeHost):
        def http_get(self, url: str, headers: dict[str, str]) -> str:
            raise RuntimeError("TLS init failed")

    out = execute('http_get("http://x")', host=BrokenHost())
    assert out.startswith("[error] t: ") and "TLS init failed" in out
    assert execute('shell("ls")', host=BrokenHost()) == "SHELL-OK"


def test_host_returning_non_text_is_an_error() -> None:
    class OddHost(FakeHost):
        def read_file(self, path: str) -> str:
            return 42  # type: ignore[return-value]

    assert "not text" in execute('read_file("a")', host=OddHost())


def test_host_output_is_capped() -> None:
    class BigHost(FakeHost):
        def read_file(self, path: str) -> str:
            return "é" * HOST_RESULT_LIMIT  # twice the byte limit

    out = execute('let s = read_file("a"); s.bytes', host=BigHost())
    assert HOST_RESULT_LIMIT - 2 <= int(out) < HOST_RESULT_LIMIT + 100


def test_wrong_argument_type_to_host_function() -> None:
    assert "must be a string" in execute("read_file(42)")


def test_default_host_denies() -> None:
    assert "[denied]" in run_tool(tool('shell("ls")'), {})


def test_tool_budget_is_500k() -> None:
    # ~300k operations: over the 100k default, under the tool budget.
    assert execute("let n = 0; for i in 0..60000 { n += 1; } n") == "60000"
    assert "Too many operations" in execute("loop {}")


def test_arguments_are_validated_against_the_schema() -> None:
    script = parse_tool_script(source='// @tool t\n// @param n integer required "N"\nparams.n * 2', label="t.rhai")
    assert run_tool(script, {"n": 4}, FakeHost()) == "8"
    refused = run_tool(script, {"n": "four"}, FakeHost())
    assert refused.startswith("[error] t: invalid arguments")
    assert run_tool(script, {}, FakeHost()).startswith("[error] t: invalid arguments")


def test_tool_scripts_compile_with_the_hardened_engine() -> None:
    # The upstream compiled tools without the policy; here eval never compiles.
    with pytest.raises(ScriptError, match="eval"):
        parse_tool_script(source='// @tool t\neval(http_get("http://x"))', label="t.rhai")


# --- tools: metadata (cases 16-20) ----------------------------------------------------------


def test_case_16_annotations() -> None:
    script = parse_tool_script(
        source=(
            "// @tool web_search\n// @description Search\n"
            '// @param query string required "Search query"\n'
            '// @param count integer optional "How many"\nparams.query'
        ),
        label="web_search.rhai",
    )
    assert script.name == "web_search"
    assert script.description == "Search"
    assert [(p.name, p.type, p.required, p.description) for p in script.params] == [
        ("query", "string", True, "Search query"),
        ("count", "integer", False, "How many"),
    ]
    assert script.parameters_schema == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Search query"},
            "count": {"type": "integer", "description": "How many"},
        },
        "required": ["query"],
    }


def test_case_17_requires_with_aliases() -> None:
    script = tool("1", name="t\n// @requires network, shell\n// @requires filesystem")
    assert script.requires == ("network", "shell", "filesystem")
    aliased = tool("1", name="t\n// @requires net,process fs\thttp")
    assert aliased.requires == ("network", "shell", "filesystem")


def test_last_tool_and_description_win() -> None:
    script = parse_tool_script(source="// @tool a\n// @description one\n// @tool b\n// @description two\n1")
    assert (script.name, script.description) == ("b", "two")


@pytest.mark.parametrize(
    ("source", "fragment", "line"),
    [
        ("let x = 1;", "missing a `// @tool", None),
        ("// @tool   \n1", "requires a tool name", 1),
        ("// @tool t\n// @param x string\n1", "requires `<name> <type>", 2),
        ("// @tool t\n// @param x string maybe\n1", "must be `required` or `optional`", 2),
    ],
)
def test_case_18_annotation_errors(source: str, fragment: str, line: int | None) -> None:
    with pytest.raises(ScriptError) as info:
        parse_tool_script(source=source, label="bad.rhai")
    assert fragment in str(info.value)
    assert "bad.rhai" in str(info.value)
    assert info.value.line == line


def test_syntax_error_in_tool_names_file_and_line(tmp_path: Path) -> None:
    file = tmp_path / "broken.rhai"
    file.write_text("// @tool b\nlet = ;\n")
    with pytest.raises(ScriptError) as info:
        parse_tool_script(file)
    assert str(info.value).startswith(f"Script compilation failed: {file}")
    assert info.value.line == 2
    assert info.value.path == str(file)


def test_case_19_sibling_manifest(tmp_path: Path) -> None:
    (tmp_path / "ann.rhai").write_text("// @tool ann\n// @param x string required\n1")
    (tmp_path / "ann.toml").write_text(
        '[tool]\nname = "override"\ndescription = "From TOML"\nrequires = ["net"]\n'
        '[[tool.params]]\nname = "mode"\nrequired = true\nschema = {type="string", enum=["a","b"]}\n'
        '[[tool.params]]\nname = "n"\ntype = "integer"\ndescription = "count"\n'
    )
    script = parse_tool_script(tmp_path / "ann.rhai")
    assert script.name == "override"
    assert script.description == "From TOML"
    assert script.requires == ("network",)
    assert script.parameters_schema == {
        "type": "object",
        "properties": {
            "mode": {"type": "string", "enum": ["a", "b"]},
            "n": {"type": "integer", "description": "count"},
        },
        "required": ["mode"],
    }


def test_case_19_broken_manifest_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "bad.rhai").write_text("// @tool bad\n1")
    (tmp_path / "bad.toml").write_text("[tool\nname=")
    (tmp_path / "empty.rhai").write_text("// @tool e\n1")
    (tmp_path / "empty.toml").write_text('[tool]\nname = ""\n')
    tools, skipped = discover_tools([tmp_path])
    assert tools == {}
    reasons = {s.path.name: s.reason for s in skipped}
    assert "tool.toml" in reasons["bad.rhai"]
    assert "must not be empty" in reasons["empty.rhai"]


def test_case_20_discovery(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (first / "dup.rhai").write_text('// @tool dup\n"first"')
    (second / "dup.rhai").write_text('// @tool dup\n"second"')
    (second / "other.rhai").write_text('// @tool other\n"o"')
    (second / "notes.txt").write_text("// @tool ignored\n")
    (second / "broken.rhai").write_text("// @tool broken\nlet = ;")
    tools, skipped = discover_tools([first, tmp_path / "missing", second])
    assert sorted(tools) == ["dup", "other"]
    assert run_tool(tools["dup"], {}, FakeHost()) == "first"
    assert tools["dup"].path == first / "dup.rhai"
    by_name = {s.path.name: s.reason for s in skipped}
    assert "Script compilation failed" in by_name["broken.rhai"]
    assert "already provided" in by_name["dup.rhai"]
    assert "notes.txt" not in by_name


def test_discovery_filters_reserved_names_and_unknown_capabilities(tmp_path: Path) -> None:
    (tmp_path / "a.rhai").write_text("// @tool read_file\n1")
    (tmp_path / "b.rhai").write_text("// @tool b\n// @requires teleport\n1")
    tools, skipped = discover_tools([tmp_path], reserved={"read_file"})
    assert tools == {}
    reasons = sorted(s.reason for s in skipped)
    assert "reserved" in reasons[1] and "teleport" in reasons[0]


# --- validators (cases 21-23) ---------------------------------------------------------------


def validator(body: str) -> Any:
    return compile_validator(source=f"fn validate(c) {{ {body} }}", label="validators/x.rhai")


@pytest.mark.parametrize(
    ("body", "verdict"),
    [
        ("()", Valid()),
        ('""', Valid()),
        ('"   "', Valid()),
        ('"the document has no root node"', Invalid("the document has no root node")),
    ],
)
def test_case_21_verdicts(body: str, verdict: object) -> None:
    assert validator(body).check("anything") == verdict


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("42", "() or a string"),
        ('throw "boom"', "boom"),
        ("loop { }", "Too many operations"),
        ("|| 1", "() or a string"),
    ],
)
def test_case_21_unusable(body: str, fragment: str) -> None:
    verdict = validator(body).check("x")
    assert isinstance(verdict, Unusable)
    assert fragment in verdict.message
    assert "validators/x.rhai" in verdict.message


def test_case_22_parse_json_validator() -> None:
    v = compile_validator(
        source='fn validate(c){ let d = parse_json(c); if d.root == () { return "missing `root`"; } () }',
        label="v.rhai",
    )
    assert v.check('{"root":{"a":1}}') == Valid()
    assert v.check('{"other":1}') == Invalid("missing `root`")
    assert isinstance(v.check("not json"), Unusable)


def test_case_23_compile_errors(tmp_path: Path) -> None:
    with pytest.raises(ScriptError, match="must define fn validate"):
        compile_validator(source="fn other(x){()}", label="v.rhai")
    with pytest.raises(ScriptError, match="exactly one parameter") as info:
        compile_validator(source="// header\nfn validate(a,b){()}", label="v.rhai")
    assert "found 2" in str(info.value) and info.value.line == 2
    file = tmp_path / "syntax.rhai"
    file.write_text("fn validate(c) { let = ; }")
    with pytest.raises(ScriptError) as info:
        compile_validator(file)
    assert str(file) in str(info.value)
    assert str(info.value).startswith("Script compilation failed: ")


def test_validator_from_file_uses_path_as_label(tmp_path: Path) -> None:
    file = tmp_path / "v.rhai"
    file.write_text('fn validate(c) { throw "nope" }')
    verdict = compile_validator(file).check("x")
    assert isinstance(verdict, Unusable) and verdict.message.startswith(f"{file}: validate: ")


def test_missing_file_is_a_script_error(tmp_path: Path) -> None:
    with pytest.raises(ScriptError, match="cannot read"):
        compile_validator(tmp_path / "absent.rhai")


def test_validator_is_shared_across_threads() -> None:
    v = compile_validator(source='fn validate(c) { if c.len() > 3 { "long" } else { () } }', label="v")
    results: list[object] = [None] * 16

    def work(i: int) -> None:
        results[i] = v.check("x" * i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [Valid()] * 4 + [Invalid("long")] * 12


# --- stage hooks (cases 24-27) ---------------------------------------------------------------


def hook(body: str) -> Any:
    return compile_hooks(source=f"fn on_stage_enter(ctx) {{ {body} }}", wanted=["on_stage_enter"], label="hooks.rhai")


@pytest.mark.parametrize(
    ("body", "outcome"),
    [
        ("()", Allow()),
        ("true", Allow()),
        ("false", Cancel(None)),
        ('#{action:"allow"}', Allow()),
        ('#{action:"modify", value:#{notes:"seeded"}}', Modify({"notes": "seeded"})),
        ('#{action:"cancel", reason:"over budget"}', Cancel("over budget")),
        ('#{action:"cancel"}', Cancel(None)),
        ('#{action:"cancel", reason: 3}', Cancel(None)),
        ('#{action:"retry"}', Retry()),
    ],
)
def test_case_24_outcomes(body: str, outcome: object) -> None:
    assert hook(body).run("on_stage_enter", {"stage": "main"}) == outcome


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ('#{action:"modfiy"}', "unknown action 'modfiy'"),
        ("#{value:1}", "no 'action'"),
        ('#{action:"modify"}', "needs a 'value'"),
        ("42", "expected (), a bool, or a map"),
        ("[1]", "expected (), a bool, or a map"),
        ("|| 1", "not plain data"),
        ('throw "nope"', "nope"),
        ("while true {}", "Too many operations"),
    ],
)
def test_case_25_errors(body: str, fragment: str) -> None:
    with pytest.raises(ScriptError) as info:
        hook(body).run("on_stage_enter", {"stage": "main"})
    assert fragment in str(info.value)
    assert "hooks.rhai" in str(info.value)
    assert "on_stage_enter" in str(info.value)


def test_case_25_throw_is_an_execution_failure() -> None:
    with pytest.raises(ScriptError) as info:
        hook('\nthrow "nope"').run("on_stage_enter", {"stage": "main"})
    assert str(info.value).startswith("Script execution failed: hooks.rhai: on_stage_enter: ")
    assert info.value.line == 2


def test_case_26_compile_checks() -> None:
    with pytest.raises(ScriptError) as info:
        compile_hooks(source="fn on_stage_enter(a, b) { () }", wanted=["on_stage_enter"], label="h.rhai")
    assert "exactly one parameter" in str(info.value) and "found 2" in str(info.value)
    with pytest.raises(ScriptError, match="defines no"):
        compile_hooks(source="fn on_stage_exit(ctx) { () }", wanted=["on_stage_enter"], label="h.rhai")
    both = compile_hooks(source="fn on_stage_exit(ctx){()} fn on_stage_enter(ctx){()} fn helper(){()}", wanted=[])
    assert both.defined == ("on_stage_enter", "on_stage_exit")
    with pytest.raises(ScriptError, match="unknown hook"):
        compile_hooks(source="fn x(ctx){()}", wanted=["on_lunch"])


def test_case_27_pass_through() -> None:
    h = hook('#{action:"modify", value: ctx.stage}')
    assert h.run("on_stage_enter", {"stage": "review"}) == Modify("review")


def test_ctx_changes_do_not_leak() -> None:
    h = hook('ctx.stage = "changed"; ()')
    ctx = {"stage": "main"}
    assert h.run("on_stage_enter", ctx) == Allow()
    assert ctx == {"stage": "main"}


def test_running_an_undefined_hook_is_an_error() -> None:
    with pytest.raises(ScriptError, match="defines no fn on_error"):
        hook("()").run("on_error", {})


def test_hook_names_order() -> None:
    assert HOOK_NAMES[0] == "on_stage_enter" and HOOK_NAMES[-1] == "on_error" and len(HOOK_NAMES) == 7


# --- regions (cases 28-30) -------------------------------------------------------------------

REGION_CTX = {"region": {"name": "brain", "budget": 100, "current_tokens": 0, "entry_count": 0}, "entries": []}


def test_case_28_render() -> None:
    r = compile_region_script(source="fn render(ctx) { `[${ctx.region.name}] ok` }", label="r.rhai")
    assert r.render(REGION_CTX) == "[brain] ok"
    empty = compile_region_script(source="fn render(ctx) { }", label="r.rhai")
    assert empty.render(REGION_CTX) is None
    fnptr = compile_region_script(source='fn render(ctx) { Fn("render") }', label="r.rhai")
    with pytest.raises(ScriptError, match="not plain data") as info:
        fnptr.render(REGION_CTX)
    assert str(info.value).startswith("Script validation failed: r.rhai: render")
    with pytest.raises(ScriptError, match="eval") as info:
        compile_region_script(source='fn render(ctx) { eval("1+1") }', label="r.rhai")
    assert str(info.value).startswith("Script compilation failed: ")


def test_case_28_render_failure() -> None:
    r = compile_region_script(source='fn render(ctx) { throw "bad" }', label="r.rhai")
    with pytest.raises(ScriptError, match="Script execution failed: r.rhai: render: .*bad"):
        r.render(REGION_CTX)


def test_case_29_on_write_and_on_overflow() -> None:
    r = compile_region_script(
        source=(
            "fn render(ctx) { () }\n"
            'fn on_write(ctx) { if ctx.entry.content == "hi" { ctx.entry.content.to_upper() } '
            'else if ctx.entry.content == "t" { true } else if ctx.entry.content == "f" { false } else { () } }\n'
            "fn on_overflow(ctx) { let drop = []; for (e, i) in ctx.entries { "
            'if e.kind != "tool_result" { drop.push(i); } } drop }'
        ),
        label="r.rhai",
    )
    assert r.has_on_write and r.has_on_overflow
    write = {"region": REGION_CTX["region"], "entry": {"content": "hi", "kind": "text", "tokens": 1}}
    assert r.on_write(write) == "HI"
    for content, expected in (("t", True), ("f", False), ("other", None)):
        assert r.on_write({**write, "entry": {"content": content, "kind": "text", "tokens": 1}}) is expected
    entries = [{"kind": "text"}, {"kind": "tool_result"}, {"kind": "text"}]
    assert r.on_overflow({"region": REGION_CTX["region"], "entries": entries, "needed_tokens": 5}) == [0, 2]


def test_case_30_compile_checks() -> None:
    with pytest.raises(ScriptError, match="must define fn render"):
        compile_region_script(source="fn on_write(ctx) { () }", label="r.rhai")
    with pytest.raises(ScriptError, match="exactly one parameter"):
        compile_region_script(source="fn render(a, b) { () }", label="r.rhai")
    with pytest.raises(ScriptError, match="on_write"):
        compile_region_script(source="fn render(ctx) { () }\nfn on_write() { () }", label="r.rhai")
    plain = compile_region_script(source="fn render(ctx) { () }", label="r.rhai")
    assert not plain.has_on_write
    with pytest.raises(ScriptError, match="defines no fn on_write"):
        plain.on_write({})


def test_script_error_carries_path_and_line() -> None:
    err = ScriptError("Script compilation failed: x", "x.rhai", 3)
    assert (err.message, err.path, err.line) == ("Script compilation failed: x", "x.rhai", 3)
    assert str(err) == "Script compilation failed: x"


def test_concurrent_tools_each_see_their_own_host() -> None:
    class NamedHost(FakeHost):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

        def env_var(self, name: str) -> str:
            return self.name

    script = tool('let n = 0; for i in 0..2000 { n += 1; } env_var("WHO") + ":" + n')
    results: dict[int, list[str]] = {}

    def work(k: int) -> None:
        results[k] = [run_tool(script, {}, NamedHost(f"h{k}")) for _ in range(10)]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {k: [f"h{k}:2000"] * 10 for k in range(8)}


def test_a_lone_surrogate_reaches_a_validator_as_a_replacement_character() -> None:
    # Issue 12 item 10: it used to raise UnicodeEncodeError out of check().
    verdict = compile_validator(source='fn validate(c) { if c.contains("\ufffd") { "odd character" } }').check("a\ud800b")
    assert verdict == Invalid("odd character")
