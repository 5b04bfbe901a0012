"""A large soul's load, kept as bytes for the next load of the same snapshot: the records'
columns as the load checked and copied them, and the word index it built from them. At 100,000
memories, parsing and checking the JSON is about 0.7 s of a 2 to 3 s load and building the index
about 1 s; an image gives both back in a few tenths of a second. The graph is then built from
the columns as after a parse (`engine/load.py`), so the two loads make the same graph.

An image starts with a format line, the key of what it was made from (`key`: the snapshot's
bytes, this format, the runtime's version and the index's thresholds) and a CRC-32 of the rest,
and `read` returns nothing for an image whose key is not the key asked for or whose rest is not
whole: only an intact image of these very bytes is unmarshalled. So an image of another snapshot (after a compaction,
a restore or a `cp` over the file), of another runtime, or torn by a crash is never used: the
load parses the file as before and a new image replaces the old. Pure: bytes in, bytes out;
where they are kept is the store's business (`store/image_file.py`).
"""

from __future__ import annotations

import hashlib
import marshal
import zlib
from array import array
from itertools import compress, islice, repeat
from operator import is_not
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, Sequence

from soulgraph import __version__
from soulgraph.engine import index as index_module
from soulgraph.engine.index import InvertedIndex

if TYPE_CHECKING:
    from soulgraph.engine.load import _Columns

FORMAT = b"soulgraph load image 2\n"
_KEY_BYTES = 20  # SHA-1
# Below this many memories a load takes a few tenths of a second at most: no image is made.
IMAGE_FROM = 20_000
_MARSHAL_VERSION = 4


class ImageStore(Protocol):
    """Where an image is kept between loads (a file beside the soul)."""

    def read(self) -> bytes | None: ...

    def write(self, image: bytes) -> None: ...


class Image(NamedTuple):
    """What `read` gives back: the snapshot's other fields, its records' columns (the fields of
    `load._RECORD_FIELDS` in order, and the memory fields the records have), the word index."""

    header: dict[str, Any]
    columns: list[list[Any]]
    memory: dict[str, list[Any]]
    index: tuple[Any, ...]


def key(snapshot: bytes) -> bytes:
    """What a load of these snapshot bytes depends on, in 20 bytes (SHA-1: a check against
    accidents, not against someone who can write the soul's folder anyway)."""
    settings = (FORMAT, __version__, index_module.SETS_DROPPED_FROM, index_module.POSTING_SET_FROM,
                index_module.MASK_SHARE, index_module.MASK_MIN_DF, sorted(index_module.STOPWORDS),
                index_module.STEMMER)
    digest = hashlib.sha1(repr(settings).encode(), usedforsecurity=False)
    digest.update(snapshot)
    return digest.digest()


def dump(made_from: bytes, header: dict[str, Any], columns: "_Columns", fields: Sequence[str],
         missing: object, index: InvertedIndex) -> bytes:
    """The image of a load: `header` (the snapshot's fields but its nodes), the `columns` it
    checked (`fields` of them in order; `missing` marks a memory field a record lacks) and the
    index `add_many` built from them in an empty index."""
    memory = {name: (bytes(map(is_not, column, repeat(missing))), [value for value in column if value is not missing])
              for name, column in columns.memory.items()}
    payload = marshal.dumps((header, [getattr(columns, name) for name in fields], memory, _index_parts(index)),
                            _MARSHAL_VERSION)
    return FORMAT + made_from + zlib.crc32(payload).to_bytes(4, "little") + payload


def read(image: bytes | None, made_from: bytes, missing: object) -> Image | None:
    """The load kept in `image`, when it was made from `made_from` (else None)."""
    start = len(FORMAT) + _KEY_BYTES + 4
    if not image or not image.startswith(FORMAT) or image[len(FORMAT):start - 4] != made_from:
        return None  # not an image, or of something else
    with memoryview(image) as view:
        payload = view[start:]
        try:
            if zlib.crc32(payload) != int.from_bytes(image[start - 4:start], "little"):
                return None  # torn or damaged
            header, columns, memory, index = marshal.loads(payload)
        except (EOFError, ValueError, TypeError):
            return None
        finally:
            payload.release()
    count = len(columns[0])
    full: dict[str, list[Any]] = {}
    for name, (present, values) in memory.items():
        column = [missing] * count
        for position, value in zip(compress(range(count), present), values):
            column[position] = value
        full[name] = column
    return Image(header, columns, full, index)


def _index_parts(index: InvertedIndex) -> tuple[Any, ...]:
    """The postings as slots (the ids are the columns'), the masks as bytes."""
    slot_of = index.slot_map()
    postings = index._postings.values()
    slots = array("I")
    for posting in postings:
        slots.extend(map(slot_of.__getitem__, posting))
    width = (index.n_slots + 7) // 8
    masks = [(word, index._mask_sizes.get(word), mask.to_bytes(width, "little")) for word, mask in index._masks.items()]
    return index.n_slots, list(index._postings), array("I", map(len, postings)).tobytes(), slots.tobytes(), masks


def fill_index(index: InvertedIndex, parts: tuple[Any, ...], node_ids: Sequence[str]) -> None:
    """Make an empty index, one that reads its nodes' texts from their owner, the index
    `add_many` made of these nodes when the image was made."""
    n_slots, words, lengths_bytes, slots_bytes, masks = parts
    lengths, slots = array("I"), array("I")
    lengths.frombytes(lengths_bytes)
    slots.frombytes(slots_bytes)
    if n_slots != len(node_ids) or len(lengths) != len(words) or sum(lengths) != len(slots) or len(index):
        raise ValueError("the load image's index does not fit its records")
    ids = list(node_ids)
    members = map(ids.__getitem__, slots)  # the nodes' own id strings, not copies
    postings, set_from = index._postings, index_module.POSTING_SET_FROM
    for word, count in zip(words, lengths):
        posting = tuple(islice(members, count))
        postings[word] = posting if count < set_from else set(set(posting))
    for word, size, mask in masks:
        index._masks[word] = int.from_bytes(mask, "little")
        if size is not None:
            index._mask_sizes[word] = size
    index.take_slots(ids)
