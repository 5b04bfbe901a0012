"""What every rule is made of: a `Finding`, a `Rule`, and the helpers its finders share.

Speed: `re` skips quickly to where a pattern's first character can match, but only when the
pattern *starts* with a literal (or a small set of them) and is case-sensitive. So every
pattern starts with its literal, left boundaries are checked in Python after the match, and
case-insensitive patterns are written in lower case and run on the lower-cased text (spans
are the same; values are read back from the original text).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

SECRET = "secret"
INJECTION = "injection"


@dataclass(frozen=True)
class Finding:
    """One match: which rule, a one-line description (never the matched text), and the span
    `text[start:end]` it covers (for a secret, the secret itself; for an assignment or a URL,
    the value, not the name)."""

    kind: str  # "secret" or "injection"
    rule: str
    description: str
    start: int
    end: int
    via: str = ""  # "" as written; else how the text was read: "normalised", "base64", "hex", "url-encoded"


@dataclass(frozen=True)
class ScanResult:
    """All findings of one scan, ordered by position."""

    findings: tuple[Finding, ...] = ()

    @property
    def secrets(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.kind == SECRET)

    @property
    def injections(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.kind == INJECTION)

    @property
    def clean(self) -> bool:
        return not self.findings

    @property
    def rules(self) -> tuple[str, ...]:
        """The distinct rule ids that fired, sorted."""
        return tuple(sorted({f.rule for f in self.findings}))


class SecretRefused(ValueError):
    """A write was refused because its text holds a secret. The message names the rules and
    where; it never includes the secret. `findings` has the spans for the caller."""

    def __init__(self, where: str, findings: tuple[Finding, ...]):
        self.where = where
        self.findings = findings
        self.rules = tuple(sorted({f.rule for f in findings}))
        n = len(findings)
        super().__init__(
            f"{where}: refused, the text holds {n} secret{'s' if n != 1 else ''} "
            f"({', '.join(self.rules)}); store where the secret lives (a vault path, an "
            "environment variable name), never the secret itself")


Finder = Callable[[str, "str | None"], Iterable[tuple[int, int]]]


@dataclass(frozen=True)
class Rule:
    """One rule: its id, kind, the description every finding carries, the source of its
    facts, and (internal) the literal keywords that gate it and its finder. A finder gets the
    text and `low`, the text lower-cased (None when lower-casing would change its length)."""

    id: str
    kind: str
    description: str
    source: str
    # Lower-case literals: the rule runs only if one is in the text. A few cheap `in` checks
    # beat running the rule (each call costs more than the checks), and beat one combined
    # regex over all prefixes (alternations of common first letters scan slowly).
    keywords: tuple[str, ...]
    find: Finder
    # For a text of ASCII characters, a cheaper gate than the keywords, when the rule has one:
    # the rule runs only if one of `words` is a whole word of the lower-cased text (a run of
    # letters and digits, as the detector splits it: one set operation for every rule) or one
    # of `literals` is in it. Each is implied by the rule's patterns, as the keywords are.
    words: frozenset[str] | None = None
    literals: tuple[str, ...] = ()


# -- helpers -------------------------------------------------------------------------------------
#
# Speed: `re` skips quickly to where a pattern's first character can match, but only when the
# pattern *starts* with a literal (or a small set of them) and is case-sensitive. So every
# pattern starts with its literal, left boundaries are checked in Python after the match, and
# case-insensitive patterns are written in lower case and run on the lower-cased text (spans
# are the same; values are read back from the original text).

WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


DIGITS = b"0123456789"


def holds_any(text: str, characters: bytes) -> bool:
    """Whether `text` holds one of the ASCII `characters`: one C-level delete over its UTF-8
    bytes (a character outside ASCII is bytes above 127 only, never one of them). Four times
    faster than a regex search for a class on a text that holds none, the common case."""
    raw = text.encode("utf-8", "surrogatepass")
    return len(raw.translate(None, characters)) != len(raw)


def free_left(text: str, start: int, bad: frozenset[str]) -> bool:
    """No character of `bad` right before `start`."""
    return start == 0 or text[start - 1] not in bad


def word_start(text: str, start: int) -> bool:
    """`start` is at a word boundary (what a leading \\b would say, for ASCII words)."""
    return start == 0 or not (text[start - 1].isalnum() or text[start - 1] == "_")


class Lower:
    """A pattern written in lower case: run on the lower-cased text when there is one (fast),
    else with IGNORECASE on the text itself."""

    def __init__(self, pattern: str, flags: int = 0):
        self.plain = re.compile(pattern, flags)
        self.folded = re.compile(pattern, flags | re.IGNORECASE)

    def finditer(self, text: str, low: str | None, pos: int = 0, endpos: int = sys.maxsize):
        if low is not None:
            return self.plain.finditer(low, pos, endpos)
        return self.folded.finditer(text, pos, endpos)

    def search(self, text: str, low: str | None, pos: int = 0, endpos: int = sys.maxsize):
        if low is not None:
            return self.plain.search(low, pos, endpos)
        return self.folded.search(text, pos, endpos)

    def match(self, text: str, low: str | None, pos: int = 0, endpos: int = sys.maxsize):
        if low is not None:
            return self.plain.match(low, pos, endpos)
        return self.folded.match(text, pos, endpos)


class Words:
    """Where any of a few lower-case literal words occurs: `str.find` per word on the
    lower-cased text (C-speed), a regex of them with IGNORECASE otherwise."""

    def __init__(self, *words: str):
        self.words = words
        self.folded = re.compile("|".join(map(re.escape, words)), re.IGNORECASE)

    def positions(self, text: str, low: str | None) -> list[int]:
        if low is None:
            return [m.start() for m in self.folded.finditer(text)]
        found: list[int] = []
        for word in self.words:
            at = low.find(word)
            while at >= 0:
                found.append(at)
                at = low.find(word, at + 1)
        if len(self.words) > 1:
            found.sort()
        return found


LONG_TEXT = 8192  # characters: past this, literals without whitespace are looked up in `pieces`


def pieces(folded: str) -> str:
    """A long text's distinct whitespace-separated pieces, a line each: a literal without
    whitespace is in the text exactly when it is in these. Hostile text repeats its pieces, and
    dozens of literal tests over all of it cost more than one split. The last two texts' are
    kept (a scan asks for the same text's several times)."""
    for text, out in _PIECES:
        if text is folded:
            return out
    out = "\n".join(set(folded.split()))
    _PIECES[:] = [(folded, out), *_PIECES[:1]]
    return out


_PIECES: list[tuple[str, str]] = []


def unspaced(literal: str) -> bool:
    """No whitespace in the literal (so `pieces` can answer for it)."""
    return len(literal.split()) == 1 and literal.split()[0] == literal


def classes(value: str) -> int:
    """How many of lower, upper, digit, other a value uses."""
    lower = upper = digit = other = 0
    for c in value:
        if "a" <= c <= "z":
            lower = 1
        elif "A" <= c <= "Z":
            upper = 1
        elif "0" <= c <= "9":
            digit = 1
        else:
            other = 1
    return lower + upper + digit + other


# Values that stand for a secret rather than being one (detect-secrets' FALSE_POSITIVES and

TRAILING = ".,;:)]}>!?\\"  # punctuation a value does not end in
SCHEME_TAIL = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")


GAP = r"\s{1,5}"  # the gap between two words

def token(pattern: str, left: frozenset[str] = ALNUM,
           check: Callable[[re.Match[str]], bool] | None = None) -> Finder:
    """A case-sensitive, literal-first token pattern: every match with no `left` character
    before it that passes `check`."""
    compiled = re.compile(pattern)

    def find(text: str, low: str | None) -> Iterator[tuple[int, int]]:
        for m in compiled.finditer(text):
            if free_left(text, m.start(), left) and (check is None or check(m)):
                yield m.span()

    return find


def valued(pattern: Lower, accept: Callable[[str], bool],
            left: Callable[[str, int], bool] | None = None) -> Finder:
    """A finder for `name <sep> value` patterns (lower case): the span of group `v`, read
    from the original text with trailing punctuation trimmed, when `accept(value)`."""

    def find(text: str, low: str | None) -> Iterator[tuple[int, int]]:
        for m in pattern.finditer(text, low):
            if left is not None and not left(text, m.start()):
                continue
            start = m.start("v")
            value = text[start:m.end("v")].rstrip(TRAILING)
            if value and accept(value):
                yield start, start + len(value)

    return find


def phrase(first_words: tuple[str, ...], pattern: str, dense_search: bool = True) -> Finder:
    """A lower-case phrase pattern, matched only where one of its possible first words starts
    a word: finding a few literals is fast, running a pattern of many branches at every
    offset is not. Where the first words are many (hostile text), one regex search per match
    is cheaper, when the pattern's first letters are few (`dense_search`)."""
    trigger = Words(*first_words)
    full = Lower(pattern)

    def find(text: str, low: str | None) -> Iterator[tuple[int, int]]:
        at = trigger.positions(text, low)
        if dense_search and len(at) > DENSE:
            # many first words (hostile text): one search per match or refusal, in C, finds the
            # same (every match starts with a first word; one not at a word start is refused)
            pos = 0
            while True:
                m = full.search(text, low, pos)
                if m is None:
                    return
                if word_start(text, m.start()):
                    pos = m.end()
                    yield m.span()
                else:
                    pos = m.start() + 1
        done = -1
        for start in at:
            if start >= done and word_start(text, start):
                m = full.match(text, low, start)
                if m:
                    done = m.end()
                    yield m.span()

    return find


DENSE = 32  # first words in a text past which a phrase is looked for by regex search
