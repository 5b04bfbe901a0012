"""The reranking stage (memory/rerank.py): off by default; when on, it reorders only the
candidates recall kept, keeps recall's scale, never reads another user's memory as context,
and its shipped weights are numbers only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from soulgraph.engine import hybrid
from soulgraph.engine.graph import Hit, SoulGraph
from soulgraph.hermes import memory_service
from soulgraph.memory import ranking, rerank
from soulgraph.store import SoulFile
from soulgraph.store.vectors import VectorStore, vectors_path

DAY = 86400.0
ROOT = Path(__file__).resolve().parent.parent
TURNS = [
    "Caroline: I went to a support group for trans people yesterday.",
    "Melanie: That sounds brave! How did it feel?",
    "Caroline: It felt freeing, everyone shared their stories.",
    "Melanie: I painted a sunset over the lake last week.",
    "Caroline: Did you paint it from a photo?",
    "Melanie: No, I sat by the lake with my kids and painted it there.",
    "Caroline: I am thinking about adopting a dog next spring.",
    "Melanie: We took the kids camping in the mountains in June.",
    "Caroline: What did the kids like most about camping?",
    "Melanie: They loved roasting marshmallows and seeing the stars.",
]


def conversation() -> SoulGraph:
    now = 10 * DAY
    graph = SoulGraph(clock=lambda: now)
    graph.add("Session 1, 8 May 2023", ["session"], node_id="s1", created_at=DAY)
    for number, text in enumerate(TURNS):
        graph.add(text, parents=["s1"], node_id=f"t{number}", created_at=DAY + 60 * number)
    return graph


@pytest.fixture(scope="module")
def vectors():
    store = VectorStore(None, background=False)
    if not store.enabled:
        pytest.skip(store.reason)
    return store


def test_the_stage_is_on_for_the_tools_and_in_prefetch_and_its_weights_are_numbers_only():
    assert rerank.ENABLED is True and memory_service.PREFETCH_STAGE is True
    record = json.loads(rerank.MODEL_PATH.read_text(encoding="utf-8"))
    assert record["features"] == list(rerank.FEATURES) and record["trained_by"] == "bench/train_reranker.py"
    assert len(record["mean"]) == len(record["spread"]) == len(rerank.FEATURES)
    assert all(isinstance(v, float) for key in ("mean", "spread") for v in record[key])
    for network in record["members"]:
        assert len(network["hidden"]) == len(rerank.FEATURES) and len(network["hidden"][0]) == len(network["out"])
        assert all(isinstance(v, float) for row in network["hidden"] for v in row)
        assert all(isinstance(v, float) for v in (*network["hidden_bias"], *network["out"], network["out_bias"]))
    held = record["held_out"]
    assert held["with the stage"]["R@1"] > held["served"]["R@1"]  # what it was kept for
    assert rerank.shipped() is not None


def test_the_model_scores_a_candidate_by_the_mean_of_its_networks():
    model = rerank.shipped()
    x = np.random.default_rng(3).normal(size=(40, len(rerank.FEATURES))) * model.spread + model.mean
    z = (x - model.mean) / model.spread
    each = [np.maximum(z @ hidden + bias, 0.0) @ out + out_bias for hidden, bias, out, out_bias in model.members]
    assert len(each) > 1 and np.allclose(model.scores(x), np.mean(each, axis=0), rtol=0, atol=1e-12)


def test_recall_hands_the_stage_its_candidates_for_a_question_only(vectors):
    graph = conversation()
    assert vectors.ready(graph)
    handed = []

    def capture(ranked):
        handed.append(list(ranked))
        return ranked

    plain = ranking.recall(graph, "What did the kids like about camping?", 5, vectors=vectors, stage=False)
    same = ranking.recall(graph, "What did the kids like about camping?", 5, vectors=vectors, reorder=capture)
    assert [h.node.id for h in same] == [h.node.id for h in plain]  # a stage that changes nothing
    assert len(handed) == 1 and len(handed[0]) >= 5
    ranking.recall(graph, "camping kids marshmallows", 5, vectors=vectors, reorder=capture)  # not a question
    assert len(handed) == 1


def test_a_stage_that_reverses_the_order_is_what_recall_returns_on_recalls_scale(vectors):
    graph = conversation()
    assert vectors.ready(graph)
    question = "What did the kids like about camping?"
    before = ranking.recall(graph, question, 12, vectors=vectors, mmr_lambda=1.0)
    reversed_ = ranking.recall(graph, question, 12, vectors=vectors, mmr_lambda=1.0,
                               reorder=lambda ranked: [type(h)(h.node, s.score, h.via)
                                                       for h, s in zip(ranked[::-1], ranked)])
    assert [h.score for h in reversed_] == sorted((h.score for h in reversed_), reverse=True)
    assert reversed_[0].node.id != before[0].node.id


def test_reorder_keeps_the_candidates_and_the_scores_places(vectors):
    graph = conversation()
    assert vectors.ready(graph)
    question = "What did Melanie paint by the lake?"
    handed = []
    ranking.recall(graph, question, 10, vectors=vectors, reorder=lambda r: handed.append(r) or r)
    ranked = handed[0]
    model = rerank.shipped()
    out = rerank.reorder(graph, question, ranked, vectors, model)
    assert sorted(h.node.id for h in out) == sorted(h.node.id for h in ranked)
    assert [h.score for h in out] == sorted((h.score for h in ranked), reverse=True)
    x = rerank.features(graph, question, ranked[: rerank.DEPTH], vectors)
    assert x.shape == (min(len(ranked), rerank.DEPTH), len(rerank.FEATURES)) and np.isfinite(x).all()
    expected = [ranked[i].node.id for i in np.argsort(-model.scores(x), kind="stable")]
    assert [h.node.id for h in out][: len(expected)] == expected
    # The turn that asks is marked so; the one after a hit sees its neighbour's words.
    asks = {h.node.id: row for h, row in zip(ranked, x)}
    assert asks["t4"][rerank.FEATURES.index("asks a question")] == 1.0
    assert asks["t5"][rerank.FEATURES.index("asks a question")] == 0.0


def test_another_users_memory_is_no_context(vectors):
    """A neighbour in `exclude` (another user's, hidden from this one) is read as no neighbour:
    the features are those of a graph without it."""
    graph = conversation()
    assert vectors.ready(graph)
    question = "Did Melanie paint it from a photo?"
    handed = []
    ranking.recall(graph, question, 10, vectors=vectors, reorder=lambda r: handed.append(r) or r)
    ranked = [h for h in handed[0] if h.node.id != "t4"]
    hidden = rerank.features(graph, question, ranked, vectors, exclude={"t4"})
    seen = rerank.features(graph, question, ranked, vectors)
    at = [h.node.id for h in ranked].index("t5")
    before = rerank.FEATURES.index("cosine before")
    assert seen[at, before] != 0.0 and hidden[at, before] == 0.0


def test_a_candidate_holding_what_the_question_asks_for_and_one_after_a_question_are_marked(vectors):
    """"When" asks for a time and "how many" for a number: a candidate holding one is marked in
    its column, and only for that kind of question; a memory right after a question is marked
    as following one (t5 follows "Did you paint it from a photo?", t2 "How did it feel?")."""
    graph = conversation()
    hits = [Hit(graph.nodes[i], 1.0) for i in ("t3", "t7", "t5", "t2")]
    column = {name: rerank.FEATURES.index(name) for name in ("a time for when", "a number for how many", "before asks")}
    when = rerank.features(graph, "When did the kids go camping?", hits, vectors)
    assert when[:, column["a time for when"]].tolist() == [1.0, 1.0, 0.0, 0.0]  # "last week", "in June"
    assert when[:, column["a number for how many"]].tolist() == [0.0] * 4
    assert when[:, column["before asks"]].tolist() == [0.0, 0.0, 1.0, 1.0]
    how_many = rerank.features(graph, "How many times did they paint?", hits, vectors)
    assert how_many[:, column["a time for when"]].tolist() == [0.0] * 4
    assert rerank.features(graph, "What did they paint?", hits, vectors)[:, column["a time for when"]].tolist() == [0.0] * 4


def test_when_on_recall_uses_the_shipped_weights_and_never_returns_an_excluded_memory(vectors, monkeypatch):
    graph = conversation()
    assert vectors.ready(graph)
    monkeypatch.setattr(rerank, "ENABLED", True)
    question = "What did the kids like about camping?"
    hits = ranking.recall(graph, question, 10, vectors=vectors, exclude={"t9"})
    assert hits and "t9" not in {h.node.id for h in hits}
    # What the shipped stage gives, handed in by hand, is what recall gave on its own.
    by_hand = ranking.recall(graph, question, 10, vectors=vectors, exclude={"t9"},
                             reorder=lambda r: rerank.reorder(graph, question, r, vectors, rerank.shipped(), {"t9"}))
    assert [h.node.id for h in hits] == [h.node.id for h in by_hand]
    monkeypatch.setattr(rerank, "ENABLED", False)
    off = ranking.recall(graph, question, 10, vectors=vectors, exclude={"t9"})
    assert [h.node.id for h in off] != [h.node.id for h in hits]  # the stage changed the order


def test_the_providers_prefetch_ranks_with_the_stage_as_the_tools_do(tmp_path, monkeypatch):
    """Prefetch (MemoryService.recall) orders its lines with the stage: turned off, the same
    question injects another block; soul_related's ranking moves with it."""
    soul = SoulFile(tmp_path / "soul.json")
    store = VectorStore(vectors_path(soul.path), background=False)
    if not store.enabled:
        pytest.skip(store.reason)
    service = memory_service.MemoryService(soul, embed=True, vectors=store)
    for turn in TURNS * 4:  # enough candidates for the stage to have an order to change
        service.sync_turn(user=turn, session_id="s1", platform="cli")
    question = "What did the kids like about camping?"
    assert store.ready(service.soul.graph())
    assert memory_service.PREFETCH_STAGE is True
    on = service.recall(query=question, limit=10)
    with_stage = [h.node.id for h in ranking.related(service.soul.graph(), question, 30, vectors=store)]
    monkeypatch.setattr(memory_service, "PREFETCH_STAGE", False)
    assert service.recall(query=question, limit=10)["ids"] != on["ids"]
    monkeypatch.setattr(rerank, "ENABLED", False)
    without = [h.node.id for h in ranking.related(service.soul.graph(), question, 30, vectors=store)]
    assert with_stage != without


def test_a_sitting_is_the_siblings_either_side_within_reach_and_one_sitting():
    graph = conversation()
    for number in range(5):  # a second sitting under the same parent, two hours after the first
        graph.add(f"Caroline: later note {number}", parents=["s1"], node_id=f"later{number}",
                  created_at=DAY + 60 * len(TURNS) + 7200 + 60 * number)
    sitting = hybrid.siblings_of(graph).sitting
    assert sitting("t5", 2) == ["t3", "t4", "t6", "t7"]
    assert sitting("t1", 10) == ["t0"] + [f"t{n}" for n in range(2, len(TURNS))]  # not the later sitting
    assert sitting("later0", 3) == ["later1", "later2", "later3"]
    assert sitting("s1", 10) == []  # no parent, and t0 was written with it: no conversation


def test_a_candidates_conversation_is_read_from_what_recall_could_show(vectors):
    """The sitting columns: the best cosine among the candidate and its conversation, and the
    other candidates it holds by their places; a memory in `exclude` is not part of it."""
    graph = conversation()
    assert vectors.ready(graph)
    question = "What did the kids like most about camping?"
    hits = [Hit(graph.nodes[f"t{n}"], 1.0 / (n + 1)) for n in range(len(TURNS))]
    column = {name: rerank.FEATURES.index(name) for name in ("cosine", "sitting best cosine", "sitting support")}
    x = rerank.features(graph, question, hits, vectors)
    best = int(np.argmax(x[:, column["cosine"]]))
    assert np.allclose(x[:, column["sitting best cosine"]], x[best, column["cosine"]])
    places = 1.0 / (1.0 + np.arange(len(hits)))
    assert np.allclose(x[:, column["sitting support"]], places.sum() - places)
    kept = [hit for place, hit in enumerate(hits) if place != best]
    hidden = rerank.features(graph, question, kept, vectors, exclude={f"t{best}"})
    assert np.allclose(hidden[:, column["sitting best cosine"]], np.delete(x[:, column["cosine"]], best).max())


def test_the_features_are_the_same_in_every_process(vectors):
    """String hashing is seeded per process: a feature summed in a set's order would differ in
    its last bit from one run to the next and flip near-ties (the doc samples caught one)."""
    script = (
        "import sys; sys.path[:0] = ['.', 'runtime']\n"
        "from tests.test_rerank import conversation, question_set\n"
        "print(question_set())\n")
    runs = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True,
                           cwd=ROOT, env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2", "3")}
    assert len(runs) == 1 and runs.pop().strip()


def question_set() -> str:
    """The stage's features for a few questions over `conversation()`, every bit of them."""
    store = VectorStore(None, background=False)
    graph = conversation()
    assert store.ready(graph)
    hits = [Hit(graph.nodes[f"t{n}"], 1.0 / (n + 1)) for n in range(len(TURNS))]
    texts = ("What did the kids like most about camping and the stars?", "When did Melanie paint the sunset?",
             "How many kids does Melanie take camping?")
    return " ".join(rerank.features(graph, text, hits, store).tobytes().hex() for text in texts)
