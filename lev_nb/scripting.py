"""The script kinds a blueprint can use, built on the hardened engine of :mod:`lev_nb.rhai`.

- Tool scripts (``tools/*.rhai``): :func:`parse_tool_script`, :func:`discover_tools`,
  :func:`run_tool`, with host I/O through a :class:`ToolHost`.
- Output validators: :func:`compile_validator` -> :class:`Validator` whose ``check`` gives
  :class:`Valid`, :class:`Invalid` or :class:`Unusable`.
- Stage hooks: :func:`compile_hooks` -> :class:`HookScript` whose ``run`` gives :class:`Allow`,
  :class:`Modify`, :class:`Cancel` or :class:`Retry`.
- Custom context regions: :func:`compile_region_script` -> :class:`RegionScript`.

Every kind compiles with the same hardened engine it runs on, with its own operation budget
(tools 500k, the others 100k). Scripts come from a file (``path``) or from a string (``source``,
e.g. a notebook cell, named by ``label``). Problems found while compiling raise
:class:`ScriptError` naming the file and line; problems while running are reported as each kind's
contract says (tools return ``[error] ...`` text, validators return ``Unusable``, hooks and
regions raise ``ScriptError``).
"""

from __future__ import annotations

import json
import re
import threading
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from lev_nb.rhai import AST, Engine, NotPlainDataError, RhaiError

__all__ = [
    "Allow",
    "Cancel",
    "CAPABILITIES",
    "DenyAllHost",
    "HOOK_NAMES",
    "HookOutcome",
    "HookScript",
    "HOST_RESULT_LIMIT",
    "Invalid",
    "Modify",
    "RegionScript",
    "Retry",
    "ScriptError",
    "SkippedTool",
    "ToolHost",
    "ToolParam",
    "ToolScript",
    "Unusable",
    "Valid",
    "Validator",
    "Verdict",
    "compile_hooks",
    "compile_region_script",
    "compile_validator",
    "discover_tools",
    "parse_tool_script",
    "run_tool",
]

# Operation budgets per kind (spec/rhai.md §1).
TOOL_MAX_OPERATIONS = 500_000
VALIDATOR_MAX_OPERATIONS = 100_000
HOOK_MAX_OPERATIONS = 100_000
REGION_MAX_OPERATIONS = 100_000

# Host I/O results are cut to this many UTF-8 bytes before they reach a script, so a large
# response cannot trip the (uncatchable) string-size limit.
HOST_RESULT_LIMIT = 900_000
_TRUNCATION_NOTE = "\n[...truncated by lev_nb: result exceeded 900 KB]"

COMPILE_PREFIX = "Script compilation failed: "
EXECUTE_PREFIX = "Script execution failed: "
VALIDATE_PREFIX = "Script validation failed: "


class ScriptError(Exception):
    """A script that cannot be used: it does not compile, lacks a required function, or failed.

    ``message`` is the full text (starting with ``Script compilation failed: `` and the like),
    ``path`` the script file or label, ``line`` the 1-based line when known.
    """

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.path, self.line))


# --------------------------------------------------------------------------------------------
# Shared plumbing
# --------------------------------------------------------------------------------------------


@cache
def _engine(max_operations: int) -> Engine:
    """One shared engine per budget for the kinds without host functions (thread-safe)."""
    return Engine(max_operations=max_operations)


def _load(path: str | Path | None, source: str | None, label: str | None) -> tuple[str, str, Path | None]:
    """Return (source text, label for messages, path) for a script given by path or by text."""
    if source is None:
        if path is None:
            raise ValueError("give the script as path= or as source=")
        file = Path(path)
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ScriptError(f"{COMPILE_PREFIX}{label or file}: cannot read the script: {exc}", file) from exc
        return text, label or str(file), file
    file = Path(path) if path is not None else None
    return source, label or (str(file) if file else "<script>"), file


def _compile(engine: Engine, source: str, label: str) -> AST:
    try:
        return engine.compile(source)
    except RhaiError as exc:
        raise ScriptError(f"{COMPILE_PREFIX}{label}: {exc}", label, exc.line) from exc


def _definition_line(source: str, fn_name: str) -> int | None:
    """Line where `fn <name>(` is defined, for pointing at a wrong signature."""
    match = re.search(rf"(?m)^[^\n]*?\bfn\s+{re.escape(fn_name)}\s*\(", source)
    return source.count("\n", 0, match.start()) + 1 if match else None


def _arities(ast: AST, name: str) -> list[int]:
    return [arity for fn_name, arity in ast.functions if fn_name == name]


def _require_unary(ast: AST, source: str, label: str, name: str, param: str, *, required: bool) -> bool:
    """Check `fn <name>(<param>)`; return whether it is defined. Raises ScriptError otherwise."""
    arities = _arities(ast, name)
    if not arities:
        if required:
            raise ScriptError(f"{COMPILE_PREFIX}{label}: script must define fn {name}({param})", label)
        return False
    wrong = [a for a in arities if a != 1]
    if wrong:
        raise ScriptError(
            f"{COMPILE_PREFIX}{label}: fn {name} must take exactly one parameter ({param}), found {wrong[0]}",
            label,
            _definition_line(source, name),
        )
    return True


def _rhai_type_name(value: object) -> str:
    """Name a returned value the way Rhai's type_of would."""
    names = {bool: "bool", int: "i64", float: "f64", str: "string", list: "array", dict: "map", bytes: "blob"}
    return names.get(type(value), type(value).__name__)


# --------------------------------------------------------------------------------------------
# Tool scripts (spec §2.1, §3.3)
# --------------------------------------------------------------------------------------------

# Canonical capability names and their accepted aliases.
CAPABILITIES: dict[str, str] = {
    "network": "network",
    "net": "network",
    "http": "network",
    "shell": "shell",
    "process": "shell",
    "process_spawn": "shell",
    "filesystem": "filesystem",
    "file": "filesystem",
    "fs": "filesystem",
}


@dataclass(frozen=True)
class ToolParam:
    """One parameter a tool advertises to the model."""

    name: str
    type: str = ""
    required: bool = False
    description: str = ""
    schema: dict[str, Any] | None = None  # a raw JSON-Schema fragment, used verbatim when given

    def property_schema(self) -> dict[str, Any]:
        """The JSON-Schema property for this parameter."""
        if self.schema is not None:
            return dict(self.schema)
        return {"type": self.type, "description": self.description}


@dataclass(frozen=True)
class ToolScript:
    """A compiled tool script and the metadata it advertises."""

    name: str
    description: str
    params: tuple[ToolParam, ...]
    requires: tuple[str, ...]
    path: Path | None
    ast: AST = field(repr=False, compare=False)
    manifest: Path | None = None  # the sibling <stem>.toml, when it supplied the metadata

    @property
    def parameters_schema(self) -> dict[str, Any]:
        """The JSON schema of the tool's arguments, as advertised to the model."""
        return {
            "type": "object",
            "properties": {p.name: p.property_schema() for p in self.params},
            "required": [p.name for p in self.params if p.required],
        }

    @property
    def unknown_capabilities(self) -> tuple[str, ...]:
        """`@requires` entries that name no known capability."""
        return tuple(c for c in self.requires if c not in CAPABILITIES.values())


@dataclass(frozen=True)
class SkippedTool:
    """A `.rhai` file that discovery did not load, and why."""

    path: Path
    reason: str


@runtime_checkable
class ToolHost(Protocol):
    """What a tool script may ask of its host. Each method returns text or raises; the exception
    text becomes a Rhai error the script can catch (``try { ... } catch (e) { ... }``)."""

    def read_file(self, path: str) -> str:
        """Contents of a file of the workspace."""
        ...

    def write_file(self, path: str, content: str) -> str:
        """Write a file of the workspace; returns a short confirmation."""
        ...

    def shell(self, command: str) -> str:
        """Run a shell command; returns its output."""
        ...

    def http_get(self, url: str, headers: dict[str, str]) -> str:
        """GET a URL; returns the body."""
        ...

    def http_post(self, url: str, body: str, headers: dict[str, str]) -> str:
        """POST a body to a URL; returns the response body."""
        ...

    def env_var(self, name: str) -> str:
        """Value of an environment variable (raise when unset or refused)."""
        ...


class DenyAllHost:
    """A host that refuses everything: every call raises ``[denied] ...``."""

    @staticmethod
    def _deny(function: str) -> PermissionError:
        return PermissionError(f"[denied] script host function '{function}' is not available here")

    def read_file(self, path: str) -> str:
        """Refuse."""
        raise self._deny("read_file")

    def write_file(self, path: str, content: str) -> str:
        """Refuse."""
        raise self._deny("write_file")

    def shell(self, command: str) -> str:
        """Refuse."""
        raise self._deny("shell")

    def http_get(self, url: str, headers: dict[str, str]) -> str:
        """Refuse."""
        raise self._deny("http_get")

    def http_post(self, url: str, body: str, headers: dict[str, str]) -> str:
        """Refuse."""
        raise self._deny("http_post")

    def env_var(self, name: str) -> str:
        """Refuse."""
        raise self._deny("env_var")


_DIRECTIVE = re.compile(r"(\S+)\s*(.*)", re.DOTALL)


def _annotations(source: str, label: str) -> tuple[str, str, list[ToolParam], list[str]]:
    """Parse `// @tool`, `@description`, `@param`, `@requires` comment directives."""
    name: str | None = None
    description = ""
    params: list[ToolParam] = []
    requires: list[str] = []
    for number, raw in enumerate(source.splitlines(), start=1):
        line = raw.strip()
        if not line.startswith("//"):
            continue
        rest = line[2:].lstrip()
        if not rest.startswith("@"):
            continue
        match = _DIRECTIVE.match(rest[1:])
        if not match:
            continue
        keyword, argument = match.group(1), match.group(2).strip()
        if keyword == "tool":
            if not argument:
                raise ScriptError(
                    f"{COMPILE_PREFIX}{label}: the @tool directive requires a tool name (`// @tool <name>`)",
                    label,
                    number,
                )
            name = argument
        elif keyword == "description":
            description = argument
        elif keyword == "param":
            parts = argument.split(None, 3)
            if len(parts) < 3:
                raise ScriptError(
                    f"{COMPILE_PREFIX}{label}: line {number}: @param requires `<name> <type> "
                    f"<required|optional>`, got: {argument!r}",
                    label,
                    number,
                )
            if parts[2] not in ("required", "optional"):
                raise ScriptError(
                    f"{COMPILE_PREFIX}{label}: line {number}: @param requiredness must be `required` or "
                    f"`optional`, got: {parts[2]!r}",
                    label,
                    number,
                )
            text = parts[3].strip().strip('"') if len(parts) == 4 else ""
            params.append(ToolParam(parts[0], parts[1], parts[2] == "required", text))
        elif keyword == "requires":
            requires.extend(token for token in re.split(r"[\s,]+", argument) if token)
    if name is None:
        raise ScriptError(f"{COMPILE_PREFIX}{label}: script tool is missing a `// @tool <name>` directive", label)
    return name, description, params, requires


def _manifest(file: Path, label: str) -> tuple[str, str, list[ToolParam], list[str]]:
    """Read a sibling `<stem>.toml`, which replaces the annotations entirely."""
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ScriptError(f"{COMPILE_PREFIX}{label}: invalid tool.toml {file.name}: {exc}", file) from exc
    tool = data.get("tool")
    if not isinstance(tool, dict):
        raise ScriptError(f"{COMPILE_PREFIX}{label}: invalid tool.toml {file.name}: missing the [tool] table", file)
    name = tool.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ScriptError(f"{COMPILE_PREFIX}{label}: tool.toml `[tool] name` must not be empty ({file.name})", file)
    params: list[ToolParam] = []
    for index, entry in enumerate(tool.get("params", [])):
        where = f"tool.toml {file.name}: tool.params[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ScriptError(f"{COMPILE_PREFIX}{label}: invalid {where}: each param needs a string `name`", file)
        schema = entry.get("schema")
        if schema is not None and not isinstance(schema, dict):
            raise ScriptError(f"{COMPILE_PREFIX}{label}: invalid {where}.schema: expected a table", file)
        params.append(
            ToolParam(
                name=entry["name"],
                type=str(entry.get("type", "")),
                required=bool(entry.get("required", False)),
                description=str(entry.get("description", "")),
                schema=schema,
            )
        )
    requires = tool.get("requires", [])
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        raise ScriptError(
            f"{COMPILE_PREFIX}{label}: invalid tool.toml {file.name}: `requires` must be a list of strings", file
        )
    return name.strip(), str(tool.get("description", "")), params, list(requires)


def parse_tool_script(
    path: str | Path | None = None, *, source: str | None = None, label: str | None = None
) -> ToolScript:
    """Read, describe and compile a tool script.

    Metadata comes from a sibling ``<stem>.toml`` when one exists beside ``path``, else from the
    comment directives. Capability aliases are normalised (``net`` -> ``network`` ...); unknown
    ones are kept as written (see ``ToolScript.unknown_capabilities``). Raises ScriptError.
    """
    text, label, file = _load(path, source, label)
    manifest = file.with_suffix(".toml") if file is not None else None
    if manifest is not None and manifest.is_file():
        name, description, params, requires = _manifest(manifest, label)
    else:
        manifest = None
        name, description, params, requires = _annotations(text, label)
    ast = _compile(_engine(TOOL_MAX_OPERATIONS), text, label)
    canonical = tuple(dict.fromkeys(CAPABILITIES.get(r.lower(), r) for r in requires))
    return ToolScript(name, description, tuple(params), canonical, file, ast, manifest)


def discover_tools(
    dirs: Iterable[str | Path], *, reserved: Iterable[str] = ()
) -> tuple[dict[str, ToolScript], list[SkippedTool]]:
    """Load every ``*.rhai`` of ``dirs`` (in order; an earlier directory wins a name clash).

    Files are taken in sorted order; a missing directory is fine. A file that fails to load, a
    name already taken (or listed in ``reserved``, e.g. built-in tools) and a tool requiring an
    unknown capability are reported in the skipped list instead of stopping discovery.
    """
    taken = set(reserved)
    tools: dict[str, ToolScript] = {}
    skipped: list[SkippedTool] = []
    for directory in dirs:
        folder = Path(directory)
        if not folder.is_dir():
            continue
        for file in sorted(p for p in folder.glob("*.rhai") if p.is_file()):
            try:
                tool = parse_tool_script(file)
            except ScriptError as exc:
                skipped.append(SkippedTool(file, str(exc)))
                continue
            if tool.name in taken:
                skipped.append(SkippedTool(file, f"tool name '{tool.name}' is reserved by a built-in tool"))
            elif tool.name in tools:
                first = tools[tool.name].path
                skipped.append(SkippedTool(file, f"tool name '{tool.name}' is already provided by {first}"))
            elif tool.unknown_capabilities:
                unknown = ", ".join(tool.unknown_capabilities)
                skipped.append(SkippedTool(file, f"@requires names unknown capability: {unknown}"))
            else:
                tools[tool.name] = tool
    return tools, skipped


def _cap(text: str) -> str:
    """Cut host output to HOST_RESULT_LIMIT bytes at a character boundary."""
    data = text.encode("utf-8")
    if len(data) <= HOST_RESULT_LIMIT:
        return text
    return data[:HOST_RESULT_LIMIT].decode("utf-8", errors="ignore") + _TRUNCATION_NOTE


def _text(function: str, what: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{function}: {what} must be a string, got {_rhai_type_name(value)}")
    return value


def _header_value(value: object) -> str:
    # As Rhai's to_string() would print it.
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return json.dumps(value) if isinstance(value, (list, dict)) else str(value)


def _headers(function: str, headers: object) -> dict[str, str]:
    if not isinstance(headers, dict):
        raise TypeError(f"{function}: headers must be a map, got {_rhai_type_name(headers)}")
    return {str(k): _header_value(v) for k, v in headers.items()}


def _host_result(function: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{function}: the host returned {type(value).__name__}, not text")
    return _cap(value)


class _CurrentHost(threading.local):
    """The host of the tool running on this thread (tool engines are shared, hosts are not)."""

    host: ToolHost | None = None


_current = _CurrentHost()


def _host() -> ToolHost:
    host = _current.host
    if host is None:  # only reachable if a script engine is misused outside run_tool
        raise RuntimeError("no tool host is active")
    return host


def _http_get(url: object, headers: object = None) -> str:
    hdrs = {} if headers is None else _headers("http_get", headers)
    return _host_result("http_get", _host().http_get(_text("http_get", "url", url), hdrs))


def _http_post(url: object, body: object, headers: object = None) -> str:
    hdrs = {} if headers is None else _headers("http_post", headers)
    result = _host().http_post(_text("http_post", "url", url), _text("http_post", "body", body), hdrs)
    return _host_result("http_post", result)


def _shell(command: object) -> str:
    return _host_result("shell", _host().shell(_text("shell", "command", command)))


def _read_file(path: object) -> str:
    return _host_result("read_file", _host().read_file(_text("read_file", "path", path)))


def _write_file(path: object, content: object) -> str:
    result = _host().write_file(_text("write_file", "path", path), _text("write_file", "content", content))
    return _host_result("write_file", result)


def _env_var(name: object) -> str:
    return _host_result("env_var", _host().env_var(_text("env_var", "name", name)))


@cache
def _tool_engine() -> Engine:
    """The tool engine (500k budget) with host I/O registered; calls go to this thread's host."""
    engine = Engine(max_operations=TOOL_MAX_OPERATIONS)
    engine.register_fn("http_get", _http_get, arity=[1, 2])
    engine.register_fn("http_post", _http_post, arity=[2, 3])
    engine.register_fn("shell", _shell)
    engine.register_fn("read_file", _read_file)
    engine.register_fn("write_file", _write_file)
    engine.register_fn("env_var", _env_var)
    return engine


@lru_cache(maxsize=256)
def _schema_validator(schema_json: str) -> Any:
    """A compiled JSON-Schema validator, or None when the schema itself is broken."""
    import jsonschema

    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError:
        return None  # a typo in a declared type: run without validation, as the upstream does
    return cls(schema)


def _argument_error(tool: ToolScript, arguments: object) -> str | None:
    """Check arguments against the advertised schema (skipped when that schema is broken)."""
    validator = _schema_validator(json.dumps(tool.parameters_schema, sort_keys=True))
    if validator is None:
        return None
    error = next(iter(validator.iter_errors(arguments)), None)
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"invalid arguments{f' at {where}' if where else ''}: {error.message}"


def run_tool(tool: ToolScript, arguments: Any, host: ToolHost | None = None, *, validate_arguments: bool = True) -> str:
    """Run a tool script with ``params`` = ``arguments``; always returns text for the model.

    A string result passes through, ``()`` becomes ``""``, anything else compact JSON. Any
    failure becomes ``[error] <tool>: <message>`` (or ``[error] cannot serialize result: ...``).
    ``host`` defaults to :class:`DenyAllHost`. With ``validate_arguments`` the arguments are first
    checked against ``tool.parameters_schema``.
    """
    if validate_arguments:
        problem = _argument_error(tool, arguments)
        if problem:
            return f"[error] {tool.name}: {problem}"
    previous, _current.host = _current.host, (host if host is not None else DenyAllHost())
    try:
        result = _tool_engine().run(tool.ast, params=arguments)
    except RhaiError as exc:
        return f"[error] {tool.name}: {exc}"
    except NotPlainDataError as exc:
        return f"[error] cannot serialize result: {exc}"
    except TypeError as exc:  # the arguments themselves could not become Rhai values
        return f"[error] {tool.name}: {exc}"
    finally:
        _current.host = previous
    if isinstance(result, str):
        return result
    if result is None:
        return ""
    try:
        return json.dumps(result, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        return f"[error] cannot serialize result: {exc}"


# --------------------------------------------------------------------------------------------
# Output validators (spec §2.2)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Valid:
    """The content passes the validator."""


@dataclass(frozen=True)
class Invalid:
    """The validator rejected the content; ``reason`` goes back to the model."""

    reason: str


@dataclass(frozen=True)
class Unusable:
    """The validator itself failed; the submission is accepted unchecked (and a warning logged)."""

    message: str


Verdict = Valid | Invalid | Unusable


@dataclass(frozen=True)
class Validator:
    """A compiled output validator defining ``fn validate(content)``."""

    label: str
    path: Path | None
    ast: AST = field(repr=False, compare=False)

    def check(self, content: str) -> Verdict:
        """Run ``validate(content)``: () or blank text is Valid, other text Invalid, else Unusable."""
        try:
            result = _engine(VALIDATOR_MAX_OPERATIONS).call(self.ast, "validate", content)
        except RhaiError as exc:
            return Unusable(f"{self.label}: validate: {exc}")
        except NotPlainDataError as exc:
            return Unusable(f"{self.label}: validate must return () or a string, got {exc}")
        if result is None or (isinstance(result, str) and not result.strip()):
            return Valid()
        if isinstance(result, str):
            return Invalid(result)
        return Unusable(f"{self.label}: validate must return () or a string, got {_rhai_type_name(result)}")


def compile_validator(
    path: str | Path | None = None, *, source: str | None = None, label: str | None = None
) -> Validator:
    """Compile an output validator; it must define ``fn validate(content)``. Raises ScriptError."""
    text, label, file = _load(path, source, label)
    ast = _compile(_engine(VALIDATOR_MAX_OPERATIONS), text, label)
    _require_unary(ast, text, label, "validate", "content", required=True)
    return Validator(label, file, ast)


# --------------------------------------------------------------------------------------------
# Stage hooks (spec §2.3)
# --------------------------------------------------------------------------------------------

HOOK_NAMES: tuple[str, ...] = (
    "on_stage_enter",
    "on_stage_exit",
    "before_inference",
    "after_inference",
    "on_tool_call",
    "on_completion",
    "on_error",
)


@dataclass(frozen=True)
class Allow:
    """Go ahead unchanged."""


@dataclass(frozen=True)
class Modify:
    """Go ahead with ``value`` in place of what the hook was shown."""

    value: Any


@dataclass(frozen=True)
class Cancel:
    """Stop; ``reason`` is None when the script gave none."""

    reason: str | None = None


@dataclass(frozen=True)
class Retry:
    """Ask for a retry (no hook honours it yet; the runtime treats it as a failure)."""


HookOutcome = Allow | Modify | Cancel | Retry


def _outcome(value: object, fail: Callable[[str], ScriptError]) -> HookOutcome:
    """Read a hook's return value per the outcome contract; `fail(detail)` builds the error."""
    if value is None or value is True:
        return Allow()
    if value is False:
        return Cancel(None)
    if isinstance(value, dict):
        if "action" not in value:
            raise fail(f"the returned map has no 'action' key (expected #{{action: \"allow\"|...}}), got: {value!r}")
        action = value["action"]
        if action == "allow":
            return Allow()
        if action == "modify":
            if "value" not in value:
                raise fail("action 'modify' needs a 'value' key holding the replacement")
            return Modify(value["value"])
        if action == "cancel":
            reason = value.get("reason")
            return Cancel(reason if isinstance(reason, str) else None)
        if action == "retry":
            return Retry()
        raise fail(f"unknown action '{action}' (expected allow, modify, cancel, or retry)")
    raise fail(f"expected (), a bool, or a map with an 'action', got: {value!r}")


@dataclass(frozen=True)
class HookScript:
    """A compiled stage-hook file; ``defined`` lists its hooks in HOOK_NAMES order."""

    label: str
    path: Path | None
    defined: tuple[str, ...]
    ast: AST = field(repr=False, compare=False)

    def run(self, hook: str, ctx: Mapping[str, Any]) -> HookOutcome:
        """Call ``hook(ctx)`` and read its outcome. Raises ScriptError on any failure."""
        if hook not in self.defined:
            raise ScriptError(f"{EXECUTE_PREFIX}{self.label}: {hook}: the script defines no fn {hook}(ctx)", self.label)
        try:
            value = _engine(HOOK_MAX_OPERATIONS).call(self.ast, hook, dict(ctx))
        except RhaiError as exc:
            raise ScriptError(f"{EXECUTE_PREFIX}{self.label}: {hook}: {exc}", self.label, exc.line) from exc
        except NotPlainDataError as exc:
            raise ScriptError(
                f"{VALIDATE_PREFIX}{self.label}: {hook} returned a value that is not plain data: {exc}", self.label
            ) from exc

        def fail(detail: str) -> ScriptError:
            return ScriptError(f"{VALIDATE_PREFIX}{self.label}: {hook}: {detail}", self.label)

        return _outcome(value, fail)


def compile_hooks(
    path: str | Path | None = None,
    wanted: Sequence[str] = (),
    *,
    source: str | None = None,
    label: str | None = None,
) -> HookScript:
    """Compile a stage-hook file. Every hook it defines must take one parameter (ctx), and every
    hook in ``wanted`` (the ones the blueprint names this file for) must be defined."""
    text, label, file = _load(path, source, label)
    unknown = [h for h in wanted if h not in HOOK_NAMES]
    if unknown:
        raise ScriptError(
            f"{COMPILE_PREFIX}{label}: unknown hook '{unknown[0]}' (expected one of {', '.join(HOOK_NAMES)})", label
        )
    ast = _compile(_engine(HOOK_MAX_OPERATIONS), text, label)
    defined = tuple(h for h in HOOK_NAMES if _require_unary(ast, text, label, h, "ctx", required=False))
    for hook in wanted:
        if hook not in defined:
            raise ScriptError(
                f"{COMPILE_PREFIX}{label}: the blueprint names this file for '{hook}', "
                f"but it defines no fn {hook}(ctx)",
                label,
            )
    return HookScript(label, file, defined, ast)


# --------------------------------------------------------------------------------------------
# Custom regions (spec §2.4)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RegionScript:
    """A compiled custom-region script: ``render`` required, ``on_write``/``on_overflow`` optional.

    Each method returns the script's raw value as plain Python data; reading it (strings, maps,
    index lists) and falling back on failure is the region's job.
    """

    label: str
    path: Path | None
    has_on_write: bool
    has_on_overflow: bool
    ast: AST = field(repr=False, compare=False)

    def _call(self, fn: str, ctx: Mapping[str, Any]) -> Any:
        try:
            return _engine(REGION_MAX_OPERATIONS).call(self.ast, fn, dict(ctx))
        except RhaiError as exc:
            raise ScriptError(f"{EXECUTE_PREFIX}{self.label}: {fn}: {exc}", self.label, exc.line) from exc
        except NotPlainDataError as exc:
            raise ScriptError(
                f"{VALIDATE_PREFIX}{self.label}: {fn} returned a value that is not plain data: {exc}", self.label
            ) from exc

    def render(self, ctx: Mapping[str, Any]) -> Any:
        """Call ``render(ctx)``."""
        return self._call("render", ctx)

    def on_write(self, ctx: Mapping[str, Any]) -> Any:
        """Call ``on_write(ctx)``; raises ScriptError if the script does not define it."""
        if not self.has_on_write:
            raise ScriptError(
                f"{EXECUTE_PREFIX}{self.label}: on_write: the script defines no fn on_write(ctx)", self.label
            )
        return self._call("on_write", ctx)

    def on_overflow(self, ctx: Mapping[str, Any]) -> Any:
        """Call ``on_overflow(ctx)``; raises ScriptError if the script does not define it."""
        if not self.has_on_overflow:
            raise ScriptError(
                f"{EXECUTE_PREFIX}{self.label}: on_overflow: the script defines no fn on_overflow(ctx)", self.label
            )
        return self._call("on_overflow", ctx)


def compile_region_script(
    path: str | Path | None = None, *, source: str | None = None, label: str | None = None
) -> RegionScript:
    """Compile a custom-region script (``fn render(ctx)`` required). Raises ScriptError."""
    text, label, file = _load(path, source, label)
    ast = _compile(_engine(REGION_MAX_OPERATIONS), text, label)
    _require_unary(ast, text, label, "render", "ctx", required=True)
    has_write = _require_unary(ast, text, label, "on_write", "ctx", required=False)
    has_overflow = _require_unary(ast, text, label, "on_overflow", "ctx", required=False)
    return RegionScript(label, file, has_write, has_overflow, ast)
