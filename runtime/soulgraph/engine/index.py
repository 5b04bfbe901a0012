"""The inverted word index behind search.

Each query word a node shares counts by its inverse document frequency, so a rare
word ("splay") outweighs a common one ("update"). The index only keeps postings; the
graph combines the lexical total with recency.

Every node also gets a dense slot number, so that sets of nodes can be bitmasks (see
`bitsets`). A common word's posting is also a mask, once a search needs it (or
`build_common_masks`): intersecting the masks of a question's common words splits the
nodes into groups that share the same common words, hence the same lexical score, at C
speed, without visiting the thousands of nodes a common word matches. In a large index
(`SETS_DROPPED_FROM`) the mask is then the word's only posting: a set costs 40 to 60
bytes a member, the mask one bit a node (at 100,000 memories, 42 MB of sets for 14 MB
of masks). A rarer word's posting is a tuple while it holds fewer than `POSTING_SET_FROM`
ids (8 bytes a member: `engine/edges.py`'s form), a set from there on.
"""

from __future__ import annotations

import math
import re
import threading
from array import array
from collections import deque
from contextlib import suppress
from itertools import accumulate, chain, compress, repeat
from operator import add, itemgetter, methodcaller
from typing import AbstractSet, Any, Callable, Iterable, Iterator, Mapping, Sequence

import Stemmer  # PyStemmer: the Snowball stemmers, in C

from soulgraph.engine.bitsets import mask_of_slots, slots_in, slots_in_any
from soulgraph.engine.edges import Edges, packed, parted
from soulgraph.engine.heap import give_back_freed_memory

WORD = re.compile(r"[^\W_]+", re.UNICODE)

# Words too common in agent notes to tell memories apart. Kept short on purpose:
# every word dropped here is a word nobody can search for.
STOPWORDS = frozenset(
    """a an and are as at be but by for from has have i if in is it its of on or
    so that the then this to was were will with""".split()
)

# A word is searched through a bitmask once it is in at least 1/MASK_SHARE of the nodes
# (and in MASK_MIN_DF of them); rarer words are cheap to scan member by member. A mask
# costs N/8 bytes whatever the word, about 3 times its posting set at the threshold and
# less above it; Zipf-like text has few such words (measured: 721 masks, 9 MB, in a
# 100,000-node graph of 400 MB). Only the words searched for get one.
MASK_SHARE = 1024
MASK_MIN_DF = 32
# From this many slots on, a word's mask replaces its set. Below, both are kept: the sets
# cost little there (5 MB at 10,000 memories), and a set & a few candidates is faster than
# testing their bits in a mask (scores_of with 200 candidates at 10,000: 173-180 against
# 230-240 µs, a one-off timing; bench/bench_engine.py gives the word search's own figures).
SETS_DROPPED_FROM = 32_768
# Below this many ids a word's posting is a tuple (in first-seen order), from it on a set. Most
# words are rare: at 100,000 memories the postings left beside the masks held 305,000 ids in
# 18.3 MB of sets, a tuple's 8 bytes an id instead. Nothing asks a posting `in` (a search asks
# its candidates, `add_shared`), so a tuple costs no search time; an add copies it (under 1 µs).
POSTING_SET_FROM = 128


def stem(word: str) -> str:
    """A word's stem, the form the index keys it by: "camped", "camping" and "camps" -> "camp".

    Snowball's English stemmer (Porter2, from PyStemmer's C build of it). It replaced Harman's
    S-stemmer, which only folded plurals: on LoCoMo, where a question says "camped" and the
    answer "camping", held-out R@1 / R@10 rose 0.475 / 0.793 -> 0.494 / 0.805, and on the
    ledgers the ranking served stayed above BM25 and the graph walk
    (docs/decisions/stemming.md). Short words and words with a digit are kept as they are.
    """
    if len(word) <= 3 or not word.isalpha():
        return word
    english = getattr(_stemmers, "english", None)
    if english is None:
        # PyStemmer's stemmers are not safe to share between threads: one per thread. Its own
        # cache is off (size 0): `_forms` keeps every token's form already.
        english = _stemmers.english = Stemmer.Stemmer("english", 0).stemWord
    return english(word)


_stemmers = threading.local()
# What the index's forms depend on: a load image made under another stemmer is not read.
STEMMER = f"snowball english (PyStemmer {Stemmer.version()})"


# token -> its searchable form ("" for a stopword). A graph's vocabulary is far smaller
# than its text, so loading 100k memories stems each distinct token once, not each use.
_forms: dict[str, str] = {}
_MAX_FORMS = 500_000


def _form(token: str) -> str:
    form = "" if token in STOPWORDS else stem(token)
    if len(_forms) < _MAX_FORMS:
        _forms[token] = form
    return form


def words(text: str) -> set[str]:
    """The distinct searchable words of a text: lower-cased, stopwords dropped, stemmed (`stem`)."""
    forms = _forms
    found = {forms[t] if t in forms else _form(t) for t in WORD.findall(text.lower())}
    found.discard("")
    return found


# For ASCII text, `WORD.findall(text.lower())` is the runs of [a-z0-9] after lower-casing:
# this table lower-cases A-Z and blanks every other byte, so `bytes.split()` finds the same
# tokens, at C speed over a whole batch of texts (`InvertedIndex.add_many`).
_ASCII_WORDS = bytes(
    (c | 0x20 if 65 <= c <= 90 else c) if chr(c).isascii() and chr(c).isalnum() else 0x20 for c in range(256)
)


# Token bytes (after _ASCII_WORDS) -> "x", the space stays: tokens are counted as b" x".
_TOKEN_MARKS = bytes(0x20 if c == 0x20 else 0x78 for c in range(256))


class _MembersOfToken(dict):
    """token -> the list collecting the node ids of its form, filled on first sight of each
    distinct token, so the bulk index pays one dict lookup per token occurrence. A token is
    an ASCII bytes run (`add_many`'s fast path) or an already searchable str form (from
    `words`); stopwords collect under the form ""."""

    def __init__(self) -> None:
        super().__init__()
        self.members: dict[str, list[str]] = {}  # form -> node ids, in the order met

    def __missing__(self, token: bytes | str) -> list[str]:
        if type(token) is bytes:
            text = token.decode("ascii")
            form = _forms[text] if text in _forms else _form(text)
        else:
            form = token
        members = self.members.get(form)
        if members is None:
            members = self.members[form] = []
        self[token] = members
        return members


# `add_shared` tests up to this many candidates one by one, more through a `_Probe`, whose set-up
# costs more than a loop over a few (at 1,000 memories); at 100,000, 48, 128 and 400 here gave
# the same word search times.
_FEW_CANDIDATES = 48
_MAX_COUNT = 65_535  # what a slot's word count can hold; a longer text counts as this long


class InvertedIndex:
    """word -> its node ids. A node's words are found again from its text when it is removed or
    re-indexed: the owner's `text_of(node_id)` gives the text a node was indexed with (a graph
    reads it from the node, so the index keeps no copy: 15 MB at 100,000 memories); without
    one, the index keeps each text itself.

    Alongside: node id <-> slot. A word's node ids are a set; a common word's are also a
    bitmask of slots, made the first time a search needs it (`mask`), so a process that
    only loads and saves never pays for masks; from then on every add and remove keeps it
    exact, and in a large index it replaces the set.
    """

    def __init__(self, text_of: Callable[[str], str] | None = None) -> None:
        self._postings: dict[str, Edges] = {}  # word -> its node ids (unless its mask replaced them)
        self._indexed: set[str] = set()
        # node id -> the text it was indexed with, kept only when no `text_of` reads it from
        # the owner. A text costs less memory than its set of words (a fifth, for a short note)
        # and nothing to build at load; it is read again only at a removal or a re-index (rare).
        self._texts: dict[str, str] | None = None if text_of is not None else {}
        self._text_of: Callable[[str], str] = text_of if text_of is not None else self._texts.__getitem__
        self._slot_of: dict[str, int] = {}
        self._id_at: list[str] = []  # slot -> node id
        self._masks: dict[str, int] = {}  # common word -> mask, each built when a search first needs it
        self._mask_sizes: dict[str, int] = {}  # a word whose mask replaced its set -> how many nodes it holds
        self._masks_swept_at = 0  # node count when masks of words grown relatively rare were last dropped
        self._sorted_ids: list[str] = []  # every slotted id in string order, for ties broken by id
        self._unsorted_ids: list[str] = []  # slotted since `_sorted_ids` was last sorted
        # slot -> how many distinct words its text has (0: not counted yet; a loaded graph's
        # are counted when a search first asks), two bytes a slot: `word_count`.
        self._word_counts = array("H")

    def __len__(self) -> int:
        return len(self._indexed)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._indexed

    def membership(self) -> Callable[[object], bool]:
        """`node_id in index` as a built-in function, for filtering many ids at C speed."""
        return self._indexed.__contains__

    # ------------------------------------------------------------------ changes
    def add(self, node_id: str, text: str) -> None:
        """Index a node's words; indexing an indexed node again replaces its words (same slot):
        its old words are those of `text_of(node_id)`, so an owner that changes a node's text
        removes it first, with its old text (`remove`)."""
        if node_id in self._indexed:
            self.remove(node_id)
        slot = self._slot_of.get(node_id)
        if slot is None:
            slot = self._slot_of[node_id] = len(self._id_at)
            self._id_at.append(node_id)
            self._unsorted_ids.append(node_id)
            self._word_counts.append(0)
        doc = words(text)
        self._indexed.add(node_id)
        if self._texts is not None:
            self._texts[node_id] = text
        self._word_counts[slot] = min(len(doc), _MAX_COUNT)
        postings, masks = self._postings, self._masks
        for word in doc:
            posting = postings.get(word)
            if type(posting) is set:
                posting.add(node_id)
            elif posting is not None:  # a tuple, without the node (`joined` would look for it first)
                postings[word] = (*posting, node_id) if len(posting) + 1 < POSTING_SET_FROM else {*posting, node_id}
            elif word in masks:
                self._mask_sizes[word] += 1  # the mask is its only posting
            else:
                postings[word] = (node_id,)
            if word in masks:
                masks[word] |= 1 << slot
        if masks:
            self._sweep_masks()

    def add_many(self, node_ids: Sequence[str], texts: Sequence[str]) -> None:
        """Index many nodes at once, leaving the state that `add` of each
        (node_ids[i], texts[i]) in order leaves: the same slots and the same postings (the
        sets sized for what they hold, so their iteration order may differ: nothing reads it).

        Loading a graph is almost all this work: a million word occurrences for 100,000
        nodes. Here ASCII texts are lower-cased and split in one pass over their bytes,
        and each occurrence costs one dict lookup and one list append inside C loops
        (`map`), with no Python bytecode per word; then each word's posting is made from
        its list. (Two sequences rather than pairs: the loader has both lists.)

        In a large index (`SETS_DROPPED_FROM`), a word in as many nodes as a mask is built
        for gets its mask here, from the slots, and no set: the state `add` of each, then
        `build_common_masks`, leaves. A load then makes no set it would drop (42 MB at
        100,000 memories), and a server's background build of the masks finds them made.
        """
        node_ids, texts = list(node_ids), list(texts)
        if len(node_ids) != len(texts):
            raise ValueError(f"{len(node_ids)} node ids but {len(texts)} texts")
        if (self._masks or len(set(node_ids)) != len(node_ids)
                or not self._slot_of.keys().isdisjoint(node_ids)):
            # Masks to keep exact, or nodes indexed twice: the one-by-one path says how.
            for node_id, text in zip(node_ids, texts):
                self.add(node_id, text)
            return
        if not node_ids:
            return
        # The ASCII texts, each after one space, lower-cased and with every other byte
        # blanked in one pass; in `marks` every token byte is "x", so a text's token count
        # is its count of " x". A non-ASCII text's words come from `words`, as a str that
        # splits into them (its slice of the buffer is empty).
        plain = list(map(str.isascii, texts))
        ascii_texts = texts if all(plain) else [text if is_ascii else "" for text, is_ascii in zip(texts, plain)]
        buffer = (" " + " ".join(ascii_texts)).encode("ascii").translate(_ASCII_WORDS)
        marks = buffer.translate(_TOKEN_MARKS)
        ends = list(accumulate(map(add, map(len, ascii_texts), repeat(1)), initial=0))
        starts, ends = ends[:-1], ends[1:]
        counts = list(map(marks.count, repeat(b" x"), starts, ends))
        del marks
        pieces: Iterable[bytes | str] = map(buffer.__getitem__, map(slice, starts, ends))
        split: Callable[[Any], list] = bytes.split
        if ascii_texts is not texts:
            pieces, split = list(pieces), methodcaller("split")  # bytes.split or str.split
            for position, is_ascii in enumerate(plain):
                if not is_ascii:
                    forms = words(texts[position])
                    pieces[position], counts[position] = " ".join(forms), len(forms)
        # Split lazily, node by node: each node's tokens are looked up while still in the
        # CPU cache and freed right after, so a million token objects never exist at once.
        tokens = chain.from_iterable(map(split, pieces))
        first = len(self._id_at)
        slots = range(first, first + len(node_ids))
        self.take_slots(node_ids, texts)
        members_of = _MembersOfToken()
        # members_of[token].append(slot) for every token of every node, in node order (a
        # node's one int repeated: no object per occurrence)...
        deque(map(list.append, map(members_of.__getitem__, tokens),
                  chain.from_iterable(map(repeat, slots, counts))), maxlen=0)
        members_of.members.pop("", None)  # stopwords
        # ...then each posting made word by word: one table at a time, which the CPU's caches
        # hold, instead of a jump to another of thousands of tables at every word. A word twice
        # in a text is listed twice: one is kept. A set grown add by add ends with up to four
        # times the table it needs; copied from a set, it is sized once for what it holds. The
        # same members as node by node, the sets in another iteration order.
        postings, id_at, n_slots = self._postings, self._id_at, len(self._id_at)
        masked_from = self._mask_threshold() if n_slots >= SETS_DROPPED_FROM else math.inf
        for form, members in members_of.members.items():
            posting = postings.get(form)
            if posting is None and len(members) >= masked_from:
                mask = mask_of_slots(members, n_slots)  # a repeat sets its bit again
                if mask.bit_count() >= masked_from:
                    self._masks[form], self._mask_sizes[form] = mask, mask.bit_count()
                    continue
            ids = tuple(map(id_at.__getitem__, dict.fromkeys(members)))
            if posting is not None:
                ids = tuple(chain(posting, ids))  # the nodes are new: no repeats
            postings[form] = ids if len(ids) < POSTING_SET_FROM else set(set(ids))

    def take_slots(self, node_ids: Sequence[str], texts: Sequence[str] = ()) -> None:
        """Give new nodes the next slots, in order, as indexed (their words are the caller's:
        `add_many`, or a load's image read back, `engine/load_image.py`); `texts`: theirs,
        needed only by an index that keeps its own."""
        if self._texts is not None and len(texts) != len(node_ids):
            raise ValueError(f"{len(node_ids)} node ids but {len(texts)} texts")
        first = len(self._id_at)
        self._slot_of.update(zip(node_ids, range(first, first + len(node_ids))))
        self._id_at.extend(node_ids)
        self._unsorted_ids.extend(node_ids)
        self._word_counts.extend(repeat(0, len(node_ids)))
        self._indexed.update(node_ids)
        if self._texts is not None:
            self._texts.update(zip(node_ids, texts))

    def remove(self, node_id: str, text: str | None = None) -> None:
        """Unindex a node (nothing if it is not indexed). `text`: the one it was indexed with,
        when `text_of` can no longer give it (the owner has changed or dropped the node)."""
        if node_id not in self._indexed:
            return
        if text is None:
            text = self._text_of(node_id)
        self._indexed.discard(node_id)
        if self._texts is not None:
            del self._texts[node_id]
        slot = self._slot_of[node_id]
        self._word_counts[slot] = 0
        for word in words(text):
            posting = self._postings.get(word)
            if posting is not None:
                posting = self._postings[word] = parted(posting, node_id)
                if not posting:
                    del self._postings[word]
                    self._masks.pop(word, None)
                elif word in self._masks:
                    self._masks[word] &= ~(1 << slot)
                continue
            left = self._mask_sizes[word] - 1
            if left:
                self._masks[word] &= ~(1 << slot)
                self._mask_sizes[word] = left
            else:
                del self._masks[word], self._mask_sizes[word]

    # ------------------------------------------------------------------ words and weights
    def df(self, word: str) -> int:
        """How many indexed nodes hold the word."""
        posting = self._postings.get(word)
        return len(posting) if posting is not None else self._mask_sizes.get(word, 0)

    def has_word(self, word: str) -> bool:
        return word in self._postings or word in self._masks

    def idf(self, word: str) -> float:
        """log(1 + N / df): positive for every word that occurs, larger when rarer."""
        df = self.df(word)
        return math.log1p(len(self._indexed) / df) if df else 0.0

    def posting(self, word: str) -> AbstractSet[str]:
        """The word's node ids (read only). A rare word's tuple or a common word's mask is made
        into a new set each call: `add_shared` and `holders` read many cheaper."""
        posting = self._postings.get(word)
        return posting if type(posting) is set else frozenset(self.holders(word))

    def holders(self, word: str) -> Iterable[str]:
        """The word's node ids, to walk once (a tuple or set; a common word's straight from its mask)."""
        posting = self._postings.get(word)
        if posting is not None:
            return posting
        mask = self._masks.get(word)
        return self.ids_in(mask, many=True) if mask is not None else ()

    def add_shared(self, scores: dict[str, float], weighted: Iterable[tuple[float, str]],
                   candidates: AbstractSet[str]) -> None:
        """scores[node] += weight for each (weight, word) in turn and each of `candidates` (a
        set or a dict's keys) that holds the word: word by word, so a node's sum is added in
        the words' order, as every scorer adds it. A set word costs a set & at C speed; a
        mask word a test of each candidate's bit, also at C speed (`_Probe`); a tuple word a
        test of each member against the candidates (`filter`)."""
        probe: _Probe | None = None
        get, size = scores.get, (len(self._id_at) + 7) // 8
        for weight, word in weighted:
            posting = self._postings.get(word)
            if posting is not None:
                held: Iterable[str] = (candidates & posting if type(posting) is set
                                       else filter(candidates.__contains__, posting))
            else:
                mask = self._masks.get(word)
                if mask is None:
                    continue
                if len(candidates) <= _FEW_CANDIDATES:  # a loop costs less than the probe's set-up
                    data, slot_of = _mask_bytes(word, mask, size), self._slot_of
                    held = [node_id for node_id in candidates
                            if (slot := slot_of.get(node_id)) is not None and data[slot >> 3] >> (slot & 7) & 1]
                else:
                    if probe is None:
                        probe = _Probe(candidates, self._slot_of, size)
                    held = probe.holding(word, mask)
            for node_id in held:
                scores[node_id] = get(node_id, 0.0) + weight

    def weighted_words(self, query_words: Iterable[str]) -> list[tuple[float, str]]:
        """(idf, word) for the query words that occur, rarest first.

        Every scorer adds the weights in this one order, so the same question gives
        bit-identical scores whichever way the candidates are gathered.
        """
        weighted = [(self.idf(w), w) for w in set(query_words) if self.has_word(w)]
        weighted.sort(key=lambda pair: (-pair[0], pair[1]))
        return weighted

    def lexical_scores(self, query_words: Iterable[str]) -> dict[str, float]:
        """Sum of idf over the query words each node shares; nodes sharing none are absent."""
        scores: dict[str, float] = {}
        get = scores.get
        for weight, word in self.weighted_words(query_words):
            for node_id in self.holders(word):
                scores[node_id] = get(node_id, 0.0) + weight
        return scores

    def word_count(self, node_id: str) -> int:
        """How many distinct words an indexed node's text has (0 for a node not indexed):
        its length as the search sees it, counted once and kept."""
        if node_id not in self._indexed:
            return 0
        slot = self._slot_of[node_id]
        count = self._word_counts[slot]
        if not count:
            count = self._word_counts[slot] = min(len(words(self._text_of(node_id))), _MAX_COUNT)
        return count

    def document_words(self, node_id: str) -> frozenset[str]:
        return frozenset(words(self._text_of(node_id))) if node_id in self._indexed else frozenset()

    # ------------------------------------------------------------------ slots and masks
    @property
    def n_slots(self) -> int:
        return len(self._id_at)

    def slot(self, node_id: str) -> int:
        return self._slot_of[node_id]

    def slot_map(self) -> Mapping[str, int]:
        """node id -> slot, for looking up many at C speed (`map(slot_map.__getitem__, ids)`).
        Read only: the index's own mapping, not a copy."""
        return self._slot_of

    def ids_in(self, mask: int, many: bool = False) -> Iterator[str]:
        """The node ids of a mask, most recently indexed first (see `bitsets.slots_in`);
        `many`: the mask may be large, so pick the way that stays linear."""
        id_at = self._id_at
        return (id_at[slot] for slot in (slots_in_any(mask) if many else slots_in(mask)))

    def mask_of(self, node_ids: Iterable[str]) -> int:
        return mask_of_slots(list(map(self._slot_of.__getitem__, node_ids)), len(self._id_at))

    def ids_by_id(self) -> list[str]:
        """Every slotted node id in string order (kept sorted lazily: new ids are merged
        in on the next call, which Python's sort does in about one pass)."""
        if self._unsorted_ids:
            self._sorted_ids.extend(self._unsorted_ids)
            self._sorted_ids.sort()
            self._unsorted_ids = []
        return self._sorted_ids

    def mask(self, word: str) -> int:
        """The word's posting as a mask (built on first use, replacing its set in a large
        index; then kept exact by add/remove)."""
        mask = self._masks.get(word)
        if mask is None:
            mask = self._masks[word] = self.mask_of(self._postings[word])
            if len(self._id_at) >= SETS_DROPPED_FROM:
                self._mask_sizes[word] = len(self._postings.pop(word))
        return mask

    def build_common_masks(self) -> int:
        """Build now the masks a search would build on first use (a server does this in the
        background after start-up, so no agent's question pays for it, and the common words'
        sets are freed early). Returns how many."""
        threshold = self._mask_threshold()
        common = [w for w, posting in self._postings.items() if len(posting) >= threshold and w not in self._masks]
        for word in common:
            self.mask(word)
        dropped = self._drop_sets_of_masked()
        if dropped or (common and len(self._id_at) >= SETS_DROPPED_FROM):
            give_back_freed_memory()  # the sets the masks replaced, freed among tables still held
        return len(common)

    def _drop_sets_of_masked(self) -> int:
        """In a large index, the sets of words that got their masks while it was small."""
        if len(self._id_at) < SETS_DROPPED_FROM:
            return 0
        both = [word for word in self._masks if word in self._postings]
        for word in both:
            self._mask_sizes[word] = len(self._postings.pop(word))
        return len(both)

    def _mask_threshold(self) -> int:
        return max(MASK_MIN_DF, len(self._indexed) // MASK_SHARE)

    def _sweep_masks(self) -> None:
        """The threshold grows with the graph: once the graph has doubled, the words now well
        under it go back to sets only, so the masks' memory stays a small share (and a graph
        grown large drops the sets its masks replace)."""
        if len(self._indexed) >= 2 * self._masks_swept_at:
            threshold = self._mask_threshold()
            for word in [w for w in self._masks if self.df(w) * 2 < threshold]:
                mask = self._masks.pop(word)
                if self._mask_sizes.pop(word, None) is not None:
                    self._postings[word] = packed(self.ids_in(mask, many=True), POSTING_SET_FROM)
            self._drop_sets_of_masked()
            self._masks_swept_at = len(self._indexed)

    def common_suffix_start(self, weighted: list[tuple[float, str]]) -> int:
        """Where the common words begin in a rarest-first word list: every word from the
        returned position on is searched through its mask (`mask`), the words before it
        member by member. Common words are the ones in at least 1/MASK_SHARE of the
        nodes (or that already have a mask), so they come last."""
        threshold = self._mask_threshold()
        start = len(weighted)
        while start:
            word = weighted[start - 1][1]
            if word not in self._masks and len(self._postings[word]) < threshold:
                break
            start -= 1
        return start


class _Probe:
    """Candidates' bits, for testing them against many masks at C speed, where a big-int
    shift per candidate would copy the mask each time: each candidate's byte of a mask is
    picked out (`itemgetter`), and the picked bytes, as one int, are &-ed with each
    candidate's own bit, also as one int; the result's non-zero bytes are the holders."""

    def __init__(self, candidates: Iterable[str], slot_of: Mapping[str, int], size: int):
        self.ids = list(filter(slot_of.__contains__, candidates))
        slots = list(map(slot_of.__getitem__, self.ids))
        places = list(map((3).__rrshift__, slots))  # slot >> 3
        self.pick = itemgetter(*places) if len(places) > 1 else lambda data: tuple(data[place] for place in places)
        self.bits = int.from_bytes(bytes(map((7).__and__, slots)).translate(_BIT_OF_POSITION), "little")
        self.size = size  # of every mask's bytes: one per 8 slots

    def holding(self, word: str, mask: int) -> Iterator[str]:
        """The candidates whose bit is set in `mask` (the word's)."""
        if not self.ids:
            return iter(())
        picked = int.from_bytes(bytes(self.pick(_mask_bytes(word, mask, self.size))), "little")
        return compress(self.ids, (picked & self.bits).to_bytes(len(self.ids), "little"))


def _mask_bytes(word: str, mask: int, size: int) -> bytes:
    """A mask's bytes, kept for the last _BYTES_KEPT words asked (12.5 kB each at 100,000
    nodes): a common word comes back question after question, and the conversion costs
    about 10 µs at that size. Kept with the mask it was made from: a changed mask is a new
    int, so it is never mistaken for the old one while the old one is held here."""
    kept = _bytes_of.pop(word, None)
    if kept is None or kept[0] is not mask or len(kept[1]) != size:
        kept = (mask, mask.to_bytes(size, "little"))
    _bytes_of[word] = kept  # the newest
    if len(_bytes_of) > _BYTES_KEPT:
        with suppress(KeyError):  # another thread's search took the oldest first
            del _bytes_of[next(iter(_bytes_of))]
    return kept[1]


_BIT_OF_POSITION = bytes(1 << (value & 7) for value in range(256))  # a bit's position in its byte -> the byte
_BYTES_KEPT = 64
_bytes_of: dict[str, tuple[int, bytes]] = {}  # word -> (its mask, the mask's bytes), oldest first
