"""Evaluations (issue 22): an agent over a dataset, every answer judged, the result a table, a
summary and a record that an older or newer evaluation can be compared with. The layer sits above
the batch layer (its runs go through ``run_many``) and below the command line and the notebook.

- :func:`evaluate` (``lev_nb.evaluate``) -> :class:`Evaluation` (:mod:`.run`, :mod:`.evaluation`);
- datasets: lists of dicts, DataFrames, CSV / JSONL files (:mod:`.datasets`);
- checks: built in, Rhai scorers, Python callables (:mod:`.checks`), a model as judge (:mod:`.judge`);
- the record under ``$LEV_HOME/evals/<id>/``: :func:`load_evaluation`, :func:`list_evaluations`
  (:mod:`.record`);
- ``lev test``'s upstream cases, one inference each (:mod:`.prompt_tests`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lev_nb.eval.checks import (
        Answer, Check, Verdict, contains, equals, json_field, json_schema, parse_check, regex, scorer,
    )
    from lev_nb.eval.datasets import Case, DatasetError
    from lev_nb.eval.evaluation import CaseResult, Comparison, Evaluation, Summary
    from lev_nb.eval.judge import Judge
    from lev_nb.eval.record import EvaluationNotFound, list_evaluations, load_evaluation
    from lev_nb.eval.run import evaluate

# Loaded on first use (``lev --help`` reads lev_nb.eval.forms without the rest of the layer).
_LAZY = {
    **dict.fromkeys(["Answer", "Check", "Verdict", "contains", "equals", "json_field", "json_schema", "parse_check",
                     "regex", "scorer"], "lev_nb.eval.checks"),
    "Case": "lev_nb.eval.datasets", "DatasetError": "lev_nb.eval.datasets",
    **dict.fromkeys(["CaseResult", "Comparison", "Evaluation", "Summary"], "lev_nb.eval.evaluation"),
    "Judge": "lev_nb.eval.judge",
    **dict.fromkeys(["EvaluationNotFound", "list_evaluations", "load_evaluation"], "lev_nb.eval.record"),
    "evaluate": "lev_nb.eval.run",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lev_nb.eval' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
