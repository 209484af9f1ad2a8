"""Slots where the layers above the engine plug in their views of engine objects (the layer
contract of the package map; no spec section).

The engine knows nothing of notebooks or terminals (the layer contract forbids the import), yet a
``Run`` and a final output should draw themselves in Jupyter and ``run.widget()`` should give the
live view. So each such object asks this registry for a view by name; the package facade
(``lev_nb/__init__.py``) fills the slots with the notebook's views, loaded on first use. With a slot
left empty (nothing registered), objects fall back to plain text.

One slot is not a display: ``RUN_OBSERVER``, where tracing (:mod:`lev_nb.observability`) is handed
to every run as it is created, so a run's events can become spans without the engine importing it.
Two more let a notebook be the person a run asks: ``PERSON_HERE`` says, as a run is created,
whether somebody can answer it where it was started (a Jupyter kernel, whose run views hold the
forms), and ``RUN_WAITER`` waits for a run while the forms keep answering (a cell blocked in
``run.wait()`` or ``await run`` would otherwise hold back the clicks).
"""

# No `from __future__ import annotations`: importing __future__ is a measurable part of `lev --help`;
# names known only to type checkers are quoted instead.

TYPE_CHECKING = False  # not from typing: `import lev_nb` (and `lev --help`) would import it

if TYPE_CHECKING:
    from typing import Any, Callable

__all__ = ["provide", "view", "has_view", "run_observer", "RUN_BUNDLE", "OUTPUT_BUNDLE", "RUN_WIDGET", "BATCH_VIEW",
           "BATCH_TABLE", "RUN_OBSERVER", "PERSON_HERE", "RUN_WAITER", "RUN_AWAITER", "person_here", "EVAL_PROGRESS", "EVAL_BUNDLE", "COMPARE_BUNDLE"]

RUN_BUNDLE = "run_bundle"  # (run) -> MIME bundle dict
OUTPUT_BUNDLE = "output_bundle"  # (final output) -> MIME bundle dict
RUN_WIDGET = "run_widget"  # (run, stages) -> a live view object
BATCH_VIEW = "batch_view"  # (batch progress) -> a live view object with update(progress)
BATCH_TABLE = "batch_table"  # (list of RunSummary) -> MIME bundle (a table)
# (settings, run_id, parent_run_id) -> a callback for the run's events, or None (tracing is off)
RUN_OBSERVER = "run_observer"
PERSON_HERE = "person_here"  # () -> bool: a person can answer a run started here (a notebook kernel)
# (run, timeout) -> True when it waited for the run (else the caller waits plainly); may raise TimeoutError
RUN_WAITER = "run_waiter"
RUN_AWAITER = "run_awaiter"  # (run) -> an awaitable that ends with the run, or None (await plainly)
# The evaluation layer's (lev_nb.eval), which sits above the engine but below the notebook too:
EVAL_PROGRESS = "eval_progress"  # (title, total) -> a live view with update(progress) and done(evaluation)
EVAL_BUNDLE = "eval_bundle"  # (evaluation) -> MIME bundle
COMPARE_BUNDLE = "eval_compare_bundle"  # (comparison) -> MIME bundle

_slots: "dict[str, Callable[..., Any]]" = {}


def provide(name: str, factory: "Callable[..., Any]") -> None:
    """Fill the slot ``name`` with ``factory`` (a later call replaces an earlier one)."""
    _slots[name] = factory


def has_view(name: str) -> bool:
    """True when something fills the slot ``name``."""
    return name in _slots


def view(name: str, *args: "Any", **kwargs: "Any") -> "Any":
    """Call the factory in slot ``name``; LookupError when the slot is empty."""
    factory = _slots.get(name)
    if factory is None:
        raise LookupError(f"no view is registered for '{name}'; `import lev_nb` fills the view slots")
    return factory(*args, **kwargs)


def run_observer(settings: "Any", run_id: str, parent_run_id: str | None) -> "Callable[[Any], None] | None":
    """What ``RUN_OBSERVER`` hands a new run to subscribe to its events, or None (nothing
    registered, or the observer is off). May raise ConfigError (it is configured and cannot work)."""
    factory = _slots.get(RUN_OBSERVER)
    if factory is None:
        return None
    observer: Callable[[Any], None] | None = factory(settings, run_id, parent_run_id)
    return observer


def person_here() -> bool:
    """Whether a person can answer a run started now, where it is started (``PERSON_HERE``)."""
    factory = _slots.get(PERSON_HERE)
    return bool(factory()) if factory is not None else False
