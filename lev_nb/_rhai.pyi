"""Type stubs for the native Rhai module (built from rust_ext/)."""

from collections.abc import Callable
from typing import Any

RHAI_VERSION: str
MAX_VARIADIC_ARITY: int
DEFAULT_LIMITS: dict[str, int | None]
"""The default of every limit, keyed by ``Engine``'s keyword arguments (from ``Limits::DEFAULT``)."""
STACK_SIZE: int
"""Native stack, in bytes, of the threads every compilation and evaluation runs on."""
MAX_NESTING: int
"""Deepest nesting of data crossing to or from Python, or serialised by ``to_json``."""

class RhaiError(Exception):
    """Any error raised by a Rhai script."""

    message: str | None
    """The script's own message (e.g. the thrown value), without position."""
    line: int | None
    """1-based line of the error, None when unknown."""
    position: int | None
    """1-based column of the error, None when unknown."""
    value: Any
    """The thrown value as Python data for `throw`, else None."""

class RhaiSyntaxError(RhaiError):
    """The script does not compile."""

class RhaiRuntimeError(RhaiError):
    """The script failed while running; scripts can catch these with try/catch."""

class RhaiLimitError(RhaiError):
    """A sandbox limit stopped the script; scripts cannot catch these."""

class NotPlainDataError(TypeError):
    """A script's result is not plain data (function pointer, timestamp, ...)."""

class AST:
    """A compiled script, immutable and shareable between threads."""

    @property
    def functions(self) -> list[tuple[str, int]]:
        """`(name, arity)` of each function the script defines, sorted."""

class Engine:
    """A hardened Rhai engine."""

    def __new__(
        cls,
        *,
        max_operations: int = ...,
        max_string_size: int = ...,
        max_array_size: int = ...,
        max_map_size: int = ...,
        max_call_levels: int = ...,
        max_expr_depth: int = ...,
        max_function_expr_depth: int = ...,
        timeout_ms: int | None = ...,
        max_memory: int = ...,
        max_script_size: int = ...,
        max_functions: int = ...,
        max_compile_ms: int = ...,
        on_print: Callable[[str], object] | None = None,
        on_debug: Callable[[str], object] | None = None,
    ) -> Engine:
        """Each limit left out takes its value in ``DEFAULT_LIMITS``; ``max_operations=0`` or
        ``timeout_ms=None`` lifts that bound. A limit outside its range (negative, or more than
        the evaluation stack can take) raises ValueError saying why."""
    @property
    def limits(self) -> dict[str, int | None]: ...
    @property
    def registered(self) -> list[str]: ...
    def compile(self, source: str) -> AST: ...
    def eval(self, source: str, **variables: Any) -> Any: ...
    def run(self, ast: AST, **variables: Any) -> Any: ...
    def call(self, ast: AST, fn_name: str, *args: Any) -> Any: ...
    def register_fn(self, name: str, func: Callable[..., Any], arities: list[int]) -> None: ...
    def start(self, dispatch: Dispatch, tag: Any, ast: AST, fn_name: str, *args: Any) -> Evaluation:
        """Start ``call(ast, fn_name, *args)`` on an evaluation thread served by ``dispatch``."""

class Dispatch:
    """The ready list of the detached evaluations one event loop serves."""

    def fileno(self) -> int:
        """The descriptor to watch for reading."""
    def ready(self) -> list[Evaluation]:
        """The evaluations that need their loop now; empties the pipe."""

class Evaluation:
    """A detached evaluation (``Engine.start``)."""

    @property
    def tag(self) -> Any: ...
    def step(self) -> bool:
        """Run its due callback or collect its end; True once it has ended."""
    def result(self) -> Any:
        """The ended evaluation's value, or what ``Engine.call`` would raise."""
    def cancel(self) -> None:
        """Fail every callback from now on."""

class Value:
    """Data converted to a Rhai value once; inside later arguments it is cloned natively."""

    def __init__(self, data: Any) -> None: ...
    def to_python(self) -> Any:
        """The value as Python data again (a fresh copy)."""

class Later:
    """A host function's answer still to come."""

    def __init__(self) -> None: ...
    def resolve(self, value: Any) -> bool:
        """Answer with ``value``; False when already answered."""
    def fail(self, message: str) -> bool:
        """Fail the call with ``message`` (catchable); False when already answered."""
    @property
    def answered(self) -> bool: ...

def append_batch(appends: list[tuple[str, bytes, int | None]]) -> list[tuple[int, int, int]]:
    """Append each ``(path, data, expected_size)`` with the interpreter lock released once for the
    batch; per file ``(size_after or -1, foreign_bytes, errno)`` (see lev_nb.store.files.append_batch)."""
    ...

def replace_batch(files: list[tuple[str, str, bytes, bool, bool]]) -> list[int]:
    """Replace each ``(path, tmp, data, durable, keep_sibling)`` through ``tmp`` with the interpreter
    lock released once for the batch; each file's errno, 0 when replaced (see
    lev_nb.store.files.replace_files, and its ``keep_siblings`` for the last flag)."""
    ...

def real_path(path: str) -> str | None:
    """``path`` with every symlink followed, in one call (None when a part of it does not exist;
    see lev_nb.workspace.real_path)."""
    ...

def mtimes(paths: list[str]) -> list[int | None]:
    """Each path's ``st_mtime_ns`` (None when it cannot be read), in one call for all of them."""
    ...
