"""The vectors of a soul file's memories, kept beside it in ``soul.json.vectors``.

The vectors are a cache: everything in them can be made again from soul.json, so nothing
here can lose a memory. What the file saves is time: a start reads it instead of embedding
every memory again.

- The file holds the model's version stamp, and per node its id, a digest of the text the
  vector was made from, the vector (float16; from engine/embeddings.py's TAIL_FROM rows, its
  coordinates on the index's directions instead, and those directions: what the index keeps)
  and the text's token ids (for the store's word counts, which weight a question's words). A
  vector whose node's text changed, or that belongs to no node, is dropped on load; a node
  without one is embedded.
- A missing file, a corrupt one or one made by another model version is rebuilt in a
  background thread; until it is ready search is lexical, and `status()` (which
  soul_summary shows) says so and why.
- Once ready, the vectors follow the graph through its watchers: an added memory is
  embedded at the next search (about 0.2 ms), a removed one dropped. The file is written
  again (atomically) when `SAVE_EVERY` vectors changed since it was written, after a
  rebuild, and when the server stops if anything changed.
"""

from __future__ import annotations

import binascii
import hashlib
import io
import threading
from pathlib import Path
from typing import AbstractSet, Any, Callable

from soulgraph.engine import embeddings
from soulgraph.engine.graph import SoulGraph
from soulgraph.engine.heap import give_back_freed_memory
from soulgraph.store.atomic import write_atomically

SUFFIX = ".vectors"
SAVE_EVERY = 256  # changed vectors before the file is written again
STORE_WEIGHT_A = 1e-3  # a of the question's store weights: the model's own a (runtime/model/rebuild/distill_static.py)
_SYNC_INLINE = 512  # more changes than this at once (a bulk import) go to the background
# Rows up to which the shortlist's due refit (engine/embeddings.py) runs in the search that finds
# it due: under 80 ms at that size (78 ms measured at 20,000). A larger store keeps its
# directions until its next load, which fits them again in the background.
_FIT_INLINE = 16384


def _coordinate_parts() -> dict[str, Any]:
    import numpy as np

    return {"shortlist": np.float32, "refine": np.float16, "tail": np.int8, "tail_scale": np.float32}


def vectors_path(soul_path: Path) -> Path:
    return soul_path.with_name(soul_path.name + SUFFIX)


def digest(text: str) -> int:
    """The text's 8-byte blake2b, as an int (the file keeps its hex: what older versions wrote)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big")


NOT_STARTED = "the vectors are not loaded yet: they load in the background from the first soul_prime, soul_summary or question"
"""What `status()` says before anything asked for the vectors (a server that has answered nothing yet)."""


class VectorStore:
    """One graph's vectors: `nearest(text, n)` once `ready()`, lexical fallback before."""

    def __init__(self, path: Path | None, *, model_loader: Callable[[], Any] | None = None,
                 background: bool = True, enabled: bool = True):
        self.path = path
        self.background = background
        self._model_loader = model_loader or embeddings.default_model
        self.model: Any = None
        self.index: Any = None
        self.graph: SoulGraph | None = None
        self._pending: set[str] = set()
        self._changed_since_save = 0
        self._copy_next_save = False  # a save that read the rows in place was overtaken by a write
        self._lock = threading.Lock()
        self._building: threading.Thread | None = None
        self._built: tuple[Any, Any, str] | None = None  # (model, index, how), handed over by the builder
        self.state = "lexical"
        self.reason = NOT_STARTED if enabled else "vectors are switched off (--no-embed)"
        self.enabled = enabled and embeddings.available()
        if enabled and not self.enabled:
            self.reason = embeddings.unavailable_reason()
        self.loaded_from = ""  # where the vectors came from: "file", "file, 3 embedded", "rebuilt (why)", ...
        # `_skipped_rows`' last answer: the set it was made from (held, so never mistaken for
        # another set at the same address), what it had changed by then, and the rows.
        self._skip_for: AbstractSet[str] | None = None
        self._skip_key: tuple | None = None
        self._skip_rows: Any = None
        # `question_vector`'s last answer, with what it was made from: recall and its reranking
        # stage ask for the same question's vector in turn.
        self._asked: tuple | None = None

    # ------------------------------------------------------------------ the graph
    def _watch(self, node_id: str) -> None:
        self._pending.add(node_id)

    def attach(self, graph: SoulGraph) -> None:
        """Follow this graph (a reload gives a new one: every node is checked again)."""
        if graph is self.graph:
            return
        if self.graph is not None and self._watch in self.graph.watchers:
            self.graph.watchers.remove(self._watch)
        self.graph = graph
        graph.watchers.append(self._watch)
        self._pending = set(graph.nodes)
        if self.index is not None:
            self._pending.update(self.index.row_of)

    def ready(self, graph: SoulGraph) -> bool:
        """Are the vectors usable for this graph now? Starts the load or rebuild if needed."""
        if not self.enabled:
            return False
        self.attach(graph)
        self._take_built()
        if self.index is None or (len(self._pending) > _SYNC_INLINE and self.background):
            # Nothing loaded yet, or a bulk change (an import) to catch up with: in the background.
            self._start_loading()
            self._take_built()  # done already when not in the background
            if self.index is None:
                return False
        self._sync()
        return True

    def _take_built(self) -> None:
        with self._lock:
            if self._built is None:
                return
            self.model, self.index, self.loaded_from = self._built
            self._built, self._building = None, None
        self.state, self.reason = "hybrid", ""

    def _sync(self) -> None:
        if not self._pending:
            return
        graph, index, model = self.graph, self.index, self.model
        changed = 0
        for node_id in self._pending:
            node = graph.nodes.get(node_id)
            if node is None:
                if node_id in index:
                    index.remove(node_id)
                    changed += 1
                continue
            mark = digest(node.content)
            if index.digest_of(node_id) != mark:
                ids = model.token_ids(node.content)
                index.put(node_id, model.embed_ids(ids), mark)
                index.count_tokens(node_id, ids)
                changed += 1
        self._pending.clear()
        if changed and index.shortlist_due() and len(index) <= _FIT_INLINE:
            index.fit_shortlist()  # the store doubled since the last fit: tens of ms, once per doubling
        self._changed_since_save += changed
        if self._changed_since_save >= SAVE_EVERY and self.path is not None:
            # The arrays are taken here; encoding and writing them (tens of ms at 10,000
            # memories) happen in a thread, so a search never waits for the disk. The vectors are
            # read in place (a copy would be 77 MB at 100,000 memories) unless the last save that
            # did so was overtaken by a write: then copied, so this one is written.
            shared = not self._copy_next_save
            payload = self._payload(model, index, shared=shared)
            check = (index, index.writes) if shared else None
            self._changed_since_save, self._copy_next_save = 0, False
            threading.Thread(target=self._write_payload, args=(payload, check), name="soulgraph-vectors-save",
                             daemon=True).start()

    # ------------------------------------------------------------------ search
    def nearest(self, text: str, n: int, accept: Callable[[str], bool] | None = None) -> list[tuple[str, float]]:
        """Up to n (node id, cosine) nearest to `text` that `accept` keeps (all if None), best first."""
        keep = None if accept is None else (lambda pair: accept(pair[0]))
        return self._kept(self.index.nearest, text, n, keep)

    def nearest_ids(self, text: str, n: int, accept: Callable[[str], bool] | None = None,
                    exclude: AbstractSet[str] = frozenset()) -> list[str]:
        """The ids of `nearest`, in its order (what recall fuses: no cosines to carry along).
        `exclude`: ids never returned (other users' memories, `SoulGraph.hidden_from`): their rows
        are left out of the search itself, so it does not look past them and again."""
        if not exclude:
            return self._kept(self.index.nearest_ids, text, n, accept)
        skip = self._skipped_rows(exclude)
        return self._kept(lambda query, wanted: self.index.nearest_ids(query, wanted, skip), text, n, accept)

    def _skipped_rows(self, exclude: AbstractSet[str]) -> Any:
        """`exclude` as rows, made again only when it or the rows changed (a reader's hidden
        set carries a version: `HiddenIds`)."""
        version = getattr(exclude, "version", None)
        key = (version, id(self.index), self.index.changes, len(exclude))
        if self._skip_for is not exclude or self._skip_key != key or version is None:
            self._skip_rows, self._skip_for, self._skip_key = self.index.rows_of(exclude), exclude, key
        return self._skip_rows

    def _kept(self, search: Callable[[Any, int], list], text: str, n: int, keep: Callable[[Any], bool] | None) -> list:
        """The first n of `search`'s answers for the question that `keep` keeps, looking further
        while a filter (a tag, a time range) keeps too few and the index has rows left."""
        query = self.question_vector(text)
        wanted = n
        while True:
            found = search(query, wanted)
            kept = found if keep is None else list(filter(keep, found))
            if len(kept) >= n or wanted >= len(self.index.id_of):
                return kept[:n]
            wanted *= 4

    def question_vector(self, text: str) -> Any:
        """The unit vector a question is searched with: halfway between its words weighted by how
        rare they are in this store and weighted as the model weighs them (general English).

        The store's weights tell one conversation's memories apart: a speaker's name in half of
        them says little about which one. In a store of many conversations, that name is what
        tells them apart, and the model's weights keep it. Half of each did better than either
        alone in both kinds of store (docs/eval.md, "In a crowd"). The memories' own vectors keep
        the model's weights, so they never need making again as the store grows."""
        import numpy as np

        model, index = self.model, self.index
        asked = self._asked
        if asked is not None and asked[0] == text and asked[1] is model and asked[2] is index \
                and asked[3] == index.counted:
            return asked[4]
        ids = model.token_ids(text)
        vector = model.embed_ids(ids, index.store_weights(ids, STORE_WEIGHT_A)) + model.embed_ids(ids)
        norm = float(np.linalg.norm(vector))
        vector = vector / norm if norm > 0.0 else vector
        vector.flags.writeable = False  # handed out again: nobody may change it
        self._asked = (text, model, index, index.counted, vector)
        return vector

    def status(self) -> dict[str, Any]:
        self._take_built()
        status: dict[str, Any] = {"mode": self.state}
        if self.state == "hybrid":
            status["model"] = self.model.version
            status["vectors"] = len(self.index)
        elif self.reason:
            status["reason"] = self.reason
        return status

    # ------------------------------------------------------------------ loading
    def _start_loading(self) -> None:
        if self._building is not None:
            return
        graph = self.graph
        texts = {node_id: node.content for node_id, node in graph.nodes.items()}  # taken here, in the caller's thread
        self._pending.clear()
        current = (self.model, self.index) if self.index is not None else None
        if current is None:
            self.state, self.reason = "lexical", "the vectors are loading"
        else:
            self.state, self.reason = "lexical", f"the vectors are catching up with {len(texts)} memories"
            self.index = None
        worker = threading.Thread(target=self._load, args=(texts, current), name="soulgraph-vectors", daemon=True)
        self._building = worker
        if self.background:
            worker.start()
        else:
            worker.run()

    def _load(self, texts: dict[str, str], current: tuple[Any, Any] | None) -> None:
        try:
            model, index = current if current is not None else (self._model_loader(), None)
            how = "memory"
            if index is None:
                index, how = self._read(model, texts)
            embedded = 0
            for node_id in [i for i in index.row_of if i not in texts]:
                index.remove(node_id)
            index.reserve(len(texts))  # one copy of the rows at most, not one per growth
            for node_id, text in texts.items():
                mark = digest(text)
                if index.digest_of(node_id) == mark and index.has_tokens(node_id):
                    continue  # read from the file, vector and tokens both
                ids = model.token_ids(text)
                if index.digest_of(node_id) != mark:
                    index.put(node_id, model.embed_ids(ids), mark)
                    embedded += 1
                index.count_tokens(node_id, ids)
            had_rows = index.matrix is not None
            if index.shortlist_due():
                index.fit_shortlist()  # here, off the caller's thread (a file of rows does not keep it)
            if embedded:
                how = f"{how}, {embedded} embedded"
            if embedded or (had_rows and index.matrix is None):
                # Before the hand-over: then only the caller's thread touches it. Rows that became
                # coordinates are written as such once, so the next load reads them as they are.
                self._write(model, index)
            give_back_freed_memory()
            with self._lock:
                self._built = (model, index, how)
        except Exception as exc:  # noqa: BLE001 - vectors are a cache: any failure leaves search lexical
            with self._lock:
                self._building = None
            self.state, self.reason = "lexical", f"the vectors could not be built: {exc}"
            self.enabled = False

    def _read(self, model: Any, texts: dict[str, str] | None = None) -> tuple[Any, str]:
        """The index saved in the file, or a new empty one (saying why). Its ids are the
        graph's own strings where `texts` (keyed by the graph's ids) has them: not a copy each."""
        import numpy as np

        index = embeddings.VectorIndex(model.dimensions, vocabulary=model.vocabulary)
        if self.path is None:
            return index, "built"
        try:
            with np.load(self.path, allow_pickle=False) as data:
                version = str(data["model"])
                if version != model.version:
                    return index, f"rebuilt (the file was made by {version}, this is {model.version})"
                ids, marks = data["ids"].tolist(), data["digests"]
                if "tail" in data.files:  # a large store's rows, as their coordinates
                    parts, rows = {}, set()
                    for name, dtype in _coordinate_parts().items():
                        parts[name], length = _with_room(data, name, dtype, embeddings.GROWTH_MIN)
                        rows.add(length)
                    basis, tail_basis = data["basis"], data["tail_basis"]
                    if rows != {len(ids)} or basis.shape[0] != model.dimensions or len(marks) != len(ids):
                        return index, "rebuilt (the file's arrays disagree)"
                else:
                    matrix, length = _with_room(data, "matrix", np.float16, embeddings.GROWTH_MIN)
                    if length != len(ids) or matrix.shape[1:] != (model.dimensions,) or len(marks) != len(ids):
                        return index, "rebuilt (the file's arrays disagree)"
                if texts:
                    shared = dict(zip(texts, texts))
                    ids = [shared.get(node_id, node_id) for node_id in ids]
                    del shared
                tokens = ends = None
                if "tokens" in data.files and "token_ends" in data.files:
                    # Two bytes an id (a file of an older runtime has four: read, then narrowed once).
                    tokens, _ = _with_room(data, "tokens", embeddings.token_type(model.vocabulary),
                                           embeddings.TOKENS_GROWTH_MIN)
                    ends = data["token_ends"]
                if "tail" in data.files:
                    index = embeddings.VectorIndex.from_coordinates(
                        ids, _marks(marks), basis, tail_basis, parts, int(data["fitted_on"]), model.vocabulary, tokens, ends)
                else:
                    index = embeddings.VectorIndex.from_rows(ids, _marks(marks), matrix, model.vocabulary, tokens, ends)
            return index, "file"
        except FileNotFoundError:
            return index, "built (no vectors file yet)"
        except Exception as exc:  # noqa: BLE001 - a corrupt cache is rebuilt, never trusted
            return (embeddings.VectorIndex(model.dimensions, vocabulary=model.vocabulary),
                    f"rebuilt (the vectors file was unreadable: {type(exc).__name__})")

    # ------------------------------------------------------------------ saving
    def save(self) -> None:
        """Write the file if a vector changed since it was last written (the server and the
        memory service call it when they stop: an unchanged store is not written again)."""
        if self.index is not None and self.model is not None and self._changed_since_save:
            self._write(self.model, self.index)

    def _write(self, model: Any, index: Any) -> None:
        if self.path is not None:
            # In this thread (a stop, a load before its hand-over): the vectors read in place,
            # checked as a save's thread checks them, should another thread write meanwhile.
            self._write_payload(self._payload(model, index, shared=True), (index, index.writes))
            self._changed_since_save = 0

    def _payload(self, model: Any, index: Any, shared: bool = False) -> dict[str, Any]:
        """The file's arrays, copied out of the index (so the index may change meanwhile); with
        `shared`, the vectors a view of the index's own rows when every row up to the last has
        its memory and they are float16 (a writer then checks `index.writes`: `_write_payload`)."""
        import numpy as np

        # Built from arrays, without an object per memory (what would stay behind in the heap).
        id_of = index.id_of
        order = np.flatnonzero(np.fromiter((node_id is not None for node_id in id_of), bool, len(id_of)))
        counts = np.maximum(index.token_count[order], 0).astype(np.int64)
        ends = np.cumsum(counts, dtype=np.int64)
        tokens = np.zeros(int(ends[-1]) if len(ends) else 0, index.token_ids.dtype)
        for at in range(0, len(order), 8192):  # the rows' token ids gathered a piece at a time
            piece, lengths = order[at : at + 8192], counts[at : at + 8192]
            first = int(ends[at] - lengths[0]) if len(piece) else 0
            within = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
            tokens[first : first + len(within)] = index.token_ids[np.repeat(index.token_start[piece], lengths) + within]
        marks = index.marks[order].astype(">u8").tobytes()
        in_place = shared and len(order) == len(id_of)

        def rows_of(array: Any, dtype: Any) -> Any:
            return array[: len(order)] if in_place and array.dtype == dtype else array[order].astype(dtype, copy=False)

        if index.matrix is not None:
            vectors = {"matrix": rows_of(index.matrix, np.float16)}
        else:  # kept as coordinates (TAIL_FROM): written as they are, with their directions
            vectors = {name: rows_of(getattr(index, name), dtype) for name, dtype in _coordinate_parts().items()}
            vectors |= {"basis": index.basis, "tail_basis": index.tail_basis, "fitted_on": np.array(index.fitted_on)}
        return {
            "model": np.array(model.version),
            "ids": np.array([id_of[row] for row in order.tolist()], dtype=str),
            # The 16-digit hex older versions wrote and read.
            "digests": np.frombuffer(binascii.hexlify(marks), "S16").astype("U16"),
            **vectors,
            # Each memory's token ids, one after another, and where each one's end: a start then
            # counts the store's words without tokenising every memory again.
            "tokens": tokens,
            "token_ends": ends,
        }

    def _write_payload(self, payload: dict[str, Any], check: tuple[Any, int] | None = None) -> None:
        """Encode and write the file. `check`: (index, its `writes` when the payload was taken),
        for a payload whose vectors are the index's own rows: if a row was written since, the
        file could pair a vector with another text's digest, so it is not written, and the next
        save copies the rows (the changes since count towards it; a stop saves them)."""
        import numpy as np

        buffer = io.BytesIO()
        np.savez(buffer, **payload)
        try:
            if check is not None and check[0].writes != check[1]:
                self._copy_next_save = True
            else:
                write_atomically(self.path, buffer.getbuffer(), default_mode=0o600)  # not a copy of it
        except OSError as exc:
            self.reason = f"the vectors file could not be written: {exc}"  # search still works
        payload.clear()  # the arrays go now (a thread's own arguments would hold them until it ends)
        del buffer
        give_back_freed_memory()

    def wait(self, timeout: float = 60.0) -> bool:
        """Wait for a background build (tests, benchmarks); True when none is left running."""
        worker = self._building
        if worker is not None and worker.is_alive():
            worker.join(timeout)
        return self._building is None or not self._building.is_alive()


def _with_room(data: Any, name: str, dtype: Any, room: int) -> tuple[Any, int]:
    """The file's array `name` and its length, read into an array of `room` more rows (zeros)
    when it has this dtype, so the index takes it as it is and grows into it (one copy in memory,
    not two, and none at the first write); read as numpy reads it otherwise."""
    import numpy as np
    from numpy.lib import format as npy

    try:
        with data.zip.open(name + ".npy") as member:
            version = npy.read_magic(member)
            shape, fortran, stored = (npy.read_array_header_1_0(member) if version == (1, 0)
                                      else npy.read_array_header_2_0(member))
            if not fortran and stored == np.dtype(dtype) and len(shape) >= 1:
                array = np.zeros((shape[0] + room,) + tuple(shape[1:]), dtype)
                target = memoryview(array[: shape[0]].reshape(-1).view(np.uint8))
                while target:
                    got = member.readinto(target[: 1 << 20])  # in pieces: a whole read would be a copy
                    if not got:
                        raise ValueError(f"the file's {name} is short")
                    target = target[got:]
                return array, shape[0]
    except (AttributeError, KeyError):
        pass  # not a zip member as np.savez writes it
    array = data[name]
    return array, len(array)


def _marks(digests: Any) -> Any:
    """The file's digests (16-digit hex strings) as uint64."""
    import numpy as np

    if digests.dtype.kind in "ui":
        return digests.astype(np.uint64)
    try:
        packed = digests.astype("S16")
        if len(packed) and int(np.char.str_len(packed).min()) == 16:
            return np.frombuffer(binascii.unhexlify(packed.tobytes()), ">u8").astype(np.uint64)
    except (ValueError, UnicodeError, binascii.Error):
        pass
    return np.array([int(text, 16) if text else 0 for text in digests.tolist()], np.uint64)
