"""What the rules and the detector read: the text as a model would read it, not as it is spelled.

An injection does not need to be spelled plainly to work on a model: "ｉｇｎｏｒｅ" (full width),
"іgnore" (a Cyrillic і), "ig\u200bnore" (a zero-width space), "1gn0r3" (leetspeak), or the whole
instruction in base64, hex or URL-encoding all read the same to it. So before matching, `fold`
gives the text one spelling:

1. Compatibility forms to their plain letter (Unicode NFKC, per character: full-width, ligatures,
   circled and mathematical letters), and Latin letters with accents to the bare letter (NFKD,
   marks dropped: "ïgnörë" is "ignore", "précédentes" is "precedentes"; the rules are written
   for the bare letters).
2. Invisible characters removed: every format character (Unicode category Cf: zero-width
   spaces and joiners, bidi controls, tag characters), variation selectors, the soft hyphen and
   the blank look-alikes (Hangul fillers, braille blank).
3. Confusable letters folded to the Latin letter they imitate, with Unicode's confusables data
   (UTS #39 `confusables.txt`, as the maintained `confusable-homoglyphs` package ships it), in
   words that mix Latin letters with other scripts only: a Russian word stays Russian, "іgnоrе"
   becomes "ignore".
4. Leetspeak read back in words that mix letters with 0 1 3 4 5 7 @ $ ("1gn0r3" is "ignore";
   "python3", "mp3" and "h264" are left alone: one digit at a word's edge is how names are
   written, unless the text has two or more clear leet words: then "4ll" is "all" too).

Every step maps one character to one or none, except step 1 (one to a few), so a match in the
folded text maps back to a span of the original (`Folded.span`).

`encoded_spans` finds text hidden in an encoding (base64 and base64url, hex, URL percent-encoding)
and decodes it, so the rules and the detector read the hidden text too; only decodings that are
mostly printable text count (a random key or hash decodes to noise and is left to the secret
rules). Without the confusables package (a lexical-only install that lacks it), step 3 is skipped
and `CONFUSABLES_SOURCE` says so.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import functools
import json
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from soulgraph.memory.scanner.matching import LONG_TEXT, holds_any

__all__ = ["Folded", "fold", "encoded_spans", "CONFUSABLES_SOURCE"]

# Characters a model does not see but a pattern does: removed before matching. Category Cf is
# checked per character; these are the ones outside it that render as nothing or a blank.
_INVISIBLE_EXTRA = frozenset("\u00ad\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180e\u2800\u3164\uffa0"
                             + "".join(map(chr, range(0xFE00, 0xFE10))))

_LEET = str.maketrans("013457@$", "oieastas")
_LEET_CHARS = frozenset("013457@$")
# A leet character next to a letter, and the word around it; `_deleet` keeps only the words
# whose leet characters stand inside them or are two or more: "1gn0r3", "pr3v10us", "ign0re";
# not "python3", "mp3", "3d".
# (written to start with the leet characters, so `re` skips quickly to them)
_LEET_NEXT_TO_LETTER = re.compile(r"[013457@$](?:(?<=[a-z][013457@$])|(?=[a-z]))")
_LEETISH = re.compile(r"(?<![a-z0-9@$])[a-z0-9@$]*(?:[a-z][013457@$]|[013457@$][a-z])[a-z0-9@$]*")


class _FoldTable(dict):
    """ord(char) -> its folded form, computed on first sight (str.translate calls __missing__),
    so folding a text costs one C-level translate once its characters are known."""

    def __missing__(self, code: int) -> str:
        char = chr(code)
        value = _fold_char(char)
        self[code] = value
        return value


def _fold_char(char: str) -> str:
    if char.isascii():
        return char
    if char in _INVISIBLE_EXTRA or unicodedata.category(char) == "Cf" or 0xE0100 <= ord(char) <= 0xE01EF:
        return ""
    compat = unicodedata.normalize("NFKC", char)
    if compat != char:
        return "".join(_fold_char(c) for c in compat)
    decomposed = unicodedata.normalize("NFKD", char)
    if decomposed[0].isascii() and decomposed[0].isalpha() \
            and all(unicodedata.category(c) == "Mn" for c in decomposed[1:]):
        return decomposed[0]
    if unicodedata.category(char) == "Mn" and unicodedata.combining(char) and 0x300 <= ord(char) <= 0x36F:
        return ""  # a combining accent on its own ("i" + U+0308): the bare letter is what is read
    return char


_TABLE = _FoldTable()


def _confusables() -> tuple[dict[int, str], str]:
    """Non-ASCII letters that Unicode's confusables data maps to one ASCII letter or digit."""
    try:
        import confusable_homoglyphs
    except ImportError:
        return {}, "none: the confusable-homoglyphs package is not installed (homoglyphs are not folded)"
    path = Path(confusable_homoglyphs.__file__).with_name("confusables.json")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return {}, f"none: {path}: {exc}"
    table: dict[int, str] = {}
    for char, looks in data.items():
        if len(char) != 1 or char.isascii():
            continue
        for look in looks:
            target = look.get("c", "")
            if len(target) == 1 and target.isascii() and target.isalnum():
                table[ord(char)] = target.lower() if not target.isdigit() else target
                break
    version = getattr(confusable_homoglyphs, "__version__", "")
    return table, f"confusable-homoglyphs {version} (Unicode confusables.txt), {len(table)} letters".replace("  ", " ")


_CONFUSABLE: dict[int, str] | None = None
CONFUSABLES_SOURCE = "not loaded yet"
_MIXED_WORD = re.compile(r"\w*(?:[A-Za-z][^\x00-\x7f]|[^\x00-\x7f][A-Za-z])\w*")


def _confusable_table() -> dict[int, str]:
    global _CONFUSABLE, CONFUSABLES_SOURCE
    if _CONFUSABLE is None:
        _CONFUSABLE, CONFUSABLES_SOURCE = _confusables()
    return _CONFUSABLE


@dataclass(frozen=True)
class Folded:
    """The folded text, and the original it came from when a character folded to more or
    fewer than one (None: one for one, spans are the same)."""

    text: str
    source: str | None = None

    def span(self, start: int, end: int, length: int) -> tuple[int, int]:
        """The span of the original text (of `length` characters) that folded[start:end] came from."""
        if self.source is None:
            return start, end
        size = len(self.text)
        first = self._origin(start) if start < size else length
        last = self._origin(end - 1) + 1 if 0 < end <= size else first
        return first, max(first, last)

    def _origin(self, at: int) -> int:
        """The index of the original character that folded[at] came from."""
        folded_starts, source_starts, lengths = self._changes
        k = bisect.bisect_right(folded_starts, at) - 1
        if k < 0:
            return at
        past = folded_starts[k] + lengths[k]
        return source_starts[k] if at < past else source_starts[k] + 1 + at - past

    @functools.cached_property
    def _changes(self) -> tuple[list[int], list[int], list[int]]:
        """Where the original has a character that folds to more or fewer than one (only for a
        finding: most folded texts never need it): the folded text's index where its folding
        starts, its own index, and its folded length."""
        source = self.source or ""
        odd = [c for c in set(source) if len(_TABLE[ord(c)]) != 1]
        folded_starts: list[int] = []
        source_starts: list[int] = []
        lengths: list[int] = []
        if odd:
            shift = 0
            for m in re.finditer("|".join(map(re.escape, odd)), source):
                at = m.start()
                n = len(_TABLE[ord(source[at])])
                folded_starts.append(at + shift)
                source_starts.append(at)
                lengths.append(n)
                shift += n - 1
        return folded_starts, source_starts, lengths


_LEET_BYTES = "".join(sorted(_LEET_CHARS)).encode("ascii")


def _has_leet(low: str) -> bool:
    # most texts hold no leet character at all: one C-level test before the pattern's search
    return holds_any(low, _LEET_BYTES) and _LEET_NEXT_TO_LETTER.search(low) is not None


def _deleet(word: str) -> str:
    inner = sum(1 for c in word[1:-1] if c in _LEET_CHARS)
    total = inner + (word[0] in _LEET_CHARS) + (word[-1] in _LEET_CHARS)
    if total >= 2 or inner >= 1:
        return word.translate(_LEET)
    return word


_RUNS = re.compile(r"([a-z0-9@$]+)")  # the runs a leet word is one of, kept by split


def _read_leet(low: str) -> str:
    """Leetspeak read back: the clear leet words first; where there are two or more, the text
    is written in leet, and a word with one leet character at its edge ("4ll") is read too."""
    if len(low) > LONG_TEXT:
        return _read_leet_long(low)
    changed = 0

    def strict(match: re.Match[str]) -> str:
        nonlocal changed
        word = _deleet(match.group())
        changed += word != match.group()
        return word

    out = _LEETISH.sub(strict, low)
    if changed >= 2:
        out = _LEETISH.sub(lambda m: m.group().translate(_LEET), out)
    return out


def _read_leet_long(low: str) -> str:
    """`_read_leet` for a long text: a leet word is a whole run of letters, digits, @ and $, so
    the text is split into its runs, each distinct leet run is read once, and the text is
    rebuilt without a Python call per word."""
    parts = _RUNS.split(low)
    runs = parts[1::2]
    leety = _LEETISH.findall("\n".join(set(runs)))  # each distinct run once
    if not leety:
        return low
    read = {word: _deleet(word) for word in leety}
    changed = [word for word, r in read.items() if r != word]
    if len(changed) >= 2 or (changed and runs.count(changed[0]) >= 2):
        read = {word: (r.translate(_LEET) if _LEETISH.fullmatch(r) else r) for word, r in read.items()}
    parts[1::2] = map(read.get, runs, runs)
    return "".join(parts)


def _translate(text: str) -> tuple[str, bool]:
    """`text` through the fold table, and whether some character of it folds to more or fewer
    than one (the lengths can still add up: one removed, one expanded). A text with a few
    distinct characters that change is rewritten by a `str.replace` each, far cheaper than
    translating it character by character."""
    table = _TABLE
    distinct = set(text)
    odd = [c for c in distinct if table[ord(c)] != c]
    resized = any(len(table[ord(c)]) != 1 for c in odd)
    changing = set(odd)
    if len(odd) > 24 or any(not changing.isdisjoint(table[ord(c)]) for c in odd):
        return text.translate(table), resized  # many, or one folds to another that changes
    for c in odd:
        text = text.replace(c, table[ord(c)])
    return text, resized


def fold(text: str, *, lower: bool = True, leet: bool = True, lowered: str | None = None,
         plain: Folded | None = None) -> Folded:
    """`text` in one spelling (see the module docstring), with the way back. `lower=False`
    keeps the case (for the secret rules, which are case-sensitive) and reads no leetspeak
    (a key's digits are its own); `leet` applies to lower-cased text only. `lowered`:
    `text.lower()`, and `plain`: `fold(text, lower=False)`, when the caller has them."""
    leet = leet and lower
    if text.isascii():
        out = (text.lower() if lowered is None else lowered) if lower else text
        if leet and _has_leet(out):
            out = _read_leet(out)  # one character for one: spans stay
        return Folded(out)
    if plain is not None:
        folded, origin = plain.text, plain.source
    else:
        folded, resized = _translate(text)
        origin = text if resized else None
        confusable = _confusable_table()
        if confusable and not folded.isascii():
            folded = _MIXED_WORD.sub(lambda m: m.group().translate(confusable), folded)
    if not lower:
        return Folded(folded, origin)
    low = folded.lower()
    if len(low) != len(folded):  # "İ" lower-cases to two characters: keep the one-for-one map
        low = "".join(c.lower() if len(c.lower()) == 1 else c for c in folded)
    if leet and _has_leet(low):
        low = _read_leet(low)
    return Folded(low, origin)


# -- encodings -----------------------------------------------------------------------------------

_BASE64 = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{16,}={0,2}")
_HEX = re.compile(r"(?<![0-9A-Fa-f])(?:[0-9A-Fa-f]{2}){12,}")
_PERCENT = re.compile(r"(?:%[0-9A-Fa-f]{2}[^%\s]{0,40}){3,}")
MAX_DECODED = 20_000  # characters of decoded text read per text: a bound on the work
# Each byte of a text's UTF-8 to "x" if it is a character of the base64 (or base64url) alphabet,
# else to a space: a stretch base64 or hex could match is 16 x's in a row (all C-level).
_B64_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-")
_ALPHABET_BYTES = bytes(ord("x") if chr(b) in _B64_ALPHABET else ord(" ") for b in range(256))


def _long_run(text: str) -> bool:
    """Whether `text` has 16 characters of the base64 alphabet in a row (a multi-byte
    character's bytes all map to spaces: the alphabet is ASCII)."""
    return len(text) >= 16 and b"xxxxxxxxxxxxxxxx" in text.encode("utf-8", "surrogatepass").translate(_ALPHABET_BYTES)


def _printable(raw: bytes) -> str | None:
    """The bytes as text when they are UTF-8 and mostly printable (at least 19 in 20 printable
    characters, tabs or newlines, and 3 in 5 letters or spaces), else None."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if len(text) < 6:
        return None
    good = len(text) if text.isprintable() else sum(1 for c in text if c.isprintable() or c in "\n\t")
    letters = sum(map(str.isalpha, text)) + text.count(" ")
    return text if good >= 0.95 * len(text) and letters >= 0.6 * len(text) else None


def encoded_spans(text: str, limit: int = 0) -> list[tuple[int, int, str, str]]:
    """(start, end, decoded, encoding) for every stretch of `text` that decodes to readable
    text (the first `limit`, if given); encoding is "base64", "hex" or "url-encoded"."""
    found: list[tuple[int, int, str, str]] = []
    budget = MAX_DECODED

    def add(start: int, end: int, decoded: str, encoding: str) -> bool:
        """Keep one; whether that was the last (the budget or the limit is reached)."""
        nonlocal budget
        found.append((start, end, decoded[:budget], encoding))
        budget -= len(decoded)
        return budget <= 0 or len(found) == limit

    if _long_run(text):  # base64 and hex need 16 characters of their alphabet in a row
        for m in _BASE64.finditer(text):
            value = m.group()
            if value.isalpha() and (value.islower() or value.isupper()):
                continue  # a long word, not an encoding
            padded = value + "=" * (-len(value.rstrip("=")) % 4)
            try:
                raw = (base64.urlsafe_b64decode if ("-" in value or "_" in value) else base64.b64decode)(padded)
            except (binascii.Error, ValueError):
                continue
            decoded = _printable(raw)
            if decoded and add(m.start(), m.end(), decoded, "base64"):
                return found
        for m in _HEX.finditer(text):
            decoded = _printable(bytes.fromhex(m.group()))
            if decoded and add(m.start(), m.end(), decoded, "hex"):
                return found
    if "%" in text:
        for m in _PERCENT.finditer(text):
            try:
                decoded = unquote(m.group(), errors="strict")
            except UnicodeDecodeError:
                continue
            if decoded != m.group() and _printable(decoded.encode("utf-8")) and add(
                    m.start(), m.end(), decoded, "url-encoded"):
                return found
    return found
