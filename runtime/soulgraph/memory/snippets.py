"""Memories as lines of a prompt block with a character budget: every memory a share, and a long
one shown by its sentences that hold the question's words.

Prefetch (hermes/memory_service.py `recall`) injects at most a few memories within a budget of
characters. Cut as they came, one long memory (a Hermes turn keeps up to 1,500 characters of
the user's words and 800 of the answer) filled the block, and the memories ranked after it were
not shown at all. `fit` takes the memories best first: each keeps what it needs of what is left
beyond `MIN_LINE` characters kept for each memory after it (or less, for one that needs less).
A memory longer than its room is cut to it by `snippet`, which keeps the sentences sharing the
most of the question's words (weighted by idf), then the sentences right after and before them
(an answer follows what it answers), in their own order, with "…" where text was left out; a
memory keeps its labels ("User:", "Assistant:", "Caroline:") before what is shown of each part.
When the budget cannot keep `MIN_LINE` for each memory, the last ones are left out.

The ranking decides which memories are shown; this module only decides how much of each.
docs/decisions/prefetch-block.md has the figures.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from soulgraph.engine.index import words

MIN_LINE = 100  # the fewest characters kept for each later line: a head and a short sentence
ELLIPSIS = "…"
MIN_TEXT = 40  # a line with less room than this for its text is left out (unless it would be the only one)
WORD_CUT = 16  # a sentence cut to its room ends at a space this near its end, else mid-word
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+(?=\S)")
# A part's leading labels, "User: " or "User: Caroline: " (names of up to four words).
_LABELS = re.compile(r"^(?:[^\W\d_][\w'.-]*(?: [\w'.-]+){0,3}: )+")


@dataclass(frozen=True)
class Part:
    """One line of a memory's text: its labels and its sentences."""

    labels: str
    sentences: tuple[str, ...]


def parts_of(text: str) -> list[Part]:
    """The memory's lines, each split into its leading labels and its sentences."""
    found = []
    for line in text.splitlines():
        line = " ".join(line.split())
        if not line:
            continue
        head = _LABELS.match(line)
        labels = head.group(0) if head else ""
        body = line[len(labels):]
        found.append(Part(labels, tuple(s for s in _SENTENCE_END.split(body) if s)))
    return found


@functools.lru_cache(maxsize=1024)
def _read(text: str) -> tuple[list[Part], list[tuple[int, int]], list[frozenset[str]]]:
    """A memory's parts, its sentences' places (part, sentence) in order, and each one's words:
    kept, since the same memories come back turn after turn."""
    parts = parts_of(text)
    spots = [(p, s) for p, part in enumerate(parts) for s in range(len(part.sentences))]
    return parts, spots, [frozenset(words(parts[p].sentences[s])) for p, s in spots]


def clear_cache() -> None:
    """Forget the memories' sentences split so far (for a measure of first showings)."""
    _read.cache_clear()


def flat(text: str) -> str:
    """The whole memory on one line, as a block shows an uncut one."""
    return " ".join(text.split())


def snippet(text: str, room: int, asked: Mapping[str, float]) -> str:
    """At most `room` characters of `text`: its sentences that share the most of the question's
    words (`asked`: each word's worth, its idf), then their neighbours, each part's labels
    before what is kept of it, "…" where text is left out."""
    whole = flat(text)
    if len(whole) <= room:
        return whole
    parts, spots, held = _read(text)
    if not spots or room <= len(ELLIPSIS):
        return whole[: max(room - len(ELLIPSIS), 0)] + ELLIPSIS if room > 0 else ""
    worth = [sum(asked[word] for word in sentence_words & asked.keys()) for sentence_words in held]
    matched = sorted((place for place in range(len(spots)) if worth[place] > 0), key=lambda place: (-worth[place], place))
    rest = sorted((place for place in range(len(spots)) if worth[place] <= 0),
                  key=lambda place: (_distance(place, matched), place))
    size = [len(parts[p].sentences[s]) for p, s in spots]
    kept: set[tuple[int, int]] = set()
    used = 0
    for group in (matched, rest):
        for place in group:
            # A sentence adds at least its length less the "…" it may replace: skip, unrendered,
            # one that cannot fit.
            if used + size[place] - len(ELLIPSIS) > room:
                continue
            trial = _render(parts, kept | {spots[place]})
            if len(trial) <= room:
                kept.add(spots[place])
                used = len(trial)
        if group and not kept:  # not one sentence fits whole: the first in line (the best match), cut
            return _cut(_render(parts, {spots[group[0]]}), room)
    return _render(parts, kept)


def _cut(text: str, room: int) -> str:
    """`text`, longer than `room`, cut to it with "…": at a word's end when one is near."""
    head = text[: room - len(ELLIPSIS)]
    if not text[len(head)].isspace():  # the cut falls inside a word
        space = head.rfind(" ", max(0, len(head) - WORD_CUT))
        head = head[:space] if space > 0 else head
    return head.rstrip() + ELLIPSIS


def _distance(place: int, matched: list[int]) -> tuple[int, int]:
    """How far a sentence is from the nearest matched one, in sentences (the one after before the
    one before); with none matched, from the start."""
    if not matched:
        return (place, 0)
    nearest = min((place - m for m in matched), key=lambda gap: (abs(gap), gap < 0))
    return (abs(nearest), int(nearest < 0))


def _render(parts: list[Part], kept: set[tuple[int, int]]) -> str:
    """The `kept` sentences in their order, each part's labels before them, one "…" for each
    stretch left out."""
    shown: list[str] = []
    for p, part in enumerate(parts):
        chosen = [s for s in range(len(part.sentences)) if (p, s) in kept]
        if not chosen:  # a part left out whole
            if not (shown and shown[-1].endswith(ELLIPSIS)):
                shown.append(ELLIPSIS)
            continue
        pieces, last = [], -1
        for s in chosen:
            if s != last + 1 and not (s == chosen[0] and shown and shown[-1] == ELLIPSIS and not part.labels):
                pieces.append(ELLIPSIS)
            pieces.append(part.sentences[s])
            last = s
        if last != len(part.sentences) - 1:
            pieces.append(ELLIPSIS)
        shown.append(part.labels + " ".join(pieces))
    return " ".join(shown)


def fit(heads: Sequence[str], texts: Sequence[str], budget: int, asked: Mapping[str, float],
        min_line: int = MIN_LINE) -> list[tuple[int, str]]:
    """The lines `head + text` (best first) within `budget` characters, one newline between
    two, each with its place in `heads`: all of each while they fit; else each in its turn takes
    what it needs of what is left beyond the room kept for the lines after it (`min_line` each,
    or less if one needs less), cut by `snippet` to that; the last lines are left out while
    the room they would keep does not fit."""
    full = [head + flat(text) for head, text in zip(heads, texts)]
    least = [min(len(line), min_line) + 1 for line in full]  # with its newline
    count = len(full)
    while count > 1 and sum(least[:count]) > budget + 1:
        count -= 1
    left = budget + 1  # each line's newline counted with it, none after the last
    kept: list[tuple[int, str]] = []
    for i in range(count):
        room = left - sum(least[i + 1:count]) - 1
        if len(full[i]) <= room:
            line = full[i]
        elif room - len(heads[i]) >= (MIN_TEXT if kept else 1):
            line = heads[i] + snippet(texts[i], room - len(heads[i]), asked)
        else:
            continue  # no room worth showing: left out
        kept.append((i, line))
        left -= len(line) + 1
    return kept
