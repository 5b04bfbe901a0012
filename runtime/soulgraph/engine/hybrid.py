"""What search adds to the word index: the memories around a hit, a date, and vectors.

Three steps on recall's ranked hits (`rerank`; memory/ranking.py runs it inside recall):

1. Neighbour context, for a question. A memory's meaning often sits in the one written just
   before it: "I go hiking" answers "what do you do to relax?". So each of the best
   `LEND_DEPTH` hits lends a share of its score to the memory written just after it
   (`NEXT_SHARE`) and just before it (`PREVIOUS_SHARE`), never lifting it past the hit itself
   (`JUST_BELOW`). Neighbours are siblings (the children of a common parent, in creation
   order) or links of a chain (each turn the child of the one before, as `sync_turn` writes
   them; `Siblings`), and only within `NEIGHBOUR_GAP` of each other (one sitting). A memory
   with no parent and no child has no neighbours: the step never invents an order the agent
   did not write down.
2. Vectors, for questions only. When the query is a question in words ("what does she do to
   relax?") and the vectors are ready, the ranking is fused with the vectors' nearest nodes by
   reciprocal rank fusion (`RRF_K`, the vectors weighted `VECTOR_WEIGHT`); the word search's
   best match never falls below place `WORD_BEST_WITHIN`. A query that is not
   a question (a title, names, keywords) stays with the words and the graph's own links: on
   the ledgers, where proposals build on proposals that share their rare names, every fusion
   measured lowered recall (docs/embeddings.md has the tables).
3. A date the question writes out (engine/when.py): memories from that span, or `TIME_SLACK`
   after it, score `TIME_BOOST` times more.

The fused scores are mapped back onto the word scale (the best fused hit keeps the best
score of the list), so trust, variety and the tools' `score` keep their meaning.
"""

from __future__ import annotations

import bisect
import re
import weakref
from typing import Callable

from soulgraph.engine.graph import Hit, Node, SoulGraph

NEXT_SHARE = 0.5  # what a hit lends the sibling written after it: an answer follows its question
PREVIOUS_SHARE = 0.25  # ... and the one before it
NEIGHBOUR_GAP = 3600.0  # seconds: siblings written further apart are not one exchange
JUST_BELOW = 0.999  # the most a neighbour's lent score brings it to: just under its hit's
LEND_DEPTH = 30  # the best candidates that lend to their neighbours (deeper changed nothing measured)
RRF_K = 60
VECTOR_WEIGHT = 0.5
WORD_BEST_WITHIN = 10  # the fused place the word search's best match never falls below
TIME_BOOST = 2.0  # a memory from the time a question names (engine/when.py) scores this much more
TIME_SLACK = 7 * 86400.0  # ... or from this long after it: things are told after they happen

_KIND_SCAN = 16  # the children looked at for a second one of a kind (a chain's turn has a few)
_AFTER_ANY_ID = "\U0010ffff"  # sorts after every id: the end of one moment's siblings
_QUESTION_WORDS = frozenset("what when where who whom whose which why how".split())
_FIRST_WORD = re.compile(r"[A-Za-z]+")


def is_question(text: str) -> bool:
    """A question in words: ends with '?' or opens with a wh-word ("how", "what", ...)."""
    stripped = text.strip()
    if stripped.endswith("?"):
        return True
    first = _FIRST_WORD.match(stripped)
    return bool(first) and first.group(0).lower() in _QUESTION_WORDS


class Siblings:
    """Each node's neighbours (see the module text), kept per graph generation: any change to
    the graph's nodes or edges makes a new one. Only parents asked about are ever sorted.

    Two shapes of conversation are read. Siblings: the children of one parent in the order
    they were written (a session node over its turns). A chain: each turn the child of the one
    before it (what `sync_turn` writes): a memory continues its parent when it is the parent's
    first child, written after it and within NEIGHBOUR_GAP of it, and no other child of its
    kind came in that sitting (a fact drawn from a turn is its child too, of another kind)."""

    def __init__(self, graph: SoulGraph):
        self.graph = graph
        self._generation = -1
        self._ordered: dict[str, list[tuple[float, str]]] = {}
        self._around: dict[str, tuple[list[str], list[str]]] = {}
        self._next: dict[str, str | None] = {}  # a node -> the child that continues it
        self._prev: dict[str, str | None] = {}  # a node -> the parent it continues
        self._sittings: dict[tuple[str, int], tuple[str, ...]] = {}

    def _fresh(self) -> None:
        if self.graph.generation != self._generation:
            self._ordered.clear()
            self._around.clear()
            self._next.clear()
            self._prev.clear()
            self._sittings.clear()
            self._generation = self.graph.generation

    def _order(self, parent: str) -> list[tuple[float, str]]:
        """The parent's children as (created_at, id), oldest first."""
        ordered = self._ordered.get(parent)
        if ordered is None:
            nodes = self.graph.nodes
            ordered = self._ordered[parent] = sorted((nodes[c].created_at, c) for c in self.graph.children.get(parent, ()))
        return ordered

    def _continued(self, node_id: str) -> str | None:
        """The child that continues the node in a chain: its first child, when written after
        it and within NEIGHBOUR_GAP (a child of the same moment comes with it, not after), and
        the only child of its kind in that sitting: a parent over several of one kind (a
        session over its turns, a heading over its entries) holds them side by side."""
        found = self._next.get(node_id, False)
        if found is not False:
            return found
        found, nodes = None, self.graph.nodes
        if self.graph.children.get(node_id):
            ordered = self._order(node_id)
            last, child = ordered[0]
            if 0 < last - nodes[node_id].created_at <= NEIGHBOUR_GAP:
                kind, found = nodes[child].kind, child
                for at, other in ordered[1:1 + _KIND_SCAN]:  # the children of its sitting, a few
                    if at - last > NEIGHBOUR_GAP:
                        break
                    if nodes[other].kind == kind:
                        found = None
                        break
                    last = at
        self._next[node_id] = found
        return found

    def _continues(self, node_id: str) -> str | None:
        """The parent the node continues in a chain (see `_continued`), if any."""
        found = self._prev.get(node_id, False)
        if found is False:
            found = self._prev[node_id] = next(
                (p for p in self.graph.parents.get(node_id, ()) if self._continued(p) == node_id), None)
        return found

    def around(self, node_id: str) -> tuple[list[str], list[str]]:
        """(memories written just before, just after) the node: the parent it continues and the
        child that continues it, then the siblings either side, one per parent at most."""
        self._fresh()
        found = self._around.get(node_id)
        if found is not None:
            return found
        graph = self.graph
        node = graph.nodes[node_id]
        up, down = self._continues(node_id), self._continued(node_id)
        before, after = [up] if up else [], [down] if down else []
        for parent in graph.parents.get(node_id, ()):
            ordered = self._order(parent)
            # Siblings written at the same moment have no order between them: not neighbours.
            first = bisect.bisect_left(ordered, (node.created_at,))
            if first > 0 and node.created_at - ordered[first - 1][0] <= NEIGHBOUR_GAP:
                before.append(ordered[first - 1][1])
            last = bisect.bisect_right(ordered, (node.created_at, _AFTER_ANY_ID))
            if last < len(ordered) and ordered[last][0] - node.created_at <= NEIGHBOUR_GAP:
                after.append(ordered[last][1])
        found = self._around[node_id] = (list(dict.fromkeys(before)), list(dict.fromkeys(after)))
        return found

    def sitting(self, node_id: str, reach: int) -> list[str]:
        """The memories written in the same sitting as the node, each within NEIGHBOUR_GAP of
        the next: at most `reach` siblings on either side under each parent, and at most `reach`
        links of its chain up and down. The conversation around it, without the node, each
        once. Its cost grows with `reach`, not with a parent's children (a hub holds thousands)."""
        self._fresh()
        kept = self._sittings.get((node_id, reach))
        if kept is not None:  # the same candidates come back question after question
            return list(kept)
        graph = self.graph
        key = (graph.nodes[node_id].created_at, node_id)
        found: list[str] = []
        for parent in graph.parents.get(node_id, ()):
            ordered = self._order(parent)
            at = bisect.bisect_left(ordered, key)
            first = max(0, at - reach)
            window, mid = ordered[first:at + reach + 1], at - first
            low = mid
            while low > 0 and window[low][0] - window[low - 1][0] <= NEIGHBOUR_GAP:
                low -= 1
            high = mid
            while high + 1 < len(window) and window[high + 1][0] - window[high][0] <= NEIGHBOUR_GAP:
                high += 1
            found += [child for _, child in window[low:mid]]
            found += [child for _, child in window[mid + 1:high + 1]]
        for step in (self._continues, self._continued):
            link = node_id
            for _ in range(reach):
                link = step(link)
                if link is None:
                    break
                found.append(link)
        kept = self._sittings[(node_id, reach)] = tuple(i for i in dict.fromkeys(found) if i != node_id)
        return list(kept)


def rerank(graph: SoulGraph, scores: dict[str, float], keep: int, *, accept: Callable[[Node], bool],
           via: dict[str, str] | None = None, neighbours: bool = True, nearest: list[str] | None = None,
           span: tuple[float, float] | None = None) -> list[Hit]:
    """The best `keep` of the candidates (node id -> score, `via` saying why each was found
    when not a plain match) after neighbour context, the vectors' `nearest` ids (fused when
    given) and the time `span` a question names (when given), best first. The best
    `LEND_DEPTH` candidates lend to their neighbours. A node `accept` refuses (archived,
    another tag, out of a time range) is never brought in."""
    if not scores and not nearest:
        return []
    nodes = graph.nodes
    scores, via = dict(scores), dict(via or {})
    if neighbours and scores:
        around = siblings_of(graph).around
        lent_by: dict[str, str] = {}  # a neighbour brought in -> the hit that brought it
        for node_id, score in _best(scores, LEND_DEPTH):
            before, after = around(node_id)
            for share, others in ((NEXT_SHARE, after), (PREVIOUS_SHARE, before)):
                for other in others:
                    held = scores.get(other)
                    if held is None:
                        if not accept(nodes[other]):
                            continue
                        held, lent_by[other] = 0.0, node_id
                    # Lifted by the context, but never past the hit it came from: the hit is
                    # what matched (lexical recall's R@1 0.316 -> 0.343 on LoCoMo dev, R@10 equal).
                    lifted, cap = held + share * score, score * JUST_BELOW
                    scores[other] = lifted if lifted <= cap else max(held, cap)
        for other, node_id in lent_by.items():
            via[other] = f"beside {node_id}"
    scale = 1.0
    if nearest is not None:
        scores, scale = _fused(scores, nearest, via)
    if span is not None:
        for node_id in scores:
            if in_span(nodes[node_id], span):
                scores[node_id] *= TIME_BOOST
    return [Hit(nodes[node_id], score * scale, via.get(node_id, "match")) for node_id, score in _best(scores, keep)]


def _best_first(scores: dict[str, float]) -> list[str]:
    """The ids by score, best first, equal scores by id (two sorts in C: by id, then a stable
    sort by score)."""
    return sorted(sorted(scores), key=scores.__getitem__, reverse=True)


def _best(scores: dict[str, float], keep: int) -> list[tuple[str, float]]:
    """The best `keep` (id, score), in `_best_first` order, without sorting them all."""
    if len(scores) > keep > 0:
        bar = sorted(scores.values(), reverse=True)[keep - 1]  # a sort in C beats heapq's Python at these sizes
        scores = {node_id: score for node_id, score in scores.items() if score >= bar}
    return [(node_id, scores[node_id]) for node_id in _best_first(scores)[:max(keep, 0)]]


def _fused(scores: dict[str, float], nearest: list[str], via: dict[str, str]) -> tuple[dict[str, float], float]:
    """Reciprocal rank fusion of the scores' order and the vectors' (weighted `VECTOR_WEIGHT`),
    and the factor that maps it back onto the word scale: the best fused node scores what the
    best scored node did."""
    order = _best_first(scores)
    top = scores[order[0]] if order else 1.0
    fused = dict(zip(order, _terms(RRF_K, 1.0, len(order))))
    for node_id, term in zip(nearest, _terms(RRF_K, VECTOR_WEIGHT, len(nearest))):
        held = fused.get(node_id)
        if held is None:
            fused[node_id], via[node_id] = term, "vector"
        else:
            fused[node_id] = held + term
    # The word search's best match keeps a place in the first `WORD_BEST_WITHIN`: a long turn
    # whose vector is diluted by code it also holds must not drop the one memory that says the
    # question's words (BEAM dev, current value in the top 10: 0.891 -> 0.909; LoCoMo R@10 +0.002).
    if order and len(fused) > WORD_BEST_WITHIN:
        bar = sorted(fused.values(), reverse=True)[WORD_BEST_WITHIN - 1]
        if fused[order[0]] < bar:
            fused[order[0]] = bar * (1 + 1e-9)
    return fused, (top / max(fused.values()) if top > 0 else 1.0)


def _terms(k: int, weight: float, n: int) -> tuple[float, ...]:
    """weight / (k + rank) for the ranks 1..n at least (zip takes what it needs): what reciprocal
    rank fusion gives each place. Kept between searches, grown to the next power of two."""
    held = _TERMS.get((k, weight), ())
    if len(held) < n:
        held = _TERMS[(k, weight)] = tuple(weight / (k + rank) for rank in range(1, 2 ** n.bit_length() + 1))
    return held


_TERMS: dict[tuple[int, float], tuple[float, ...]] = {}


def memory_time(node: Node) -> float:
    """When a memory's content happened, as far as the graph knows: valid_from, else its writing."""
    return node.valid_from if node.valid_from is not None else node.created_at


def in_span(node: Node, span: tuple[float, float]) -> bool:
    """Whether a memory is from the time a question names (`when.window`), or TIME_SLACK after it."""
    return span[0] <= memory_time(node) < span[1] + TIME_SLACK


_SIBLINGS: "weakref.WeakKeyDictionary[SoulGraph, Siblings]" = weakref.WeakKeyDictionary()


def siblings_of(graph: SoulGraph) -> Siblings:
    """The graph's sibling order, kept between searches."""
    found = _SIBLINGS.get(graph)
    if found is None:
        found = _SIBLINGS[graph] = Siblings(graph)
    return found
