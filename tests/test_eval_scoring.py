"""Scoring and replay on hand-made ledgers whose right answers are known."""

from __future__ import annotations

import pytest

from soulgraph.eval.ledger import check_ledger, parse_time
from soulgraph.eval.replay import replay_ledger
from soulgraph.eval.report import ledger_report, ledger_text
from soulgraph.eval.scoring import (
    Question,
    long_range,
    percentile,
    recall_at,
    reciprocal_rank,
    summarize,
)

HOUR = 3600.0


def iso(hours: float) -> str:
    """An ISO time `hours` after 2024-01-01T00:00:00Z."""
    from datetime import datetime, timedelta, timezone

    moment = datetime(2024, 1, 1, tzinfo=timezone.utc) + timedelta(hours=hours)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


T0 = parse_time(iso(0))


def task(task_id, hours, deps=(), title=None, updates=(), **extra):
    return {"id": task_id, "title": title or f"task {task_id}", "created_at": iso(hours),
            "updated_at": [iso(u) for u in updates], "deps": list(deps), **extra}


# A small history. C (10 h) is built on A (0 h) and B (1 h): both long range. D is built
# on C a minute later: short range. E (11 h) declares a dependency on F before F exists
# (20 h): a waiting-on question when F is created. G declares its dependency on F only
# at 21 h, after F exists: not waiting on, and its edge only appears at 21 h.
LEDGER = [
    task("A", 0, title="alpha storage engine"),
    task("B", 1, title="beta network layer"),
    task("C", 10, ["A", "B"], title="gamma storage over the network"),
    task("D", 10 + 1 / 60, ["C"], title="delta tests for gamma"),
    task("E", 11, ["F"], title="epsilon rollout"),
    task("G", 12, ["F"], title="eta cleanup", meta={"dep_declared_at": {"F": iso(21)}}),
    task("F", 20, title="zeta scheduler"),
]


def questions_of(result, kind):
    return {q.subject: q for q in result.questions if q.kind == kind}


def test_recall_and_mrr_on_a_known_ranking():
    question = Question("built_on", "X", 0.0, {"A": 0.0, "B": 0.0})
    question.record("m", ["Z", "A", "Y", "Y2", "Y3", "Y4", "B", "Y5"])
    assert recall_at(question, "m", 1) == 0.0
    assert recall_at(question, "m", 5) == 0.5
    assert recall_at(question, "m", 10) == 1.0
    assert reciprocal_rank(question, "m") == 0.5
    question.record("none", ["Z", "Y"])
    assert recall_at(question, "none", 10) == 0.0 and reciprocal_rank(question, "none") == 0.0


def test_an_answer_returned_twice_counts_once():
    question = Question("built_on", "X", 0.0, {"A": 0.0})
    question.record("m", ["A", "A", "B"])
    assert question.ranks["m"] == {"A": 1}


def test_long_range_keeps_only_answers_six_hours_old():
    asked = 100 * HOUR
    question = Question("built_on", "X", asked, {"old": asked - 6 * HOUR, "new": asked - 5.9 * HOUR})
    question.record("m", ["new", "old"])
    old = long_range(question)
    assert set(old.answers) == {"old"}
    assert old.ranks["m"] == {"old": 2}  # the rank is still its place in the full ranking
    assert recall_at(old, "m", 1) == 0.0 and reciprocal_rank(old, "m") == 0.5
    assert long_range(Question("built_on", "Y", asked, {"new": asked - 60})) is None


def test_summary_averages_over_questions():
    q1 = Question("k", "1", 0, {"A": 0})
    q1.record("m", ["A"])
    q2 = Question("k", "2", 0, {"B": 0, "C": 0})
    q2.record("m", ["x", "x2", "x3", "x4", "x5", "B"])
    summary = summarize([q1, q2], ["m"], (5, 10))
    assert summary["questions"] == 2
    assert summary["methods"]["m"] == {"recall@5": 0.5, "recall@10": 0.75, "mrr": (1 + 1 / 6) / 2}
    assert summarize([], ["m"], (5,))["methods"]["m"]["recall@5"] is None


def test_percentile_is_nearest_rank():
    values = list(range(1, 101))
    assert percentile(values, 50) == 50 and percentile(values, 99) == 99 and percentile(values, 100) == 100
    assert percentile([3.0], 99) == 3.0 and percentile([], 50) is None


def test_built_on_keys_ranks_and_long_range_split():
    result = replay_ledger(check_ledger(LEDGER), ["recent"])
    built = questions_of(result, "built_on")
    assert set(built) == {"C", "D"}  # E and G name a dep that does not exist yet
    assert set(built["C"].answers) == {"A", "B"}
    # `recent` at C's question: B then A.
    assert built["C"].ranks["recent"] == {"B": 1, "A": 2}
    assert built["D"].ranks["recent"] == {"C": 1}
    assert long_range(built["C"]) is not None and long_range(built["D"]) is None
    report = ledger_report(check_ledger(LEDGER), result)
    scores = report["scores"]["built_on"]
    assert scores["all"]["questions"] == 2 and scores["long_range"]["questions"] == 1
    assert scores["long_range"]["methods"]["recent"] == {"recall@5": 1.0, "recall@10": 1.0, "mrr": 1.0}


def test_waiting_on_keys_use_the_declaration_time():
    result = replay_ledger(check_ledger(LEDGER), ["recent"])
    waiting = questions_of(result, "waiting_on")
    # F exists at 20 h. E declared its dependency at 11 h (its created_at): waiting on.
    # G declared it at 21 h (meta.dep_declared_at): not waiting on.
    assert set(waiting) == {"F"} and set(waiting["F"].answers) == {"E"}
    # recent at 20 h: G (12 h), E (11 h), D, C, …
    assert waiting["F"].ranks["recent"] == {"E": 2}
    assert result.stats["late edges"] == 1  # F -> G, added at 21 h
    assert result.stats["edges"] == 5  # A->C, B->C, C->D, F->E, F->G

    by_created = replay_ledger(check_ledger(LEDGER), ["recent"], use_declared_at=False)
    assert set(questions_of(by_created, "waiting_on")["F"].answers) == {"E", "G"}
    assert by_created.stats["late edges"] == 0


def test_creating_a_task_touches_its_deps():
    # At D's question (a minute after C), A and B were just touched by C; C was not.
    result = replay_ledger(check_ledger(LEDGER), ["recent", "hot"])
    question = questions_of(result, "built_on")["D"]
    assert question.ranks["recent"] == {"C": 1}
    assert question.ranks["hot"] == {"C": 3}  # behind A and B, each touched once


def test_updates_touch_the_task_in_time_order():
    ledger = [task("A", 0, title="a"), task("B", 1, title="b"), task("C", 2, title="c", updates=[5]),
              task("D", 6, ["A"], title="d")]
    result = replay_ledger(check_ledger(ledger), ["hot"])
    assert result.stats["updates"] == 1
    assert questions_of(result, "built_on")["D"].ranks["hot"] == {"A": 3}  # C (touched at 5 h), B, A


def test_bad_input_is_counted_not_fatal():
    raw = [
        task("A", 0),
        task("A", 1),  # duplicate id
        {"title": "no id", "created_at": iso(0)},
        "not a task",
        {"id": "T", "title": "", "created_at": iso(0)},
        {"id": "BadTime", "title": "x", "created_at": "yesterday-ish"},
        task("B", 2, ["A", "ghost", "B", "A"], updates=[1, 3]),  # unknown dep, self dep, repeat, early update
        {**task("C", 3), "updated_at": ["garbage", iso(4)]},
        task("D", 4, ["A"], meta={"dep_declared_at": {"A": "not a time"}}),
    ]
    ledger = check_ledger(raw)
    counts = ledger.problems.counts
    assert [t.id for t in ledger.tasks] == ["A", "B", "C", "D"]
    assert counts["duplicate id (later copy skipped)"] == 1
    assert counts["task without an id"] == 2
    assert counts["task without a title (skipped)"] == 1
    assert counts["bad created_at (task skipped)"] == 1
    assert counts["unknown dep id (dropped)"] == 1
    assert counts["task depends on itself (dropped)"] == 1
    assert counts["updated_at before created_at (dropped)"] == 1
    assert counts["bad updated_at (dropped)"] == 1
    assert counts["bad dep_declared_at time (ignored)"] == 1
    b = ledger.tasks[1]
    assert b.deps == ["A"] and len(b.updated_at) == 1
    report = ledger_report(ledger, replay_ledger(ledger, ["recent", "keyword"]))
    text = ledger_text(report)
    assert "unknown dep id (dropped): 1" in text and "bad created_at (task skipped): 1" in text


def test_a_ledger_that_is_not_a_list_is_refused():
    with pytest.raises(ValueError):
        check_ledger({"id": "A"})


def test_project_filter_and_tags():
    raw = [task("A", 0, project="x"), task("B", 1, project="y"), task("C", 12, ["A", "B"], project="x")]
    ledger = check_ledger(raw, project="x")
    assert [t.id for t in ledger.tasks] == ["A", "C"]
    assert ledger.problems.counts["dep outside the chosen project (dropped)"] == 1
    result = replay_ledger(ledger, ["recent"])
    assert set(questions_of(result, "built_on")["C"].answers) == {"A"}


def test_parse_time_forms():
    assert parse_time("2024-01-01T00:00:00Z") == parse_time("2024-01-01T00:00:00") == parse_time("2024-01-01")
    assert parse_time(1700000000) == 1700000000.0
    assert parse_time("") is None and parse_time(None) is None and parse_time(True) is None
