"""The supersede evaluation (eval/supersede.py) on a small ledger in the real ledgers' form, and
the synthetic preference change: the newer statement must win in recall and in the snapshot."""

import json

from soulgraph.engine.graph import SoulGraph
from soulgraph.eval.__main__ import main
from soulgraph.eval.supersede import evaluate, supersede_pairs
from soulgraph.memory import lifecycle, snapshot

LEDGER = [
    {"id": "P-1", "title": "String interpolation with dollar templates", "created_at": "2001-01-01T00:00:00Z",
     "deps": [], "meta": {"status": "Superseded"}},
    {"id": "P-2", "title": "Packaging metadata format", "created_at": "2002-01-01T00:00:00Z", "deps": [],
     "meta": {"status": "Final"}},
    {"id": "P-3", "title": "Literal string interpolation", "created_at": "2015-01-01T00:00:00Z", "deps": ["P-1"],
     "meta": {"status": "Final"}},
    {"id": "P-4", "title": "Packaging metadata format version 2", "created_at": "2016-01-01T00:00:00Z", "deps": ["P-2"],
     "meta": {"status": "Final"}},
]


def test_pairs_come_from_status_and_deps_and_the_lifecycle_puts_the_new_first(tmp_path, capsys):
    path = tmp_path / "ledger.json"
    path.write_text(json.dumps(LEDGER))
    _tasks, pairs = supersede_pairs(path)
    assert pairs == [("P-1", "P-3")]  # P-2 -> P-4 is a dependency, not a replacement: P-2 is Final
    report = evaluate(path)
    assert report["without_lifecycle"]["new_above_old"] == 0.0
    assert report["with_lifecycle"] == {"new_above_old": 1.0, "new_in_top5": 1.0, "new_in_top10": 1.0}
    assert main(["supersede", str(path)]) == 0
    assert "1 replacement pairs" in capsys.readouterr().out


def test_a_changed_preference_wins_in_recall_and_in_the_snapshot():
    now = [1_800_000_000.0]
    graph = SoulGraph(clock=lambda: now[0])
    first = graph.add("The user prefers tea in the morning", kind="preference")
    now[0] += 86400 * 40
    second = graph.add("The user now prefers coffee in the morning", kind="preference")
    before = [hit.node.id for hit in graph.query("what does the user prefer in the morning", 2)]
    lifecycle.supersede(graph, first.id, second.id, writer="user")
    after = [hit.node.id for hit in graph.query("what does the user prefer in the morning", 2)]
    assert after == [second.id] and first.id in before
    text = snapshot.render(graph)
    assert "coffee" in text and "tea" not in text
