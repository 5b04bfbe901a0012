"""Vectors for memories: a static embedding model and an index of one vector per node.

The model is a table with one row per WordPiece token, distilled from all-MiniLM-L6-v2
(runtime/model/rebuild/distill_static.py, docs/embeddings.md): a text's vector is the mean of its tokens'
rows, normalised, so embedding costs a tokenisation and a gather (about 0.1 ms), with no
neural network at run time. Its files are a package of their own (soulgraph-model, built from
runtime/model/, 12 MB), and it needs numpy (the `embed` extra); without either, `available()`
is False and search is lexical.

`VectorIndex` holds the vectors of a graph's nodes as rows of one matrix: float32 in a small
index, float16 from `SHORTLIST_FROM` rows on (what the file keeps, so a row in memory is the
row a reload gives; each row read for a search is widened to float32 first). A search in a
small index is one matrix-vector product. From `SHORTLIST_FROM` rows on it goes in steps, on
the rows' coordinates on the store's own `SHORTLIST_DIMENSIONS` principal directions (a third of
a row, holding nearly all of what the rows' dot products hold): those coordinates (the
`shortlist`, float32) pick `SHORTLIST_FACTOR` times the rows asked for, and those are scored on
their full rows (reading every full row, 1.5 kB each, was what a search cost at that size).
From `LEAD_FROM` rows on, reading all 128 coordinates of every row is most of a search, so the
shortlist holds only the leading `SHORTLIST_LEAD`, which pick `LEAD_FACTOR` times the rows asked
for; the other coordinates (`refine`, as compact as the rows) are read for those picks only and
complete their coordinates, which pick as above. From `TAIL_FROM` rows on (at a fit) the full
rows are not kept: the directions are fitted on every dimension, and a row is its coordinates
on all of them (a rotation of it): the shortlist's, and the rest (`tail`, int8, scaled per row).
A pick's score is then the sum of the three parts' products with the question's coordinates.
docs/embeddings.md measures what each step misses. From `CELLS_FROM` rows on (off unless set:
it did not pay, see there), the fit also splits the rows into about sqrt(rows) cells (k-means on
the shortlist coordinates), and a search reads only the shortlist rows of the cells whose
centres lie nearest the question (an inverted file), then goes on as above. The index is pure:
store/vectors.py persists it beside the soul file, its rows or its coordinates (not the cells:
they would be fitted again at a load).
"""

from __future__ import annotations

import functools
import importlib.util
import itertools
import json
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from soulgraph.engine.heap import give_back_freed_memory
from soulgraph.engine.wordpiece import WordPiece

# One BLAS thread. A search is one small matrix-vector product: a second thread only adds hand-
# offs, and OpenBLAS's threads spin on cores the agent and the other hosts' work need (at 10,000
# memories on two busy cores, a hybrid question took 5.2 ms with them and 2.1 ms without;
# bench/bench_threads.py measures it). Read by the BLAS library when numpy loads, so set before
# that, here, where every runtime process that can load numpy comes first; a value the operator
# set stays.
BLAS_THREADS = "1"
if "numpy" not in sys.modules:
    for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS"):
        os.environ.setdefault(_name, BLAS_THREADS)

if TYPE_CHECKING:
    import numpy as np
else:
    np = None  # numpy, imported on first use (`_numpy`): a server start never pays for it

MODEL_PACKAGE = "soulgraph_model"  # the model's files, a package of their own (runtime/model/)
SHORTLIST_FROM = 2048  # rows from which a search scores the shortlist: below, the full rows cost little
SHORTLIST_DIMENSIONS = 128  # principal directions a large index is searched on first
SHORTLIST_FACTOR = 3  # rows the shortlist picks per row asked for, then scored on their full rows
# From LEAD_FROM rows (at a fit), a search reads only the leading SHORTLIST_LEAD directions of
# every row (float32), which pick LEAD_FACTOR rows per row asked for; the other directions are
# kept as compact as the rows and read for those picks only. At 100,000 distinct texts this finds
# 0.996 of the exact first 10 and 0.981 of the first 200 in half the time of all 128 read for
# every row, and holds 38 MB instead of 51; at 10,000 rows the second look's scattered reads cost
# more than they save, so a smaller store reads all 128, as one pass (docs/embeddings.md,
# bench/bench_ivf.py).
LEAD_FROM = 16384
SHORTLIST_LEAD = 64
LEAD_FACTOR = 10
SHORTLIST_SAMPLE = 8192  # rows the directions are fitted on, at most (projecting every row still grows with them)
# Rows from which the shortlist is split into cells; None: never. Off, because it does not pay:
# on this model's vectors the cells that hold 0.99 of the first 10 and 0.97 of the first 200 are
# about half of them, and reading them in pieces costs what reading the shortlist whole does
# (docs/embeddings.md, bench/bench_ivf.py, which turns them on).
CELLS_FROM: int | None = None
CELLS_SAMPLE_PER_CELL = 40  # rows per cell the cells' centres are fitted on, at most
CELLS_ROUNDS = 8  # k-means rounds (the centres settle in a few; more bought no recall)
CELLS_PROBED_SHARE = 0.5  # share of the cells a search reads, nearest first (less misses the budget: docs)
CELLS_CANDIDATES = 8  # ... and more until they hold this many times the rows the shortlist picks
# When the rows are full, room for an eighth more (at least GROWTH_MIN rows) is made: a store of
# 100,000 memories grows by 12,500 rows, not 100,000 (doubling made one write cost hundreds of MB).
# The copy holds the old rows and the new for a moment; rows not yet written take no memory.
GROWTH_SHARE = 8
GROWTH_MIN = 64
TOKENS_GROWTH_MIN = 4096  # token ids the token buffer grows by, at least (also by an eighth)
# Rows from which the matrix is float16; None: from SHORTLIST_FROM, where a search stops reading
# every row. Widening the 600 rows a search scores in full costs about 0.06 ms (10,000 memories:
# the vectors' 200 nearest 0.57 -> 0.63 ms p50) and halves the rows' memory (docs/embeddings.md).
HALF_FROM: int | None = None
HALF_CHUNK = 1024  # float16 rows widened at once for a search (the scratch they go in is kept per thread)
# Rows from which (at a fit) a row is kept as its coordinates on every principal direction
# instead of itself: the shortlist's two parts, and the other directions' (`tail`) in int8, each
# row's scaled by its largest. The directions are a rotation, so the three parts' products with
# the question's coordinates add up to the row's product with it; the other directions hold
# under 1 % of the rows' length, so int8 loses little there: at 100,000 distinct texts, rows
# scored this way find 0.996-0.999 of the exact first 10 and 0.998-0.999 of the first 200, where
# int8 full rows find 0.85-0.90 and 0.91-0.94 (bench/row_precision.py); 64 MB instead of 115 (77 of rows, 38 of the
# shortlist). None: never. Below it the full rows are kept: exact scores, below the size where
# the word index also starts to trade time for memory (index.SETS_DROPPED_FROM).
TAIL_FROM: int | None = 32768
TAIL_LEVELS = 127  # int8's levels either side of zero


def _numpy() -> Any:
    global np
    if np is None:
        import numpy

        np = numpy
    return np


def model_dir() -> Path | None:
    """Where the model's files are (the soulgraph-model package), without importing numpy."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def available() -> bool:
    """Can this Python embed at all (numpy and the model package installed)? Looks, imports nothing."""
    folder = model_dir()
    return importlib.util.find_spec("numpy") is not None and folder is not None and (folder / "model.json").is_file()


def unavailable_reason() -> str:
    if importlib.util.find_spec("numpy") is None:
        return "numpy is not installed (install the runtime's `embed` extra: pip install 'soulgraph[embed]')"
    folder = model_dir()
    if folder is None:
        return ("the soulgraph-model package is not installed (it is built from runtime/model/ in the "
                "soulfleet repository; the fleet installs it with soul_embed: true)")
    if not (folder / "model.json").is_file():
        return f"the model files are missing from {folder}"
    return ""


class StaticModel:
    def __init__(self, tokens: Sequence[str], table: Any, scales: Any, version: str):
        if table.shape[0] != len(tokens) or scales.shape[0] != len(tokens):
            raise ValueError(f"model files disagree: {len(tokens)} tokens, {table.shape[0]} rows, "
                             f"{scales.shape[0]} scales")
        self.tokenizer = WordPiece(tokens)
        self.table = table  # int8, memory-mapped: only the rows a text uses are read
        self.scales = scales
        self.version = version
        self.dimensions = int(table.shape[1])
        self.vocabulary = len(tokens)

    @classmethod
    def load(cls, folder: Path | None = None) -> "StaticModel":
        if not available():
            raise RuntimeError(unavailable_reason())
        folder = folder or model_dir()
        _numpy()
        info = json.loads((folder / "model.json").read_text(encoding="utf-8"))
        tokens = (folder / "vocab.txt").read_text(encoding="utf-8").split("\n")
        if tokens and tokens[-1] == "":
            tokens.pop()
        # Memory-mapped, seen as a plain array (no memmap subclass to pass through at each gather).
        table = np.asarray(np.load(folder / "table.npy", mmap_mode="r"))
        scales = np.load(folder / "scales.npy")
        return cls(tokens, table, scales, str(info["version"]))

    def token_ids(self, text: str) -> Any:
        return np.asarray(self.tokenizer.encode(text), dtype=np.intp)

    def embed(self, text: str) -> Any:
        """The text's unit vector (float32); all zeros when no token of it is known."""
        return self.embed_ids(self.token_ids(text))

    def embed_ids(self, rows: Any, weights: Any = None) -> Any:
        """The unit vector of these token ids, each row weighted by `weights` (one per id) if given."""
        if not len(rows):
            return np.zeros(self.dimensions, np.float32)
        factors = self.scales[rows] if weights is None else self.scales[rows] * weights
        vector = factors.astype(np.float32) @ self.table[rows].astype(np.float32)
        norm = float(np.linalg.norm(vector))
        return vector / norm if norm > 0.0 else vector


@functools.lru_cache(maxsize=1)
def default_model() -> StaticModel:
    """The shipped model, loaded once per process (its table is memory-mapped)."""
    return StaticModel.load()


class VectorIndex:
    """Node id -> unit vector, as rows of one matrix that grows by an eighth when full.

    A removed node's row is zeroed and reused, so ids and rows never need renumbering. Each
    row remembers a digest of the text it was made from (`digest_of`, an int: the 8 bytes of
    store/vectors.py's hash), so a caller can tell a vector that no longer matches its node's
    text (store/vectors.py), and the token ids of that text (`tokens_of`), kept one after
    another in one int32 buffer, with each row's start and count.

    The rows are float32 below `HALF_FROM` rows (SHORTLIST_FROM unless set), where a search
    multiplies them all (a float16 matrix would have to be widened whole at each search: 4 ms at
    2,000 rows against 0.04 ms). From there on they are float16: a vector put in is rounded to
    it, as the file rounds it, and a search widens only the rows it scores in full.

    The shortlist (see the module text) is fitted by `fit_shortlist`, which the owner calls
    when `shortlist_due()`: at `SHORTLIST_FROM` rows and again each time the rows double, so
    the directions follow what the store holds. Between fits, rows added are projected on
    the directions already fitted; the full rows are kept, for the next fit and the file,
    until a fit at TAIL_FROM rows or more, from which a row is its coordinates on every
    direction (`tail`: see TAIL_FROM) and the next fit and the file work from those."""

    def __init__(self, dimensions: int, capacity: int = 64, vocabulary: int = 0):
        _numpy()
        capacity = max(capacity, 1)
        self.dimensions = dimensions
        self.matrix = np.zeros((capacity, dimensions), np.float32)
        self.row_of: dict[str, int] = {}
        self.id_of: list[str | None] = []
        self.marks = np.zeros(capacity, np.uint64)  # each row's digest, 0 for none
        self._free: list[int] = []
        # How often each token occurs in the memories indexed (their ids kept per row, so a
        # removal is exact): what makes a word common in this store (`store_weights`).
        self.token_ids = np.zeros(0, token_type(vocabulary))  # every row's ids, one row's after another (with gaps)
        self.token_start = np.zeros(capacity, np.int64)  # where a row's ids start in `token_ids`
        self.token_count = np.full(capacity, -1, np.int32)  # ... and how many: -1, none recorded
        self._tokens_used = 0  # of `token_ids`
        self._tokens_dead = 0  # ... left behind by a replaced or removed row (taken back by `_compact_tokens`)
        self.token_counts = np.zeros(vocabulary, np.int64)
        self.total_tokens = 0
        self.basis: Any = None  # dimensions x SHORTLIST_DIMENSIONS: the principal directions
        self.shortlist: Any = None  # each row's coordinates on the leading ones (all, below LEAD_FROM), float32
        self.refine: Any = None  # ... and on the others, of the rows' own type (a row per row of `marks`)
        # From TAIL_FROM rows, `matrix` is None and a row is its coordinates: the shortlist's, and
        # on `tail_basis` (the other principal directions) `tail` (int8) times `tail_scale`.
        self.tail_basis: Any = None
        self.tail: Any = None
        self.tail_scale: Any = None
        self.fitted_on = 0  # rows when the directions were fitted
        self.centres: Any = None  # cells x SHORTLIST_DIMENSIONS: the cells' centres, unit (None: no cells)
        self.cell_of: Any = None  # each row's cell, -1 for a free row (a row per row of `marks`)
        self.cell_rows: list[Any] = []  # each cell's rows, as intp arrays
        self.cell_coords: list[Any] = []  # ... and their shortlist coordinates, contiguous (read in one pass)
        self.changes = 0  # bumped when a row gets or loses its node: what maps ids to rows starts again
        self.writes = 0  # bumped before any row is written: a reader of the rows in another thread checks it
        self.counted = 0  # bumped when the token counts change: a question's store weights start again

    @classmethod
    def from_rows(cls, ids: Sequence[str], marks: Any, matrix: Any, vocabulary: int = 0,
                  tokens: Any = None, ends: Any = None) -> "VectorIndex":
        """An index of these rows (what a file holds), made in one go. `ids`: unique; `marks`:
        their digests (uint64); `matrix`: their vectors, one row each, then any rows of room
        for more (kept as they are when already of the index's type: no second copy);
        `tokens`: every row's token ids one after another (then any room for more), `ends`: where
        each row's end. No tokens, or ids that do not fit the vocabulary: none recorded, for the
        owner to count again."""
        _numpy()
        count = len(ids)
        if len(set(ids)) != count or len(marks) != count or matrix.shape[0] < count:
            raise ValueError("the rows disagree")
        dtype = np.float16 if count >= _half_from() else np.float32
        if matrix.dtype != dtype or matrix.shape[0] == count or not matrix.flags.c_contiguous:
            full = np.zeros((max(matrix.shape[0], count + GROWTH_MIN), matrix.shape[1]), dtype)
            full[:count] = matrix[:count]
            matrix = full
        index = cls(int(matrix.shape[1]), capacity=matrix.shape[0], vocabulary=vocabulary)
        index.matrix = matrix
        index._take_rows(ids, marks, tokens, ends, vocabulary)
        return index

    @classmethod
    def from_coordinates(cls, ids: Sequence[str], marks: Any, basis: Any, tail_basis: Any, parts: dict[str, Any],
                         fitted_on: int, vocabulary: int = 0, tokens: Any = None, ends: Any = None) -> "VectorIndex":
        """An index of rows kept as their coordinates (what a file of a store past TAIL_FROM
        holds): `parts` holds `shortlist`, `refine`, `tail` and `tail_scale`, a row each per id
        and then the same rows of room, kept as they are (no second copy); `basis` and
        `tail_basis` are the directions they are on, fitted on `fitted_on` rows. The rest as
        `from_rows`."""
        _numpy()
        count = len(ids)
        shortlist, refine, tail, scale = (parts[name] for name in ("shortlist", "refine", "tail", "tail_scale"))
        capacity = shortlist.shape[0]
        dimensions, width = basis.shape
        if (len(set(ids)) != count or len(marks) != count or capacity < count
                or any(part.shape[0] != capacity for part in (refine, tail, scale))
                or (shortlist.dtype, refine.dtype, tail.dtype, scale.dtype) != (np.float32, np.float16, np.int8, np.float32)
                or shortlist.shape[1] + refine.shape[1] != width or tail_basis.shape != (dimensions, dimensions - width)
                or tail.shape[1:] != (dimensions - width,)):
            raise ValueError("the coordinates disagree")
        index = cls(int(dimensions), capacity=capacity, vocabulary=vocabulary)
        index.matrix = None
        index.basis, index.tail_basis = np.asarray(basis, np.float32), np.asarray(tail_basis, np.float32)
        index.shortlist, index.refine, index.tail, index.tail_scale = shortlist, refine, tail, scale
        index.fitted_on = int(fitted_on)
        index._take_rows(ids, marks, tokens, ends, vocabulary)
        index.fit_cells()
        return index

    def _take_rows(self, ids: Sequence[str], marks: Any, tokens: Any, ends: Any, vocabulary: int) -> None:
        """The ids, digests and token ids of a new index's first rows (`from_rows`)."""
        count = len(ids)
        self.row_of = dict(zip(ids, range(count)))
        self.id_of = list(ids)
        self.marks[:count] = marks
        self.changes = 1
        if tokens is None or ends is None:
            return
        tokens, ends = np.asarray(tokens), np.asarray(ends, np.int64)
        counts = np.diff(ends, prepend=0)
        used = int(ends[-1]) if count else 0
        if (len(ends) != count or used > len(tokens) or (count and int(counts.min()) < 0)
                or (used and (int(tokens[:used].min()) < 0 or int(tokens[:used].max()) >= vocabulary))):
            return
        self.token_ids, self._tokens_used = tokens.astype(token_type(vocabulary), copy=False), used  # ids past `used`: room, kept
        self.token_start[:count] = ends - counts
        self.token_count[:count] = counts
        self.token_counts = np.bincount(tokens[:used], minlength=vocabulary).astype(np.int64)
        self.total_tokens = used

    @property
    def capacity(self) -> int:
        """Rows there is room for (every array kept per row has this many)."""
        return len(self.marks)

    def reserve(self, rows: int) -> None:
        """Make room for this many rows in all (before adding many: one copy instead of many),
        float16 already if they will reach HALF_FROM (the float32 rows never held at full size)."""
        if rows > self.capacity:
            if self.matrix is not None and rows >= _half_from() and self.matrix.dtype != np.float16:
                self.matrix = self.matrix.astype(np.float16)
            self._grow(rows)

    def shortlist_due(self) -> bool:
        """Time to fit the shortlist's directions: first at SHORTLIST_FROM rows, then at each doubling."""
        return len(self.row_of) >= max(SHORTLIST_FROM, 2 * self.fitted_on)

    def fit_shortlist(self) -> None:
        """Fit the directions that keep the most of the rows' dot products (the eigenvectors
        of the rows' uncentred second moment, largest first), and project every row on them;
        from TAIL_FROM rows on, on every direction, and the full rows go (never to come back: a
        store that shrinks keeps its coordinates). Tens of milliseconds at 10,000 rows; the
        owner runs it in the background at a load."""
        used = len(self.id_of)
        if used == 0 or self.dimensions <= SHORTLIST_DIMENSIONS:
            return
        self._narrow()
        sample = self._full_rows(np.arange(0, used, max(1, used // SHORTLIST_SAMPLE)))
        moment = (sample.T @ sample).astype(np.float64)
        _, directions = np.linalg.eigh(moment)  # ascending eigenvalues
        directions = np.ascontiguousarray(directions[:, ::-1], dtype=np.float32)
        width = SHORTLIST_DIMENSIONS
        tailed = self.matrix is None or (TAIL_FROM is not None and len(self.row_of) >= TAIL_FROM)
        basis = np.ascontiguousarray(directions[:, :width])
        tail_basis = np.ascontiguousarray(directions[:, width:]) if tailed else None
        lead = min(SHORTLIST_LEAD, width) if len(self.row_of) >= LEAD_FROM else width
        capacity = self.capacity
        shortlist = np.zeros((capacity, lead), np.float32)
        refine = np.zeros((capacity, width - lead), np.float16 if tailed else self.matrix.dtype)
        tail = np.zeros((capacity, self.dimensions - width), np.int8) if tailed else None
        scale = np.zeros(capacity, np.float32) if tailed else None
        on = directions if tailed else basis
        for start in range(0, used, 8192):  # a piece at a time, from the rows as they are kept now
            end = min(used, start + 8192)
            coordinates = self._full_rows(np.arange(start, end)) @ on
            shortlist[start:end] = coordinates[:, :lead]
            refine[start:end] = coordinates[:, lead:width]
            if tailed:
                tail[start:end], scale[start:end] = _quantised(coordinates[:, width:])
        self.basis, self.shortlist, self.refine, self.fitted_on = basis, shortlist, refine, len(self.row_of)
        if tailed:
            self.tail_basis, self.tail, self.tail_scale, self.matrix = tail_basis, tail, scale, None
            give_back_freed_memory()
        self.fit_cells()

    def _full_rows(self, rows: Any) -> Any:
        """These rows (an int array) as float32 vectors: the rows kept, widened, or made again
        from their coordinates (the int8 part's rounding in them)."""
        if self.matrix is not None:
            return _widened(self.matrix[rows])
        coordinates = np.concatenate([self.shortlist[rows], self.refine[rows].astype(np.float32),
                                      self.tail[rows].astype(np.float32) * self.tail_scale[rows, None]], axis=1)
        return coordinates @ np.concatenate([self.basis, self.tail_basis], axis=1).T

    def _narrow(self) -> None:
        """float16 rows from HALF_FROM rows on (never back: a shrunk index keeps them)."""
        if self.matrix is not None and self.matrix.dtype != np.float16 and len(self.row_of) >= _half_from():
            self.matrix = self.matrix.astype(np.float16)

    def fit_cells(self) -> None:
        """Split the rows into about sqrt(rows) cells by spherical k-means on their shortlist
        coordinates (a sample fitted, then every row given its nearest centre). Below
        CELLS_FROM rows, or without a shortlist, there are no cells and a search reads the
        shortlist whole."""
        self.centres, self.cell_of, self.cell_rows, self.cell_coords = None, None, [], []
        if self.shortlist is None or CELLS_FROM is None or len(self.row_of) < CELLS_FROM:
            return
        used = len(self.id_of)
        live = np.flatnonzero(np.fromiter((node is not None for node in self.id_of), bool, used))
        cells = max(1, int(round(len(live) ** 0.5)))
        rng = np.random.default_rng(0)  # the same rows give the same cells
        take = min(len(live), cells * CELLS_SAMPLE_PER_CELL)
        sample = self.shortlist[np.sort(rng.choice(live, take, replace=False))]
        centres = _unit(sample[rng.choice(take, cells, replace=False)])
        for _ in range(CELLS_ROUNDS):
            nearest = _nearest_centres(sample, centres)
            sums = np.zeros_like(centres)
            np.add.at(sums, nearest, sample)
            filled = np.bincount(nearest, minlength=cells) > 0
            centres[filled] = _unit(sums[filled])  # an empty cell keeps its centre
        cell_of = np.full(self.capacity, -1, np.intp)
        for start in range(0, len(live), 8192):  # in chunks: rows x cells scores at once would be large
            chunk = live[start : start + 8192]
            cell_of[chunk] = _nearest_centres(self.shortlist[chunk], centres)
        order = live[np.argsort(cell_of[live], kind="stable")]
        bounds = np.searchsorted(cell_of[order], np.arange(cells + 1))
        self.cell_rows = [order[bounds[c] : bounds[c + 1]] for c in range(cells)]
        self.cell_coords = [self.shortlist[members] for members in self.cell_rows]
        self.centres, self.cell_of = centres, cell_of

    def _place(self, row: int) -> None:
        """Put a row in its nearest cell (taking it out of the one it was in)."""
        cell = int(_nearest_centres(self.shortlist[row : row + 1], self.centres)[0])
        if int(self.cell_of[row]) >= 0:
            self._unplace(row)
        self.cell_rows[cell] = np.append(self.cell_rows[cell], row)
        self.cell_coords[cell] = np.concatenate([self.cell_coords[cell], self.shortlist[row : row + 1]])
        self.cell_of[row] = cell

    def _unplace(self, row: int) -> None:
        old = int(self.cell_of[row])
        if old >= 0:
            kept = self.cell_rows[old] != row
            self.cell_rows[old] = self.cell_rows[old][kept]
            self.cell_coords[old] = self.cell_coords[old][kept]
            self.cell_of[row] = -1

    def count_tokens(self, node_id: str, ids: Any) -> None:
        """Record the token ids of a node's text (replacing what was recorded for it); the
        node has a row (`put` first)."""
        row = self.row_of[node_id]
        self._uncount(row)
        ids = np.asarray(ids, self.token_ids.dtype)
        if len(ids):
            np.add.at(self.token_counts, ids, 1)
            self.total_tokens += len(ids)
            self.counted += 1
        end = self._tokens_used + len(ids)
        if end > len(self.token_ids):
            self._compact_tokens()
            end = self._tokens_used + len(ids)
            if end > len(self.token_ids):
                _grow_attribute(self, "token_ids", end + max(TOKENS_GROWTH_MIN, end // GROWTH_SHARE))
                give_back_freed_memory()
        self.token_ids[self._tokens_used : end] = ids
        self.token_start[row], self.token_count[row] = self._tokens_used, len(ids)
        self._tokens_used = end

    def has_tokens(self, node_id: str) -> bool:
        row = self.row_of.get(node_id)
        return row is not None and int(self.token_count[row]) >= 0

    def tokens_of(self, node_id: str) -> Any:
        """The token ids recorded for this node (a view: copy to keep), or None."""
        row = self.row_of.get(node_id)
        if row is None or int(self.token_count[row]) < 0:
            return None
        start = int(self.token_start[row])
        return self.token_ids[start : start + int(self.token_count[row])]

    def _uncount(self, row: int) -> None:
        count = int(self.token_count[row])
        if count > 0:
            start = int(self.token_start[row])
            np.subtract.at(self.token_counts, self.token_ids[start : start + count], 1)
            self.total_tokens -= count
            self.counted += 1
            self._tokens_dead += count
        self.token_count[row] = -1

    def _compact_tokens(self) -> None:
        """Close the gaps replaced and removed rows left in the token buffer, when they are
        at least half of it (so each id is moved a bounded number of times)."""
        if self._tokens_dead * 2 < self._tokens_used or not self._tokens_dead:
            return
        used = len(self.id_of)
        counts = np.maximum(self.token_count[:used], 0).astype(np.int64)
        packed = np.zeros(int(counts.sum()) + max(TOKENS_GROWTH_MIN, int(counts.sum()) // GROWTH_SHARE), self.token_ids.dtype)
        at = 0
        starts, old = self.token_start, self.token_ids
        for row in np.flatnonzero(counts).tolist():
            start, count = int(starts[row]), int(counts[row])
            packed[at : at + count] = old[start : start + count]
            starts[row] = at
            at += count
        self.token_ids, self._tokens_used, self._tokens_dead = packed, at, 0

    def store_weights(self, ids: Any, a: float) -> Any:
        """a / (a + p(token)) for these ids, p being the token's share of the store's tokens:
        a word in half the memories (a speaker's name in a chat) says little about which one."""
        if not self.total_tokens:
            return np.ones(len(ids), np.float32)
        return (a / (a + self.token_counts[ids] / self.total_tokens)).astype(np.float32)

    def __len__(self) -> int:
        return len(self.row_of)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self.row_of

    def digest_of(self, node_id: str) -> int:
        """The digest this node's vector was put with (0: none, or no such node)."""
        row = self.row_of.get(node_id)
        return 0 if row is None else int(self.marks[row])

    def put(self, node_id: str, vector: Any, digest: int | str = 0) -> None:
        """Set a node's vector (float16 from HALF_FROM rows on), with the digest of its
        text: an int, or its hex (how older files and callers gave it)."""
        self.writes += 1
        row = self.row_of.get(node_id)
        if row is None:
            row = self._free.pop() if self._free else len(self.id_of)
            if row == len(self.id_of):
                self.id_of.append(None)
            if row >= self.capacity:
                self._grow(row + 1)
            self.row_of[node_id] = row
            self.id_of[row] = node_id
            self.changes += 1
            self._narrow()
        if self.matrix is not None:
            self.matrix[row] = vector
            widened = _widened(self.matrix[row : row + 1])[0]
        else:
            widened = np.asarray(vector, np.float16).astype(np.float32)  # rounded as a kept row is
        if self.shortlist is not None:
            coordinates = widened @ self.basis
            lead = self.shortlist.shape[1]
            self.shortlist[row], self.refine[row] = coordinates[:lead], coordinates[lead:]
            if self.tail is not None:
                self.tail[row : row + 1], self.tail_scale[row : row + 1] = _quantised((widened @ self.tail_basis)[None])
            if self.centres is not None:
                self._place(row)  # a replaced row may now lie nearer another cell
        self.marks[row] = _mark(digest)

    def _grow(self, rows: int) -> None:
        """Room for at least `rows` rows, and an eighth more (GROWTH_MIN at least), in every
        array kept per row."""
        capacity = rows + max(GROWTH_MIN, rows // GROWTH_SHARE)
        for name, fill in (("matrix", 0), ("shortlist", 0), ("refine", 0), ("tail", 0), ("tail_scale", 0),
                           ("cell_of", -1), ("marks", 0), ("token_start", 0), ("token_count", -1)):
            if getattr(self, name) is not None:
                _grow_attribute(self, name, capacity, fill)
        give_back_freed_memory()  # the old arrays, where the heap keeps what is freed

    def remove(self, node_id: str) -> None:
        row = self.row_of.pop(node_id, None)
        if row is None:
            return
        self.writes += 1
        self._uncount(row)
        if self.matrix is not None:
            self.matrix[row] = 0.0
        if self.shortlist is not None:
            self.shortlist[row] = 0.0
            self.refine[row] = 0.0
        if self.tail is not None:
            self.tail[row], self.tail_scale[row] = 0, 0.0
        if self.cell_of is not None:
            self._unplace(row)
        self.id_of[row] = None
        self.marks[row] = 0
        self._free.append(row)
        self.changes += 1

    def nearest(self, query: Any, n: int) -> list[tuple[str, float]]:
        """The n nodes most similar to `query` (cosine), best first; equal cosines (copies of
        one text) in the order of their rows. Exact below SHORTLIST_FROM rows; from there, the
        n best of the shortlist's picks, by their exact cosines (from TAIL_FROM rows, by the
        cosines their coordinates give: within about 1e-4 of them)."""
        rows, scores = self._nearest_rows(query, n)
        id_of = self.id_of
        # A removed node's row (id None) is zeros, and may be among them.
        return [(id_of[row], score) for row, score in zip(rows.tolist(), scores.tolist()) if id_of[row] is not None]

    def nearest_ids(self, query: Any, n: int, skip: Any = None) -> list[str]:
        """The ids of `nearest`, without their cosines (what recall's fusion needs: the order);
        `skip`: a boolean array over rows (`rows_of`), rows never returned (other users')."""
        id_of = self.id_of
        return list(filter(None, [id_of[row] for row in self._nearest_rows(query, n, skip)[0].tolist()]))

    def rows_of(self, node_ids: Any) -> Any:
        """A boolean array over the rows, true at these nodes' rows (those that have one)."""
        found = np.fromiter(map(self.row_of.get, node_ids, itertools.repeat(-1)), np.intp)
        marked = np.zeros(max(len(self.id_of), 1), bool)
        marked[found[found >= 0]] = True
        return marked

    def scores(self, rows: Any, query: Any) -> Any:
        """The products of these rows (an int array) with `query`, as float32: exactly what the
        rows widened to float32 give; from TAIL_FROM rows, what their coordinates give."""
        if self.matrix is not None:
            return _products(self.matrix, rows, query)
        projected, out = query @ self.basis, np.empty(len(rows), np.float32)
        for start in range(0, len(rows), 8192):  # a piece at a time: the rows' coordinates are copied to be read
            part = rows[start : start + 8192]
            out[start : start + len(part)] = self.rough_scores(part, projected) + self.tail_scores(part, query)
        return out

    def tail_scores(self, rows: Any, query: Any) -> Any:
        """The products of these rows' coordinates on the directions past the shortlist's with
        `query`'s (rows kept as their coordinates only: TAIL_FROM)."""
        return (np.take(self.tail, rows, axis=0).astype(np.float32) @ (query @ self.tail_basis)) * self.tail_scale[rows]

    def rough_scores(self, rows: Any, projected: Any, lead: Any = None) -> Any:
        """The products of these rows' coordinates on every direction with `projected` (the
        question on them): `lead`, their products on the leading directions, when known."""
        width = self.shortlist.shape[1]
        if lead is None:
            lead = self.shortlist[rows] @ projected[:width]
        if self.refine.shape[1] == 0:
            return lead
        return lead + _products(self.refine, rows, projected[width:])

    def _nearest_rows(self, query: Any, n: int, skip: Any = None) -> tuple[Any, Any]:
        used = len(self.id_of)
        if n <= 0 or not self.row_of or not query.any():
            return np.zeros(0, np.intp), np.zeros(0, np.float32)
        if skip is not None:
            skip = skip[:used] if len(skip) >= used else np.pad(skip, (0, used - len(skip)))
        wide = SHORTLIST_FACTOR * n
        if self.shortlist is not None and wide < used:
            projected = query @ self.basis
            first = LEAD_FACTOR * n if self.refine.shape[1] else wide  # picked on the leading directions
            if self.centres is not None:
                rows = self._cell_picks(projected, first, skip)  # skipped rows already left out
                if not len(rows):
                    return rows, np.zeros(0, np.float32)
                lead = None
            else:
                lead = self.shortlist[:used] @ projected[: self.shortlist.shape[1]]
                if skip is not None:
                    lead[skip] = -np.inf  # never among the picks
                rows = _best(lead, first)
                lead = lead[rows]
            rough = None  # the picks' products on every shortlist direction, once known
            if len(rows) > wide:
                rough = self.rough_scores(rows, projected, lead)
                picked = _best(rough, wide)
                rows, rough = rows[picked], rough[picked]  # still in row order
            if self.matrix is not None:
                scores = self.scores(rows, query)  # the picks scored on their full rows
            else:  # ... or on their coordinates on every direction
                if rough is None:
                    rough = self.rough_scores(rows, projected, lead)
                scores = rough + self.tail_scores(rows, query)
            if skip is not None:
                scores[skip[rows]] = -np.inf  # fewer rows left than picks: a skipped one may be in
        else:
            rows = np.arange(used)
            plain = self.matrix is not None and self.matrix.dtype != np.float16
            scores = self.matrix[:used] @ query if plain else self.scores(rows, query)
            if skip is not None:
                scores[skip] = -np.inf
        n = min(n, len(rows))
        top = np.sort(np.argpartition(scores, len(rows) - n)[len(rows) - n:])  # by row, then stably by score
        top = top[np.argsort(-scores[top], kind="stable")]
        if skip is not None:
            top = top[scores[top] > -np.inf]
        return rows[top], scores[top]

    def _cell_picks(self, projected: Any, wide: int, skip: Any) -> Any:
        """The `wide` best rows by leading coordinates among the rows of the cells nearest
        `projected` (the question on the directions): CELLS_PROBED_SHARE of the cells, and more
        until they hold CELLS_CANDIDATES times the rows the shortlist picks."""
        lead = projected[: self.shortlist.shape[1]]
        order = np.argsort(-(self.centres @ lead))
        sizes = np.fromiter((len(self.cell_rows[c]) for c in order), np.intp, len(order))
        enough = int(np.searchsorted(np.cumsum(sizes), CELLS_CANDIDATES * wide)) + 1
        probed = order[: max(int(np.ceil(CELLS_PROBED_SHARE * len(order))), enough)]
        candidates = np.concatenate([self.cell_rows[c] for c in probed])
        rough = np.concatenate([self.cell_coords[c] @ lead for c in probed])  # each cell read in one pass
        if skip is not None:
            kept = ~skip[candidates]
            candidates, rough = candidates[kept], rough[kept]
        return np.sort(candidates[_best(rough, wide)])

    def rows(self) -> list[tuple[str, int]]:
        return sorted(self.row_of.items(), key=lambda pair: pair[1])


def _quantised(coordinates: Any) -> tuple[Any, Any]:
    """float32 rows as int8 (-TAIL_LEVELS..TAIL_LEVELS) and each row's scale (a zero row: 0)."""
    scale = (np.abs(coordinates).max(axis=1) / TAIL_LEVELS).astype(np.float32)
    levels = np.rint(coordinates / np.where(scale > 0, scale, 1)[:, None])
    return levels.astype(np.int8), scale


def _best(scores: Any, n: int) -> Any:
    """The positions of the n largest scores (all when there are no more), in increasing order."""
    if n >= len(scores):
        return np.arange(len(scores))
    return np.sort(np.argpartition(scores, len(scores) - n)[len(scores) - n :])


def token_type(vocabulary: int) -> Any:
    """The type token ids are kept in: two bytes each while the vocabulary fits (the shipped
    model's 30,522 tokens do), four beyond."""
    _numpy()
    return np.uint16 if vocabulary <= 1 << 16 else np.int32


def _unit(rows: Any) -> Any:
    return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)


def _nearest_centres(points: Any, centres: Any) -> Any:
    """Each point's nearest centre by direction (centres are unit): the largest p.c."""
    return np.argmax(points @ centres.T, axis=1)


def _half_from() -> int:
    return SHORTLIST_FROM if HALF_FROM is None else HALF_FROM


def _mark(digest: int | str) -> int:
    if isinstance(digest, str):
        return int(digest, 16) if digest else 0
    return int(digest)


def _grow_attribute(owner: Any, name: str, rows: int, fill: Any = 0) -> None:
    """Give the array `owner.name` `rows` rows, the new ones `fill`: a copy, whose new rows take
    memory only once written (calloc's pages). The old rows and the new are held at once for
    that moment; numpy's in-place resize was no better (it copied too, and zeroed the new rows
    at once). A view a caller keeps goes on seeing the old array."""
    array = getattr(owner, name)
    grown = np.zeros((rows,) + array.shape[1:], array.dtype)
    if fill != 0:
        grown[array.shape[0] :] = fill
    grown[: array.shape[0]] = array
    setattr(owner, name, grown)


# A float16's bits, shifted into a float32's place (sign kept, exponent and fraction moved up by
# 13), are that float16's value times 2**-112, exactly, subnormals included: so a product with a
# query scaled by 2**112 is, bit for bit, the product of the widened row. numpy's own float16 cast
# is scalar code on CPUs without AVX-512 (5 ns a value: 0.5 ms for the 600 rows a search scores),
# these four vector passes are not.
_HALF_SHIFT = 13
_HALF_KEEP = -0x70002000  # 0x8FFFE000 as int32: the sign and the moved exponent and fraction
_HALF_SCALE = 2.0**112
_scratch = threading.local()  # per thread: searches may run in several


def _products(matrix: Any, rows: Any, query: Any) -> Any:
    """These rows of `matrix` (float32 or float16) times `query`, as float32."""
    if matrix.dtype != np.float16:
        return matrix[rows] @ query
    return _half_products(matrix, rows, query)


def _half_products(matrix: Any, rows: Any, query: Any) -> Any:
    halves = matrix.view(np.int16)
    scaled = query.astype(np.float32) * np.float32(_HALF_SCALE)
    out = np.empty(len(rows), np.float32)
    width = matrix.shape[1]
    kept = getattr(_scratch, "buffers", None)
    if kept is None:
        kept = _scratch.buffers = {}
    buffers = kept.get(width)  # by width: the full rows and the refining coordinates take turns
    if buffers is None:
        buffers = kept[width] = (np.empty((HALF_CHUNK, width), np.int16), np.empty((HALF_CHUNK, width), np.int32))
    gathered, bits = buffers
    for start in range(0, len(rows), HALF_CHUNK):
        part = rows[start : start + HALF_CHUNK]
        count = len(part)
        np.take(halves, part, axis=0, out=gathered[:count], mode="clip")  # rows are in range
        np.left_shift(gathered[:count], np.int32(_HALF_SHIFT), out=bits[:count])  # sign-extended
        np.bitwise_and(bits[:count], np.int32(_HALF_KEEP), out=bits[:count])
        np.matmul(bits[:count].view(np.float32), scaled, out=out[start : start + count])
    return out


def _widened(rows: Any) -> Any:
    """float16 rows as float32 (float32 rows as they are), by the bits as `_half_products`."""
    if rows.dtype != np.float16:
        return rows
    bits = np.left_shift(rows.view(np.int16), np.int32(_HALF_SHIFT), dtype=np.int32)
    bits &= np.int32(_HALF_KEEP)
    widened = bits.view(np.float32)
    widened *= np.float32(_HALF_SCALE)
    return widened
