"""Retrieval methods, each a small pluggable class compared in the same replay.

A retriever has a `name`, sees the memory grow through `observe_add` (a node was
added) and `observe_touch` (a node was used), and answers `ask(text, k)` with up to
`k` node ids, best first. Methods that read the soul graph get the replay's graph and
need no hooks: the replay keeps the graph itself up to date.

To compare a new method (hybrid, embeddings), subclass `Retriever` and add it to
`METHODS`; every harness command can then name it in `--methods`.
"""

from __future__ import annotations

import heapq
from typing import Callable

from soulgraph.eval.bm25 import BM25Index
from soulgraph.engine.graph import SoulGraph
from soulgraph.engine.index import words
from soulgraph.memory import ranking


class Retriever:
    name = "?"

    def observe_add(self, node_id: str, text: str, at: float) -> None:
        """A node was added to memory at time `at`."""

    def observe_touch(self, node_id: str, at: float) -> None:
        """A node was used (splayed) at time `at`."""

    def ask(self, text: str, k: int) -> list[str]:
        raise NotImplementedError


def top_k(scores: dict[str, float], k: int, seq: dict[str, int]) -> list[str]:
    """Ids of the k best scores; equal scores go to the newer node (larger `seq`).

    Plain word counts tie often, so the tie-break matters: newest first is what a
    reader scanning a log backwards would see, and it is the same for every method.
    """
    best = heapq.nsmallest(k, scores.items(), key=lambda item: (-item[1], -seq[item[0]]))
    return [node_id for node_id, _ in best]


class _SequencedRetriever(Retriever):
    def __init__(self) -> None:
        self.seq: dict[str, int] = {}

    def observe_add(self, node_id: str, text: str, at: float) -> None:
        self.seq[node_id] = len(self.seq)
        self.index_text(node_id, text)

    def index_text(self, node_id: str, text: str) -> None:
        pass


class Recent(_SequencedRetriever):
    """The k most recently added nodes, whatever the question."""

    name = "recent"

    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []

    def index_text(self, node_id: str, text: str) -> None:
        self.ids.append(node_id)

    def ask(self, text: str, k: int) -> list[str]:
        return self.ids[: -k - 1 : -1] if k > 0 else []


class Keyword(_SequencedRetriever):
    """How many distinct words a node shares with the question; nothing else."""

    name = "keyword"

    def __init__(self) -> None:
        super().__init__()
        self.postings: dict[str, list[str]] = {}

    def index_text(self, node_id: str, text: str) -> None:
        for word in words(text):
            self.postings.setdefault(word, []).append(node_id)

    def ask(self, text: str, k: int) -> list[str]:
        counts: dict[str, float] = {}
        for word in words(text):
            for node_id in self.postings.get(word, ()):
                counts[node_id] = counts.get(node_id, 0) + 1
        return top_k(counts, k, self.seq)


class BM25(_SequencedRetriever):
    """Okapi BM25 (k1 = 1.2, b = 0.75) over the same text the graph indexes."""

    name = "bm25"

    def __init__(self) -> None:
        super().__init__()
        self.index = BM25Index()

    def index_text(self, node_id: str, text: str) -> None:
        self.index.add(node_id, text)

    def ask(self, text: str, k: int) -> list[str]:
        return top_k(self.index.scores(text), k, self.seq)


class _GraphRetriever(Retriever):
    def __init__(self, graph: SoulGraph) -> None:
        self.graph = graph


class SemanticSearch(_GraphRetriever):
    """The graph's own search: idf of shared words, boosted by recency."""

    name = "semantic_search"

    def ask(self, text: str, k: int) -> list[str]:
        return [hit.node.id for hit in self.graph.query(text, k)]


class Recall(_GraphRetriever):
    """What soul_query returns: the graph's search, then trust, replacements and variety
    (`memory/ranking.py`)."""

    name = "recall"

    def ask(self, text: str, k: int) -> list[str]:
        return [hit.node.id for hit in ranking.recall(self.graph, text, k)]


class RecallBefore(_GraphRetriever):
    """recall as it was before issue 15 (no neighbour context, no time-aware questions, no
    vectors): the graph's search, trust, replacements and variety."""

    name = "recall_before"

    def ask(self, text: str, k: int) -> list[str]:
        return [hit.node.id for hit in ranking.recall(self.graph, text, k, neighbours=False, time_aware=False)]


class Hybrid(_GraphRetriever):
    """What soul_query returns with the `embed` extra: recall, its neighbour context, and for a
    question the static vectors fused in (engine/hybrid.py). Built inline, with no file."""

    name = "hybrid"

    def __init__(self, graph: SoulGraph) -> None:
        super().__init__(graph)
        from soulgraph.store.vectors import VectorStore

        self.vectors = VectorStore(None, background=False)
        if not self.vectors.enabled:
            raise ValueError(f"method {self.name!r} needs the vectors: {self.vectors.reason}")

    def ask(self, text: str, k: int) -> list[str]:
        return [hit.node.id for hit in ranking.recall(self.graph, text, k, vectors=self.vectors)]


class HybridRelated(Hybrid):
    """What soul_related returns with the `embed` extra: hybrid's hits, then their DAG neighbours."""

    name = "hybrid_related"

    def ask(self, text: str, k: int) -> list[str]:
        return [hit.node.id for hit in ranking.related(self.graph, text, k, vectors=self.vectors)]


class RecallRelated(_GraphRetriever):
    """What soul_related returns: recall's hits, then their DAG parents and children."""

    name = "recall_related"

    def ask(self, text: str, k: int) -> list[str]:
        return [hit.node.id for hit in ranking.related(self.graph, text, k)]


class Related(_GraphRetriever):
    """Search hits followed by their DAG parents and children."""

    name = "related"

    def ask(self, text: str, k: int) -> list[str]:
        return [hit.node.id for hit in self.graph.related(text, k)]


class RelatedNoRecency(_GraphRetriever):
    """`related` with the recency boost turned off."""

    name = "related_no_recency"

    def ask(self, text: str, k: int) -> list[str]:
        return [hit.node.id for hit in self.graph.related(text, k, recency_weight=0.0)]


class Hot(_GraphRetriever):
    """The splay order (`hot()`): what the memory has been doing, not retrieval."""

    name = "hot"

    def ask(self, text: str, k: int) -> list[str]:
        return [node.id for node in self.graph.hot(k)]


METHODS: dict[str, Callable[[SoulGraph], Retriever]] = {
    "recent": lambda graph: Recent(),
    "keyword": lambda graph: Keyword(),
    "bm25": lambda graph: BM25(),
    "semantic_search": SemanticSearch,
    "recall": Recall,
    "related": Related,
    "recall_related": RecallRelated,
    "recall_before": RecallBefore,
    "hybrid": Hybrid,
    "hybrid_related": HybridRelated,
    "related_no_recency": RelatedNoRecency,
    "hot": Hot,
}
DEFAULT_METHODS = ["recent", "keyword", "bm25", "semantic_search", "related", "related_no_recency", "recall",
                   "recall_related"]


def parse_methods(spec: str | None) -> list[str]:
    if not spec:
        return list(DEFAULT_METHODS)
    names = [name.strip() for name in spec.split(",") if name.strip()]
    unknown = [name for name in names if name not in METHODS]
    if unknown:
        raise ValueError(f"unknown method(s) {', '.join(unknown)}; known: {', '.join(METHODS)}")
    return list(dict.fromkeys(names))


def make_retrievers(names: list[str], graph: SoulGraph) -> list[Retriever]:
    return [METHODS[name](graph) for name in names]
