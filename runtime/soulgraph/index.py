"""The inverted word index behind search.

Each query word a node shares counts by its inverse document frequency, so a rare
word ("splay") outweighs a common one ("update"). The index only keeps postings; the
graph combines the lexical total with recency.
"""

from __future__ import annotations

import math
import re
from typing import Iterable

WORD = re.compile(r"[^\W_]+", re.UNICODE)

# Words too common in agent notes to tell memories apart. Kept short on purpose:
# every word dropped here is a word nobody can search for.
STOPWORDS = frozenset(
    """a an and are as at be but by for from has have i if in is it its of on or
    so that the then this to was were will with""".split()
)


def stem(word: str) -> str:
    """Fold plurals onto their singular ("runtimes" -> "runtime", "queries" -> "query").

    Harman's S-stemmer (1991): it only strips plural endings, so it almost never joins
    words of different meaning. On the evaluation ledgers it lifts long-range recall
    for every method (docs/eval.md).
    """
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and not word.endswith(("eies", "aies")):
        return word[:-3] + "y"
    if word.endswith("es") and not word.endswith(("aes", "ees", "oes")):
        return word[:-1]
    if word.endswith("s") and not word.endswith(("us", "ss")):
        return word[:-1]
    return word


def words(text: str) -> set[str]:
    """The distinct searchable words of a text: lower-cased, stopwords dropped, plurals folded."""
    return {stem(w) for w in WORD.findall(text.lower()) if w not in STOPWORDS}


class InvertedIndex:
    """word -> set of node ids, plus each node's words so it can be removed."""

    def __init__(self) -> None:
        self._postings: dict[str, set[str]] = {}
        self._doc_words: dict[str, frozenset[str]] = {}

    def __len__(self) -> int:
        return len(self._doc_words)

    def add(self, node_id: str, text: str) -> None:
        if node_id in self._doc_words:
            self.remove(node_id)
        doc = frozenset(words(text))
        self._doc_words[node_id] = doc
        for word in doc:
            self._postings.setdefault(word, set()).add(node_id)

    def remove(self, node_id: str) -> None:
        for word in self._doc_words.pop(node_id, ()):
            posting = self._postings[word]
            posting.discard(node_id)
            if not posting:
                del self._postings[word]

    def idf(self, word: str) -> float:
        """log(1 + N / df): positive for every word that occurs, larger when rarer."""
        df = len(self._postings.get(word, ()))
        return math.log1p(len(self._doc_words) / df) if df else 0.0

    def posting(self, word: str) -> set[str]:
        return self._postings.get(word, set())

    def weighted_words(self, query_words: Iterable[str]) -> list[tuple[float, str]]:
        """(idf, word) for the query words that occur, rarest first.

        Every scorer adds the weights in this one order, so the same question gives
        bit-identical scores whichever way the candidates are gathered.
        """
        weighted = [(self.idf(w), w) for w in set(query_words) if w in self._postings]
        weighted.sort(key=lambda pair: (-pair[0], pair[1]))
        return weighted

    def lexical_scores(self, query_words: Iterable[str]) -> dict[str, float]:
        """Sum of idf over the query words each node shares; nodes sharing none are absent."""
        scores: dict[str, float] = {}
        for weight, word in self.weighted_words(query_words):
            for node_id in self._postings[word]:
                scores[node_id] = scores.get(node_id, 0.0) + weight
        return scores

    def document_words(self, node_id: str) -> frozenset[str]:
        return self._doc_words.get(node_id, frozenset())
