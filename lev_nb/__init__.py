"""lev_nb: design, try and run multi-stage LLM agents in a notebook.

The public API is deliberately small; heavier submodules load on first use so that
``import lev_nb`` stays cheap in a notebook kernel.
"""

# No `from __future__ import annotations`: importing __future__ is a measurable part of `lev --help`;
# names known only to type checkers are quoted instead.

TYPE_CHECKING = False  # not `from typing import ...`: typing costs every `import lev_nb` (and `lev --help`)

if TYPE_CHECKING:
    from typing import Any, Callable

    # The lazy exports below, as type checkers should see them (at run time __getattr__ loads them).
    from lev_nb.blueprint import Blueprint, BlueprintError, Report
    from lev_nb.catalog import load
    from lev_nb.batch import RunSummary, run_many
    from lev_nb.eval import Evaluation, evaluate, load_evaluation
    from lev_nb.engine.api import resume, run
    from lev_nb.engine.handle import Run, RunNotFinished
    from lev_nb.engine.interaction import InteractionError
    from lev_nb.engine.launch import LaunchError
    from lev_nb.engine.resume import ResumeError
    from lev_nb.explain.table import RunTable, runs
    from lev_nb.providers import MockModel, ScriptedModel, register_provider
    from lev_nb.verdict import validate
    from lev_nb.notebook.designer import designer
    from lev_nb.version import __version__

__all__ = [
    "__version__", "Blueprint", "BlueprintError", "Report", "Run", "load", "validate", "run",
    "ScriptedModel", "MockModel", "config", "configure", "ConfigError", "Settings", "LaunchError",
    "InteractionError", "RunNotFinished",
    "resume", "ResumeError",
    "run_many", "RunSummary", "register_provider",
    "runs", "RunTable",
    "evaluate", "Evaluation", "load_evaluation",
    "designer",
]

# Lazy exports: name -> (module, attribute). Resolved on first access by __getattr__.
_LAZY_EXPORTS: dict[str, tuple[str, str]] = {
    "__version__": ("lev_nb.version", "__version__"),  # lazy too: a module less for `lev --help` to load
    "load": ("lev_nb.catalog", "load"),
    "validate": ("lev_nb.verdict", "validate"),
    "Blueprint": ("lev_nb.blueprint", "Blueprint"),
    "BlueprintError": ("lev_nb.blueprint", "BlueprintError"),
    "Report": ("lev_nb.blueprint", "Report"),
    "Run": ("lev_nb.engine.handle", "Run"),
    # run.result asked before the run has ended (run.wait() or await run first).
    "RunNotFinished": ("lev_nb.engine.handle", "RunNotFinished"),
    # A run that cannot start as asked (bp.run / lev_nb.run): raised before anything is written.
    "LaunchError": ("lev_nb.engine.launch", "LaunchError"),
    # An answer (run.respond) or a message (run.send) the run cannot take.
    "InteractionError": ("lev_nb.engine.interaction", "InteractionError"),
    "run": ("lev_nb.engine.api", "run"),
    # Continue a paused run, or one whose process was killed, from its record.
    "resume": ("lev_nb.engine.api", "resume"),
    "ResumeError": ("lev_nb.engine.resume", "ResumeError"),
    # One blueprint over many tasks, across processes or a Dask cluster (lev_nb/batch).
    "run_many": ("lev_nb.batch", "run_many"),
    "RunSummary": ("lev_nb.batch", "RunSummary"),
    # The run store as a table (status, agent, stages, calls, tokens, cost, ...): lev_nb/explain.
    "runs": ("lev_nb.explain.table", "runs"),
    "RunTable": ("lev_nb.explain.table", "RunTable"),
    # An agent over a dataset, each answer checked, recorded under $LEV_HOME/evals (lev_nb/eval).
    "evaluate": ("lev_nb.eval", "evaluate"),
    "Evaluation": ("lev_nb.eval", "Evaluation"),
    "load_evaluation": ("lev_nb.eval", "load_evaluation"),
    # A live blueprint editor widget: re-validates and redraws as you type, dry run on the mock model.
    "designer": ("lev_nb.notebook.designer", "designer"),
    "ScriptedModel": ("lev_nb.providers", "ScriptedModel"),
    "MockModel": ("lev_nb.providers", "MockModel"),
    # A model backend of your own, named by stages as provider = "<name>" (README "Models and providers").
    "register_provider": ("lev_nb.providers", "register_provider"),
    # The user's configuration: `lev_nb.config()` is the effective settings (README "Configuration").
    "config": ("lev_nb.settings.loader", "current"),
    "configure": ("lev_nb.settings.loader", "configure"),
    "ConfigError": ("lev_nb.settings.errors", "ConfigError"),
    "Settings": ("lev_nb.settings.model", "Settings"),
}


def __getattr__(name: str) -> object:
    target = _LAZY_EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'lev_nb' has no attribute {name!r}")
    from importlib import import_module  # not at the top: importlib loads warnings, and `lev --help` needs neither

    value = getattr(import_module(target[0]), target[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public API, so ``lev_nb.<Tab>`` offers the lazy exports without importing them."""
    return sorted(set(__all__) | {"load_ipython_extension"})


def _notebook_view(module: str, name: str) -> "Callable[..., Any]":
    """A factory that imports ``module`` on first call, so ``import lev_nb`` stays cheap."""

    def make(*args: "Any", **kwargs: "Any") -> "Any":
        from importlib import import_module

        return getattr(import_module(module), name)(*args, **kwargs)

    return make


def _wire_notebook_views() -> None:
    """Fill the engine's view slots with the notebook's views (the engine never imports them)."""
    from lev_nb.engine import views

    views.provide(views.RUN_BUNDLE, _notebook_view("lev_nb.notebook.display", "run_summary_bundle"))
    views.provide(views.OUTPUT_BUNDLE, _notebook_view("lev_nb.notebook.display", "final_output_bundle"))
    views.provide(views.RUN_WIDGET, _notebook_view("lev_nb.notebook.widget", "RunWidget"))
    views.provide(views.BATCH_VIEW, _notebook_view("lev_nb.notebook.batchview", "BatchView"))
    views.provide(views.BATCH_TABLE, _notebook_view("lev_nb.notebook.batchview", "summaries_bundle"))
    # A notebook kernel is a person a run can ask, and waiting there keeps the forms answering.
    views.provide(views.PERSON_HERE, _notebook_view("lev_nb.notebook.asking", "person_here"))
    views.provide(views.RUN_WAITER, _notebook_view("lev_nb.notebook.asking", "wait"))
    views.provide(views.RUN_AWAITER, _notebook_view("lev_nb.notebook.asking", "await_run"))
    views.provide(views.EVAL_PROGRESS, _notebook_view("lev_nb.notebook.evalview", "EvalProgressView"))
    views.provide(views.EVAL_BUNDLE, _notebook_view("lev_nb.notebook.evalview", "eval_bundle"))
    views.provide(views.COMPARE_BUNDLE, _notebook_view("lev_nb.notebook.evalview", "compare_bundle"))


def _wire_tracing() -> None:
    """Let each new run ask lev_nb.observability whether to trace it (the engine never imports it;
    OpenTelemetry itself loads only when [observability] or OTEL_TRACES_EXPORTER turns tracing on)."""
    from lev_nb.engine import views

    views.provide(views.RUN_OBSERVER, _notebook_view("lev_nb.observability", "observe_run"))


_wire_notebook_views()
_wire_tracing()


def load_ipython_extension(ipython: object) -> None:
    """``%load_ext lev_nb``: register the %lev, %%lev, %%blueprint and %%rhai magics."""
    from lev_nb.notebook import load_ipython_extension as load

    load(ipython)
