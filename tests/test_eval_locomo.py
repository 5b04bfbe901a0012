"""LoCoMo scoring on a small conversation written for this test, in LoCoMo's shape.

(The real LoCoMo data is CC BY-NC and never enters the repository.)
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from soulgraph.eval.__main__ import main
from soulgraph.eval.locomo import parse_session_date, read_locomo, replay_locomo, sessions_in_order
from soulgraph.eval.report import locomo_report, locomo_text
from soulgraph.eval.retrievers import DEFAULT_METHODS
from soulgraph.eval.scoring import Question, hit_at, recall_at, reciprocal_rank

FIXTURE = Path(__file__).parent / "fixtures" / "eval" / "locomo-shaped.json"


def run(methods=("bm25", "related", "recent")):
    return replay_locomo(read_locomo(FIXTURE), list(methods))


def test_session_dates_parse_as_utc():
    assert parse_session_date("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc).timestamp()
    assert parse_session_date("12:04 am on 1 Jan, 2024") == datetime(2024, 1, 1, 0, 4, tzinfo=timezone.utc).timestamp()
    assert parse_session_date("not a date") is None and parse_session_date(None) is None


def test_turns_sessions_and_messy_evidence_are_counted():
    result = run()
    assert result.stats["conversations"] == 1 and result.stats["sessions"] == 3
    assert result.stats["turns"] == 9 and result.stats["turns with an image caption"] == 1
    counts = result.problems.counts
    assert counts["several ids in one evidence string (split)"] == 1
    assert counts["malformed evidence id (repaired)"] == 1
    assert counts["evidence id naming no turn (dropped)"] == 3  # D7:7, D9:1, D
    assert counts["question without usable evidence (skipped)"] == 2
    assert counts["turn without a usable dia_id (skipped)"] == 1
    assert counts["bad session date (a day after the previous session)"] == 1
    questions = {q.subject: q for q in result.questions}
    assert len(questions) == 6
    assert set(questions["fixture-1 q1"].answers) == {"D1:4", "D2:1"}
    assert set(questions["fixture-1 q2"].answers) == {"D2:2"}
    assert set(questions["fixture-1 q3"].answers) == {"D2:4"}
    assert [q.kind for q in result.questions] == [
        "single-hop", "multi-hop", "temporal", "single-hop", "open-domain", "adversarial"]


def test_rankings_find_the_obvious_answers():
    result = run()
    questions = {q.subject: q for q in result.questions}
    # The caption is part of the turn: "trailer" is found only through it.
    assert recall_at(questions["fixture-1 q4"], "bm25", 5) == 1.0
    assert recall_at(questions["fixture-1 q3"], "bm25", 1) == 1.0  # "snapped"
    assert recall_at(questions["fixture-1 q1"], "related", 5) == 1.0


def test_report_and_cli(capsys):
    result = run(DEFAULT_METHODS)
    report = locomo_report(str(FIXTURE), result)
    assert report["overall"]["questions"] == 6
    assert set(report["by_category"]) == {"multi-hop", "temporal", "open-domain", "single-hop", "adversarial"}
    assert report["by_category"]["single-hop"]["questions"] == 2
    text = locomo_text(report)
    assert "all, R@10" in text and "adversarial, R@1" in text and "several ids in one evidence string" in text

    assert main(["locomo", str(FIXTURE), "--json", "--methods", "bm25,keyword"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert list(data["overall"]["methods"]) == ["bm25", "keyword"]
    assert set(data["overall"]["methods"]["bm25"]) == {"recall@1", "recall@5", "recall@10", "recall@20", "mrr"}


def test_sessions_are_ranked_by_their_best_turn():
    session_of = {"D1:1": "session_1", "D1:2": "session_1", "D2:1": "session_2", "D3:4": "session_3"}
    assert sessions_in_order(["D2:1", "D1:2", "D2:1", "D3:4", "D1:1"], session_of) == \
        ["session_2", "session_1", "session_3"]
    question = Question("single-hop", "q", 0.0, {"session_1": 0.0, "session_3": 0.0})
    question.record("m", ["session_2", "session_1", "session_3"])
    assert (hit_at(question, "m", 1), hit_at(question, "m", 2), reciprocal_rank(question, "m")) == (0.0, 1.0, 0.5)


def test_session_level_scores_follow_the_turn_rankings():
    result = run(DEFAULT_METHODS)
    assert len(result.session_questions) == len(result.questions)
    for turns, sessions in zip(result.questions, result.session_questions):
        assert turns.subject == sessions.subject and len(sessions.answers) <= len(turns.answers)
        for method in DEFAULT_METHODS:
            # The evidence turn ranked first puts its session among the first that many sessions.
            # (Another turn of an evidence session may put it there sooner, or alone.)
            if turns.ranks[method]:
                best = min(turns.ranks[method].values())
                assert hit_at(sessions, method, best) == 1.0
    report = locomo_report(str(FIXTURE), result)
    overall = report["sessions"]["overall"]["methods"]["bm25"]
    assert overall["hit@1"] <= overall["hit@3"] <= overall["hit@5"] <= overall["hit@10"]
    assert "all, hit@10" in locomo_text(report) and "Evidence session" in locomo_text(report)


def test_locomo_through_the_memory_provider(capsys):
    """Turns in through sync_turn, questions out through prefetch's recall: scored on what was
    injected, within the budget, beside the direct figures of the same run."""
    from soulgraph.eval.provider import METHOD, replay

    result = replay(read_locomo(FIXTURE), budget=1500, limit=8)
    questions = {q.subject: q for q in result["questions"]}
    assert len(questions) == 6 and result["stats"]["turns"] == 9
    assert all(chars <= 1500 for chars in result["injected_chars"])
    assert all(items <= 8 for items in result["injected_items"])
    assert recall_at(questions["fixture-1 q3"], METHOD, 1) == 1.0  # "snapped", the first memory injected
    assert "recall" in questions["fixture-1 q3"].ranks  # the direct figures, same questions
    # A budget that fits one line injects one memory.
    tight = replay(read_locomo(FIXTURE), budget=60, limit=8)
    assert max(tight["injected_items"]) == 1
    assert main(["provider", str(FIXTURE), "--budget", "600"]) == 0
    assert "through the memory provider" in capsys.readouterr().out


def _two_users(tmp_path):
    """The fixture's conversation and a second one made from it (other names, other boat), so
    two users share one soul."""
    first = json.loads(FIXTURE.read_text(encoding="utf-8"))[0]
    second = json.loads(json.dumps(first).replace("Ada", "Cleo").replace("Ben", "Dev").replace("sailboat", "canoe"))
    second["sample_id"] = "fixture-2"
    path = tmp_path / "two.json"
    path.write_text(json.dumps([first, second]), encoding="utf-8")
    return path


def test_provider_users_together_alone_and_crowd(tmp_path, capsys):
    """One soul for two users, each its own scope, recalls within a user as two souls do; with
    no scopes, the other user's memories take places in what is injected."""
    from soulgraph.eval.provider import METHOD, compare, compare_text, replay, scores

    path = _two_users(tmp_path)
    data = read_locomo(path)
    together = replay(data, limit=10, users="together", direct=False)
    assert together["stats"]["souls"] == 1 and together["stats"]["conversations"] == 2
    assert together["stats"]["turns"] == 18 and len(together["questions"]) == 12
    assert together["stats"]["injected from another conversation"] == 0  # the scopes hold
    crowd = replay(data, limit=10, users="crowd", direct=False)
    assert crowd["stats"]["injected from another conversation"] > 0
    result = compare(data, limit=10)
    assert set(result["runs"]) == {"alone", "together", "crowd"}
    alone = scores(result["runs"]["alone"]["questions"])
    assert abs(scores(result["runs"]["together"]["questions"])["R@10"] - alone["R@10"]) <= 0.01
    snapped = {q.subject: q for q in together["questions"]}["fixture-2 q3"]
    # The second user's own rope among the first two lines (the reranking stage's networks,
    # refitted, may put the turn before it first), and none of the first user's.
    assert recall_at(snapped, METHOD, 2) == 1.0
    table = compare_text(str(path), result)
    assert "together" in table and "Δ R@10" in table and "R@10 by category" in table
    assert main(["provider", str(path), "--users", "all", "--limit", "10"]) == 0
    out = capsys.readouterr().out
    assert all(f"\n{users} " in out for users in ("alone", "together", "crowd"))
    assert main(["provider", str(FIXTURE), "--users", "together"]) == 0
    assert "a scope per conversation" in capsys.readouterr().out
