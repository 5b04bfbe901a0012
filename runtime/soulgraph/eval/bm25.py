"""Okapi BM25, kept up to date one document at a time.

score(d, q) = sum over query words w of
    idf(w) * tf(w, d) * (k1 + 1) / (tf(w, d) + k1 * (1 - b + b * |d| / avgdl))
with idf(w) = ln(1 + (N - df(w) + 0.5) / (df(w) + 0.5)), the form that never goes
negative for words found in more than half the documents. A query word that occurs
twice counts twice. N, df and avgdl are read at query time, so adding a document
costs only its own words.
"""

from __future__ import annotations

import math
from collections import Counter

from soulgraph.engine.index import STOPWORDS, WORD, stem

K1 = 1.2
B = 0.75


def tokens(text: str) -> list[str]:
    """The engine's words, with repeats (BM25 counts them): the same stopwords and stemming,
    so the comparison with the graph's search is about scoring, not tokenising."""
    return [stem(w) for w in WORD.findall(text.lower()) if w not in STOPWORDS]


class BM25Index:
    def __init__(self, k1: float = K1, b: float = B) -> None:
        self.k1 = k1
        self.b = b
        self.postings: dict[str, dict[str, int]] = {}  # word -> doc id -> term frequency
        self.lengths: dict[str, int] = {}
        self.doc_words: dict[str, tuple[str, ...]] = {}  # so a document can be removed
        self.total_length = 0

    def __len__(self) -> int:
        return len(self.lengths)

    def add(self, doc_id: str, text: str) -> None:
        if doc_id in self.lengths:
            self.remove(doc_id)
        counts = Counter(tokens(text))
        length = sum(counts.values())
        self.lengths[doc_id] = length
        self.doc_words[doc_id] = tuple(counts)
        self.total_length += length
        for word, tf in counts.items():
            self.postings.setdefault(word, {})[doc_id] = tf

    def remove(self, doc_id: str) -> None:
        length = self.lengths.pop(doc_id, None)
        if length is None:
            return
        self.total_length -= length
        for word in self.doc_words.pop(doc_id):
            posting = self.postings[word]
            del posting[doc_id]
            if not posting:
                del self.postings[word]

    def idf(self, word: str) -> float:
        df = len(self.postings.get(word, ()))
        n = len(self.lengths)
        return math.log1p((n - df + 0.5) / (df + 0.5))

    def scores(self, text: str) -> dict[str, float]:
        """BM25 score of every document sharing at least one word with `text`."""
        n = len(self.lengths)
        if not n:
            return {}
        avgdl = self.total_length / n or 1.0
        k1, b = self.k1, self.b
        result: dict[str, float] = {}
        for word, qtf in Counter(tokens(text)).items():
            posting = self.postings.get(word)
            if not posting:
                continue
            weight = qtf * self.idf(word)
            for doc_id, tf in posting.items():
                norm = k1 * (1.0 - b + b * self.lengths[doc_id] / avgdl)
                result[doc_id] = result.get(doc_id, 0.0) + weight * tf * (k1 + 1.0) / (tf + norm)
        return result
