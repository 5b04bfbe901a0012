"""BERT's WordPiece tokenizer from its vocabulary alone, in plain Python.

The static model (engine/embeddings.py) needs a text's token ids and nothing else, so the
runtime carries no tokenizer library. The steps are BERT's uncased ones: drop control
characters, turn whitespace into spaces, put spaces around CJK ideographs, lower-case and
strip accents; split on whitespace and then on every punctuation character; cut each word
greedily into the longest pieces the vocabulary holds (continuations spelled ``##piece``),
and a word that cannot be cut, or is longer than `MAX_WORD_CHARS`, is ``[UNK]``. On all of
LoCoMo's dev turns and questions this gives exactly the ids of the `tokenizers` library
(docs/decisions/embedding-model.md).
"""

from __future__ import annotations

import unicodedata
from typing import Iterable, Iterator

MAX_WORD_CHARS = 100
_CACHE_LIMIT = 50_000  # words remembered with their ids: chat repeats its words


def _is_punctuation(char: str) -> bool:
    code = ord(char)
    # BERT counts every non-alphanumeric ASCII sign as punctuation, `$` and `^` included.
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _is_cjk(code: int) -> bool:
    return (0x4E00 <= code <= 0x9FFF or 0x3400 <= code <= 0x4DBF or 0x20000 <= code <= 0x2A6DF
            or 0x2A700 <= code <= 0x2B73F or 0x2B740 <= code <= 0x2B81F or 0x2B820 <= code <= 0x2CEAF
            or 0xF900 <= code <= 0xFAFF or 0x2F800 <= code <= 0x2FA1F)


def normalize(text: str) -> str:
    if text.isascii() and text.isprintable():
        return text.lower()  # the common case: nothing to drop, no accents
    kept = []
    for char in text:
        code = ord(char)
        if code == 0 or code == 0xFFFD:
            continue
        category = unicodedata.category(char)
        if char in "\t\n\r" or category == "Zs":
            kept.append(" ")
        elif category in ("Cc", "Cf"):
            continue
        elif _is_cjk(code):
            kept.append(f" {char} ")
        else:
            kept.append(char)
    lowered = "".join(kept).lower()
    if lowered.isascii():
        return lowered
    return "".join(c for c in unicodedata.normalize("NFD", lowered) if unicodedata.category(c) != "Mn")


def split_words(text: str) -> Iterator[str]:
    """Whitespace, then every punctuation character on its own."""
    for chunk in text.split():
        if chunk.isalnum() and chunk.isascii():
            yield chunk
            continue
        current: list[str] = []
        for char in chunk:
            if _is_punctuation(char):
                if current:
                    yield "".join(current)
                    current = []
                yield char
            else:
                current.append(char)
        if current:
            yield "".join(current)


class WordPiece:
    def __init__(self, tokens: Iterable[str], unknown: str = "[UNK]"):
        self.ids = {token: position for position, token in enumerate(tokens)}
        if unknown not in self.ids:
            raise ValueError(f"the vocabulary has no {unknown!r} token")
        self.unknown = self.ids[unknown]
        self._cache: dict[str, list[int]] = {}

    def __len__(self) -> int:
        return len(self.ids)

    def encode(self, text: str) -> list[int]:
        """The token ids of `text`, without [CLS] and [SEP]."""
        ids: list[int] = []
        for word in split_words(normalize(text)):
            ids.extend(self._word_ids(word))
        return ids

    def _word_ids(self, word: str) -> list[int]:
        found = self._cache.get(word)
        if found is not None:
            return found
        found = self._cut(word)
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[word] = found
        return found

    def _cut(self, word: str) -> list[int]:
        if len(word) > MAX_WORD_CHARS:
            return [self.unknown]
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                token = self.ids.get(piece)
                if token is not None:
                    pieces.append(token)
                    break
                end -= 1
            else:
                return [self.unknown]  # some part of the word is in no piece
            start = end
        return pieces
