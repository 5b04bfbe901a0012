"""The incremental BM25 index against the Okapi formula computed from scratch."""

from __future__ import annotations

import math

import pytest

from soulgraph.eval.bm25 import BM25Index, tokens
from soulgraph.eval.retrievers import BM25

CORPUS = {
    "d1": "the splay tree keeps recency order",
    "d2": "splay splay splay: a tree that moves hot nodes up",
    "d3": "an inverted index for search over memory",
    "d4": "memory graph with DAG lineage and search",
    "d5": "recency boost for search over the memory graph and the splay tree order",
}
QUERIES = ["splay tree", "memory search", "recency order order", "graph", "nothing matches here"]


def brute_force(docs: dict[str, str], query: str, k1: float = 1.2, b: float = 0.75) -> dict[str, float]:
    """Okapi BM25 written straight from its definition, recomputing everything."""
    bags = {d: tokens(text) for d, text in docs.items()}
    n = len(bags)
    avgdl = sum(len(bag) for bag in bags.values()) / n
    scores = {}
    for doc, bag in bags.items():
        total, shared = 0.0, False
        for word in tokens(query):  # a repeated query word counts each time
            df = sum(1 for other in bags.values() if word in other)
            tf = bag.count(word)
            if tf == 0:
                continue
            shared = True
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            total += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(bag) / avgdl))
        if shared:
            scores[doc] = total
    return scores


def assert_same(got: dict[str, float], want: dict[str, float]) -> None:
    assert set(got) == set(want)
    for doc in want:
        assert got[doc] == pytest.approx(want[doc], rel=1e-12)


def test_matches_the_formula_after_every_addition():
    index = BM25Index()
    seen: dict[str, str] = {}
    for doc, text in CORPUS.items():
        index.add(doc, text)
        seen[doc] = text
        for query in QUERIES:
            assert_same(index.scores(query), brute_force(seen, query))


def test_replacing_and_removing_a_document_keeps_statistics_exact():
    index = BM25Index()
    for doc, text in CORPUS.items():
        index.add(doc, text)
    index.add("d2", "a shorter text about the tree")  # replaces d2
    index.remove("d3")
    index.remove("missing")
    docs = {**CORPUS, "d2": "a shorter text about the tree"}
    del docs["d3"]
    for query in QUERIES:
        assert_same(index.scores(query), brute_force(docs, query))
    assert len(index) == 4 and "inverted" not in index.postings


def test_term_frequency_saturates_and_rare_words_weigh_more():
    scores = BM25Index()
    for doc, text in CORPUS.items():
        scores.add(doc, text)
    splay = scores.scores("splay")
    assert splay["d2"] > splay["d1"]  # three occurrences beat one …
    assert splay["d2"] < 3 * splay["d1"]  # … but not three times over
    assert scores.idf("lineage") > scores.idf("search")


def test_retriever_ranks_by_score_then_newest():
    retriever = BM25()
    for n, text in enumerate(["apple pie", "apple tart", "plum pie"]):
        retriever.observe_add(f"n{n}", text, float(n))
    assert retriever.ask("apple", 5) == ["n1", "n0"]  # equal scores: newer first
    assert retriever.ask("plum pie", 1) == ["n2"]
    assert retriever.ask("", 5) == [] and BM25().ask("apple", 5) == []
