"""Vectors for memories: a static embedding model and an index of one vector per node.

The model is a table with one row per WordPiece token, distilled from all-MiniLM-L6-v2
(bench/distill_static.py, docs/embeddings.md): a text's vector is the mean of its tokens'
rows, normalised, so embedding costs a tokenisation and a gather (about 0.1 ms), with no
neural network at run time. Its files are a package of their own (soulgraph-model, built from
runtime/model/, 12 MB), and it needs numpy (the `embed` extra); without either, `available()`
is False and search is lexical.

`VectorIndex` holds the vectors of a graph's nodes as rows of one float32 matrix. A search in
a small index is one matrix-vector product. From `SHORTLIST_FROM` rows on it goes in two steps:
the rows' coordinates on the store's own `SHORTLIST_DIMENSIONS` principal directions (the
`shortlist`, a third of a row, holding nearly all of what the rows' dot products hold) pick
`SHORTLIST_FACTOR` times the rows asked for, and those are scored on their full rows. Reading
every full row, 1.5 kB each, was what a search cost at that size; docs/embeddings.md measures
what the shortlist misses. From `CELLS_FROM` rows on (off unless set: it did not pay, see there),
the fit also splits the rows into about sqrt(rows) cells (k-means on the shortlist coordinates),
and a search reads only the shortlist rows of the cells whose centres lie nearest the question
(an inverted file), then goes on as above. The index is pure: store/vectors.py persists it
beside the soul file (not the cells: they would be fitted again with the directions at a load).
"""

from __future__ import annotations

import functools
import importlib.util
import itertools
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

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
    """Node id -> unit vector, as rows of one matrix that grows by doubling.

    A removed node's row is zeroed and reused, so ids and rows never need renumbering. Each
    row remembers a digest of the text it was made from (`digest`), so a caller can tell a
    vector that no longer matches its node's text (store/vectors.py).

    The shortlist (see the module text) is fitted by `fit_shortlist`, which the owner calls
    when `shortlist_due()`: at `SHORTLIST_FROM` rows and again each time the rows double, so
    the directions follow what the store holds. Between fits, rows added are projected on
    the directions already fitted; the full rows are kept, for the next fit and the file."""

    def __init__(self, dimensions: int, capacity: int = 64, vocabulary: int = 0):
        _numpy()
        self.dimensions = dimensions
        self.matrix = np.zeros((max(capacity, 1), dimensions), np.float32)
        self.row_of: dict[str, int] = {}
        self.id_of: list[str | None] = []
        self.digest: dict[str, str] = {}
        self._free: list[int] = []
        # How often each token occurs in the memories indexed (their ids kept per node, so a
        # removal is exact): what makes a word common in this store (`store_weights`).
        self.tokens: dict[str, Any] = {}
        self.token_counts = np.zeros(vocabulary, np.int64)
        self.total_tokens = 0
        self.basis: Any = None  # dimensions x SHORTLIST_DIMENSIONS: the principal directions
        self.shortlist: Any = None  # each row's coordinates on them (rows as `matrix`)
        self._fitted_on = 0  # rows when the directions were fitted
        self.centres: Any = None  # cells x SHORTLIST_DIMENSIONS: the cells' centres, unit (None: no cells)
        self.cell_of: Any = None  # each row's cell, -1 for a free row (rows as `matrix`)
        self.cell_rows: list[Any] = []  # each cell's rows, as intp arrays
        self.cell_coords: list[Any] = []  # ... and their shortlist coordinates, contiguous (read in one pass)
        self.changes = 0  # bumped when a row gets or loses its node: what maps ids to rows starts again

    def shortlist_due(self) -> bool:
        """Time to fit the shortlist's directions: first at SHORTLIST_FROM rows, then at each doubling."""
        return len(self.row_of) >= max(SHORTLIST_FROM, 2 * self._fitted_on)

    def fit_shortlist(self) -> None:
        """Fit the directions that keep the most of the rows' dot products (the eigenvectors
        of the rows' uncentred second moment, largest first), and project every row on them.
        Tens of milliseconds at 10,000 rows; the owner runs it in the background at a load."""
        used = len(self.id_of)
        if used == 0 or self.dimensions <= SHORTLIST_DIMENSIONS:
            return
        rows = self.matrix[:used]
        sample = rows[:: max(1, used // SHORTLIST_SAMPLE)]
        moment = (sample.T @ sample).astype(np.float64)
        _, directions = np.linalg.eigh(moment)  # ascending eigenvalues
        basis = np.ascontiguousarray(directions[:, ::-1][:, :SHORTLIST_DIMENSIONS], dtype=np.float32)
        shortlist = np.zeros((self.matrix.shape[0], SHORTLIST_DIMENSIONS), np.float32)
        shortlist[:used] = rows @ basis
        self.basis, self.shortlist, self._fitted_on = basis, shortlist, len(self.row_of)
        self.fit_cells()

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
        cell_of = np.full(self.matrix.shape[0], -1, np.intp)
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
        """Record the token ids of a node's text (replacing what was recorded for it)."""
        self._uncount(node_id)
        if len(ids):
            np.add.at(self.token_counts, ids, 1)
            self.total_tokens += len(ids)
        self.tokens[node_id] = ids

    def _uncount(self, node_id: str) -> None:
        old = self.tokens.pop(node_id, None)
        if old is not None and len(old):
            np.subtract.at(self.token_counts, old, 1)
            self.total_tokens -= len(old)

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

    def put(self, node_id: str, vector: Any, digest: str = "") -> None:
        row = self.row_of.get(node_id)
        if row is None:
            row = self._free.pop() if self._free else len(self.id_of)
            if row == len(self.id_of):
                self.id_of.append(None)
            if row >= self.matrix.shape[0]:
                self.matrix = _doubled(self.matrix)
                if self.shortlist is not None:
                    self.shortlist = _doubled(self.shortlist)
                if self.cell_of is not None:
                    grown = np.full(self.matrix.shape[0], -1, np.intp)
                    grown[: len(self.cell_of)] = self.cell_of
                    self.cell_of = grown
            self.row_of[node_id] = row
            self.id_of[row] = node_id
            self.changes += 1
        self.matrix[row] = vector
        if self.shortlist is not None:
            self.shortlist[row] = self.matrix[row] @ self.basis
            if self.centres is not None:
                self._place(row)  # a replaced row may now lie nearer another cell
        self.digest[node_id] = digest

    def remove(self, node_id: str) -> None:
        self._uncount(node_id)
        row = self.row_of.pop(node_id, None)
        if row is None:
            return
        self.matrix[row] = 0.0
        if self.shortlist is not None:
            self.shortlist[row] = 0.0
        if self.cell_of is not None:
            self._unplace(row)
        self.id_of[row] = None
        self.digest.pop(node_id, None)
        self._free.append(row)
        self.changes += 1

    def nearest(self, query: Any, n: int) -> list[tuple[str, float]]:
        """The n nodes most similar to `query` (cosine), best first; equal cosines (copies of
        one text) in the order of their rows. Exact below SHORTLIST_FROM rows; from there, the
        n best of the shortlist's picks, by their exact cosines."""
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

    def _nearest_rows(self, query: Any, n: int, skip: Any = None) -> tuple[Any, Any]:
        used = len(self.id_of)
        if n <= 0 or not self.row_of or not query.any():
            return np.zeros(0, np.intp), np.zeros(0, np.float32)
        if skip is not None:
            skip = skip[:used] if len(skip) >= used else np.pad(skip, (0, used - len(skip)))
        wide = SHORTLIST_FACTOR * n
        if self.centres is not None and wide < used:
            rows = self._cell_picks(query @ self.basis, wide, skip)  # skipped rows already left out
            if not len(rows):
                return rows, np.zeros(0, np.float32)
            scores = self.matrix[rows] @ query
        elif self.shortlist is not None and wide < used:
            rough = self.shortlist[:used] @ (query @ self.basis)
            if skip is not None:
                rough[skip] = -np.inf  # never among the picks
            rows = np.sort(np.argpartition(rough, used - wide)[used - wide:])
            scores = self.matrix[rows] @ query  # the picks scored on their full rows
            if skip is not None:
                scores[skip[rows]] = -np.inf  # fewer rows left than picks: a skipped one may be in
        else:
            rows, scores = np.arange(used), self.matrix[:used] @ query
            if skip is not None:
                scores[skip] = -np.inf
        n = min(n, len(rows))
        top = np.sort(np.argpartition(scores, len(rows) - n)[len(rows) - n:])  # by row, then stably by score
        top = top[np.argsort(-scores[top], kind="stable")]
        if skip is not None:
            top = top[scores[top] > -np.inf]
        return rows[top], scores[top]

    def _cell_picks(self, projected: Any, wide: int, skip: Any) -> Any:
        """The `wide` best rows by shortlist coordinates among the rows of the cells nearest
        `projected` (the question on the directions): CELLS_PROBED_SHARE of the cells, and
        more until they hold CELLS_CANDIDATES * wide rows."""
        order = np.argsort(-(self.centres @ projected))
        sizes = np.fromiter((len(self.cell_rows[c]) for c in order), np.intp, len(order))
        enough = int(np.searchsorted(np.cumsum(sizes), CELLS_CANDIDATES * wide)) + 1
        probed = order[: max(int(np.ceil(CELLS_PROBED_SHARE * len(order))), enough)]
        candidates = np.concatenate([self.cell_rows[c] for c in probed])
        rough = np.concatenate([self.cell_coords[c] @ projected for c in probed])  # each cell read in one pass
        if skip is not None:
            kept = ~skip[candidates]
            candidates, rough = candidates[kept], rough[kept]
        if len(candidates) > wide:
            candidates = candidates[np.argpartition(rough, len(candidates) - wide)[len(candidates) - wide :]]
        return np.sort(candidates)

    def rows(self) -> list[tuple[str, int]]:
        return sorted(self.row_of.items(), key=lambda pair: pair[1])


def _unit(rows: Any) -> Any:
    return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)


def _nearest_centres(points: Any, centres: Any) -> Any:
    """Each point's nearest centre by direction (centres are unit): the largest p.c."""
    return np.argmax(points @ centres.T, axis=1)


def _doubled(matrix: Any) -> Any:
    grown = np.zeros((matrix.shape[0] * 2, matrix.shape[1]), matrix.dtype)
    grown[: matrix.shape[0]] = matrix
    return grown
