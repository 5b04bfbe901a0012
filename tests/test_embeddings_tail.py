"""A large vector index keeps each row as its coordinates on the principal directions (issue 31):
the shortlist's, then the rest in int8 (`embeddings.TAIL_FROM`). What must hold: it finds what
the full rows find and scores near their exact cosines, rows written and removed later follow,
a refit works from the coordinates alone, and the vectors file keeps them bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from soulgraph.engine import embeddings
from soulgraph.engine.embeddings import VectorIndex
from soulgraph.engine.graph import SoulGraph
from soulgraph.store.vectors import VectorStore, vectors_path
from tests.test_embeddings import _sentence_like_rows


@pytest.fixture
def small_tail(monkeypatch):
    """Every step of a large index at hundreds of rows: the shortlist from 256 (16 directions of
    48), its lead from 800 (6 directions), the coordinates instead of the rows from 1,000."""
    monkeypatch.setattr(embeddings, "SHORTLIST_FROM", 256)
    monkeypatch.setattr(embeddings, "SHORTLIST_DIMENSIONS", 16)
    monkeypatch.setattr(embeddings, "LEAD_FROM", 800)
    monkeypatch.setattr(embeddings, "SHORTLIST_LEAD", 6)
    monkeypatch.setattr(embeddings, "TAIL_FROM", 1000)


def _index(rows: np.ndarray, prefix: str = "m") -> VectorIndex:
    index = VectorIndex(rows.shape[1])
    for n, row in enumerate(rows):
        index.put(f"{prefix}{n:04d}", row)
    index.fit_shortlist()
    return index


def _exact(index_rows: dict[str, np.ndarray], query: np.ndarray, n: int) -> list[str]:
    ids = list(index_rows)
    scores = np.stack([index_rows[i] for i in ids]) @ query
    return [ids[k] for k in np.argsort(-scores, kind="stable")[:n]]


def _queries(rows: np.ndarray, count: int = 50, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    queries = rows[rng.integers(0, len(rows), count)] + 0.2 * rng.standard_normal((count, rows.shape[1])).astype(np.float32)
    return (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32)


def test_a_large_index_keeps_coordinates_not_rows_and_finds_what_the_rows_find(small_tail, monkeypatch):
    rows = _sentence_like_rows(1200, 48, seed=5)
    kept = {f"m{n:04d}": row for n, row in enumerate(rows.astype(np.float16).astype(np.float32))}  # as a store rounds them
    index = _index(rows)
    assert index.matrix is None and index.tail.dtype == np.int8 and index.tail.shape[1] == 48 - 16
    assert index.tail_basis.shape == (48, 32) and index.refine.shape[1] == 10
    monkeypatch.setattr(embeddings, "TAIL_FROM", None)
    full = _index(rows)  # the same index with its full rows
    assert full.matrix is not None and full.tail is None
    held = lambda ix: sum(a.nbytes for a in (ix.matrix, ix.shortlist, ix.refine, ix.tail, ix.tail_scale) if a is not None)  # noqa: E731
    assert held(index) < 0.6 * held(full)

    shared = []
    for query in _queries(rows):
        found = index.nearest(query, 20)
        assert [i for i, _ in found] == index.nearest_ids(query, 20)
        # Each answer's cosine is its row's, within the int8 part's rounding.
        assert all(abs(score - float(kept[i] @ query)) < 2e-3 for i, score in found)
        shared.append(len({i for i, _ in found} & {i for i, _ in full.nearest(query, 20)}) / 20)
        some = np.array([3, 77, 640, 1199])
        assert np.allclose(index.scores(some, query), np.stack([kept[f"m{r:04d}"] for r in some]) @ query, atol=2e-3)
    assert np.mean(shared) >= 0.99
    # A whole scan (more rows asked for than the shortlist would pick) ranks every row the same way.
    query = _queries(rows, 1, seed=9)[0]
    assert index.nearest_ids(query, 1200)[:10] == _exact(kept, query, 10)


def test_rows_written_and_removed_later_follow_and_a_refit_works_from_the_coordinates(small_tail):
    rows = _sentence_like_rows(1100, 48, seed=6)
    index = _index(rows)
    assert index.matrix is None
    index.remove("m0010")
    index.put("late", rows[10])
    index.put("m0020", rows[30])  # a row's vector replaced
    assert index.nearest(rows[10], 1)[0][0] == "late"
    assert {i for i, _ in index.nearest(rows[30], 2)} == {"m0020", "m0030"}
    assert all(i != "m0010" for i in index.nearest_ids(rows[10], 1100))

    more = _sentence_like_rows(1200, 48, seed=12)
    for n, row in enumerate(more):
        index.put(f"x{n:04d}", row)
    assert index.shortlist_due()
    index.fit_shortlist()  # from the coordinates: the rows are gone
    assert index.matrix is None and index.fitted_on == len(index) and not index.shortlist_due()
    assert index.tail.shape[0] == index.shortlist.shape[0] == index.capacity == len(index.token_count)
    kept = {node: (rows[30] if node == "m0020" else rows[10] if node == "late" else
                   rows[int(node[1:])] if node[0] == "m" else more[int(node[1:])]).astype(np.float16).astype(np.float32)
            for node in index.row_of}
    shared = [len(set(index.nearest_ids(q, 20)) & set(_exact(kept, q, 20))) / 20 for q in _queries(np.concatenate([rows, more]))]
    assert np.mean(shared) >= 0.98
    row = index.row_of["x0005"]
    index.remove("x0005")  # its coordinates zeros, all of them: a freed row scores 0 until reused
    assert not index.tail[row].any() and index.tail_scale[row] == 0 and not index.shortlist[row].any()
    assert "x0005" not in index.nearest_ids(more[5], 50)


def _graph_with(count: int) -> SoulGraph:
    graph = SoulGraph(clock=lambda: 1.7e9)
    for n in range(count):
        graph.add(f"memory {n}: a trip to lake {n % 7} with {('Ada', 'Bo', 'Cy')[n % 3]} in week {n % 11}")
    return graph


QUESTIONS = ("Which lake did Ada visit?", "what happened in week 4", "a trip with Bo")


def test_the_vectors_file_keeps_the_coordinates_bit_for_bit(tmp_path, monkeypatch):
    monkeypatch.setattr(embeddings, "SHORTLIST_FROM", 8)
    monkeypatch.setattr(embeddings, "TAIL_FROM", 32)
    path = vectors_path(tmp_path / "soul.json")
    graph = _graph_with(60)
    store = VectorStore(path, background=False)
    assert store.ready(graph) and store.index.matrix is None and store.index.tail is not None
    store.save()
    with np.load(path) as data:
        assert "matrix" not in data.files and data["tail"].dtype == np.int8 and int(data["fitted_on"]) == 60
    payload = store._payload(store.model, store.index, shared=True)
    assert np.shares_memory(payload["tail"], store.index.tail)  # a save reads the coordinates in place
    again = VectorStore(path, background=False)
    assert again.ready(graph) and again.loaded_from == "file" and again.index.matrix is None
    for name in ("basis", "tail_basis"):
        assert np.array_equal(getattr(again.index, name), getattr(store.index, name))
    for name in ("shortlist", "refine", "tail", "tail_scale"):
        assert np.array_equal(getattr(again.index, name)[:60], getattr(store.index, name)[:60])
    assert again.index.fitted_on == 60 and not again.index.shortlist_due()  # not fitted again at the load
    for question in QUESTIONS:
        assert again.nearest(question, 10) == store.nearest(question, 10)


def test_a_file_of_rows_is_read_into_coordinates_and_a_broken_one_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setattr(embeddings, "SHORTLIST_FROM", 8)
    path = vectors_path(tmp_path / "soul.json")
    graph = _graph_with(60)
    rows_store = VectorStore(path, background=False)  # TAIL_FROM as shipped: 60 rows keep their rows
    assert rows_store.ready(graph) and rows_store.index.matrix is not None
    rows_store.save()
    monkeypatch.setattr(embeddings, "TAIL_FROM", 32)
    moved = VectorStore(path, background=False)
    assert moved.ready(graph) and moved.loaded_from == "file" and moved.index.matrix is None
    for question in QUESTIONS:
        exact = [i for i, _ in rows_store.nearest(question, 5)]
        assert len(set(exact) & {i for i, _ in moved.nearest(question, 5)}) >= 4
    with np.load(path) as data:  # written once as coordinates: the next load reads them as they are
        assert "matrix" not in data.files and "tail" in data.files
        arrays = {name: data[name] for name in data.files}
    arrays["tail"] = arrays["tail"][:-1]  # one row short
    with open(path, "wb") as handle:  # (a path would get .npz added)
        np.savez(handle, **arrays)
    broken = VectorStore(path, background=False)
    assert broken.ready(graph) and broken.loaded_from == "rebuilt (the file's arrays disagree), 60 embedded"
    assert broken.index.matrix is None and len(broken.index) == 60  # embedded again, then fitted
