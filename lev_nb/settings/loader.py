"""Reading the effective settings: ``config.toml``, then the environment, then overrides.

Precedence, highest first (one order for every key):

1. launch options — ``lev -c KEY=VALUE`` for one command;
2. session overrides — ``lev_nb.configure(...)`` in a notebook or script;
3. environment variables — the ones in :data:`lev_nb.settings.schema.ENVIRONMENT`;
4. the file — ``$LEV_CONFIG``, else ``$LEV_HOME/config.toml`` (LEV_HOME defaults to ``~/.lev``);
5. the built-in default.

Each layer is checked against the same schema before it counts: an unknown key is a
:class:`ConfigError` with a "did you mean", a value of the wrong type or out of range is one too,
and an error in the file names the file, line and key path like a blueprint error. Every effective
value remembers its :class:`Source`. A missing file is not an error: the defaults apply.
"""

from __future__ import annotations

import os
import re
import threading
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import MappingProxyType
from typing import Any

from lev_nb.blueprint.errors import closest, did_you_mean, locate_key
from lev_nb.blueprint.read_paths import toml_key
from lev_nb.blueprint.shellkeys import is_valid_prefix
from lev_nb.records import record
from lev_nb.secrets import SHELL_ENV_MODES, declare_credentials, environ_stamp

from .errors import ConfigError, ConfigWarning, unreadable
from .mcp_servers import ServerEntryError, entry_line, parse_servers
from .model import BUILTIN_PROVIDERS, EXPORTERS, POLICIES, SCRIPT_PERMISSIONS, Settings, Source
from .paths import config_path
from .schema import ENVIRONMENT, SCHEMA, Key, MapOf, Node, Table, Value, static_keys
from .upstream import alias_of, ignored_reason

__all__ = [
    "Row",
    "check_launch",
    "clear_session",
    "configure",
    "current",
    "dotted",
    "launch_options",
    "load",
    "parse_assignments",
    "rows",
]

_PRESENT = object()  # marks a user-named entry written with no keys of its own (`[agent_read_paths.cto]`)

Flat = dict[Key, tuple[Any, Source]]


def dotted(key: Iterable[str]) -> str:
    """A key path as TOML writes it: ``limits.max_concurrent_inferences``, ``agent_read_paths."a.b".allow``."""
    return ".".join(toml_key(part) for part in key)


def split_dotted(text: str) -> Key:
    """``a.b."c.d"`` -> ("a", "b", "c.d"); the inverse of :func:`dotted`."""
    parts: list[str] = []
    buf = ""
    quoted = False
    i = 0
    while i < len(text):
        c = text[i]
        if c == '"':
            quoted = not quoted
        elif c == "\\" and quoted and i + 1 < len(text):
            i += 1
            buf += text[i]
        elif c == "." and not quoted:
            parts.append(buf.strip())
            buf = ""
        else:
            buf += c
        i += 1
    parts.append(buf.strip())
    return tuple(parts)


# ------------------------------------------------------------------------------------------------
# Layers: where a batch of values comes from, and how to name a value's origin or problem
# ------------------------------------------------------------------------------------------------
class _Layer:
    kind: str = ""
    text_values = False  # values are strings to convert (environment, -c), not typed TOML/Python

    def source(self, key: Key) -> Source:
        return Source(self.kind)  # type: ignore[arg-type]

    def error(self, message: str, key: Key, hint: str | None = None, line: int | None = None) -> ConfigError:
        raise NotImplementedError


class _FileLayer(_Layer):
    kind = "file"

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.text = text
        self.warnings: list[str] = []

    def warn(self, message: str, key: Key) -> None:
        """Keep a warning about ``key``, prefixed with where it is (``file:line``)."""
        loc = self._where(key)
        where = f"{self.path}:{loc[0]}" if loc else str(self.path)
        self.warnings.append(f"{where}: {message}")

    def _where(self, key: Key) -> tuple[int, int] | None:
        return locate_key(self.text, list(key))

    def source(self, key: Key) -> Source:
        loc = self._where(key)
        return Source("file", path=self.path, line=loc[0] if loc else None)

    def error(self, message: str, key: Key, hint: str | None = None, line: int | None = None) -> ConfigError:
        loc = (line, 1) if line is not None else self._where(key)
        return ConfigError(message, path=self.path, key_path=dotted(key) or None,
                           line=loc[0] if loc else None, column=loc[1] if loc else None, hint=hint)


class _EnvLayer(_Layer):
    kind = "env"
    text_values = True

    def __init__(self, names: Mapping[Key, str]) -> None:
        self.names = names

    def source(self, key: Key) -> Source:
        return Source("env", env=self.names.get(key))

    def error(self, message: str, key: Key, hint: str | None = None, line: int | None = None) -> ConfigError:
        return ConfigError(message, key_path=dotted(key), hint=hint,
                           origin=f"environment variable {self.names.get(key, '?')}")


class _OverrideLayer(_Layer):
    def __init__(self, kind: str, origin: str, text_values: bool) -> None:
        self.kind = kind
        self.origin = origin
        self.text_values = text_values

    def error(self, message: str, key: Key, hint: str | None = None, line: int | None = None) -> ConfigError:
        return ConfigError(message, key_path=dotted(key) or None, hint=hint, origin=self.origin)


_SESSION = _OverrideLayer("session", "lev_nb.configure()", text_values=False)
_LAUNCH = _OverrideLayer("launch", "the -c option", text_values=True)


# ------------------------------------------------------------------------------------------------
# Checking a layer against the schema
# ------------------------------------------------------------------------------------------------
def _walk(node: Node, data: Any, key: Key, layer: _Layer, out: Flat) -> None:
    if isinstance(node, Value):
        out[key] = (_coerce(node, data, key, layer), layer.source(key))
        return
    if not isinstance(data, Mapping):
        what = f"[{dotted(key)}]" if key else "the file"
        raise layer.error(f"{what} must be a table, not {_describe(data)}", key)
    if isinstance(node, MapOf):
        for name, value in data.items():
            if not isinstance(name, str) or not name:
                raise layer.error(f"a {node.key} name must be a non-empty string", key)
            if isinstance(node.item, Table):
                out.setdefault(key + (name,), (_PRESENT, layer.source(key + (name,))))
            _walk(node.item, value, key + (name,), layer, out)
        return
    for name, value in data.items():
        child = node.fields.get(name)
        if child is None:
            _not_ours(node, data, key + (name,), value, layer, out)
            continue
        _check_placement(key + (name,), layer)
        _walk(child, value, key + (name,), layer, out)


def _not_ours(node: Table, data: Any, key: Key, value: Any, layer: _Layer, out: Flat) -> None:
    """A key lev_nb's schema does not have. In the file (where an upstream configuration may be):
    an upstream alias is read as its lev_nb key, an upstream key lev_nb cannot honour is one warning
    saying why, anything else one warning with a "did you mean"; the file still loads, as the
    upstream's does. Elsewhere (the environment, ``configure()``, ``-c``) it is an error."""
    if not isinstance(layer, _FileLayer):
        raise layer.error(f"unknown key '{key[-1]}'", key, hint=_unknown_hint(key[-1], node, key[:-1]))
    target = alias_of(key)
    if target is not None:
        spec = _lookup(SCHEMA, target)
        if isinstance(spec, Value):
            out[target] = (_coerce(spec, value, key, layer), layer.source(key))
            return
    reason = ignored_reason(key)
    if reason is not None:
        layer.warn(f"{dotted(key)} is an upstream setting lev_nb ignores: {reason}", key)
    else:
        layer.warn(f"unknown key '{dotted(key)}' is ignored ({_unknown_hint(key[-1], node, key[:-1])})", key)


def _check_placement(key: Key, layer: _Layer) -> None:
    if len(key) == 3 and key[0] == "model_providers" and key[2] in ("script", "options") and key[1] in BUILTIN_PROVIDERS:
        raise layer.error(
            f"'{key[1]}' is a built-in provider; {key[2]} applies to Rhai provider scripts only", key,
            hint="give a script provider a name of its own, e.g. [model_providers.my-gateway]")


def _unknown_hint(word: str, node: Table, key: Key) -> str | None:
    statics = [k for k, _ in static_keys()]
    for other in statics:
        if other[-1] == word and other[:-1] != key:
            where = f"[{dotted(other[:-1])}]" if len(other) > 1 else "the top level"
            return f"it belongs under {where}: {dotted(other)}"
    hint = did_you_mean(word, node.fields)
    if hint:
        return hint
    close = closest(word, [k[-1] for k in statics], cutoff=0.75)
    if close:
        target = next(k for k in statics if k[-1] == close)
        return f"did you mean '{dotted(target)}'?"
    return f"valid keys here: {', '.join(node.fields)}"


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a float ({value})"
    if isinstance(value, str):
        return f"a string ({value!r})"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, Mapping):
        return "a table"
    return f"a {type(value).__name__}"


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _coerce(spec: Value, raw: Any, key: Key, layer: _Layer) -> Any:
    """The value ``raw`` as ``spec`` types it, or a ConfigError naming what was expected."""
    if layer.text_values and isinstance(raw, str):
        raw = _from_text(spec, raw, key, layer)
    kind = spec.type
    if kind == "str":
        if isinstance(raw, os.PathLike):
            raw = os.fspath(raw)
        if not isinstance(raw, str):
            raise layer.error(f"expected a string, got {_describe(raw)}", key)
        value: Any = raw
    elif kind == "int":
        if not isinstance(raw, int) or isinstance(raw, bool):
            raise layer.error(f"expected a whole number, got {_describe(raw)}", key)
        if spec.minimum is not None and raw < spec.minimum:
            raise layer.error(f"must be at least {spec.minimum}, got {raw}", key)
        value = raw
    elif kind == "float":
        if not isinstance(raw, (int, float)) or isinstance(raw, bool):
            raise layer.error(f"expected a number, got {_describe(raw)}", key)
        if raw < 0 or raw != raw or raw == float("inf"):
            raise layer.error(f"must be a finite number of at least 0, got {raw}", key)
        value = float(raw)
    elif kind == "bool":
        if not isinstance(raw, bool):
            raise layer.error(f"expected true or false, got {_describe(raw)}", key)
        value = raw
    elif kind == "str_list":
        if not isinstance(raw, (list, tuple)):
            raise layer.error(f"expected an array of strings, got {_describe(raw)}", key)
        for item in raw:
            if not isinstance(item, str):
                raise layer.error(f"expected an array of strings, but one item is {_describe(item)}", key)
        value = tuple(raw)
    elif kind in ("policy", "script_permission"):
        valid = POLICIES if kind == "policy" else SCRIPT_PERMISSIONS
        if not isinstance(raw, str) or raw.lower() not in valid:
            got = f"'{raw}'" if isinstance(raw, str) else _describe(raw)
            raise layer.error(f"{got} is not a {kind.replace('_', ' ')} (valid: {', '.join(valid)})", key,
                              hint=did_you_mean(raw.lower(), valid) if isinstance(raw, str) else None)
        value = raw.lower()
    elif kind == "mcp_servers":
        value = _servers(raw, key, layer)
    else:  # a free-form table
        if not isinstance(raw, Mapping):
            raise layer.error(f"expected a table, got {_describe(raw)}", key)
        value = MappingProxyType(dict(raw))
    _check_value(key, value, layer)
    return value


def _servers(raw: Any, key: Key, layer: _Layer) -> Any:
    """The ``[[mcp_servers]]`` entries, checked; an error names the entry and the key in it."""
    try:
        return parse_servers(raw)
    except ServerEntryError as exc:
        name = None
        if exc.index is not None and isinstance(raw, (list, tuple)) and exc.index < len(raw):
            entry = raw[exc.index]
            name = entry.get("name") if isinstance(entry, Mapping) else None
        which = f"entry '{name}'" if isinstance(name, str) and name else (
            f"entry {exc.index + 1}" if exc.index is not None else None)
        message = f"{which}: {exc.message}" if which and exc.message.find(f"'{name}'") < 0 else exc.message
        line = entry_line(layer.text, exc.index, exc.key) if isinstance(layer, _FileLayer) else None
        where = key + ((exc.key,) if exc.key else ())
        raise layer.error(message, where, exc.hint, line=line) from None


def _from_text(spec: Value, text: str, key: Key, layer: _Layer) -> Any:
    """Convert a string from the environment or ``-c`` to the key's type."""
    kind = spec.type
    stripped = text.strip()
    if kind == "int":
        try:
            return int(stripped)
        except ValueError:
            raise layer.error(f"expected a whole number, got '{text}'", key) from None
    if kind == "float":
        try:
            return float(stripped)
        except ValueError:
            raise layer.error(f"expected a number, got '{text}'", key) from None
    if kind == "bool":
        if stripped.lower() in _TRUE:
            return True
        if stripped.lower() in _FALSE:
            return False
        raise layer.error(f"expected true or false, got '{text}'", key)
    if kind in ("str_list", "table"):
        if stripped.startswith(("[", "{")):
            try:
                return tomllib.loads(f"v = {stripped}")["v"]
            except tomllib.TOMLDecodeError as exc:
                raise layer.error(f"not a TOML {'array' if kind == 'str_list' else 'inline table'}: {exc}",
                                  key) from None
            except RecursionError:
                raise layer.error("nested too deeply", key) from None
        if kind == "str_list":
            return [part.strip() for part in stripped.split(",") if part.strip()]
    return text


# Keys whose value is one of a few words.
_CHOICES: dict[Key, tuple[str, ...]] = {
    ("sandbox", "kind"): ("none", "namespace", "container"),
    ("sandbox", "on_unavailable"): ("error", "warn"),
    ("sandbox", "engine"): ("podman", "docker"),
    ("observability", "exporter"): EXPORTERS,
    ("security", "shell_env"): SHELL_ENV_MODES,
}


_POOL_TABLES = (("limits", "max_concurrent_inferences_by_model"), ("limits", "max_concurrent_inferences_by_provider"))


def _check_value(key: Key, value: Any, layer: _Layer) -> None:
    """Rules beyond the type: a word among its choices; a safe-commands shell entry must be a bare
    command prefix."""
    choices = _CHOICES.get(key)
    if choices is not None and value is not None and value not in choices:
        raise layer.error(f"'{value}' is not one of {', '.join(choices)}", key,
                          hint=did_you_mean(str(value), choices))
    if key[:2] in _POOL_TABLES and len(key) == 3 and isinstance(value, int) and value < 0:
        raise layer.error(f"a pool cannot be {value} calls wide", key,
                          hint="give the most calls in flight at once (0 is read as 1); delete the key for no pool of its own")
    if key[-1] == "shell" and key[0] in ("safe_commands", "agent_safe_commands"):
        for entry in value:
            if not is_valid_prefix(entry):
                raise layer.error(
                    f"'{entry}' is not a bare command prefix, so no call could ever match it", key,
                    hint="write a program and at most one subcommand, e.g. \"cargo test\", "
                         "with no flags, pipes or redirects")


# ------------------------------------------------------------------------------------------------
# Building the layers
# ------------------------------------------------------------------------------------------------
def _defaults() -> Flat:
    return {key: (spec.default, Source("default")) for key, spec in static_keys()}


def _file_layer(path: Path) -> tuple[Flat, bool, tuple[str, ...]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}, False, ()
    except IsADirectoryError:
        raise ConfigError("is a folder, not a file", path=path, kind="read") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise unreadable(path, exc) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        raise ConfigError(f"not valid TOML: {msg}", path=path, kind="parse",
                          line=int(m.group(1)) if m else None, column=int(m.group(2)) if m else None) from None
    except RecursionError:  # tomllib parses nested arrays and tables recursively
        raise ConfigError("not valid TOML: arrays or tables are nested too deeply", path=path, kind="parse",
                          hint="a configuration never needs more than a few levels of nesting") from None
    out: Flat = {}
    layer = _FileLayer(path, text)
    _walk(SCHEMA, data, (), layer, out)
    return out, True, tuple(layer.warnings)


def _env_values() -> dict[str, str]:
    return {var: os.environ[var] for var, _ in ENVIRONMENT if os.environ.get(var, "").strip()}


def _env_layer(values: Mapping[str, str]) -> Flat:
    names = {key: var for var, key in ENVIRONMENT}
    data: dict[str, Any] = {}
    for var, key in ENVIRONMENT:
        if var in values:
            _nest(data, key, values[var])
    out: Flat = {}
    _walk(SCHEMA, data, (), _EnvLayer(names), out)
    return out


def _nest(data: dict[str, Any], key: Key, value: Any) -> None:
    for part in key[:-1]:
        nxt = data.get(part)
        if not isinstance(nxt, dict):
            nxt = data[part] = {}
        data = nxt
    data[key[-1]] = value


def _flatten_overrides(data: Mapping[str, Any], layer: _OverrideLayer) -> Flat:
    out: Flat = {}
    _walk(SCHEMA, data, (), layer, out)
    return out


# ------------------------------------------------------------------------------------------------
# Assembling Settings
# ------------------------------------------------------------------------------------------------
def _build(flat: Flat, path: Path, exists: bool, warnings: tuple[str, ...] = ()) -> Settings:
    sources = MappingProxyType({dotted(k): src for k, (v, src) in flat.items() if v is not _PRESENT})
    kwargs = _build_kwargs(SCHEMA, (), flat)
    return Settings(**kwargs, path=path, file_exists=exists, sources=sources, warnings=warnings)


def _build_kwargs(node: Table, prefix: Key, flat: Flat) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    for name, child in node.fields.items():
        key = prefix + (name,)
        if isinstance(child, Value):
            if key in flat:
                kwargs[name] = flat[key][0]
        elif isinstance(child, Table):
            kwargs[name] = child.cls(**_build_kwargs(child, key, flat))
        else:
            kwargs[name] = _build_map(child, key, flat)
    return kwargs


def _build_map(node: MapOf, prefix: Key, flat: Flat) -> Mapping[str, Any]:
    names: dict[str, None] = {}
    for key in flat:
        if len(key) > len(prefix) and key[:len(prefix)] == prefix:
            names.setdefault(key[len(prefix)], None)
    out: dict[str, Any] = {}
    for name in names:
        key = prefix + (name,)
        item = node.item
        if isinstance(item, Value):
            if key in flat and flat[key][0] is not _PRESENT:
                out[name] = flat[key][0]
        elif isinstance(item, Table):
            out[name] = item.cls(**_build_kwargs(item, key, flat))
        else:
            out[name] = _build_map(item, key, flat)
    return MappingProxyType(out)


def load(path: str | os.PathLike[str] | None = None, *, environ: Mapping[str, str] | None = None,
         session: Mapping[str, Any] | None = None, launch: Mapping[str, Any] | None = None) -> Settings:
    """Read the settings from ``path`` (default: :func:`config_path`) and the given layers.

    ``environ`` defaults to the process environment; ``session`` and ``launch`` are nested
    override tables (default: none). Raises :class:`ConfigError` on any problem.
    """
    file = Path(path) if path is not None else config_path()
    values = _env_values() if environ is None else {
        var: environ[var] for var, _ in ENVIRONMENT if environ.get(var, "").strip()}
    flat = _defaults()
    from_file, exists, warnings = _file_layer(file)
    flat.update(from_file)
    flat.update(_env_layer(values))
    if session:
        flat.update(_flatten_overrides(session, _SESSION))
    if launch:
        flat.update(_flatten_overrides(launch, _LAUNCH))
    settings = _build(flat, file, exists, warnings)
    # A key variable named in the configuration is a secret whatever its name (lev_nb.secrets).
    declare_credentials(p.api_key_env for p in settings.model_providers.values() if p.api_key_env)
    return settings


# ------------------------------------------------------------------------------------------------
# The process-wide view: session overrides, launch options, and a cache
# ------------------------------------------------------------------------------------------------
_lock = threading.RLock()
_session: dict[str, Any] = {}
_launch: dict[str, Any] = {}
_generation = 0
_cache: tuple[Any, Settings] | None = None


def _stamp(path: Path) -> Any:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def current() -> Settings:
    """The effective settings of this process (file, environment, session overrides, launch options).

    Re-read when the file, the environment or the overrides change; raises :class:`ConfigError`.
    """
    global _cache
    path = config_path()
    with _lock:
        # The whole environment's fingerprint (cheaper to take than the variables read from it).
        key = (str(path), _stamp(path), environ_stamp(), _generation)
        if _cache is not None and _cache[0] == key:
            return _cache[1]
        settings = load(path, session=_session, launch=_launch)
        _cache = (key, settings)
    _tell(settings.warnings)
    return settings


_told: set[str] = set()


def _tell(messages: tuple[str, ...]) -> None:
    """Warn (:class:`ConfigWarning`, once per process) that the file sets keys nothing reads: the
    one message itself, or one line naming them all (``lev config`` gives the reason for each), so a
    whole upstream configuration does not bury every command's output."""
    import warnings

    fresh = [m for m in messages if m not in _told]
    if not fresh:
        return
    _told.update(fresh)
    if len(fresh) == 1:
        text = fresh[0]
    else:
        keys = [_ignored_key(m) for m in fresh]
        shown = ", ".join(keys[:6]) + (f" and {len(keys) - 6} more" if len(keys) > 6 else "")
        where = fresh[0].split(":", 1)[0]
        text = f"{where}: {len(fresh)} keys nothing reads are ignored ({shown}); `lev config` says why for each"
    warnings.warn(text, ConfigWarning, stacklevel=3)


def _ignored_key(message: str) -> str:
    """The dotted key a warning of :func:`_not_ours` is about."""
    body = message.split(": ", 1)[1]
    if body.startswith("unknown key '"):
        return body[len("unknown key '"):].split("'", 1)[0]
    return body.split(" ", 1)[0]


# Sections whose keys are long and unambiguous enough to be given by their own name alone
# (`configure(max_concurrent_inferences=4)`, `lev -c default_max_iterations=10`).
_SHORTCUT_SECTIONS = ("limits", "security")


def _leaf_names() -> dict[str, Key]:
    """The [limits] and [security] keys by their own name (each names one key only)."""
    return {key[-1]: key for key, _ in static_keys() if len(key) == 2 and key[0] in _SHORTCUT_SECTIONS}


def _override_key(name: str) -> Key:
    """Resolve one ``configure()`` keyword to a key path, or raise with a "did you mean"."""
    if name in SCHEMA.fields:
        return (name,)
    if "." in name:
        return split_dotted(name)
    short = _leaf_names()
    if name in short:
        return short[name]
    # Suggest by full path, by top-level name, or by a key's own name (any section).
    by_leaf: dict[str, Key] = {}
    for key, _ in static_keys():
        by_leaf.setdefault(key[-1], key)
    everything = [dotted(k) for k, _ in static_keys()] + list(SCHEMA.fields) + list(by_leaf)
    close = closest(name, everything)
    hint = None
    if close:
        target = by_leaf.get(close)
        hint = f"did you mean '{dotted(target) if target else close}'?"
    raise ConfigError(f"unknown setting '{name}'", origin="lev_nb.configure()", hint=hint)


def configure(**overrides: Any) -> Settings:
    """Set session overrides (above the environment and the file) and return the effective settings.

    Keywords are top-level keys (``default_model="..."``), whole sections as dicts
    (``limits={"max_concurrent_inferences": 4}``), dotted keys (``**{"security.read_paths": [...]}``)
    or a ``[limits]`` / ``[security]`` key by its own name (``max_concurrent_inferences=4``). ``None``
    removes an override. A misspelt name or a value of the wrong type raises :class:`ConfigError`
    and changes nothing. :func:`clear_session` removes every override.
    """
    global _generation
    with _lock:
        updates: dict[str, Any] = {}
        removals: list[Key] = []
        for name, value in overrides.items():
            key = _override_key(name)
            if value is None:
                removals.append(key)
            else:
                _nest(updates, key, value)
        if updates:
            _flatten_overrides(updates, _SESSION)  # check before anything changes
        candidate = _deep_copy(_session)
        for key in removals:
            _remove(candidate, key)
        _merge(candidate, updates)
        settings = load(config_path(), session=candidate, launch=_launch)
        _session.clear()
        _session.update(candidate)
        _generation += 1
        return settings


def clear_session() -> None:
    """Remove every ``configure()`` override."""
    global _generation
    with _lock:
        _session.clear()
        _generation += 1


def session_overrides() -> dict[str, Any]:
    """A copy of the current session overrides (nested like the file)."""
    with _lock:
        return _deep_copy(_session)


def check_launch(assignments: Mapping[str, Any]) -> None:
    """Raise :class:`ConfigError` if the launch options name an unknown key or a bad value."""
    _flatten_overrides(assignments, _LAUNCH)


@contextmanager
def launch_options(assignments: Mapping[str, Any]) -> Iterator[None]:
    """Apply launch options (nested, as from :func:`parse_assignments`) for the duration of a command,
    over the ones already in force (``lev doctor`` adds its own to the command's ``-c`` options)."""
    global _generation
    with _lock:
        _flatten_overrides(assignments, _LAUNCH)
        previous = _deep_copy(_launch)
        _merge_into(_launch, _deep_copy(dict(assignments)))
        _generation += 1
    try:
        yield
    finally:
        with _lock:
            _launch.clear()
            _launch.update(previous)
            _generation += 1


def _merge_into(into: dict[str, Any], more: Mapping[str, Any]) -> None:
    for key, value in more.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _merge_into(into[key], value)
        else:
            into[key] = value


def parse_assignments(items: Iterable[str]) -> dict[str, Any]:
    """``["limits.max_concurrent_inferences=4", ...]`` -> a nested override table (values stay text)."""
    data: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"'{item}' is not KEY=VALUE", origin="the -c option",
                              hint="for example -c limits.max_concurrent_inferences=4")
        key = split_dotted(name.strip())
        if key[0] not in SCHEMA.fields and len(key) == 1:
            key = _leaf_names().get(key[0], key)
        _nest(data, key, value)
    return data


def _lookup(node: Node, key: Key) -> Node | None:
    for part in key:
        if isinstance(node, Table):
            nxt = node.fields.get(part)
            if nxt is None:
                return None
            node = nxt
        elif isinstance(node, MapOf):
            node = node.item
        else:
            return None
    return node


def _deep_copy(data: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _deep_copy(v) if isinstance(v, Mapping) else v for k, v in data.items()}


def _merge(into: dict[str, Any], new: Mapping[str, Any], key: Key = ()) -> None:
    """Merge override tables; a value the schema types as one key (a free-form table) is replaced whole."""
    for k, v in new.items():
        here = key + (k,)
        if isinstance(v, Mapping) and isinstance(into.get(k), dict) and not isinstance(_lookup(SCHEMA, here), Value):
            _merge(into[k], v, here)
        else:
            into[k] = _deep_copy(v) if isinstance(v, Mapping) else v


def _remove(data: dict[str, Any], key: Key) -> None:
    for part in key[:-1]:
        nxt = data.get(part)
        if not isinstance(nxt, dict):
            return
        data = nxt
    data.pop(key[-1], None)


# ------------------------------------------------------------------------------------------------
# What `lev config` lists
# ------------------------------------------------------------------------------------------------
@record
class Row:
    """One effective value: its dotted key, value and where it came from."""

    key: str
    value: Any
    source: Source


def rows(settings: Settings) -> list[Row]:
    """Every key with its effective value, in the order of the format, user-named entries included."""
    out: list[Row] = []
    _rows(SCHEMA, (), settings, settings, out)
    return out


def _rows(node: Node, key: Key, value: Any, settings: Settings, out: list[Row]) -> None:
    if isinstance(node, Value):
        out.append(Row(dotted(key), value, settings.source(dotted(key))))
    elif isinstance(node, Table):
        for name, child in node.fields.items():
            _rows(child, key + (name,), getattr(value, name), settings, out)
    else:
        for name, item in value.items():
            _rows(node.item, key + (name,), item, settings, out)
