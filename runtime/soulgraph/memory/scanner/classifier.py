"""The injection detector beside the rules: a linear model over words and character n-grams.

Rules catch the phrasings someone wrote down; most injections in the public corpora are
phrased otherwise (a role-play set-up, "modify your answer to…", a request in Tagalog). This
model reads the folded text (normalise.py) as features and adds up one weight per feature:

    w:<word>        every word (a run of letters, marks and digits; a number is "0")
    g:<trigram>     the character trigrams of each word, with its edges: "<ig", "ign", …, "re>"
    c:<pair>        for scripts written without spaces (Chinese, Japanese, Thai, …): each
                    character pair inside the run, and each character
    b:<word word>   every pair of neighbouring words

    score = bias + (sum of the weights of the text's features) / sqrt(number of features)

and the text is flagged when the score passes the model's threshold and the text has at least
`MIN_WORDS` words (shorter ones are left to the rules). The weights come from
`bench/train_injection_model.py` (logistic regression in numpy, trained offline on the dev
split of the public attack corpora and benign text; the file records what it was trained on,
its threshold and the figures it was chosen by). Scoring is pure Python: each distinct word's
weights are added up once and kept (`_WORD_CACHE`), so a note costs about one dictionary
look-up per word and per word pair, no numpy, no model load at start (the weights are read on
first use).

The model's file is package data (`injection_model.json.gz`); without it the scanner runs its
rules alone and `status()` says so.
"""

from __future__ import annotations

import gzip
import json
import math
import re
import unicodedata
from pathlib import Path
from itertools import compress, repeat
from operator import itemgetter
from typing import Any, Iterable

__all__ = ["features", "words", "score", "flags", "status", "MODEL_PATH"]

MODEL_PATH = Path(__file__).with_name("injection_model.json.gz")

class _Separators(dict):
    """ord(char) -> the char itself if it belongs in a word (a letter, mark or digit), else a
    space; filled on first sight, so splitting a text into words is one C-level translate."""

    def __missing__(self, code: int) -> str:
        char = chr(code)
        value = char if unicodedata.category(char)[0] in "LMN" else " "
        self[code] = value
        return value


_SEPARATORS = _Separators()
# Scripts written without spaces between words: a run of them is read as character pairs.
_UNSPACED = re.compile("[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff"
                       "\uf900-\ufaff\uff66-\uff9f]")
MIN_WORDS = 5  # a shorter text is judged by the rules alone (see `long_enough`)
MAX_FEATURE_WORDS = 5_000  # words read per text: enough to judge it, a bound on the work
MAX_FEATURE_CHARS = 40_000  # characters those words are looked for in
_CACHE_LIMIT = 100_000  # distinct words whose weights are kept


def _word_features(word: str) -> list[str]:
    if word.isdigit():
        return ["w:0"]
    if _UNSPACED.search(word):
        out = ["c:" + c for c in word]
        out += ["c:" + word[i:i + 2] for i in range(len(word) - 1)]
        return out
    edged = "<" + word + ">"
    return ["w:" + word] + ["g:" + edged[i:i + 3] for i in range(len(edged) - 2)]


def words(folded: str) -> list[str]:
    """The words of a folded text the model reads: runs of letters, marks and digits, the first
    `MAX_FEATURE_WORDS` in its first `MAX_FEATURE_CHARS` characters."""
    out = folded[:MAX_FEATURE_CHARS].translate(_SEPARATORS).split()
    return out if len(out) <= MAX_FEATURE_WORDS else out[:MAX_FEATURE_WORDS]


_words = words


def _pairs(words: list[str]) -> list[str]:
    spaced = ["0" if w.isdigit() else w for w in words]
    return ["b:" + a + " " + b for a, b in zip(spaced, spaced[1:])
            if not (_UNSPACED.search(a) or _UNSPACED.search(b))]


def long_enough(folded: str) -> bool:
    """Whether a text has the MIN_WORDS words the model needs to judge it (a run of a script
    written without spaces counts a word per two characters). Below that, a word or two decide
    the score: "password: see the vault" would read like the corpora's "what is the password?"."""
    return _enough(_words(folded[:4_000]))


def _enough(words: list[str]) -> bool:
    count = 0
    for word in words:
        count += (len(word) + 1) // 2 if _UNSPACED.search(word) else 1
        if count >= MIN_WORDS:
            return True
    return False


def features(folded: str) -> list[str]:
    """Every feature of a folded text, with repeats (what the model is trained on)."""
    words = _words(folded)
    out: list[str] = []
    for word in words:
        out += _word_features(word)
    return out + _pairs(words)


class _Model:
    """The weights, and per-word caches that turn a score into a few C-level passes over the words."""

    def __init__(self, data: dict[str, Any]):
        self.weights: dict[str, float] = data["weights"]
        self.bias = float(data["bias"])
        self.threshold = float(data["threshold"])
        self.info = {k: v for k, v in data.items() if k != "weights"}
        # the word-pair weights by first word, then second: no "b:a b" string built per pair
        self.pairs: dict[str, dict[str, float]] = {}
        for name, weight in self.weights.items():
            if name.startswith("b:"):
                a, _, b = name[2:].partition(" ")
                self.pairs.setdefault(a, {})[b] = weight
        # per distinct word, filled on first sight: its own features' weight, their count, its
        # name in word pairs (None for a run of a script written without spaces: no pairs), and
        # the weights of the pairs it starts (keyed by the next word's name)
        self.word_weight: dict[str, float] = {}
        self.word_count: dict[str, int] = {}
        self.word_name: dict[str, str | None] = {}
        self.word_next: dict[str, dict[str, float]] = {}

    def learn(self, words: Iterable[str]) -> None:
        """Fill the caches for the words not seen before."""
        missing = set(words).difference(self.word_weight)
        if not missing:
            return
        if len(self.word_weight) + len(missing) > _CACHE_LIMIT:
            for cache in (self.word_weight, self.word_count, self.word_name, self.word_next):
                cache.clear()
            missing = set(words)
        get = self.weights.get
        for word in missing:
            names = _word_features(word)
            name = "0" if word.isdigit() else (None if _UNSPACED.search(word) else word)
            self.word_weight[word] = sum(get(n, 0.0) for n in names)
            self.word_count[word] = len(names)
            self.word_name[word] = name
            self.word_next[word] = self.pairs.get(name, _NO_PAIRS) if name is not None else _NO_PAIRS

    def score(self, folded: str) -> float:
        """The same sum as over `features(folded)`, a word's own features added up once."""
        return self.score_words(_words(folded), *_shape(folded))

    def score_words(self, words: list[str], spaced: bool = False, numbers: bool = True) -> float:
        """The score of a text's words. `spaced`: the text has no character of a script written
        without spaces (so every neighbouring pair of words is a feature); `numbers`: it may
        have a word of digits (whose name in pairs is "0"; without one, a word's name is itself)."""
        if len(words) < 2:
            if not words:
                return self.bias
            self.learn(words)
            return self.bias + self.word_weight[words[0]] / math.sqrt(self.word_count[words[0]])
        look = itemgetter(*words)
        try:
            weights = look(self.word_weight)
        except KeyError:
            self.learn(words)
            weights = look(self.word_weight)
        count = sum(look(self.word_count))
        nexts = look(self.word_next)
        names = look(self.word_name) if numbers or not spaced else words
        # each word's pairs, looked up by the next word's name; most words start some pair
        total = sum(weights) + sum(map(dict.get, compress(nexts, nexts), compress(names[1:], nexts), repeat(0.0)))
        if spaced:
            count += len(names) - 1
        else:  # a pair with a word of an unspaced script is no feature
            count += sum(1 for a, b in zip(names, names[1:]) if a is not None and b is not None)
        return self.bias + total / math.sqrt(count)


_NO_PAIRS: dict[str, float] = {}


def _shape(folded: str) -> tuple[bool, bool]:
    """Whether the text is `spaced` (no character of a script written without spaces: one test
    of the text, not one per word) and may have `numbers` (words of digits), as `score_words`
    takes them."""
    if folded.isascii():
        return True, any(d in folded for d in "0123456789")
    return _UNSPACED.search(folded) is None, True


_MODEL: _Model | None = None
_PROBLEM = ""


def _model() -> _Model | None:
    global _MODEL, _PROBLEM
    if _MODEL is None and not _PROBLEM:
        try:
            with gzip.open(MODEL_PATH, "rt", encoding="utf-8") as handle:
                _MODEL = _Model(json.load(handle))
        except FileNotFoundError:
            _PROBLEM = f"rules only: the detector's weights are not installed ({MODEL_PATH.name} missing)"
        except (OSError, ValueError, KeyError, TypeError) as exc:
            _PROBLEM = f"rules only: {MODEL_PATH.name} cannot be read ({exc})"
    return _MODEL


def score(folded: str) -> float | None:
    """The model's score of a folded text (None: no model, rules only)."""
    model = _model()
    return None if model is None else model.score(folded)


def flags(folded: str, split: list[str] | None = None) -> bool:
    """Whether the model flags a folded text as an injection (`split`: its `words`, when known)."""
    model = _model()
    if model is None:
        return False
    words = _words(folded) if split is None else split
    spaced, numbers = _shape(folded)
    if spaced:
        if len(words) < MIN_WORDS:
            return False
    elif not _enough(words):
        return False
    return model.score_words(words, spaced, numbers) > model.threshold


def status() -> dict[str, Any]:
    """What the detector is: the model's own record (version, threshold, what it was trained on
    and measured at), or why the scanner runs on rules alone."""
    model = _model()
    if model is None:
        return {"detector": _PROBLEM}
    return {"detector": "rules and a linear model", **model.info}
