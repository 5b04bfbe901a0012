"""The injection detector beside the rules: a linear model over words and character n-grams.

Rules catch the phrasings someone wrote down; most injections in the public corpora are
phrased otherwise (a role-play set-up, "modify your answer to…", a request in Tagalog). This
model reads the folded text (normalise.py) as features and adds up one weight per feature:

    w:<word>        every word (a run of letters, marks and digits; a number is "0")
    g:<trigram>     the character trigrams of each word, with its edges: "<ig", "ign", …, "re>"
    c:<pair>        for scripts written without spaces (Chinese, Japanese, Thai, …): each
                    character pair inside the run, and each character
    b:<word word>   every pair of neighbouring words
    p:<prefix>      a word's first four letters, and s:<suffix> its last four (words of five or more)

    score = bias + (sum of the weights of the text's features) / sqrt(known + u * unknown)

(`known`: the text's features that carry a weight, `unknown`: the others, `u`: the model's
`unknown_weight`, 1 when its file does not say) and the text is flagged when the score passes
the model's threshold and the text has at least `MIN_WORDS` words. A word the model has never
seen is no evidence either way: counted in full it pulls a text in a language with little
training text towards the bias; not counted at all, a short text is judged by its one or two
known words, and in such a language those are mostly the attacks' words ("Anweisungen").
docs/decisions/injection-detector.md has the cross-validated figures. A shorter text of `SHORT_MIN_WORDS` words or more ("Reply in reverse.",
"Was ist das Passwort?") is judged against a stricter threshold, the highest score a benign
short text reached in the training script's cross-validation (a word or two decide a short
text's score, so its threshold sits above every benign one seen); a single word is left to the
rules. The weights come from `bench/train_injection_model.py` (logistic regression in numpy,
trained offline on the dev split of the public attack corpora and benign text; the file
records what it was trained on, its thresholds and the figures they were chosen by).

Scoring is pure Python in a few C-level passes over the words: each distinct word's own
weight, known-feature count, name in pairs and the pairs it starts are worked out once and kept
(up to `_CACHE_LIMIT` words), so a note costs a handful of `itemgetter` look-ups over its word
list, no numpy, no model load at start (the weights are read on first use).

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
from operator import itemgetter
from typing import Any, Iterable

from soulgraph.memory.scanner.matching import DIGITS, holds_any

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
_ASCII_SEPARATORS = bytes(b if chr(b).isalnum() else 32 for b in range(128)) + bytes(range(128, 256))
# Scripts written without spaces between words: a run of them is read as character pairs.
_UNSPACED = re.compile("[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff"
                       "\uf900-\ufaff\uff66-\uff9f]")
MIN_WORDS = 5  # a shorter text is judged against the stricter short-text threshold (see `judged`)
SHORT_MIN_WORDS = 2  # a shorter one still (a word) by the rules alone
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
    out = ["w:" + word] + ["g:" + edged[i:i + 3] for i in range(len(edged) - 2)]
    if len(word) > 4:
        out += ["p:" + word[:4], "s:" + word[-4:]]
    return out


def words(folded: str) -> list[str]:
    """The words of a folded text the model reads: runs of letters, marks and digits, the first
    `MAX_FEATURE_WORDS` in its first `MAX_FEATURE_CHARS` characters."""
    head = folded[:MAX_FEATURE_CHARS]
    if head.isascii():  # a bytes translate is C-speed per character; a str one looks each one up
        out = head.encode("ascii").translate(_ASCII_SEPARATORS).decode("ascii").split()
    else:
        out = head.translate(_SEPARATORS).split()
    return out if len(out) <= MAX_FEATURE_WORDS else out[:MAX_FEATURE_WORDS]


_words = words


def _pairs(words: list[str]) -> list[str]:
    spaced = ["0" if w.isdigit() else w for w in words]
    return ["b:" + a + " " + b for a, b in zip(spaced, spaced[1:])
            if not (_UNSPACED.search(a) or _UNSPACED.search(b))]


def long_enough(folded: str) -> bool:
    """Whether a text has the MIN_WORDS words the model needs to judge it at its threshold (a
    run of a script written without spaces counts a word per two characters). Below that, a
    word or two decide the score: "password: see the vault" would read like the corpora's
    "what is the password?"."""
    return _count(_words(folded[:4_000])) >= MIN_WORDS


def judged(folded: str) -> str | None:
    """How the model judges a text: "long" (MIN_WORDS words or more: at its threshold),
    "short" (SHORT_MIN_WORDS to MIN_WORDS - 1: at its stricter short-text threshold), or None
    (shorter still: the rules alone)."""
    count = _count(_words(folded[:4_000]))
    return "long" if count >= MIN_WORDS else "short" if count >= SHORT_MIN_WORDS else None


def _count(words: list[str]) -> int:
    """The words counted (a run of an unspaced script a word per two characters), up to MIN_WORDS."""
    count = 0
    for word in words:
        count += (len(word) + 1) // 2 if _UNSPACED.search(word) else 1
        if count >= MIN_WORDS:
            break
    return count


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
        # texts of SHORT_MIN_WORDS to MIN_WORDS - 1 words: flagged only above this (None: never)
        self.short_threshold = None if data.get("short_threshold") is None else float(data["short_threshold"])
        # what a feature without a weight counts in the divisor (a known one counts 1)
        self.unknown_weight = float(data.get("unknown_weight", 1.0))
        self.info = {k: v for k, v in data.items() if k != "weights"}
        # the word-pair weights by first word, then second: no "b:a b" string built per pair
        self.pairs: dict[str, dict[str, float]] = {}
        for name, weight in self.weights.items():
            if name.startswith("b:"):
                a, _, b = name[2:].partition(" ")
                self.pairs.setdefault(a, {})[b] = weight
        # per distinct word, filled on first sight: its own features' weight and the count of those
        # the model knows, its name in word pairs (None for a run of a script written without
        # spaces: no pairs), and by the next word's name, its own weight plus that of the pair it
        # starts and one more known feature (so one look-up per position adds both; a next word
        # that starts no known pair gets the word's own)
        self.word_weight: dict[str, complex] = {}  # known features' weight + 1j * their count: one sum adds both
        self.word_name: dict[str, str | None] = {}
        self.word_next: dict[str, dict[str | None, complex]] = {}

    def learn(self, words: Iterable[str]) -> None:
        """Fill the caches for the words not seen before."""
        missing = set(words).difference(self.word_weight)
        if not missing:
            return
        if len(self.word_weight) + len(missing) > _CACHE_LIMIT:
            for cache in (self.word_weight, self.word_name, self.word_next):
                cache.clear()
            missing = set(words)
        # Every number has the features of "0" (w:0, and "0" in pairs): its weights are worked
        # out once and shared, not for each new number a note brings (a date, a count).
        numbers = [word for word in missing if word != "0" and word.isdigit()]
        if numbers:
            missing.difference_update(numbers)
            if "0" not in self.word_weight:
                missing.add("0")
        get = self.weights.get
        for word in missing:
            names = _word_features(word)
            name = "0" if word.isdigit() else (None if _UNSPACED.search(word) else word)
            known = [weight for weight in map(get, names) if weight is not None]
            count = len(known) + self.unknown_weight * (len(names) - len(known))
            own = self.word_weight[word] = complex(sum(known), count)
            self.word_name[word] = name
            pairs = self.pairs.get(name, _NO_PAIRS) if name is not None else _NO_PAIRS
            # a known pair counts 1; `score_words` counts every pair as unknown first
            more = 1.0 - self.unknown_weight
            self.word_next[word] = {b: own + complex(weight, more) for b, weight in pairs.items()} if pairs else _NO_PAIRS
        for word in numbers:
            self.word_weight[word], self.word_name[word], self.word_next[word] = (
                self.word_weight["0"], "0", self.word_next["0"])

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
            own = self.word_weight[words[0]]
            return self.bias + own.real / math.sqrt(own.imag) if own.imag > 1e-9 else self.bias
        look = itemgetter(*words)
        try:
            weights = look(self.word_weight)
        except KeyError:
            self.learn(words)
            weights = look(self.word_weight)
        names = look(self.word_name) if numbers or not spaced else words
        # each word's own weight and that of the pair it starts, looked up by the next word's name
        # (a pair with a word of an unspaced script, named None, is never a known pair)
        own = sum(map(dict.get, look(self.word_next), names[1:], weights), weights[-1])
        if spaced:
            pairs = len(names) - 1
        else:  # a pair with a word of an unspaced script is no feature
            pairs = sum(1 for a, b in zip(names, names[1:]) if a is not None and b is not None)
        count = own.imag + self.unknown_weight * pairs
        return self.bias + own.real / math.sqrt(count) if count > 1e-9 else self.bias


_NO_PAIRS: dict = {}


def _shape(folded: str) -> tuple[bool, bool]:
    """Whether the text is `spaced` (no character of a script written without spaces: one test
    of the text, not one per word) and may have `numbers` (words of digits), as `score_words`
    takes them."""
    if folded.isascii():
        return True, holds_any(folded, DIGITS)
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
    """Whether the model flags a folded text as an injection (`split`: its `words`, when known).
    A text of MIN_WORDS words or more is flagged above the model's threshold; a shorter one of
    SHORT_MIN_WORDS or more above its short-text threshold (when the model has one)."""
    model = _model()
    if model is None:
        return False
    words = _words(folded) if split is None else split
    spaced, numbers = _shape(folded)
    count = min(len(words), MIN_WORDS) if spaced else _count(words)
    if count >= MIN_WORDS:
        threshold = model.threshold
    elif count >= SHORT_MIN_WORDS and model.short_threshold is not None:
        threshold = model.short_threshold
    else:
        return False
    return model.score_words(words, spaced, numbers) > threshold


def status() -> dict[str, Any]:
    """What the detector is: the model's own record (version, threshold, what it was trained on
    and measured at), or why the scanner runs on rules alone."""
    model = _model()
    if model is None:
        return {"detector": _PROBLEM}
    return {"detector": "rules and a linear model", **model.info}
