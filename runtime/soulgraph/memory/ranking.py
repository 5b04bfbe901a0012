"""Recall that knows the memory record: what `soul_query` and `soul_related` rank by.

The engine's search (`SoulGraph.query`) ranks by shared words and recency, exactly (its
property tests compare it with a brute-force scan). Recall takes its best `pool(k)` hits
and then applies what the memory record knows, in three steps:

1. Trust. Each hit's score is multiplied by
   ``(0.5 + 0.5 · confidence) · (1 + STRENGTH_WEIGHT · s / (1 + s))``, divided by that
   product for a fresh memory at the defaults (confidence 0.7, s = 1), so such a memory keeps
   the score the search gave it. ``s`` is `ranking_strength`: what is left of a
   confirmation's lift (it fades with the half-life), never below a fresh memory's unless the
   memory was weakened. A memory written with confidence 0.3 weighs 0.65 / 0.85 of one at the
   default; one confirmed three times (s = 4) 1.2 / 1.125. The factors are bounded, so a
   memory never outranks a much better match on trust alone. For a search in words (not a
   question: `weighs_length`) each hit's length counts too, as in BM25 and mildly
   (`length_factors`): a hit of the hits' mean length keeps its score, a short one gains at
   most an eighth, a long one loses at most a quarter.
2. Replacements. A superseded memory that matches the question well (it would have made the
   top k) brings in the memory that replaced it (the end of its `superseded_by` chain),
   scored `REPLACEMENT_SHARE` of the old one, marked ``via="replaces <old id>"``: "what do I
   use for X" finds the new answer even when only the old one shares the question's words.
3. Variety (maximal marginal relevance). The first `MMR_DEPTH` results are picked one at a
   time, each the candidate with the best ``λ · score / best score − (1 − λ) · overlap``,
   overlap being its largest similarity to a result already picked: the Jaccard overlap of
   their words beyond the question's, counted from `DUPLICATE_OVERLAP` up, between memories
   of `DUPLICATE_MIN_WORDS` words or more. With λ = `MMR_LAMBDA` a near-copy of a result
   already picked loses its place to a different memory that matches a little less, so five
   rewordings of one fact do not fill a top five. A deeper list goes on in score order.

Each result keeps its trust-weighted score; the order is the MMR order (a near-copy may
appear below a lower score). docs/soul-graph.md shows the formulas with real output and
docs/eval.md what they change on the evaluation data.

Before variety, engine/hybrid.py re-ranks the candidates (`_hybrid`): neighbour context, a date
the question names, and, given the vectors (store/vectors.py) and a question, the vectors'
nearest memories fused in (docs/embeddings.md). Then the search looks `CONTEXT_DEPTH` deep.
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import AbstractSet, Callable, Protocol

from soulgraph.engine import hybrid, when
from soulgraph.engine import record
from soulgraph.engine.graph import ACTIVE, Hit, Node, SoulGraph
from soulgraph.engine.index import words
from soulgraph.memory import rerank

STRENGTH_WEIGHT = 0.25
REPLACEMENT_SHARE = 0.95
MMR_LAMBDA = 0.5
DUPLICATE_OVERLAP = 0.6
MMR_DEPTH = 10  # how many of the first results the pass orders
DUPLICATE_MIN_WORDS = 3
# How deep recall looks before it re-ranks (engine/hybrid.py). Neighbour context: an answer may sit
# beside a weaker hit. The vectors bring their FUSION_DEPTH nearest, each scored by the words as
# well: fusion rewards the memories both rank, and the deeper the lists the more of those it
# sees (docs/embeddings.md). With them, the word search needs to go no deeper than the pool.
CONTEXT_DEPTH = 50
FUSION_DEPTH = 200
# A search in words weighs its matches' lengths as BM25 does (`length_factors`), mildly: short
# titles sharing a proposal's rare names were losing to longer ones (docs/decisions/length-weighting.md).
LENGTH_B = 0.2
LENGTH_K1 = 1.2
LENGTH_CAP = 4.0


class Vectors(Protocol):
    """What recall needs of the vectors (store/vectors.py's VectorStore)."""

    def ready(self, graph: SoulGraph) -> bool: ...

    def nearest_ids(self, text: str, n: int, accept: Callable[[str], bool] | None = None,
                    exclude: AbstractSet[str] = frozenset()) -> list[str]: ...


def pool(k: int) -> int:
    """How many engine hits recall re-ranks to return k: room for trust and variety to act."""
    return k + max(5, k // 4)


def trust(node: Node, now: float, half_life: float = record.STRENGTH_HALF_LIFE) -> float:
    """The factor confidence and reinforcement put on a memory's score, relative to a fresh
    memory at the defaults (whose score it leaves as the search found it; see the module text)."""
    if node.confidence == record.DEFAULT_CONFIDENCE and node.strength == record.DEFAULT_STRENGTH:
        return 1.0  # the defaults: ranking strength 1, the common case
    return _raw_trust(node.confidence, ranking_strength(node, now, half_life)) / _DEFAULT_TRUST


def weighs_length(text: str) -> bool:
    """Whether recall weighs its matches' lengths for `text`: for a search in words (a title,
    names, keywords), not for a question (one with a question mark anywhere too: "…, Joanna?
    Answer yes or no."), which the words and the vectors score as they are: on LoCoMo and BEAM
    the weighing cost the answers' long turns (docs/decisions/length-weighting.md)."""
    return not (hybrid.is_question(text) or "?" in text)


def length_factors(graph: SoulGraph, hits: list[Hit]) -> list[float]:
    """Okapi BM25's length normalisation for one term, ``(k1 + 1) / (1 + k1 · (1 − b + b · n / n̄))``,
    for each hit: n is its count of distinct words, n̄ the mean over these hits (a hit of mean
    length keeps its score), n / n̄ capped at `LENGTH_CAP` (a long memory loses at most a
    quarter). Mild (b = `LENGTH_B`): of two memories sharing the question's words, the shorter
    is more about them."""
    index, archive = graph.index, graph.archive_index
    counts = [max(1, index.word_count(hit.node.id) or archive.word_count(hit.node.id)) for hit in hits]
    mean = sum(counts) / len(counts)
    k1, b, cap = LENGTH_K1, LENGTH_B, LENGTH_CAP
    return [(k1 + 1.0) / (1.0 + k1 * (1.0 - b + b * min(cap, n / mean))) for n in counts]


def _raw_trust(confidence: float, strength: float) -> float:
    return (0.5 + 0.5 * confidence) * (1.0 + STRENGTH_WEIGHT * strength / (1.0 + strength))


_DEFAULT_TRUST = _raw_trust(record.DEFAULT_CONFIDENCE, record.DEFAULT_STRENGTH)


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
           recency_weight: float | None = None, mmr_lambda: float | None = None,
           vectors: Vectors | None = None, neighbours: bool = True, time_aware: bool = True,
           exclude: AbstractSet[str] = frozenset(),
           reorder: Callable[[list[Hit]], list[Hit]] | None = None, stage: bool = True) -> list[Hit]:
    """The k memories recall returns for `text`, best first (see the module text). `vectors`,
    `neighbours` and `time_aware` are the steps of engine/hybrid.py; all off, recall is what it
    was before them (the eval's `recall_before`). `exclude`: ids no step may return (other
    users' memories, `SoulGraph.hidden_from`). `reorder`: for a question with the vectors ready,
    what reorders the candidates before variety, `rerank.DEPTH` of them at least (default: the
    reranking stage when `rerank.ENABLED` and `stage`, else none; bench/train_reranker.py passes
    its own). `stage=False`: never the shipped stage (prefetch, when
    `memory_service.PREFETCH_STAGE` is off)."""
    if k <= 0:
        return []
    fused = vectors is not None and hybrid.is_question(text) and vectors.ready(graph)
    # Fused, the vectors' candidates are scored by the words too: a deeper word search adds nothing.
    depth = max(pool(k), CONTEXT_DEPTH if neighbours and not fused else 0)
    found = graph.query(text, depth, hint=hint, tag=tag, include_archived=include_archived, where=where,
                        recency_weight=recency_weight, exclude=exclude)
    now, half_life = graph.clock(), graph.strength_half_life
    hits: dict[str, Hit] = {}
    reordered = False
    lengths = length_factors(graph, found) if found and weighs_length(text) else itertools.repeat(1.0)
    for hit, length in zip(found, lengths):
        factor = trust(hit.node, now, half_life) * length
        if factor != 1.0:
            hit, reordered = Hit(hit.node, hit.score * factor, hit.via), True
        hits[hit.node.id] = hit
    for hit in _replacements(graph, text, hint, hits, k, tag, where, now, half_life):
        if hit.node.id in exclude:
            continue
        if hit.node.id not in hits or hits[hit.node.id].score < hit.score:
            hits[hit.node.id], reordered = hit, True
    # The search's own order is (-score, id) already, unless a score changed here.
    ranked = sorted(hits.values(), key=lambda h: (-h.score, h.node.id)) if reordered else found
    if fused and reorder is None and stage and rerank.ENABLED and rerank.shipped() is not None:
        reorder = functools.partial(rerank.reorder, graph, text, vectors=vectors, exclude=exclude)
    staged = fused and reorder is not None
    ranked = _hybrid(graph, text, ranked, max(k, rerank.DEPTH) if staged else k, tag, include_archived, where,
                     vectors if fused else None, neighbours, time_aware, recency_weight, exclude)
    if staged:
        ranked = reorder(ranked)
    question = frozenset(words(text) | (words(hint) if hint else set()))
    return diversify(ranked, k, MMR_LAMBDA if mmr_lambda is None else mmr_lambda, question)


def _hybrid(graph: SoulGraph, text: str, ranked: list[Hit], k: int, tag: str | None, include_archived: bool,
            where: Callable[[Node], bool] | None, vectors: Vectors | None, neighbours: bool,
            time_aware: bool = True, recency_weight: float | None = None,
            exclude: AbstractSet[str] = frozenset()) -> list[Hit]:
    """Neighbour context, the vectors for a question, and the time it names (engine/hybrid.py)."""

    def accept(node: Node) -> bool:
        return ((include_archived or node.status == ACTIVE) and (tag is None or tag in node.tags)
                and (where is None or where(node)) and node.id not in exclude)

    span = when.window(text, graph.clock()) if time_aware else None
    if vectors is None and not neighbours and span is None:
        return ranked
    scores = {hit.node.id: hit.score for hit in ranked}
    via = {hit.node.id: hit.via for hit in ranked if hit.via != "match"}
    nearest = None
    if vectors is not None:  # ready, and the text is a question (recall checked)
        nodes = graph.nodes
        if tag is None and where is None and not include_archived:
            # A plain search keeps the active memories: those in the word index (the graph keeps
            # the others in its archive index). Asking it reads no node.
            member = graph.index.membership()
            keep = (lambda i: member(i) and i not in exclude) if exclude else member  # noqa: E731
        else:
            keep = lambda i: (node := nodes.get(i)) is not None and accept(node)  # noqa: E731
        nearest = (vectors.nearest_ids(text, max(pool(k), FUSION_DEPTH), keep, exclude=exclude) if exclude
                   else vectors.nearest_ids(text, max(pool(k), FUSION_DEPTH), keep))
        # The vectors' candidates the word search did not reach get their word scores too, so
        # the fusion sees every memory both lists rank (what a deeper word search would give).
        now, half_life = graph.clock(), graph.strength_half_life
        for node_id, score in graph.scores_of(text, itertools.filterfalse(scores.__contains__, nearest),
                                               recency_weight).items():
            scores[node_id] = score * trust(nodes[node_id], now, half_life)
    # The turn around a hit answers a question ("what do you do to relax?" -> the reply), not a
    # search for words: "dog" asks for the memories that say it, not the turns beside them.
    lend = neighbours and hybrid.is_question(text)
    return hybrid.rerank(graph, scores, pool(k), accept=accept, via=via, neighbours=lend, nearest=nearest,
                         span=span)


def related(graph: SoulGraph, text: str, k: int = 10, *, hint: str | None = None,
            vectors: Vectors | None = None, where: Callable[[Node], bool] | None = None,
            exclude: AbstractSet[str] = frozenset(), stage: bool = True) -> list[Hit]:
    """What `soul_related` returns: recall's hits, then their DAG parents and children
    (`SoulGraph.related`; neighbours inherit a share of a hit's score, all sorted by score).
    `where`, `exclude`: only the memories it accepts, none it excludes, hits and neighbours alike.
    `stage`: as for `recall`."""
    return graph.related(text, k, hint=hint, where=where, exclude=exclude,
                         hits=recall(graph, text, k, hint=hint, vectors=vectors, where=where, exclude=exclude,
                                     stage=stage))


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
        idf = math.log1p(total / (len(holders) + index.df(word)))
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

    The pass orders the first `MMR_DEPTH` results (near-copies crowd the top of a list; a
    deep list then goes on in score order). When no two of those are copies, the greedy pass
    would pick exactly them, in order: that is checked first, and is the common case.
    Otherwise the copies among their candidates are found, then picked greedily and lazily: overlap never raises a candidate's
    value above its first term, so candidates are looked at in score order and the look
    stops at one whose first term cannot beat the best found."""
    if mmr_lambda >= 1.0 or len(ranked) <= 1:
        return ranked[:k]
    head = min(k, MMR_DEPTH)
    # The pass picks the first `head` results from the candidates for that many; the rest
    # follow in score order (a deep list costs what a short one does).
    left = ranked[:pool(head)]
    sets = [_copy_words(hit.node.content, question) for hit in left]
    copies: dict[str, list[tuple[str, float]]] = {}
    if not _copies(left, sets, 0, min(head, len(left)), copies):
        return ranked[:k]
    _copies(left, sets, head, len(left), copies)  # and the candidates behind the head
    best_score = ranked[0].score or 1.0
    picked: list[Hit] = []
    overlap: dict[str, float] = {}  # the largest similarity to a result picked so far
    while left and len(picked) < head:
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
    chosen = {hit.node.id for hit in picked}
    return picked + [hit for hit in ranked if hit.node.id not in chosen][: k - len(picked)]


def _copies(hits: list[Hit], sets: list[frozenset[str]], start: int, end: int,
            copies: dict[str, list[tuple[str, float]]]) -> dict[str, list[tuple[str, float]]]:
    """Add to `copies` each pair of `hits[:end]` that are copies (similarity of their `sets`
    from `DUPLICATE_OVERLAP`), the later of the two from `start` on; for each hit, the others
    it is a copy of. Every pair is compared: `diversify` looks at `pool(MMR_DEPTH)` hits at
    most (105 pairs), where an index of the words (an AllPairs join) costs more than it
    saves. Jaccard is at most the smaller size over the larger: other pairs go unopened."""
    threshold = DUPLICATE_OVERLAP
    for j in range(start, end):
        mine = sets[j]
        size = len(mine)
        if not size:
            continue
        low, high = threshold * size - 1e-9, size / threshold + 1e-9
        for i in range(j):
            other = sets[i]
            if not low <= len(other) <= high:
                continue
            shared = len(mine & other)
            similarity = shared / (size + len(other) - shared)
            if similarity >= threshold:
                a, b = hits[i].node.id, hits[j].node.id
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
