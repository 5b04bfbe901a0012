"""A reranking stage for recall: a question's first `DEPTH` candidates, reordered by a small
model over what recall already knows, for the tools' answers (`soul_query`, `soul_related`)
and the provider's prefetch (docs/decisions/reranker.md). `ENABLED = False` turns it off.

No cross-encoder can be installed without a download at run time, so the stage scores each
candidate from cheap features (`FEATURES`, computed by `features`): its place and score in
recall's order; the cosines of the question with it and with the memories written just before
and after it (engine/hybrid.py's neighbours: siblings, or a chain of turns); the share of the question's
idf that each of those three holds, and that the three hold together; whether its speaker
("Name: ...") is named in the question; whether it lies in the time the question names; its
length; whether it asks a question itself; whether it holds what the question asks for (a time
for "when", a number for "how many"); whether the memory before it asks a question (an answer
follows its question); its conversation (`SITTING_REACH` memories either side, in one sitting):
how near the question its best and best three memories are, and how many other candidates it
holds; and its place among the candidates by its cosine alone, by its words alone and by its
conversation's best cosine.

The model comes from `bench/train_reranker.py` (ten networks of one hidden layer of sixteen
rectified units, their scores averaged, fitted in numpy on LoCoMo dev as the eval's graphs and
the memory provider's chains of turns hold it, each conversation held out in turn for the
figures it records) and lives in `rerank_model.json` beside this module:
the networks' weights and the features' means and spreads, no text. Without the file, or
without numpy, the stage leaves recall's order as it is.

Recall calls `reorder` after neighbours, vectors and dates and before variety (memory/ranking.py),
for questions only, and only when the vectors are ready. It reorders the candidates recall kept
(scopes, supersedes and flags already applied) and brings in none; a memory recall would not
show (another user's, archived) is no neighbour and no part of a conversation. The scores stay
on recall's scale: the candidate placed first gets the best score the candidates had, the
second the second best, and so on.
"""

from __future__ import annotations

import functools
import json
import math
import re
from itertools import chain
from pathlib import Path
from typing import AbstractSet, Any, Sequence

from soulgraph.engine import hybrid, when
from soulgraph.engine.graph import Hit, SoulGraph
from soulgraph.engine.index import words

ENABLED = True  # recall reorders a question's candidates with the shipped weights (unless asked not to)
DEPTH = 50  # candidates reordered (recall's first 50 hold 0.86 of the evidence, its first 30 0.81)
MODEL_PATH = Path(__file__).with_name("rerank_model.json")
SITTING_REACH = 10  # the memories either side of a candidate read as its conversation (hybrid.Siblings.sitting)
FEATURES = ("place", "score share", "cosine", "cosine before", "cosine after", "idf share", "idf share before",
            "idf share after", "speaker named", "in the time named", "log words", "asks a question",
            "a time for when", "a number for how many", "before asks",
            "idf share around", "sitting support", "sitting best cosine", "sitting top 3 cosine",
            "place by cosine", "place by words", "place by sitting")
# The last columns, each a candidate's place among the candidates by another column alone.
_PLACES = {"place by cosine": "cosine", "place by words": "idf share", "place by sitting": "sitting best cosine"}


def features(graph: SoulGraph, text: str, ranked: Sequence[Hit], vectors: Any,
             exclude: AbstractSet[str] = frozenset()) -> Any:
    """One row of FEATURES per candidate in `ranked` (recall's order), as a float64 array.
    `vectors`: a ready VectorStore (its question vector and rows). A neighbour counts only if
    default recall could show it (active, not in `exclude`: another user's memory is no context)."""
    import numpy as np

    index = vectors.index
    question = vectors.question_vector(text)
    idf = {word: graph.index.idf(word) for word in words(text)}
    shares = _Shares(idf)
    span = when.window(text, graph.clock())
    named = {token.strip(".,;:!?\"'()").lower() for token in text.replace("'s ", " ").split()}
    siblings = hybrid.siblings_of(graph)
    nodes = graph.nodes
    member = graph.index.membership()

    def usable(found: list[str]) -> str | None:
        for node_id in found:
            if member(node_id) and node_id not in exclude:
                return node_id
        return None

    shown = [hit.node.id for hit in ranked]
    before, after = [], []
    for node_id in shown:
        up, down = siblings.around(node_id)
        before.append(usable(up))
        after.append(usable(down))
    sittings = [[i for i in siblings.sitting(node_id, SITTING_REACH) if member(i) and i not in exclude]
                for node_id in shown]
    context = list(dict.fromkeys(i for i in chain(shown, before, after) if i is not None))
    everyone = list(dict.fromkeys(chain(context, chain.from_iterable(sittings))))
    row_of = index.row_of
    rows = [row_of.get(node_id, -1) for node_id in everyone]
    have = np.array([row >= 0 for row in rows], bool)
    cosines = np.zeros(len(everyone))
    if have.any():
        cosines[have] = index.scores(np.array([row for row in rows if row >= 0], np.intp), question)
    cosine = dict(zip(everyone, cosines.tolist()))
    cosine[None] = 0.0  # no neighbour
    held = {node_id: shares.held(nodes[node_id].content) for node_id in context}  # bits of the question's words
    held[None] = 0
    place_of = {node_id: place for place, node_id in enumerate(shown)}

    kind = _answer_kind(text)
    top = ranked[0].score if ranked and ranked[0].score else 1.0
    share = shares.share
    own = []  # each candidate's columns that need no other candidate
    for place, hit in enumerate(ranked):
        node = hit.node
        up, down = before[place], after[place]
        speaker, log_words, asks, has_time, has_number = _read(node.content)
        talk = sorted([cosine[node.id]] + [cosine[i] for i in sittings[place]], reverse=True)
        own.append((
            1.0 / (1 + place), hit.score / top,
            cosine[node.id], cosine[up], cosine[down],
            share(held[node.id]), share(held[up]), share(held[down]),
            float(bool(speaker) and speaker in named),
            float(span is not None and hybrid.in_span(node, span)),
            log_words, float(asks),
            float(kind is _TIME and has_time), float(kind is _NUMBER and has_number),
            float(up is not None and _read(nodes[up].content)[2]),
            share(held[node.id] | held[up] | held[down]),
            # the other candidates in its conversation, each by its place in recall's order
            sum(1.0 / (1 + place_of[i]) for i in sittings[place] if i in place_of),
            talk[0], sum(talk[:3]) / len(talk[:3])))
    alone = len(FEATURES) - len(_PLACES)
    out = np.zeros((len(ranked), len(FEATURES)))
    out[:, :alone] = np.array(own, np.float64).reshape(len(ranked), alone)
    for column, source in _PLACES.items():  # its place among the candidates by one column alone
        order = np.argsort(-out[:, FEATURES.index(source)], kind="stable")
        out[order, FEATURES.index(column)] = 1.0 / (1.0 + np.arange(len(ranked)))
    return out


class _Shares:
    """The share of a question's idf that a memory's words hold. A memory's match is a bitmask
    over the question's words, and each mask's share is summed once per question. The sums go
    through math.fsum, exact whatever the order: a plain sum in a set's order would vary in its
    last bit from one process to the next (string hashing is seeded per process), and so would
    a near-tie between candidates."""

    def __init__(self, idf: dict[str, float]):
        self.idf = list(idf.values())
        self.total = math.fsum(self.idf) or 1.0
        self.bits = {word: 1 << bit for bit, word in enumerate(idf)}
        self.asked = frozenset(idf)
        self._sums: dict[int, float] = {0: 0.0}

    def held(self, content: str) -> int:
        """The bits of the question's words the text holds."""
        return sum(map(self.bits.__getitem__, self.asked & _words_of(content)))

    def share(self, mask: int) -> float:
        found = self._sums.get(mask)
        if found is None:
            found = self._sums[mask] = math.fsum(v for bit, v in enumerate(self.idf) if mask >> bit & 1) / self.total
        return found


_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_DAYS = "Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday"
# Months and weekdays capitalised ("May", not "may"); the rest in any case.
_TIME = re.compile(rf"\b(?:{_MONTHS}|{_DAYS}|(?i:yesterday|today|tonight|tomorrow|weekend|ago|last (?:week|month|year|night)"
                   rf"|next (?:week|month|year)|this (?:week|month|year|morning)|since|recently)|(?:19|20)\d\d)\b")
_NUMBER = re.compile(r"(?i)\b(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|twice|once|dozen|hundred)\b")


_ROLE = re.compile(r"^(?:User|Assistant): ")


def _answer_kind(question: str) -> re.Pattern[str] | None:
    """What an answer to the question holds, from its first words: a time for "when" (a date, a
    weekday, "yesterday", "last week", "two years ago"), a number for "how many / much / long /
    often / old"; else None. (A name for "who" or "where" was tried: its weight came out nil.)"""
    low = question.lower().lstrip()
    if low.startswith("when") or low.startswith("what year") or low.startswith("what date"):
        return _TIME
    if low.startswith(("how many", "how much", "how long", "how often", "how old")):
        return _NUMBER
    return None


@functools.lru_cache(maxsize=4096)
def _read(content: str) -> tuple[str, float, bool, bool, bool]:
    """What the features read of a memory's text alone, kept (the same candidates come back
    question after question): its speaker ("Name: ..."), the log of its length in words,
    whether it asks a question, whether it holds a time, whether it holds a number."""
    head = _ROLE.sub("", content[:60], count=1)[:40]  # a turn sync_turn wrote: "User: Caroline: ..."
    return (head.split(":", 1)[0].strip().lower() if ":" in head else "", math.log1p(len(content.split())),
            content.rstrip().endswith("?"), _TIME.search(content) is not None, _NUMBER.search(content) is not None)


@functools.lru_cache(maxsize=4096)
def _words_of(text: str) -> frozenset[str]:
    """A memory's words as the index reads them (the same candidates come back question after
    question: splitting their texts again was most of the stage's time)."""
    return frozenset(words(text))


class Model:
    """A few small networks over the standardised features, their scores averaged: each is one
    hidden layer of rectified units, score = relu(z · hidden + hidden_bias) · out + out_bias,
    z = (x - mean) / spread. (Several, each fitted from its own random start: one alone moved
    R@1 by ±0.01 from one start to the next.)"""

    def __init__(self, data: dict[str, Any]):
        import numpy as np

        if list(data["features"]) != list(FEATURES):
            raise ValueError(f"the model's features {data['features']} are not this stage's {list(FEATURES)}")
        self.mean = np.asarray(data["mean"], np.float64)
        self.spread = np.asarray(data["spread"], np.float64)
        self.members = [(np.asarray(m["hidden"], np.float64), np.asarray(m["hidden_bias"], np.float64),
                         np.asarray(m["out"], np.float64), float(m["out_bias"])) for m in data["members"]]
        if not self.members or any(h.shape != (len(FEATURES), len(b)) or o.shape != b.shape
                                   for h, b, o, _ in self.members):
            raise ValueError("the model's networks do not fit its features")
        # The networks side by side as one wide layer, their outputs averaged by the last product:
        # one pair of products a question, not one per network.
        self.hidden = np.hstack([h for h, _, _, _ in self.members])
        self.hidden_bias = np.concatenate([b for _, b, _, _ in self.members])
        self.out = np.concatenate([o for _, _, o, _ in self.members]) / len(self.members)
        self.out_bias = sum(b for _, _, _, b in self.members) / len(self.members)

    def scores(self, x: Any) -> Any:
        import numpy as np

        z = (x - self.mean) / self.spread
        return np.maximum(z @ self.hidden + self.hidden_bias, 0.0) @ self.out + self.out_bias


@functools.lru_cache(maxsize=1)
def shipped() -> Model | None:
    """The weights in MODEL_PATH (None: no file, or numpy missing: recall's order stays)."""
    try:
        return Model(json.loads(MODEL_PATH.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, ImportError):
        return None


def reorder(graph: SoulGraph, text: str, ranked: list[Hit], vectors: Any, model: Model | None = None,
            exclude: AbstractSet[str] = frozenset()) -> list[Hit]:
    """`ranked` with its first DEPTH reordered by `model` (the shipped one when None); the scores
    keep their places (the first gets the best), the candidates' `via` stays theirs."""
    import numpy as np

    model = model or shipped()
    head = ranked[:DEPTH]
    if model is None or len(head) < 2:
        return ranked
    order = np.argsort(-model.scores(features(graph, text, head, vectors, exclude)), kind="stable").tolist()
    scores = sorted((hit.score for hit in head), reverse=True)
    return [Hit(head[i].node, score, head[i].via) for i, score in zip(order, scores)] + ranked[DEPTH:]
