"""The vector index's cells (an inverted file over the shortlist's directions, issue 31): what
they find against the exact search, that they follow rows added, replaced and removed, and that
an index without them (the default, and any small one) searches as before."""

from __future__ import annotations

import numpy as np
import pytest

from soulgraph.engine import embeddings
from soulgraph.engine.embeddings import VectorIndex

DIMENSIONS = 384


# The vectors live in 64 of the 384 dimensions, as a model's do in fewer than all of them: the
# shortlist's 128 directions then hold them whole, and what is lost is the cells' doing.
SPAN = np.linalg.qr(np.random.default_rng(0).standard_normal((DIMENSIONS, 64)))[0]
CENTRES = np.random.default_rng(1).standard_normal((60, 64))


def clustered(count: int, seed: int) -> np.ndarray:
    """Unit vectors around 60 fixed centres (queries too): data with cells to find."""
    rng = np.random.default_rng(seed)
    rows = (CENTRES[rng.integers(60, size=count)] + 0.5 * rng.standard_normal((count, 64))) @ SPAN.T
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def filled(rows: np.ndarray) -> VectorIndex:
    index = VectorIndex(DIMENSIONS, capacity=len(rows))
    for number, row in enumerate(rows):
        index.put(f"n{number}", row)
    index.fit_shortlist()
    return index


def exact_ids(index: VectorIndex, query: np.ndarray, n: int) -> list[str]:
    scores = index.matrix[: len(index.id_of)] @ query
    scores[[row for row, node in enumerate(index.id_of) if node is None]] = -np.inf
    return [index.id_of[row] for row in np.argsort(-scores, kind="stable")[:n]]


def found(index: VectorIndex, query: np.ndarray, n: int) -> float:
    return len(set(index.nearest_ids(query, n)) & set(exact_ids(index, query, n))) / n


@pytest.fixture
def cells_on(monkeypatch):
    monkeypatch.setattr(embeddings, "CELLS_FROM", 1000)


def check_cells(index: VectorIndex) -> None:
    """Every node's row in exactly one cell, with its current shortlist coordinates; no free row in any."""
    rows = np.concatenate(index.cell_rows)
    assert sorted(rows.tolist()) == sorted(index.row_of.values())
    for cell, (members, coords) in enumerate(zip(index.cell_rows, index.cell_coords)):
        assert np.array_equal(index.cell_of[members], np.full(len(members), cell))
        assert np.allclose(coords, index.shortlist[members], atol=1e-6)


def test_cells_find_what_the_exact_search_finds(cells_on):
    index = filled(clustered(6000, seed=1))
    assert index.centres is not None and len(index.cell_rows) == round(6000 ** 0.5)
    queries = clustered(60, seed=2)
    assert np.mean([found(index, q, 10) for q in queries]) >= 0.99
    assert np.mean([found(index, q, 200) for q in queries]) >= 0.97
    # And the search read less than every row: the cells probed hold a part of them.
    probed = int(np.ceil(embeddings.CELLS_PROBED_SHARE * len(index.cell_rows)))
    assert probed < len(index.cell_rows)


def test_cells_follow_adds_replacements_and_removals(cells_on):
    rows = clustered(4000, seed=3)
    index = filled(rows[:3000])
    assert index.centres is not None
    extra = clustered(1000, seed=4)
    for number, row in enumerate(extra[:600]):  # added after the fit, past the matrix's capacity
        index.put(f"new{number}", row)
    for number in range(0, 600, 3):  # replaced by another text's vector
        index.put(f"n{number}", extra[600 + number // 3])
    for number in range(1, 600, 3):
        index.remove(f"n{number}")
    check_cells(index)
    for number in range(600, 700):  # the rows freed are reused
        index.put(f"reused{number}", rows[3000 + number])
    check_cells(index)
    # A replaced node is found by its new vector, a removed one never.
    assert index.nearest_ids(extra[600], 1) == ["n0"]
    removed = {f"n{number}" for number in range(1, 600, 3)}
    assert not removed & set(index.nearest_ids(rows[1], 200))
    queries = clustered(40, seed=5)
    assert np.mean([found(index, q, 10) for q in queries]) >= 0.99
    assert np.mean([found(index, q, 200) for q in queries]) >= 0.97


def test_skipped_rows_never_come_back_from_the_cells(cells_on):
    index = filled(clustered(3000, seed=6))
    query = index.matrix[5].copy()
    skip = index.rows_of([f"n{number}" for number in range(0, 3000, 2)])
    got = index.nearest_ids(query, 50, skip)
    assert got and all(int(node[1:]) % 2 for node in got)
    assert index.nearest_ids(query, 50, index.rows_of(list(index.row_of))) == []  # everything skipped


def test_small_and_default_indexes_have_no_cells(monkeypatch):
    rows = clustered(3000, seed=7)
    default = filled(rows)  # CELLS_FROM is None: never cells
    assert embeddings.CELLS_FROM is None and default.centres is None and default.shortlist is not None
    monkeypatch.setattr(embeddings, "CELLS_FROM", 5000)
    small = filled(rows)  # below CELLS_FROM
    assert small.centres is None
    query = clustered(1, seed=8)[0]
    assert small.nearest(query, 200) == default.nearest(query, 200)
    tiny = VectorIndex(DIMENSIONS)
    for number, row in enumerate(rows[:500]):
        tiny.put(f"n{number}", row)
    assert not tiny.shortlist_due() and tiny.shortlist is None  # below SHORTLIST_FROM: exact
    assert tiny.nearest_ids(query, 20) == exact_ids(tiny, query, 20)
