"""The base of the blueprint's tables: immutable records that remember which keys a blueprint wrote.

The loader (:mod:`lev_nb.blueprint.loader`) checks every key and value itself, with the file, line
and key path a user needs, and builds tables from values it has already checked. So a table holds
checked values and answers questions about them; it does not validate again. It needs no library:
importing pydantic and building thirty models was about 170 ms of the 290 ms a ``lev validate``
took in a new process (``python -m bench --only cold``), for a container nobody validated through.

A table class declares its keys as annotated class attributes, with a plain default or
:func:`field` (a default factory, the TOML spelling when it differs, or ``exclude`` for a value the
loader takes from the table's own key, such as a stage's name). An instance has:

- its keys as attributes, in ``__dict__``; assigning one raises :class:`FrozenTable`;
- ``model_fields_set``: the keys it was given (what :meth:`Blueprint.to_toml` writes back);
- ``model_extra``: the unknown keys a *lenient* table kept (``None`` on a strict one);
- ``model_dump``, ``model_copy``, ``model_fields``, ``model_config``: the reading API the rest of
  lev_nb, the docs and users' notebooks already use, with the same names and meanings.

Private attributes (a name with a leading underscore, declared with :func:`private`) may be set
after construction: they carry provenance such as the file a blueprint was read from.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from typing import Any, ClassVar, Literal, TypeVar, dataclass_transform

from lev_nb.records import evaluated_annotation

__all__ = ["FrozenTable", "Key", "Table", "field", "private"]

_T = TypeVar("_T", bound="Table")


class _Missing:
    def __repr__(self) -> str:
        return "<required>"


_MISSING: Any = _Missing()


class FrozenTable(AttributeError):
    """Raised on assigning to or deleting an attribute of a table: tables are immutable."""


class Key:
    """What a table knows of one of its keys (``Table.model_fields[name]``)."""

    __slots__ = ("name", "default", "default_factory", "alias", "exclude", "description", "_owner", "_hint")

    def __init__(self, default: Any = _MISSING, *, default_factory: Callable[[], Any] | None = None,
                 alias: str | None = None, exclude: bool = False, description: str | None = None) -> None:
        self.name = ""
        self.default = default
        self.default_factory = default_factory
        self.alias = alias
        self.exclude = exclude
        self.description = description
        self._owner: type | None = None
        self._hint: Any = _MISSING

    def is_required(self) -> bool:
        """True when the key has neither a default nor a default factory."""
        return self.default is _MISSING and self.default_factory is None

    def get_default(self) -> Any:
        """The key's default value (a new one from the factory each time)."""
        return self.default_factory() if self.default_factory is not None else self.default

    @property
    def annotation(self) -> Any:
        """The key's type, resolved from the declaring class's annotation when first asked."""
        if self._hint is not _MISSING:
            return self._hint
        assert self._owner is not None
        hint = evaluated_annotation(self._owner, self._owner.__dict__["__annotations__"][self.name])
        self._hint = hint
        return hint

    def __repr__(self) -> str:
        return f"Key({self.name!r}, default={self.default!r}, alias={self.alias!r}, exclude={self.exclude})"


def field(default: Any = _MISSING, *, default_factory: Callable[[], Any] | None = None,
        alias: str | None = None, exclude: bool = False, description: str | None = None) -> Any:
    """Declare a table key with more than a plain default (typed ``Any`` so the declaration
    type-checks against the key's own annotation)."""
    return Key(default, default_factory=default_factory, alias=alias, exclude=exclude, description=description)


class _Private:
    __slots__ = ("default", "default_factory")

    def __init__(self, default: Any, default_factory: Callable[[], Any] | None) -> None:
        self.default = default
        self.default_factory = default_factory


def private(default: Any = None, *, default_factory: Callable[[], Any] | None = None) -> Any:
    """Declare a private attribute: not a key of the table, settable after construction."""
    return _Private(default, default_factory)


@dataclass_transform(kw_only_default=True, frozen_default=True, field_specifiers=(field,))
class Table:
    """An immutable table of a blueprint; ``extra="allow"`` on a subclass makes it lenient.

    ``Table(**values)`` builds one from values the caller vouches for, as the loader's
    :func:`~lev_nb.blueprint.model.construct` does: keys may be given by name or TOML spelling, a
    strict table refuses unknown ones (:class:`TypeError`) and a lenient one keeps them.
    """

    __slots__ = ("__dict__", "model_fields_set", "model_extra", "_private")

    model_config: ClassVar[dict[str, Any]] = {"frozen": True, "extra": "forbid"}
    model_fields: ClassVar[dict[str, Key]] = {}
    # The loader's fast path, computed once per class: alias -> name, and the keys' defaults.
    _aliases: ClassVar[dict[str, str]] = {}
    _plan: ClassVar[tuple[tuple[str, Any, Callable[[], Any] | None], ...]] = ()
    _privates: ClassVar[dict[str, _Private]] = {}

    model_fields_set: set[str]
    model_extra: dict[str, Any] | None
    _private: dict[str, Any] | None

    def __init_subclass__(cls, extra: Literal["allow", "forbid"] | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if extra is not None:
            cls.model_config = {**cls.model_config, "extra": extra}
        fields = dict(cls.model_fields)
        privates = dict(cls._privates)
        for name in cls.__dict__.get("__annotations__", {}):
            if name.startswith("__") or name in Table.__annotations__:  # the base's own attributes
                continue
            value = cls.__dict__.get(name, _MISSING)
            if name.startswith("_"):
                privates[name] = value if isinstance(value, _Private) else _Private(
                    None if value is _MISSING else value, None)
                if name in cls.__dict__:
                    delattr(cls, name)
                continue
            spec = value if isinstance(value, Key) else Key(value)
            spec.name, spec._owner = name, cls
            fields[name] = spec
            if name in cls.__dict__:
                delattr(cls, name)  # the value lives in each instance's __dict__, not on the class
        cls.model_fields = fields
        cls._privates = privates
        cls._aliases = {f.alias: n for n, f in fields.items() if f.alias and f.alias != n}
        cls._plan = tuple((n, f.default, f.default_factory) for n, f in fields.items())

    def __init__(self, **values: Any) -> None:
        cls = type(self)
        if cls.model_config["extra"] != "allow":
            unknown = [k for k in values if k not in cls.model_fields and k not in cls._aliases]
            if unknown:
                raise TypeError(f"{cls.__name__} has no key {', '.join(map(repr, unknown))}; "
                                f"it has {', '.join(cls.model_fields)}")
        # Built by hand, not by the loader: the values are checked against the keys' types here.
        for given, value in values.items():
            spec = cls.model_fields.get(cls._aliases.get(given, given))
            if spec is not None and not _conforms(value, spec.annotation):
                raise TypeError(f"{cls.__name__}.{given} must be {_describe(spec.annotation)}, not {value!r}")
        _fill(self, values)

    @classmethod
    def model_construct(cls: type[_T], **values: Any) -> _T:
        """Build a table from checked values (the same as calling the class)."""
        return cls(**values)

    @classmethod
    def from_checked(cls: type[_T], **values: Any) -> _T:
        """Build a table from values already checked against its keys (the loader's fast path:
        no type check; given keys become ``model_fields_set``, unknown ones ``model_extra`` on a
        lenient table)."""
        instance = cls.__new__(cls)
        _fill(instance, values)
        return instance

    # -- immutability -----------------------------------------------------------------------------
    def __setattr__(self, name: str, value: Any) -> None:
        privates = self._private
        if privates is not None and name in privates:
            privates[name] = value
            return
        raise FrozenTable(f"{type(self).__name__} is immutable: '{name}' cannot be set "
                          "(model_copy(update={...}) makes a changed copy)")

    def __delattr__(self, name: str) -> None:
        raise FrozenTable(f"{type(self).__name__} is immutable: '{name}' cannot be deleted")

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails: a private attribute, or a lenient table's unknown key.
        if not name.startswith("__"):
            try:
                privates = object.__getattribute__(self, "_private")
                if privates is not None and name in privates:
                    return privates[name]
                extra = object.__getattribute__(self, "model_extra")
                if extra is not None and name in extra:
                    return extra[name]
            except AttributeError:  # a half-built instance (during unpickling)
                pass
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __getstate__(self) -> tuple[dict[str, Any], set[str], dict[str, Any] | None, dict[str, Any] | None]:
        return self.__dict__, self.model_fields_set, self.model_extra, self._private

    def __setstate__(self, state: tuple[dict[str, Any], set[str], dict[str, Any] | None, dict[str, Any] | None]) -> None:
        data, fields_set, extra, privates = state
        object.__setattr__(self, "__dict__", data)
        object.__setattr__(self, "model_fields_set", fields_set)
        object.__setattr__(self, "model_extra", extra)
        object.__setattr__(self, "_private", privates)

    def set_private(self, **values: Any) -> None:
        """Set private attributes (such as where a blueprint was read from) after construction."""
        privates = self._private
        unknown = [k for k in values if privates is None or k not in privates]
        if unknown:
            raise AttributeError(f"{type(self).__name__} has no private attribute {', '.join(unknown)}")
        assert privates is not None
        privates.update(values)

    # -- value semantics ------------------------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Table)
        return self.__dict__ == other.__dict__ and self.model_extra == other.model_extra

    def __hash__(self) -> int:
        return hash((type(self), *self.__dict__.values()))

    def __repr__(self) -> str:
        parts = [f"{k}={v!r}" for k, v in self.__dict__.items()]
        parts += [f"{k}={v!r}" for k, v in (self.model_extra or {}).items()]
        return f"{type(self).__name__}({', '.join(parts)})"

    # -- reading ----------------------------------------------------------------------------------------
    def model_dump(self, *, exclude_unset: bool = False, by_alias: bool = False,
                   exclude_none: bool = False) -> dict[str, Any]:
        """The table as plain dicts and lists: its keys in declaration order, then a lenient
        table's unknown keys; excluded keys (those taken from the table's own key) left out."""
        return _dump_table(self, exclude_unset, by_alias, exclude_none)

    def model_copy(self: _T, *, update: dict[str, Any] | None = None) -> _T:
        """A copy with ``update`` applied (the updated keys count as written)."""
        copy = type(self).__new__(type(self))
        data = dict(self.__dict__)
        fields_set = set(self.model_fields_set)
        extra = dict(self.model_extra) if self.model_extra is not None else None
        for name, value in (update or {}).items():
            name = self._aliases.get(name, name)
            if name in self.model_fields:
                data[name] = value
            elif extra is not None:
                extra[name] = value
            else:
                raise TypeError(f"{type(self).__name__} has no key {name!r}")
            fields_set.add(name)
        copy.__setstate__((data, fields_set, extra, dict(self._private) if self._private is not None else None))
        return copy


def _conforms(value: Any, hint: Any) -> bool:
    """Whether ``value`` is of the type a key declares (the forms the blueprint's tables use)."""
    if hint is Any:
        return True
    if hint is None or hint is type(None):
        return value is None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_conforms(value, a) for a in args)
    if origin is Literal:
        return value in args
    if origin is list:
        return isinstance(value, list) and all(_conforms(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(_conforms(v, args[1]) for v in value.values())
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def _describe(hint: Any) -> str:
    """A key's type in words, for the error of a table built by hand with a wrong value."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in args)
    if origin is Literal:
        return "one of " + ", ".join(map(repr, args))
    if origin is list:
        return f"a list of {_describe(args[0])}"
    if origin is dict:
        return f"a table of {_describe(args[1])}"
    if hint is type(None):
        return "None"
    return "anything" if hint is Any else getattr(hint, "__name__", str(hint))


def _fill(instance: Table, values: dict[str, Any]) -> None:
    """Set a new table's keys from ``values`` (consumed), defaults for the rest."""
    cls = type(instance)
    for alias, name in cls._aliases.items():
        if alias in values:
            values[name] = values.pop(alias)
    data: dict[str, Any] = {}
    fields_set: set[str] = set()
    for name, default, factory in cls._plan:
        if name in values:
            data[name] = values.pop(name)
            fields_set.add(name)
        elif factory is not None:
            data[name] = factory()
        elif default is _MISSING:
            raise TypeError(f"{cls.__name__} needs the key {name!r}")
        else:
            data[name] = default
    lenient = cls.model_config["extra"] == "allow"
    if lenient:
        fields_set.update(values)
    privates = {k: (p.default_factory() if p.default_factory is not None else p.default)
                for k, p in cls._privates.items()} or None
    object.__setattr__(instance, "__dict__", data)
    object.__setattr__(instance, "model_fields_set", fields_set)
    object.__setattr__(instance, "model_extra", dict(values) if lenient else None)
    object.__setattr__(instance, "_private", privates)


def _dump_value(value: Any, exclude_unset: bool, by_alias: bool, exclude_none: bool) -> Any:
    if isinstance(value, Table):
        return _dump_table(value, exclude_unset, by_alias, exclude_none)
    if isinstance(value, list | tuple):
        return [_dump_value(v, exclude_unset, by_alias, exclude_none) for v in value]
    if isinstance(value, dict):
        return {k: _dump_value(v, exclude_unset, by_alias, exclude_none) for k, v in value.items()}
    return value


def _dump_table(table: Table, exclude_unset: bool, by_alias: bool, exclude_none: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    fields = table.model_fields
    written = table.model_fields_set
    for name, value in table.__dict__.items():
        spec = fields[name]
        if spec.exclude or (exclude_unset and name not in written) or (exclude_none and value is None):
            continue
        out[spec.alias if by_alias and spec.alias else name] = _dump_value(value, exclude_unset, by_alias, exclude_none)
    for name, value in (table.model_extra or {}).items():
        if not (exclude_none and value is None):
            out[name] = _dump_value(value, exclude_unset, by_alias, exclude_none)
    return out

