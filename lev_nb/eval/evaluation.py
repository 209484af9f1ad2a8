"""What an evaluation gives back (issue 22): :class:`CaseResult` per run, :class:`Evaluation`
with its :meth:`~Evaluation.summary` (:class:`Summary`), ``to_pandas()`` and
:meth:`~Evaluation.compare` (:class:`Comparison`, case by case).

A case passes when its run completed and every check passed; a run that did not complete fails
with the run's own reason (its checks are not run on an answer that does not exist).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, field
from typing import Any

from lev_nb.eval.checks import Verdict
from lev_nb.eval.stats import percentile, wilson
from lev_nb.records import record

__all__ = ["CaseResult", "Comparison", "Evaluation", "Summary", "PATH_SEPARATOR"]

PATH_SEPARATOR = " → "
FAILURE_GROUPS_SHOWN = 10


@record(frozen=False)
class CaseResult:
    """One run of one case: the case (``index``, ``task``, ``inputs``, ``expected``), the run
    (``run_id``, ``status``, ``error``), the answer (``content``, ``format``), each check's
    ``verdicts``, and what it took (``tokens``, ``cost_usd``, ``duration_s``, ``stage_path``)."""

    index: int
    task: str
    run_id: str | None
    status: str
    passed: bool
    inputs: dict[str, Any] = field(default_factory=dict)
    expected: Any = None
    content: str | None = None
    format: str | None = None
    error: str | None = None
    verdicts: list[Verdict] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    duration_s: float | None = None
    stage_path: list[str] = field(default_factory=list)
    repeat: int = 0
    attempts: int = 1

    @property
    def tokens(self) -> int:
        """Prompt and completion tokens of the run."""
        return self.prompt_tokens + self.completion_tokens

    @property
    def judge_cost_usd(self) -> float:
        """What the judge checks of this case cost (apart from the run's cost)."""
        return sum(v.cost_usd for v in self.verdicts)

    @property
    def reason(self) -> str:
        """Why the case failed (the run's error, or each failed check's reason); '' when it passed."""
        if self.passed:
            return ""
        if self.status != "complete":
            return f"run {self.status}: {self.error or 'no reason recorded'}"
        return "; ".join(f"{v.check}: {v.reason}" for v in self.verdicts if not v.passed)

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON-ready data (one line of the record's cases.jsonl)."""
        data = asdict(self)
        data["verdicts"] = [asdict(v) for v in self.verdicts]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CaseResult":
        """A result read back from its record."""
        data = dict(data)
        data["verdicts"] = [Verdict(**v) for v in data.get("verdicts", [])]
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


@record
class Summary:
    """An evaluation in numbers: the pass rate with its 95% Wilson interval, cost and tokens per
    case, p50/p95 run duration, the failures grouped by reason and the stage paths taken."""

    cases: int
    passed: int
    pass_rate: float
    ci_low: float
    ci_high: float
    cost_usd: float
    cost_per_case: float
    judge_cost_usd: float
    tokens_per_case: float
    p50_s: float | None
    p95_s: float | None
    by_status: dict[str, int]
    failures: list[tuple[str, int]]
    stage_paths: list[tuple[str, int]]

    @property
    def failed(self) -> int:
        """Cases that did not pass."""
        return self.cases - self.passed

    def lines(self) -> list[str]:
        """The summary as lines of text (the terminal's and the plain-text view's)."""
        def secs(v: float | None) -> str:
            return "-" if v is None else f"{v:.2f} s"

        out = [
            f"pass rate {self.pass_rate:.1%} ({self.passed}/{self.cases}), 95% CI {self.ci_low:.1%}-{self.ci_high:.1%}",
            f"cost ${self.cost_usd:.4f} (${self.cost_per_case:.4f} per case; judge ${self.judge_cost_usd:.4f} apart)"
            f", {self.tokens_per_case:.0f} tokens per case",
            f"duration p50 {secs(self.p50_s)}, p95 {secs(self.p95_s)}",
        ]
        if self.failures:
            out.append("failures by reason:")
            out.extend(f"  {count:>4} × {reason}" for reason, count in self.failures)
        if self.stage_paths:
            out.append("stage paths:")
            out.extend(f"  {count:>4} × {path}" for path, count in self.stage_paths)
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


def model_label(model: str | None) -> str:
    """A model spec as views and names show it: a scripted model by its file's name (the record
    keeps the whole spec; a view saved in a notebook keeps no path of this machine)."""
    if not model:
        return "own models"
    if model.startswith("scripted:"):
        return "scripted:" + model[len("scripted:"):].replace("\\", "/").rsplit("/", 1)[-1]
    return model


def _group(reason: str) -> str:
    """A failure's reason as its group: numbers and quoted values blurred, so 'expected 'a', got
    'b'' and 'expected 'c', got 'd'' land together."""
    import re

    return re.sub(r"'[^']*'|\"[^\"]*\"|\d+(\.\d+)?", "…", reason)[:160]


@record(frozen=False)
class Evaluation:
    """An evaluation: what was run (``agent``, ``blueprint_hash``, ``model``, ``dataset``,
    ``dataset_hash``, ``checks``, ``repeats``) and one :class:`CaseResult` per run, in case order.
    ``id`` names its record under ``$LEV_HOME/evals/``."""

    id: str
    agent: str
    blueprint_path: str | None
    blueprint_hash: str
    model: str | None
    dataset: str
    dataset_hash: str
    checks: list[dict[str, Any]]
    results: list[CaseResult]
    repeats: int = 1
    created_at: str = ""
    duration_s: float = 0.0
    label: str | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def passed(self) -> int:
        """How many runs passed."""
        return sum(1 for r in self.results if r.passed)

    @property
    def pass_rate(self) -> float:
        """The share of runs that passed."""
        return self.passed / len(self.results) if self.results else 0.0

    @property
    def failures(self) -> list[CaseResult]:
        """The results that did not pass."""
        return [r for r in self.results if not r.passed]

    @property
    def name(self) -> str:
        """The label given to it, else the agent's name and the model."""
        return self.label or f"{self.agent} · {model_label(self.model)}"

    def summary(self) -> Summary:
        """The numbers of this evaluation (see :class:`Summary`)."""
        results = self.results
        n = len(results)
        passed = self.passed
        low, high = wilson(passed, n)
        cost = sum(r.cost_usd for r in results)
        durations = [r.duration_s for r in results if r.duration_s is not None]
        reasons: Counter[str] = Counter()
        for r in results:
            if r.passed:
                continue
            if r.status != "complete":
                reasons[_group(f"run {r.status}: {r.error or 'no reason recorded'}")] += 1
            for v in r.verdicts:
                if not v.passed and r.status == "complete":
                    reasons[_group(f"{v.check}: {v.reason}")] += 1
        paths = Counter(PATH_SEPARATOR.join(r.stage_path) or "(none)" for r in results)
        return Summary(
            cases=n, passed=passed, pass_rate=passed / n if n else 0.0, ci_low=low, ci_high=high,
            cost_usd=cost, cost_per_case=cost / n if n else 0.0,
            judge_cost_usd=sum(r.judge_cost_usd for r in results),
            tokens_per_case=sum(r.tokens for r in results) / n if n else 0.0,
            p50_s=percentile(durations, 50), p95_s=percentile(durations, 95),
            by_status=dict(Counter(r.status for r in results)),
            failures=reasons.most_common(FAILURE_GROUPS_SHOWN), stage_paths=paths.most_common(),
        )

    def to_pandas(self) -> Any:
        """One row per run: the case, the run, the answer, ``passed``, the reason, one column per
        check (``check:<name>``, True/False), tokens, cost, duration and the stage path."""
        import pandas as pd

        rows = []
        for r in self.results:
            row: dict[str, Any] = {"case": r.index, "repeat": r.repeat, "task": r.task}
            row.update({f"input:{k}": v for k, v in r.inputs.items()})
            row.update({"expected": r.expected, "run_id": r.run_id, "status": r.status, "passed": r.passed,
                        "reason": r.reason, "answer": r.content, "format": r.format})
            row.update({f"check:{v.check}": v.passed for v in r.verdicts})
            row.update({"tokens": r.tokens, "cost_usd": r.cost_usd, "judge_cost_usd": r.judge_cost_usd,
                        "duration_s": r.duration_s, "stage_path": PATH_SEPARATOR.join(r.stage_path)})
            rows.append(row)
        return pd.DataFrame(rows)

    def compare(self, other: "Evaluation") -> "Comparison":
        """This evaluation (before) against ``other`` (after), case by case."""
        return Comparison.of(self, other)

    def spec(self) -> dict[str, Any]:
        """What makes the evaluation repeatable, and its numbers (the record's eval.json)."""
        data = {k: getattr(self, k) for k in ("id", "agent", "blueprint_path", "blueprint_hash", "model", "dataset",
                                                "dataset_hash", "checks", "repeats", "created_at", "duration_s",
                                                "label", "warnings")}
        data["summary"] = asdict(self.summary())
        return json.loads(json.dumps(data, default=str))

    def __repr__(self) -> str:
        return f"<Evaluation {self.id}: {self.name}, {self.passed}/{len(self.results)} passed>"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        from lev_nb.engine import views

        bundle = {"text/plain": repr(self) + "\n" + str(self.summary())}
        if views.has_view(views.EVAL_BUNDLE):
            bundle.update(views.view(views.EVAL_BUNDLE, self))
        return bundle


@record
class CaseChange:
    """One case in both evaluations: whether it passed before and after, and what changed."""

    key: str
    task: str
    before: CaseResult | None
    after: CaseResult | None

    @property
    def change(self) -> str:
        """fixed, broken, still passing, still failing, added or removed."""
        if self.before is None:
            return "added"
        if self.after is None:
            return "removed"
        if self.before.passed != self.after.passed:
            return "fixed" if self.after.passed else "broken"
        return "still passing" if self.after.passed else "still failing"

    def what_changed(self) -> list[str]:
        """The differences, in words: the verdict, the answer, the stage path, cost and tokens."""
        b, a = self.before, self.after
        if b is None or a is None:
            return []
        out = []
        if b.passed != a.passed:
            out.append(f"{'fixed' if a.passed else 'broken'}: {a.reason or b.reason}")
        elif not a.passed and a.reason != b.reason:
            out.append(f"reason: {a.reason}")
        if (b.content or "") != (a.content or ""):
            out.append("answer changed")
        if b.stage_path != a.stage_path:
            out.append(f"path {PATH_SEPARATOR.join(b.stage_path)} ⇒ {PATH_SEPARATOR.join(a.stage_path)}")
        if b.status != a.status:
            out.append(f"status {b.status} ⇒ {a.status}")
        if abs(a.tokens - b.tokens) > 0:
            out.append(f"tokens {a.tokens - b.tokens:+d}")
        return out


@record
class Comparison:
    """Two evaluations side by side (``before``, ``after``) and each case's :class:`CaseChange`.
    Cases are matched by their task and inputs (and repeat), so two datasets in another order
    still line up."""

    before: Evaluation
    after: Evaluation
    cases: list[CaseChange]

    @classmethod
    def of(cls, before: Evaluation, after: Evaluation) -> "Comparison":
        def key(r: CaseResult) -> str:
            return json.dumps([r.task, r.inputs, r.repeat], sort_keys=True, default=str)

        a = {key(r): r for r in after.results}
        b = {key(r): r for r in before.results}
        keys = list(b) + [k for k in a if k not in b]
        cases = [CaseChange(k, (b.get(k) or a[k]).task, b.get(k), a.get(k)) for k in keys]
        return cls(before, after, cases)

    def changed(self, kind: str) -> list[CaseChange]:
        """The cases whose change is ``kind`` (fixed, broken, still failing, ...)."""
        return [c for c in self.cases if c.change == kind]

    @property
    def fixed(self) -> list[CaseChange]:
        """Cases that failed before and pass after."""
        return self.changed("fixed")

    @property
    def broken(self) -> list[CaseChange]:
        """Cases that passed before and fail after."""
        return self.changed("broken")

    def lines(self) -> list[str]:
        """The comparison in words: both summaries' numbers, then each case that changed."""
        s, t = self.before.summary(), self.after.summary()
        out = [f"before: {self.before.name} ({self.before.id})", f"after:  {self.after.name} ({self.after.id})",
               f"pass rate {s.pass_rate:.1%} ⇒ {t.pass_rate:.1%} ({t.pass_rate - s.pass_rate:+.1%}); "
               f"{len(self.fixed)} fixed, {len(self.broken)} broken",
               f"cost per case ${s.cost_per_case:.4f} ⇒ ${t.cost_per_case:.4f}; tokens per case "
               f"{s.tokens_per_case:.0f} ⇒ {t.tokens_per_case:.0f}"]
        for c in self.cases:
            what = c.what_changed()
            if c.change in ("fixed", "broken", "added", "removed") or what:
                out.append(f"  [{c.change}] {c.task[:60]!r}: {'; '.join(what) or c.change}")
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def to_pandas(self) -> Any:
        """One row per case: passed before and after, the change, both reasons, what changed, and
        the tokens, cost and duration of each side."""
        import pandas as pd

        rows = []
        for c in self.cases:
            b, a = c.before, c.after
            rows.append({
                "task": c.task, "change": c.change,
                "passed_before": None if b is None else b.passed, "passed_after": None if a is None else a.passed,
                "reason_before": None if b is None else b.reason, "reason_after": None if a is None else a.reason,
                "what_changed": "; ".join(c.what_changed()),
                "tokens_before": None if b is None else b.tokens, "tokens_after": None if a is None else a.tokens,
                "cost_before": None if b is None else b.cost_usd, "cost_after": None if a is None else a.cost_usd,
                "run_before": None if b is None else b.run_id, "run_after": None if a is None else a.run_id,
            })
        return pd.DataFrame(rows)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        from lev_nb.engine import views

        bundle = {"text/plain": str(self)}
        if views.has_view(views.COMPARE_BUNDLE):
            bundle.update(views.view(views.COMPARE_BUNDLE, self))
        return bundle

