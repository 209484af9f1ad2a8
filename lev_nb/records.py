"""Records that are cheap to define: how lev_nb declares its dataclasses.

``@dataclass(frozen=True)`` compiles, from source, an ``__init__``, ``__repr__``, ``__eq__``,
``__hash__``, ``__setattr__`` and ``__delattr__`` for every class it decorates, about 0.1 ms each
at import time; over the hundred-odd value classes (run events, the run plan, the settings,
messages) that a notebook's first ``bp.run`` imports, that was a third of its start-up.
:func:`record` makes the same kind of dataclass (``dataclasses.fields``, ``replace`` and ``asdict``
work as before; type checkers see a dataclass) but compiles one function per class, its
``__init__`` (:func:`_write_init`: the parameters and body ``@dataclass`` would write). The other
methods are the shared functions below, which read the class's fields and behave as the generated
ones do.

The ``__init__`` itself is compiled late: compiling is about 0.2 ms a class, and a process builds
only some of its classes, most of them a few times (a run makes a few kinds of event out of
dozens). A class's first instances are filled by a loop over its fields (:class:`_FieldLoop`, the
same binding, defaults and order); its ``__init__`` is compiled at its ninth instance, at a call
whose arguments do not bind (so that Python itself raises the error), or when the function itself
is looked up (``Cls.__init__``, a signature read).

``@record`` is immutable: assigning or deleting an attribute raises
:class:`dataclasses.FrozenInstanceError`, as on a frozen dataclass. ``@record(frozen=False)`` is the
mutable kind (a run's state, its meta.json record, the messages of a conversation being built).
"""

from __future__ import annotations

import dataclasses
import inspect
import reprlib
import sys
import types
from dataclasses import MISSING, FrozenInstanceError, dataclass
from operator import attrgetter
from typing import Any, Callable, TypeVar, dataclass_transform, overload

__all__ = ["evaluated_annotation", "record"]

T = TypeVar("T")


_compiled_annotations: dict[str, types.CodeType] = {}


def evaluated_annotation(owner: type, annotation: Any) -> Any:
    """``annotation``, as written on ``owner``, evaluated in the module that defines ``owner``.

    Our modules postpone annotations (``from __future__ import annotations``), so a class's
    ``__annotations__`` hold strings. The same few strings recur across the settings and blueprint
    tables, so each is compiled once per process. Only our own classes' annotations come here,
    never input."""
    if not isinstance(annotation, str):
        return annotation
    code = _compiled_annotations.get(annotation)
    if code is None:
        code = _compiled_annotations[annotation] = compile(annotation, "<annotation>", "eval")
    return eval(code, vars(sys.modules[owner.__module__]))  # noqa: S307 - our own source


class _Factory:
    """The default of a parameter whose field has a ``default_factory`` (shown as dataclasses do)."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def _write_init(cls: type, frozen: bool) -> None:
    """Compile ``cls.__init__`` from its fields, with the parameters, defaults, default factories,
    keyword-only fields and ``__post_init__`` call of a dataclass ``__init__``; a frozen one sets
    its fields past its own ``__setattr__``, as dataclasses do."""
    env: dict[str, Any] = {"_FACTORY": _FACTORY, "_set": object.__setattr__}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    for f in dataclasses.fields(cls):
        name = f.name
        factory = f.default_factory is not MISSING
        if factory:
            env[f"_factory_{name}"] = f.default_factory
            default: str | None = "_FACTORY"
        elif f.default is not MISSING:
            env[f"_default_{name}"] = f.default
            default = f"_default_{name}"
        else:
            default = None
        if f.init:
            (keyword if f.kw_only else positional).append(name if default is None else f"{name}={default}")
            value = f"_factory_{name}() if {name} is _FACTORY else {name}" if factory else name
        elif default is not None:  # init=False: set from its default, as dataclasses do
            value = f"_factory_{name}()" if factory else default
        else:
            continue
        body.append(f"_set(self, {name!r}, {value})" if frozen else f"self.{name} = {value}")
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    params = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    source = f"def __init__({params}):\n" + "".join(f"    {line}\n" for line in body or ["pass"])
    exec(source, env)
    init = env["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__annotations__ = {f.name: f.type for f in dataclasses.fields(cls) if f.init} | {"return": None}
    cls.__init__ = init  # type: ignore[misc]


# Instances a record class makes through the field loop before its __init__ is compiled: a
# process starting up makes a few of most of its classes (compiling them all was about 7% of a
# first mock `lev run`), and a class it makes more of gets the compiled one (about 5x faster).
_LOOPED_INSTANCES = 8


class _FieldLoop:
    """What a record's ``__init__`` does, as a loop over its fields, for calls whose arguments
    bind (a call that does not bind goes to the compiled ``__init__``, to raise Python's own
    error): positional then keyword arguments, defaults and default factories, ``init=False``
    fields from their defaults, in field order, then ``__post_init__``."""

    def __init__(self, cls: type, frozen: bool) -> None:
        fields = dataclasses.fields(cls)
        self.cls, self.frozen = cls, frozen
        self.positional = tuple(f.name for f in fields if f.init and not f.kw_only)
        self.accepted = frozenset(f.name for f in fields if f.init)
        self.required = tuple(f.name for f in fields
                              if f.init and f.default is MISSING and f.default_factory is MISSING)
        self.steps = tuple((f.name, f.init, f.default, None if f.default_factory is MISSING else f.default_factory)
                           for f in fields)
        self.post_init = hasattr(cls, "__post_init__")

    def __call__(self, obj: Any, /, *args: Any, **kwargs: Any) -> None:  # "self" may be a keyword given
        if len(args) > len(self.positional):
            return self._compiled(obj, args, kwargs)
        given = dict(zip(self.positional, args))
        for name, value in kwargs.items():
            if name in given or name not in self.accepted:
                return self._compiled(obj, args, kwargs)
            given[name] = value
        if any(name not in given for name in self.required):
            return self._compiled(obj, args, kwargs)
        put = object.__setattr__ if self.frozen else setattr
        for name, init, default, factory in self.steps:
            if init and name in given:
                value = given[name]
            elif factory is not None:
                value = factory()
            elif default is not MISSING:
                value = default
            else:
                continue
            put(obj, name, value)
        if self.post_init:
            obj.__post_init__()
        return None

    def _compiled(self, obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        _compiled_init(self.cls, self.frozen)(obj, *args, **kwargs)


def _compiled_init(cls: type, frozen: bool) -> Any:
    """``cls``'s compiled ``__init__``, compiled now if the class still holds its placeholder (two
    threads may both compile it: the same function, either one kept)."""
    if isinstance(cls.__dict__["__init__"], _InitOnFirstUse):
        _write_init(cls, frozen)
    return cls.__dict__["__init__"]


class _InitOnFirstUse:
    """A record's ``__init__`` until the class has made :data:`_LOOPED_INSTANCES` instances, each
    through :class:`_FieldLoop`, or until the function itself is looked up (``Cls.__init__``, a
    signature read): then compiled (:func:`_write_init`), put in the class in its place, and
    returned bound as the real one would be."""

    def __init__(self, cls: type, frozen: bool) -> None:
        self.cls, self.frozen = cls, frozen
        self.loop: _FieldLoop | None = None
        self.made = 0

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        init: Any = self.cls.__dict__["__init__"]
        if init is self and obj is not None and self.made < _LOOPED_INSTANCES:
            self.made += 1  # a race between threads only moves the switch by an instance or two
            loop = self.loop
            if loop is None:
                loop = self.loop = _FieldLoop(self.cls, self.frozen)
            return types.MethodType(loop, obj)
        return _compiled_init(self.cls, self.frozen).__get__(obj, owner)


def _signature_text(cls: type) -> str:
    """``Name(field: 'type' = default, ...)``, the text ``@dataclass`` gives a class without a
    docstring (written from the fields: reading the signature would compile ``__init__``)."""
    params: list[str] = []
    star = False
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if f.kw_only and not star:
            params.append("*")
            star = True
        text = f"{f.name}: {f.type!r}" if isinstance(f.type, str) else f"{f.name}: {inspect.formatannotation(f.type)}"
        if f.default_factory is not MISSING:
            text += f" = {_FACTORY!r}"
        elif f.default is not MISSING:
            text += f" = {f.default!r}"
        params.append(text)
    return f"{cls.__name__}({', '.join(params)})"


class _Names:
    """What the shared methods read of one record class's fields (worked out on first use)."""

    def __init__(self, cls: type) -> None:
        fields = dataclasses.fields(cls)
        self.shown = tuple(f.name for f in fields if f.repr)
        self.compared = _getter(tuple(f.name for f in fields if f.compare))
        self.hashed = _getter(tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash)))


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """A function giving an instance's values of ``names`` as one tuple."""
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return attrgetter(*names) if names else (lambda obj: ())


_NAMES: dict[type, _Names] = {}


def _names(cls: type) -> _Names:
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = _Names(cls)
    return names


def _setattr(self: Any, name: str, value: Any) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _delattr(self: Any, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


@reprlib.recursive_repr()
def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in _names(type(self)).shown)
    return f"{type(self).__qualname__}({shown})"


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    values = _names(type(self)).compared
    return values(self) == values(other)


def _hash(self: Any) -> int:
    return hash(_names(type(self)).hashed(self))


@overload
def record(cls: type[T], /) -> type[T]: ...


@overload
def record(*, eq: bool = True, frozen: bool = True, slots: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def record(cls: type[T] | None = None, /, *, eq: bool = True, frozen: bool = True, slots: bool = False) -> Any:
    """Make ``cls`` a dataclass, like ``@dataclass(frozen=frozen, eq=eq, slots=slots)``: immutable
    unless ``frozen=False``, compared by value unless ``eq=False`` (then by identity), its fields
    in slots with ``slots=True`` (for a class of more than 30 fields made once per run: past 30,
    Python stops sharing an instance dict's keys, and each instance carries a dict of its own).

    As with ``@dataclass``, an ``__eq__`` makes a mutable record unhashable, and the methods the
    class body defines itself (``__repr__``, ``__eq__``, ``__hash__``) are kept.
    """

    def wrap(cls: type[T]) -> type[T]:
        own = dict(cls.__dict__)
        # A body that defines __eq__ gets __hash__ = None from Python itself: not a choice of its own.
        own_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
        undocumented = own.get("__doc__") is None
        if undocumented:
            cls.__doc__ = cls.__name__  # for now: dataclass() would read a signature to write one
        cls = dataclass(cls, init=False, eq=False, repr=False, slots=slots)
        cls.__init__ = _InitOnFirstUse(cls, frozen)  # type: ignore[assignment,method-assign]
        if undocumented:
            cls.__doc__ = _signature_text(cls)
        if frozen:
            cls.__setattr__ = _setattr  # type: ignore[method-assign]
            cls.__delattr__ = _delattr  # type: ignore[method-assign]
        if "__repr__" not in own:
            cls.__repr__ = _repr  # type: ignore[method-assign]
        if eq:
            if "__eq__" not in own:
                cls.__eq__ = _eq  # type: ignore[method-assign]
            if not own_hash:
                cls.__hash__ = _hash if frozen else None  # type: ignore[method-assign,assignment]
        return cls

    return wrap if cls is None else wrap(cls)
