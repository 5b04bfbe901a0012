"""Scoring: recall@k, reciprocal rank, the long-range split, latency percentiles.

A question carries its answer key (answer id -> when that answer was created) and,
per method, the 1-based rank of each answer the method returned. Recall@k is the
share of the answers ranked within the top k; MRR is 1 / rank of the first answer
(0 when none was returned). Scores are averaged over questions.

The long-range split keeps, in each question, only the answers created at least six
hours before the question was asked, and drops questions left with none. Most
dependencies are minutes old and pure recency finds them; the old ones test memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable

LONG_RANGE_SECONDS = 6 * 3600.0


@dataclass(slots=True)
class Question:
    kind: str  # "built_on" / "waiting_on" (ledger), a LoCoMo category name, …
    subject: str  # the task (or question) id it was asked for
    asked_at: float
    answers: dict[str, float]  # answer id -> created_at
    ranks: dict[str, dict[str, int]] = field(default_factory=dict)  # method -> answer id -> rank

    def record(self, method: str, ranked: list[str]) -> None:
        found = {}
        for position, node_id in enumerate(ranked, 1):
            if node_id in self.answers and node_id not in found:
                found[node_id] = position
        self.ranks[method] = found


def recall_at(question: Question, method: str, k: int) -> float:
    ranks = question.ranks.get(method, {})
    return sum(1 for rank in ranks.values() if rank <= k) / len(question.answers)


def hit_at(question: Question, method: str, k: int) -> float:
    """1 when any answer is ranked within the top k, else 0 (the unit of session-level scores)."""
    return 1.0 if any(rank <= k for rank in question.ranks.get(method, {}).values()) else 0.0


def reciprocal_rank(question: Question, method: str) -> float:
    ranks = question.ranks.get(method, {})
    return 1.0 / min(ranks.values()) if ranks else 0.0


def long_range(question: Question, horizon: float = LONG_RANGE_SECONDS) -> Question | None:
    """The question with only the answers created >= `horizon` before it; None if none are."""
    cutoff = question.asked_at - horizon
    old = {a: t for a, t in question.answers.items() if t <= cutoff}
    if not old:
        return None
    ranks = {m: {a: r for a, r in found.items() if a in old} for m, found in question.ranks.items()}
    return Question(question.kind, question.subject, question.asked_at, old, ranks)


def summarize(questions: Iterable[Question], methods: list[str], ks: Iterable[int]) -> dict:
    """{"questions": n, "methods": {method: {"recall@k": …, "mrr": …}}} averaged over questions."""
    questions = list(questions)
    ks = list(ks)
    out: dict = {"questions": len(questions), "methods": {}}
    for method in methods:
        scores = {}
        for k in ks:
            scores[f"recall@{k}"] = _mean(recall_at(q, method, k) for q in questions)
        scores["mrr"] = _mean(reciprocal_rank(q, method) for q in questions)
        out["methods"][method] = scores
    return out


def summarize_hits(questions: Iterable[Question], methods: list[str], ks: Iterable[int]) -> dict:
    """As summarize, with hit@k (any answer within the top k) in place of recall@k."""
    questions = list(questions)
    ks = list(ks)
    out: dict = {"questions": len(questions), "methods": {}}
    for method in methods:
        scores = {f"hit@{k}": _mean(hit_at(q, method, k) for q in questions) for k in ks}
        scores["mrr"] = _mean(reciprocal_rank(q, method) for q in questions)
        out["methods"][method] = scores
    return out


def _mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return sum(values) / len(values) if values else None


def percentile(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile (p in 0..100) of unsorted values; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100.0 * len(ordered)))
    return ordered[rank - 1]


def latency_summary(seconds: list[float]) -> dict:
    return {
        "questions": len(seconds),
        "p50_ms": _ms(percentile(seconds, 50)),
        "p99_ms": _ms(percentile(seconds, 99)),
        "mean_ms": _ms(_mean(seconds)),
        "total_s": sum(seconds),
    }


def _ms(value: float | None) -> float | None:
    return None if value is None else value * 1000.0
