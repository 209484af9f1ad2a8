"""The numbers of an evaluation's summary: the Wilson interval and the duration percentiles."""

from __future__ import annotations

import pytest

from lev_nb.eval.checks import Verdict
from lev_nb.eval.evaluation import CaseResult, Evaluation
from lev_nb.eval.stats import percentile, wilson


def test_the_wilson_interval_stays_inside_0_and_1_and_narrows_with_more_cases() -> None:
    assert wilson(0, 10) == (0.0, pytest.approx(0.2775, abs=1e-4))
    assert wilson(10, 10) == (pytest.approx(0.7225, abs=1e-4), 1.0)
    low, high = wilson(45, 50)
    assert low == pytest.approx(0.7864, abs=1e-4) and high == pytest.approx(0.9565, abs=1e-4)
    assert wilson(450, 500)[1] - wilson(450, 500)[0] < high - low
    assert wilson(0, 0) == (0.0, 1.0)


def test_percentiles_interpolate() -> None:
    assert percentile([], 50) is None
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([float(v) for v in range(1, 101)], 95) == pytest.approx(95.05)


def test_the_summary_counts_cost_and_groups_failures_and_paths() -> None:
    def result(i: int, passed: bool, reason: str = "", status: str = "complete") -> CaseResult:
        verdicts = [Verdict("equals", passed, reason, cost_usd=0.001)]
        return CaseResult(i, f"t{i}", f"r{i}", status, passed, verdicts=verdicts if status == "complete" else [],
                          cost_usd=0.01, duration_s=float(i), stage_path=["a", "b"] if i % 2 else ["a"],
                          prompt_tokens=100, completion_tokens=20, error="boom" if status != "complete" else None)

    results = [result(1, True), result(2, False, "expected 'x', got 'y'"), result(3, False, "expected 'z', got 'w'"),
               result(4, False, status="error")]
    ev = Evaluation("e", "agent", None, "h", "mock", "dataset", "dh", [], results)
    s = ev.summary()
    assert (s.cases, s.passed, s.failed) == (4, 1, 3)
    assert s.cost_usd == pytest.approx(0.04) and s.judge_cost_usd == pytest.approx(0.003)
    assert s.tokens_per_case == 120 and s.p50_s == 2.5
    assert s.failures == [("equals: expected …, got …", 2), ("run error: boom", 1)]
    assert s.stage_paths == [("a → b", 2), ("a", 2)]
    assert results[3].reason == "run error: boom"
