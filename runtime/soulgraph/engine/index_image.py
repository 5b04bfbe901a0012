"""The word index's image: a built index as bytes, so that a large soul's next load reads its postings back instead
of building them (at 100,000 memories the index is about 1 s of a 2 to 3 s load; read back, 0.1 s).

An image holds what `InvertedIndex.add_many` leaves in a fresh index: each word's posting as
slots, each common word's mask, and the key of what it was built from: the node ids and their
texts in order, the index's thresholds, the runtime's version and this format's. `restore` uses
an image only when its key is the key of the ids and texts about to be indexed, so an image of
another snapshot, of another runtime or torn by a crash is never read: the load builds the
index as before and a new image replaces the old one. Pure: bytes in, bytes out; where the
bytes live is the store's business (`store/index_file.py`).
"""

from __future__ import annotations

import hashlib
import marshal
from array import array
from itertools import islice
from typing import Protocol, Sequence

from soulgraph import __version__
from soulgraph.engine import index as index_module
from soulgraph.engine.index import InvertedIndex

FORMAT = b"soulgraph word index image 1\n"
# Below this many memories a load builds its index in a tenth of a second or less: no image.
IMAGE_FROM = 20_000
_MARSHAL_VERSION = 4


class ImageStore(Protocol):
    """Where an image is kept between loads (a file beside the soul)."""

    def read(self) -> bytes | None: ...

    def write(self, image: bytes) -> None: ...


def key(node_ids: Sequence[str], texts: Sequence[str]) -> bytes:
    """What an index built from these ids and texts depends on, in 20 bytes (SHA-1: a check
    against accidents, not against someone who can write the soul's folder anyway)."""
    digest = hashlib.sha1(usedforsecurity=False)
    settings = (__version__, index_module.SETS_DROPPED_FROM, index_module.POSTING_SET_FROM,
                index_module.MASK_SHARE, index_module.MASK_MIN_DF, sorted(index_module.STOPWORDS))
    digest.update(repr(settings).encode())
    digest.update(len(node_ids).to_bytes(8, "little"))
    for strings in (node_ids, texts):
        # Each string's length first, so no two lists join into the same bytes.
        digest.update(array("Q", map(len, strings)).tobytes())
        digest.update("".join(strings).encode("utf-8", "surrogatepass"))
    return digest.digest()


def dump(index: InvertedIndex, built_from: bytes) -> bytes:
    """The image of an index that `add_many` filled from empty; `built_from`: `key` of its input."""
    slot_of = index.slot_map()
    words = list(index._postings)
    postings = index._postings.values()
    lengths = array("I", map(len, postings))
    slots = array("I")
    for posting in postings:
        slots.extend(map(slot_of.__getitem__, posting))
    width = (index.n_slots + 7) // 8
    masks = [(word, index._mask_sizes.get(word), mask.to_bytes(width, "little")) for word, mask in index._masks.items()]
    return FORMAT + marshal.dumps((built_from, index.n_slots, words, lengths.tobytes(), slots.tobytes(), masks),
                                  _MARSHAL_VERSION)


def restore(index: InvertedIndex, image: bytes, node_ids: Sequence[str], texts: Sequence[str],
            built_from: bytes) -> bool:
    """Fill an empty index from its image, leaving what `add_many(node_ids, texts)` would
    (`built_from`: their `key`); False, the index untouched, when the image is not of them."""
    if not image.startswith(FORMAT) or len(index) or index.n_slots:
        return False
    try:
        made_from, n_slots, words, lengths_bytes, slots_bytes, masks = marshal.loads(memoryview(image)[len(FORMAT):])
    except (EOFError, ValueError, TypeError):
        return False  # torn or not an image
    if made_from != built_from or n_slots != len(node_ids):
        return False
    lengths, slots = array("I"), array("I")
    lengths.frombytes(lengths_bytes)
    slots.frombytes(slots_bytes)
    if len(lengths) != len(words) or sum(lengths) != len(slots):
        return False
    ids = list(node_ids)
    members = map(ids.__getitem__, slots)  # the nodes' own id strings, not copies
    postings = index._postings
    set_from = index_module.POSTING_SET_FROM
    for word, count in zip(words, lengths):
        posting = tuple(islice(members, count))
        postings[word] = posting if count < set_from else set(set(posting))
    for word, size, mask in masks:
        index._masks[word] = int.from_bytes(mask, "little")
        if size is not None:
            index._mask_sizes[word] = size
    index.take_slots(ids, texts)
    return True
