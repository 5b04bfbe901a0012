"""Recall that knows the memory record: what `soul_query` and `soul_related` rank by.

The engine's search (`SoulGraph.query`) ranks by shared words and recency, exactly (its
property tests compare it with a brute-force scan). Recall takes its best `pool(k)` hits
and then applies what the memory record knows, in three steps:

1. Trust. Each hit's score is multiplied by
   ``(0.5 + 0.5 · confidence) · (1 + STRENGTH_WEIGHT · s / (1 + s))``
   where ``s`` is the memory's reinforcement now (`record.effective_strength`: its strength
   halved every half-life without confirmation; pinned memories never decay). A memory
   written with confidence 0.3 weighs 0.65 / 0.85 of one written with the default 0.7; a
   memory confirmed a few times (s ≈ 3) weighs about 1.19 / 1.11 of a fresh unconfirmed one
   (s = 1), and an old unconfirmed one (s → 0) 1 / 1.11 of it. The factors are bounded, so
   a memory never outranks a much better match on trust alone.
2. Replacements. A superseded memory that matches the question well (it would have made the
   top k) brings in the memory that replaced it (the end of its `superseded_by` chain),
   scored `REPLACEMENT_SHARE` of the old one, marked ``via="replaces <old id>"``: "what do I
   use for X" finds the new answer even when only the old one shares the question's words.
3. Variety (maximal marginal relevance). The k results are picked one at a time, each the
   candidate with the best ``λ · score / best score − (1 − λ) · similarity`` to the results
   already picked, similarity being the Jaccard overlap of their word sets. With λ = `MMR_LAMBDA`
   a near-copy of a result already picked loses its place to a different memory that matches
   a little less, so five rewordings of one fact do not fill a top five.

Each result keeps its trust-weighted score; the order is the MMR order (a near-duplicate may
appear below a lower score). docs/soul-graph.md shows the formulas with real output and
docs/eval.md what they change on the evaluation data.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections import Counter
from typing import Callable

from soulgraph.engine.graph import ACTIVE, Hit, Node, SoulGraph
from soulgraph.engine.index import words
from soulgraph.memory import record

STRENGTH_WEIGHT = 0.25
REPLACEMENT_SHARE = 0.95
MMR_LAMBDA = 0.5
DUPLICATE_OVERLAP = 0.6
DUPLICATE_MIN_WORDS = 3


def pool(k: int) -> int:
    """How many engine hits recall re-ranks to return k: room for trust and variety to act."""
    return k + max(5, k // 2)


def trust(node: Node, now: float, half_life: float = record.STRENGTH_HALF_LIFE) -> float:
    """The factor confidence and reinforcement put on a memory's score (see the module text)."""
    strength = ranking_strength(node, now, half_life)
    return (0.5 + 0.5 * node.confidence) * (1.0 + STRENGTH_WEIGHT * strength / (1.0 + strength))


def ranking_strength(node: Node, now: float, half_life: float = record.STRENGTH_HALF_LIFE) -> float:
    """Reinforcement as ranking sees it: what is left of it now, but never below the lesser
    of the stored strength and a fresh memory's. A confirmation's lift fades with the
    half-life; a weakened memory stays low until confirmed; age alone costs nothing (the
    engine's recency already favours what is in use, and old foundations are often what a
    question is after: docs/eval.md measured the loss when age counted here)."""
    if node.strength <= record.DEFAULT_STRENGTH:
        return node.strength  # what is left of it can only be less: the floor is the stored value
    left = record.effective_strength(node.strength, node.confirmed_at, now, pinned=node.pinned,
                                     half_life=half_life)
    return max(left, record.DEFAULT_STRENGTH)


def recall(graph: SoulGraph, text: str, k: int = 10, *, hint: str | None = None, tag: str | None = None,
           include_archived: bool = False, where: Callable[[Node], bool] | None = None,
           recency_weight: float | None = None, mmr_lambda: float | None = None) -> list[Hit]:
    """The k memories recall returns for `text`, best first (see the module text)."""
    if k <= 0:
        return []
    found = graph.query(text, pool(k), hint=hint, tag=tag, include_archived=include_archived, where=where,
                        recency_weight=recency_weight)
    now, half_life = graph.clock(), graph.strength_half_life
    hits = {hit.node.id: Hit(hit.node, hit.score * trust(hit.node, now, half_life), hit.via) for hit in found}
    for hit in _replacements(graph, text, hint, hits, k, tag, where, now, half_life):
        if hit.node.id not in hits or hits[hit.node.id].score < hit.score:
            hits[hit.node.id] = hit
    ranked = sorted(hits.values(), key=lambda h: (-h.score, h.node.id))
    question = frozenset(words(text) | (words(hint) if hint else set()))
    return diversify(ranked, k, MMR_LAMBDA if mmr_lambda is None else mmr_lambda, question)


def related(graph: SoulGraph, text: str, k: int = 10, *, hint: str | None = None) -> list[Hit]:
    """What `soul_related` returns: recall's hits, then their DAG parents and children
    (`SoulGraph.related`; neighbours inherit a share of a hit's score, all sorted by score)."""
    return graph.related(text, k, hint=hint, hits=recall(graph, text, k, hint=hint))


def _replacements(graph: SoulGraph, text: str, hint: str | None, hits: dict[str, Hit], k: int, tag: str | None,
                  where: Callable[[Node], bool] | None, now: float, half_life: float) -> list[Hit]:
    """Current memories that replaced a superseded one matching as well as the k-th hit."""
    archive = graph.archive_index
    if not len(archive):
        return []
    query_words = words(text) | (words(hint) if hint else set())
    index, total = graph.index, len(graph.index) + len(archive)
    bar = sorted((h.score for h in hits.values()), reverse=True)[k - 1] if len(hits) >= k else 0.0
    old_scores: dict[str, float] = {}
    for word in query_words:
        holders = archive.posting(word)
        if not holders:
            continue
        # Scored as if the old memories were still in the index: idf over both indexes.
        idf = math.log1p(total / (len(holders) + len(index.posting(word))))
        for node_id in holders:
            old_scores[node_id] = old_scores.get(node_id, 0.0) + idf
    found = []
    for old_id, score in old_scores.items():
        old = graph.nodes[old_id]
        if old.status != "superseded":
            continue
        score *= trust(old, now, half_life)
        if score < bar:
            continue
        current = _current(graph, old)
        if current is None or (tag is not None and tag not in current.tags) or (where is not None and not where(current)):
            continue
        found.append(Hit(current, score * REPLACEMENT_SHARE, f"replaces {old_id}"))
    return found


def _current(graph: SoulGraph, node: Node) -> Node | None:
    """The end of a superseded memory's chain of replacements, if it is in default recall."""
    seen = {node.id}
    while node.superseded_by is not None and node.superseded_by in graph.nodes and node.superseded_by not in seen:
        node = graph.nodes[node.superseded_by]
        seen.add(node.id)
    return node if node.status == ACTIVE else None


def diversify(ranked: list[Hit], k: int, mmr_lambda: float = MMR_LAMBDA, question: frozenset[str] = frozenset()) -> list[Hit]:
    """Maximal marginal relevance over `ranked` (best first, equal scores by id): k picked,
    each best by ``λ · score / best − (1 − λ) · overlap`` (ties to the higher score, then the
    smaller id), overlap being the largest similarity to a memory already picked (Jaccard on
    `_copy_words`), counted only from `DUPLICATE_OVERLAP` up: below it, two memories are
    different answers, not copies.

    When no two of the first k are copies, the greedy pass would pick exactly those, in
    order: that is checked first, and is the common case. Otherwise the copies among all the
    candidates are found, then picked greedily and lazily: overlap never raises a candidate's
    value above its first term, so candidates are looked at in score order and the look
    stops at one whose first term cannot beat the best found."""
    if mmr_lambda >= 1.0 or len(ranked) <= 1:
        return ranked[:k]
    if not _copies(ranked[:k], question):
        return ranked[:k]
    copies = _copies(ranked, question)
    best_score = ranked[0].score or 1.0
    left = list(ranked)
    picked: list[Hit] = []
    overlap: dict[str, float] = {}  # the largest similarity to a result picked so far
    while left and len(picked) < k:
        choice, choice_value = -1, 0.0
        for position, hit in enumerate(left):
            first = mmr_lambda * hit.score / best_score
            if choice >= 0 and first <= choice_value:
                break  # neither this nor any lower score can do better (a tie goes to the earlier)
            value = first - (1 - mmr_lambda) * overlap.get(hit.node.id, 0.0)
            if choice < 0 or value > choice_value:
                choice, choice_value = position, value
        hit = left.pop(choice)
        picked.append(hit)
        for other, similarity in copies.get(hit.node.id, ()):
            if similarity > overlap.get(other, 0.0):
                overlap[other] = similarity
    return picked


def _copies(ranked: list[Hit], question: frozenset[str]) -> dict[str, list[tuple[str, float]]]:
    """For each candidate, the others it is a copy of (similarity from `DUPLICATE_OVERLAP`).

    Two copies share at least that share of each one's words, and only words that occur in
    more than one candidate can be shared: a candidate with fewer of those has no copy, and
    is not compared at all (most are not)."""
    threshold = DUPLICATE_OVERLAP
    sets = [_copy_words(hit.node.content, question) for hit in ranked]
    counts = Counter(itertools.chain.from_iterable(sets))
    repeated = {word for word, count in counts.items() if count > 1}
    suspects = [i for i, words_of in enumerate(sets) if words_of and len(repeated.intersection(words_of)) >= threshold * len(words_of)]
    copies: dict[str, list[tuple[str, float]]] = {}
    for n, i in enumerate(suspects):
        mine = sets[i]
        for j in suspects[:n]:
            other = sets[j]
            shared = len(mine & other)
            similarity = shared / (len(mine) + len(other) - shared)
            if similarity >= threshold:
                a, b = ranked[i].node.id, ranked[j].node.id
                copies.setdefault(a, []).append((b, similarity))
                copies.setdefault(b, []).append((a, similarity))
    return copies


def _copy_words(content: str, question: frozenset[str]) -> frozenset[str]:
    """The words two memories are compared on to tell copies: those beyond the question's
    (two answers that share only what was asked are not copies: two standards both named in
    the question; two that also share what was not asked are), all of them when the question
    covers every word, none (never a copy) for a memory under `DUPLICATE_MIN_WORDS` words: a
    name or a few words is too little to call two memories the same."""
    every = _word_set(content)
    if len(every) < DUPLICATE_MIN_WORDS:
        return frozenset()
    return (every - question) or every


@functools.lru_cache(maxsize=4096)
def _word_set(content: str) -> frozenset[str]:
    return frozenset(words(content))


class _negated:
    """Orders ids in reverse, so max() prefers the smaller id on a tie (as the engine does)."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __lt__(self, other: "_negated") -> bool:
        return self.value > other.value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _negated) and self.value == other.value
