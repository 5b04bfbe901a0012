"""The vectors (issue 15): WordPiece, the static model, the vector index and its file, and what
search does with them: neighbour context, time-aware questions, vectors fused in for questions.

The MCP tests drive the real server through the SDK's client; the Hermes provider's recall is
covered in test_hermes_provider.py's own tests (it passes the same VectorStore)."""

from __future__ import annotations

import asyncio
import threading
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from soulgraph.engine import embeddings, hybrid, when
from soulgraph.engine.embeddings import StaticModel, VectorIndex
from soulgraph.engine.graph import SoulGraph
from soulgraph.engine.wordpiece import WordPiece
from soulgraph.hermes import memory_service
from soulgraph.memory import lifecycle, ranking
from soulgraph.store import SoulFile
from soulgraph.store import vectors as vectors_module
from soulgraph.store.vectors import STORE_WEIGHT_A, VectorStore, vectors_path
from tests.mcp_session import with_server

MODEL = embeddings.default_model()


def day(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()


# ---------------------------------------------------------------- WordPiece
def test_wordpiece_gives_berts_ids():
    encode = MODEL.tokenizer.encode
    # Ids of bert-base-uncased's vocabulary: [UNK] = 100, "hello" = 7592, "world" = 2088.
    assert encode("Hello, world!") == [7592, 1010, 2088, 999]
    assert encode("  HELLO\tworld ") == [7592, 2088]
    assert encode("Café") == encode("cafe")  # accents stripped, as BERT uncased does
    assert encode("hiking") == [13039]
    assert encode("unhappiness")[0] != MODEL.tokenizer.unknown and len(encode("unhappiness")) > 1
    assert encode("x" * 101) == [100]  # a word longer than BERT's limit is [UNK]
    assert encode("") == [] and encode("\u200b\x00") == []


def test_wordpiece_refuses_a_vocabulary_without_unk():
    with pytest.raises(ValueError, match="UNK"):
        WordPiece(["a", "b"])


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_wordpiece_ids_are_in_the_vocabulary(text):
    ids = MODEL.tokenizer.encode(text)
    assert all(0 <= i < len(MODEL.tokenizer) for i in ids)


# ---------------------------------------------------------------- the model
def test_embedding_is_a_unit_vector_and_meaning_outweighs_words():
    vector = MODEL.embed("I go hiking in the mountains every weekend")
    assert vector.shape == (MODEL.dimensions,) and abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5
    question = MODEL.embed("What outdoor activities does she enjoy?")
    related = float(question @ MODEL.embed("I go hiking in the mountains every weekend"))
    unrelated = float(question @ MODEL.embed("The quarterly invoice is due to accounting on Friday"))
    assert related > unrelated + 0.05  # static mean vectors share a common direction: margins are small
    assert not MODEL.embed("").any()


def test_the_model_stamp_names_this_build():
    assert MODEL.version.startswith("minilm-static-384-") and MODEL.dimensions == 384


# ---------------------------------------------------------------- the index
def test_vector_index_grows_reuses_rows_and_ranks_by_cosine():
    index = VectorIndex(3, capacity=1)
    for node_id, vector in (("a", [1, 0, 0]), ("b", [0, 1, 0]), ("c", [0.8, 0.6, 0])):
        index.put(node_id, np.array(vector, np.float32), node_id)
    assert index.matrix.shape[0] >= 3
    assert [i for i, _ in index.nearest(np.array([1, 0, 0], np.float32), 2)] == ["a", "c"]
    index.remove("a")
    assert "a" not in index and [i for i, _ in index.nearest(np.array([1, 0, 0], np.float32), 5)][0] == "c"
    index.put("d", np.array([0, 0, 1], np.float32))
    assert index.row_of["d"] == 0  # the freed row
    assert index.nearest(np.zeros(3, np.float32), 3) == []


def test_nearest_ids_are_nearests_ids_in_its_order_removed_rows_left_out(monkeypatch):
    """Recall fuses the ids alone (`nearest_ids`): the same ones, in the same order, as `nearest`,
    with or without the shortlist, a freed row (zeros, which a question may still reach) never
    among them."""
    rows = _sentence_like_rows(600, 32)
    for shortlist_from in (10_000, 256):
        monkeypatch.setattr(embeddings, "SHORTLIST_FROM", shortlist_from)
        monkeypatch.setattr(embeddings, "SHORTLIST_DIMENSIONS", 16)
        index = VectorIndex(32, vocabulary=1)
        for number, row in enumerate(rows):
            index.put(f"m{number:04d}", row)
        for number in range(0, 600, 7):
            index.remove(f"m{number:04d}")
        if index.shortlist_due():
            index.fit_shortlist()
        for query in rows[:20]:
            query = -query  # far from its own row: zero rows score 0, above every negative cosine
            assert index.nearest_ids(query, 50) == [i for i, _ in index.nearest(query, 50)]
            assert None not in index.nearest_ids(query, 600) and len(index.nearest_ids(query, 600)) <= 600 - 86


def test_a_filtered_look_goes_on_past_freed_rows_until_the_index_has_no_rows_left():
    """A filter that keeps only memories far from the question is answered in full: the freed
    rows (zeros, between the near and the far) shorten a look, but the store looks further
    until every row was seen, not until a look came back short."""
    words = ["[UNK]", "north", "south", "east"]
    table = np.array([[0, 0, 0], [127, 0, 0], [-127, 0, 0], [0, 127, 0]], np.int8)
    model = StaticModel(words, table, np.ones(4, np.float32), "compass-test")
    graph = _graph_with(["north"] * 12 + ["south"] * 3 + ["east"] * 2)
    store = VectorStore(None, model_loader=lambda: model, background=False)
    assert store.ready(graph)
    for number in range(4, 13):  # nine of the twelve north memories removed: their rows freed
        graph.remove(f"n{number}")
    assert store.ready(graph) and len(store.index.id_of) == 17 and len(store.index) == 8
    south = {"n13", "n14", "n15"}
    # Cosines: the 3 north rows 1, the 9 freed rows and the 2 east ones 0, the 3 south ones -1. A
    # first look (2 rows) keeps none of them; the second (8) comes back short (freed rows dropped).
    assert store.nearest_ids("north", 2, south.__contains__) == ["n13", "n14"]
    assert [i for i, _ in store.nearest("north", 5, south.__contains__)] == ["n13", "n14", "n15"]
    assert store.nearest_ids("north", 5, lambda i: False) == []  # nothing to keep: ends at the last row


def _sentence_like_rows(rows: int, dimensions: int, seed: int = 7) -> np.ndarray:
    """Unit vectors whose spread lies mostly in a few directions (a decaying spectrum, turned
    at random), as sentence vectors' does: what the shortlist keeps."""
    rng = np.random.default_rng(seed)
    spread = rng.standard_normal((rows, dimensions)) * 0.8 ** np.arange(dimensions)
    turn, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((dimensions, dimensions)))
    vectors = spread @ turn
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture
def small_shortlist(monkeypatch):
    """The shortlist from 256 rows, of 16 dimensions: its tests hold hundreds of rows, not thousands."""
    monkeypatch.setattr(embeddings, "SHORTLIST_FROM", 256)
    monkeypatch.setattr(embeddings, "SHORTLIST_DIMENSIONS", 16)


def _put(index: VectorIndex, rows: np.ndarray, start: int = 0) -> VectorIndex:
    """Rows under the ids m0000, m0001, … from `start` on."""
    for n, row in enumerate(rows, start):
        index.put(f"m{n:04d}", row)
    return index


def test_a_large_index_is_searched_on_its_shortlist_and_a_small_one_exactly(small_shortlist):
    rows = _sentence_like_rows(600, 48)
    index = VectorIndex(48)
    _put(index, rows[:255])
    assert not index.shortlist_due() and index.shortlist is None  # small: every search is exact
    exact = lambda query, n: [f"m{row:04d}" for row in np.argsort(-(rows[: len(index)] @ query), kind="stable")[:n]]  # noqa: E731
    assert [i for i, _ in index.nearest(rows[3], 20)] == exact(rows[3], 20)

    _put(index, rows[255:], 255)
    assert index.shortlist_due()
    index.fit_shortlist()
    assert index.shortlist.shape[1] == 16 and not index.shortlist_due()
    # The shortlist's nearest are nearly the exact ones: over 50 questions, 90 % of the exact top 20.
    rng = np.random.default_rng(1)
    shared = []
    for query in rows[rng.integers(0, 600, 50)] + 0.2 * rng.standard_normal((50, 48)).astype(np.float32):
        query = query / np.linalg.norm(query)
        shared.append(len({i for i, _ in index.nearest(query, 20)} & set(exact(query, 20))) / 20)
    assert np.mean(shared) >= 0.9
    # A row written after the fit is projected on the same directions; a removed one is never found.
    index.put("late", rows[10])
    assert index.nearest(rows[10], 2)[0][0] in {"late", "m0010"}
    index.remove("m0010")
    index.remove("late")
    assert all(i not in {"m0010", "late"} for i, _ in index.nearest(rows[10], 600))
    # It is fitted again when the rows have doubled since.
    for n, row in enumerate(_sentence_like_rows(602, 48, seed=8)):
        index.put(f"x{n:04d}", row)
    assert index.shortlist_due()


def test_the_leading_directions_pick_first_and_the_others_refine_only_those_picks(small_shortlist, monkeypatch):
    """The shortlist's coordinates in two parts: the leading directions (float32, read for every
    row) and the others (as compact as the rows, read for the lead's picks only). Together they
    are the coordinates on every direction; a search through both steps finds what one pass over
    all the coordinates finds; a row written or removed later is in both parts."""
    monkeypatch.setattr(embeddings, "LEAD_FROM", 800)
    monkeypatch.setattr(embeddings, "SHORTLIST_LEAD", 6)
    monkeypatch.setattr(embeddings, "LEAD_FACTOR", 6)
    rows = _sentence_like_rows(900, 48, seed=11)
    index = _put(VectorIndex(48), rows[:700])
    index.fit_shortlist()  # below LEAD_FROM: every coordinate read for every row, float32
    assert index.shortlist.shape[1] == 16 and index.refine.shape[1] == 0
    index = _put(VectorIndex(48), rows)
    index.fit_shortlist()
    assert index.shortlist.shape == (index.matrix.shape[0], 6) and index.shortlist.dtype == np.float32
    assert index.refine.shape == (index.matrix.shape[0], 10) and index.refine.dtype == np.float16
    widened = index.matrix[:900].astype(np.float32)
    coordinates = widened @ index.basis
    assert np.allclose(index.shortlist[:900], coordinates[:, :6], atol=1e-5)
    assert np.allclose(index.refine[:900].astype(np.float32), coordinates[:, 6:], atol=2e-3)  # float16
    query = rows[42]
    projected = query @ index.basis
    some = np.array([3, 42, 500, 899])
    assert np.allclose(index.rough_scores(some, projected),
                       index.shortlist[some] @ projected[:6] + index.refine[some].astype(np.float32) @ projected[6:],
                       atol=1e-5)
    # One pass over all 16 coordinates of every row, then the full rows, against the two steps.
    def one_pass(query, n):
        rough = index.shortlist[:900] @ (query @ index.basis)[:6] + index.refine[:900].astype(np.float32) @ (query @ index.basis)[6:]
        picks = np.sort(np.argsort(-rough, kind="stable")[: embeddings.SHORTLIST_FACTOR * n])
        return {f"m{row:04d}" for row in picks[np.argsort(-(widened[picks] @ query), kind="stable")[:n]]}
    rng = np.random.default_rng(4)
    agree = []
    for query in rows[rng.integers(0, 900, 40)] + 0.2 * rng.standard_normal((40, 48)).astype(np.float32):
        query = (query / np.linalg.norm(query)).astype(np.float32)
        agree.append(len({i for i, _ in index.nearest(query, 20)} & one_pass(query, 20)) / 20)
    assert np.mean(agree) >= 0.95
    index.put("late", -rows[0])
    row = index.row_of["late"]
    assert np.allclose(index.shortlist[row], (-widened[0] @ index.basis)[:6], atol=1e-3) and index.refine[row].any()
    assert index.nearest(-rows[0], 1)[0][0] == "late"
    index.remove("late")
    assert not index.shortlist[row].any() and not index.refine[row].any()


def test_skipped_rows_are_never_returned_and_an_exact_search_ranks_the_rest_as_before(small_shortlist):
    """Other users' rows left out of the search itself (`skip`): below the shortlist the answer
    is the unskipped ranking with those rows taken out; on the shortlist, n rows, none skipped;
    and a skip made before rows were added or removed still holds for the rows it named."""
    rows = _sentence_like_rows(600, 48, seed=3)
    index = VectorIndex(48)
    _put(index, rows[:200])
    hidden = {f"m{n:04d}" for n in range(0, 200, 3)}
    skip = index.rows_of(hidden | {"not-a-node"})
    for query in rows[[1, 5, 90]]:
        every = index.nearest_ids(query, 200)
        assert index.nearest_ids(query, 20, skip) == [i for i in every if i not in hidden][:20]
    _put(index, rows[200:], 200)
    index.fit_shortlist()
    for query in rows[[2, 7, 300, 555]]:
        found = index.nearest_ids(query, 30, skip)  # a skip shorter than the rows: the new ones count
        assert len(found) == 30 and not set(found) & hidden
    everyone = index.rows_of(set(index.row_of))
    assert index.nearest_ids(rows[4], 10, everyone) == []


def test_the_vector_store_fits_the_shortlist_at_a_load_and_as_the_store_grows(tmp_path, monkeypatch):
    from soulgraph.store import vectors

    monkeypatch.setattr(embeddings, "SHORTLIST_FROM", 8)
    path = vectors_path(tmp_path / "soul.json")
    graph = _graph_with([f"memory number {n} about hiking trip {n % 3}" for n in range(7)])
    store = VectorStore(path, background=False)
    assert store.ready(graph) and store.index.shortlist is None  # 7 rows: exact
    graph.add("one more memory, about a puppy")
    assert store.ready(graph) and store.index.shortlist is not None  # the eighth: fitted in the sync
    store.save()
    again = VectorStore(path, background=False)
    assert again.ready(graph) and again.loaded_from == "file" and again.index.shortlist is not None  # at the load
    assert again.nearest("What about the puppy?", 1)[0][0] == "n8"
    # Past _FIT_INLINE rows a due refit waits for the next load (in the background), not a search.
    monkeypatch.setattr(vectors, "_FIT_INLINE", 10)
    fitted = again.index.shortlist
    for n in range(9):
        graph.add(f"another memory, number {n}")
    assert again.ready(graph) and again.index.shortlist_due() and again.index.shortlist is fitted
    loaded = VectorStore(path, background=False)
    assert loaded.ready(graph) and not loaded.index.shortlist_due()  # a load fits it again


# ---------------------------------------------------------------- the index's memory (issue 31)
def test_a_shortlisted_index_keeps_its_rows_as_float16_and_scores_them_as_widened(small_shortlist, monkeypatch):
    """Below SHORTLIST_FROM rows float32 (the whole matrix is multiplied at each search); from
    there float16, what the file holds, so a row in memory is the row a reload gives; the rows a
    search scores in full are widened exactly (bit for bit as numpy's own cast)."""
    rows = _sentence_like_rows(600, 48, seed=5)
    index = VectorIndex(48)
    _put(index, rows[:255])
    assert index.matrix.dtype == np.float32
    _put(index, rows[255:], 255)
    index.fit_shortlist()
    assert index.matrix.dtype == np.float16 and index.shortlist.dtype == np.float32
    assert np.array_equal(index.matrix[:600], rows.astype(np.float16))  # as the file rounds them
    for query in rows[[0, 17, 333]]:
        found = index.nearest(query, 25)
        wanted = index.matrix[[index.row_of[i] for i, _ in found]].astype(np.float32) @ query
        assert np.allclose([score for _, score in found], wanted, rtol=0, atol=1e-6)  # BLAS may sum in another order
    # The widening itself: signs, zeros, subnormals and the largest values (bit for bit when the
    # rows are multiplied at once; in pieces of HALF_CHUNK, BLAS may sum in another order).
    odd = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    odd = odd[np.isfinite(odd)]
    odd = odd[: len(odd) // 48 * 48].reshape(-1, 48)
    query = np.random.default_rng(2).standard_normal(48).astype(np.float32) * 1e-3
    picked = np.arange(0, len(odd), 3)
    assert np.array_equal(embeddings._half_products(odd, picked, query), odd[picked].astype(np.float32) @ query)
    monkeypatch.setattr(embeddings, "HALF_CHUNK", 7)
    assert np.allclose(embeddings._half_products(odd, picked, query), odd[picked].astype(np.float32) @ query,
                       rtol=1e-5, atol=0)
    assert np.array_equal(embeddings._widened(odd), odd.astype(np.float32))
    # A row written now is rounded the same way; a shortlist fitted on the float16 rows is what
    # fitting on their float32 values gives.
    index.put("late", rows[3])
    assert np.array_equal(index.matrix[index.row_of["late"]], rows[3].astype(np.float16))
    monkeypatch.setattr(embeddings, "SHORTLIST_FROM", 10**6)  # kept float32
    again = VectorIndex(48)
    for n, row in enumerate(rows.astype(np.float16).astype(np.float32)):
        again.put(f"m{n:04d}", row)
    again.fit_shortlist()
    assert again.matrix.dtype == np.float32
    index.remove("late")
    index.fit_shortlist()
    assert np.allclose(np.abs(index.basis), np.abs(again.basis), atol=1e-4)


def test_a_loaded_index_grows_by_an_eighth_not_by_doubling():
    """Growth is bounded: 100 rows past a loaded 5,000 make room for an eighth more, not 5,000."""
    rng = np.random.default_rng(4)
    rows = rng.standard_normal((5000, 192)).astype(np.float16)
    ids = [f"m{n}" for n in range(5000)]
    index = VectorIndex.from_rows(ids, np.arange(1, 5001, dtype=np.uint64), rows, vocabulary=50,
                                  tokens=np.tile(np.arange(5, dtype=np.int32), 5000), ends=np.arange(5, 25001, 5))
    assert index.matrix.dtype == np.float16 and index.matrix.shape[0] == 5000 + embeddings.GROWTH_MIN
    assert index.digest_of("m7") == 8 and index.tokens_of("m7").tolist() == [0, 1, 2, 3, 4]
    assert index.total_tokens == 25000 and int(index.token_counts[3]) == 5000
    index.fit_shortlist()
    for n in range(100):
        index.put(f"new{n}", rng.standard_normal(192).astype(np.float32), n + 1)
        index.count_tokens(f"new{n}", [7, 8])
    assert len(index) == 5100 and index.matrix.shape[0] < 1.25 * 5100
    assert index.shortlist.shape[0] == index.matrix.shape[0] == len(index.marks) == len(index.token_count)
    assert index.tokens_of("new99").tolist() == [7, 8] and index.tokens_of("m4999").tolist() == [0, 1, 2, 3, 4]
    assert len(index.token_ids) < 1.25 * 25200
    # The rows from the file and the new ones are all found where they were put.
    assert index.nearest_ids(index.matrix[index.row_of["new50"]].astype(np.float32), 1) == ["new50"]
    assert index.nearest_ids(rows[1234].astype(np.float32), 1) == ["m1234"]
    # A view a caller keeps is never pulled from under it: the rows are copied instead.
    held = index.matrix[:10]
    for n in range(700):
        index.put(f"more{n}", rng.standard_normal(192).astype(np.float32))
    assert np.array_equal(held, rows[:10]) and index.matrix.shape[0] < 1.25 * len(index)
    assert np.array_equal(index.matrix[:10], rows[:10])


def test_token_ids_replaced_and_removed_are_uncounted_and_their_room_taken_back():
    index = VectorIndex(4, vocabulary=20)
    for n in range(50):
        index.put(f"m{n}", np.ones(4, np.float32))
        index.count_tokens(f"m{n}", [n % 20, 3])
    for round_ in range(400):  # many rewrites: the buffer must not grow with them
        node = f"m{round_ % 50}"
        index.count_tokens(node, [round_ % 20, 4, 5])
    index.remove("m0")
    counted = np.zeros(20, np.int64)
    for node in index.row_of:
        np.add.at(counted, index.tokens_of(node), 1)
    assert (counted == index.token_counts).all() and index.total_tokens == int(counted.sum())
    assert index.tokens_of("m0") is None and not index.has_tokens("m0")
    assert len(index.token_ids) <= 2 * 150 + embeddings.TOKENS_GROWTH_MIN


def test_a_vectors_file_round_trip_gives_the_same_rows_and_the_same_answers(tmp_path, monkeypatch):
    """A store past SHORTLIST_FROM keeps float16 rows: saved and read back, they are the same
    rows, so a search answers the same before and after a restart; the file's digests are still
    the 16-digit hex older versions wrote (and read)."""
    monkeypatch.setattr(embeddings, "SHORTLIST_FROM", 8)
    path = vectors_path(tmp_path / "soul.json")
    graph = _graph_with([f"memory number {n} about a hiking trip to peak {n % 7}" for n in range(40)]
                        + ["we adopted a puppy named Biscuit", "the invoice is due on Friday"])
    store = VectorStore(path, background=False)
    assert store.ready(graph) and store.index.matrix.dtype == np.float16
    store.save()
    again = VectorStore(path, background=False)
    assert again.ready(graph) and again.loaded_from == "file"
    used = len(store.index.id_of)
    assert np.array_equal(again.index.matrix[:used], store.index.matrix[:used])
    assert again.index.id_of == store.index.id_of
    for question in ("What about the puppy?", "When is the invoice due?", "Which peak did they hike?"):
        assert again.nearest(question, 10) == store.nearest(question, 10)
    with np.load(path) as data:
        assert data["digests"].dtype == np.dtype("U16")
        assert int(data["digests"][0], 16) == vectors_module.digest(graph.nodes[data["ids"][0]].content)
    # The ids are the graph's own strings, not copies of them.
    assert all(node_id is next(k for k in graph.nodes if k == node_id) for node_id in again.index.id_of[:3])


def test_a_vectors_file_without_token_ids_still_loads(tmp_path):
    """Files written before the token ids were kept: the vectors are read, the words counted again."""
    path = vectors_path(tmp_path / "soul.json")
    graph = _graph_with(["Melanie: I go hiking", "Caroline: a puppy!"])
    first = VectorStore(path, background=False)
    assert first.ready(graph)
    first.save()
    with np.load(path) as data:
        old = {name: data[name] for name in ("model", "ids", "digests", "matrix")}
    np.savez(path, **old)
    again = VectorStore(path, background=False)
    assert again.ready(graph) and again.loaded_from == "file"  # nothing embedded again
    assert (again.index.token_counts == first.index.token_counts).all()
    assert again.nearest("what about the puppy?", 1)[0][0] == first.nearest("what about the puppy?", 1)[0][0]


# ---------------------------------------------------------------- the vector store
def _graph_with(texts: list[str]) -> SoulGraph:
    graph = SoulGraph(clock=lambda: day("2024-01-01"))
    for text in texts:
        graph.add(text)
    return graph


def test_vectors_are_saved_beside_the_soul_file_and_read_back(tmp_path):
    path = vectors_path(tmp_path / "soul.json")
    graph = _graph_with(["I go hiking every weekend", "The build needs Python 3.11"])
    first = VectorStore(path, background=False)
    assert first.ready(graph) and first.status()["mode"] == "hybrid" and first.status()["vectors"] == 2
    assert path.is_file() and path.stat().st_mode & 0o777 == 0o600
    assert first.loaded_from.startswith("built")

    second = VectorStore(path, background=False)
    graph.add("A third memory, written since")
    assert second.ready(graph)
    assert second.loaded_from == "file, 1 embedded"  # the two saved vectors were read, not made again
    assert len(second.index) == 3


def test_a_vectors_file_of_another_model_or_corrupt_is_rebuilt(tmp_path):
    path = vectors_path(tmp_path / "soul.json")
    graph = _graph_with(["I go hiking every weekend"])
    VectorStore(path, background=False).ready(graph)
    other = StaticModel(MODEL.tokenizer.ids, MODEL.table, MODEL.scales, "another-model-1")
    store = VectorStore(path, background=False, model_loader=lambda: other)
    assert store.ready(graph)
    assert "made by minilm-static" in store.loaded_from and "this is another-model-1" in store.loaded_from

    path.write_bytes(b"PK\x03\x04 not really a zip")
    store = VectorStore(path, background=False)
    assert store.ready(graph) and "unreadable" in store.loaded_from
    assert len(store.index) == 1


def test_search_is_lexical_while_the_vectors_load_and_says_so(tmp_path):
    release = threading.Event()

    def slow_model():
        release.wait(30)
        return MODEL

    graph = _graph_with(["I go hiking every weekend"])
    store = VectorStore(vectors_path(tmp_path / "soul.json"), model_loader=slow_model)
    assert not store.ready(graph)
    assert store.status() == {"mode": "lexical", "reason": "the vectors are loading"}
    # recall still answers, from the words alone
    assert [h.node.content for h in ranking.recall(graph, "what about hiking?", 3, vectors=store)]
    release.set()
    assert store.wait(30) and store.ready(graph) and store.status()["mode"] == "hybrid"


def test_without_the_embed_extra_search_is_lexical_and_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setattr(embeddings.importlib.util, "find_spec", lambda name: None)
    store = VectorStore(vectors_path(tmp_path / "soul.json"))
    assert not store.ready(_graph_with(["x"]))
    assert store.status()["mode"] == "lexical" and "soulgraph[embed]" in store.status()["reason"]
    assert VectorStore(None, enabled=False).status()["reason"].endswith("(--no-embed)")


def test_the_vectors_follow_the_graph(tmp_path):
    graph = _graph_with(["I go hiking every weekend"])
    store = VectorStore(None, background=False)
    assert store.ready(graph)
    node = graph.add("We adopted a puppy named Biscuit")
    store.ready(graph)
    assert node.id in store.index
    graph.remove(node.id)
    store.ready(graph)
    assert node.id not in store.index and len(store.index) == 1


# ---------------------------------------------------------------- search
def test_a_question_is_told_from_a_title():
    assert hybrid.is_question("what does she do to relax")
    assert hybrid.is_question("Did the build pass?")
    assert not hybrid.is_question("EIP-1559: fee market change")
    assert not hybrid.is_question("whatever works")


@pytest.mark.parametrize("text, span", [
    ("What did she paint on October 13, 2023?", ("2023-10-13", "2023-10-14")),
    ("What did Gina find on 1 February, 2023?", ("2023-02-01", "2023-02-02")),
    ("What setback did he face in October 2023?", ("2023-10-01", "2023-11-01")),
    ("When did Melanie go camping in June?", ("2023-06-01", "2023-07-01")),  # the latest June by now
    ("What happened in December?", ("2022-12-01", "2023-01-01")),  # December 2023 has not begun
    ("What did he do last May?", ("2023-05-01", "2023-06-01")),
    ("What did we decide last November?", ("2022-11-01", "2022-12-01")),  # asked in November 2023
    ("What happened in November?", ("2023-11-01", "2023-12-01")),  # this November has begun
    ("What changed in 2022?", ("2022-01-01", "2023-01-01")),
    ("What changed in early 2022?", ("2022-01-01", "2023-01-01")),  # the year: how early is not said
    ("What was planned for mid-2024?", ("2024-01-01", "2025-01-01")),
    ("What state did Joanna visit in summer 2021?", ("2021-06-01", "2021-09-01")),
    ("Which trail did we hike in the fall of 2022?", ("2022-09-01", "2022-12-01")),
    ("What did she plant in spring, 2023?", ("2023-03-01", "2023-06-01")),
    ("Where did they ski in winter 2021?", None),  # its start or its end of 2021: not read
    ("What may I ask?", None),
    ("Due on February 30, 2023", None),
    # A span counted from a written date: before it ends where the date begins, after it starts
    # where the date ends.
    ("What did John do the week before August 3, 2023?", ("2023-07-27", "2023-08-03")),
    ("What puppy did she get two weeks before August 11, 2023?", ("2023-07-28", "2023-08-11")),
    ("What did Maria do last weekend before April 10, 2023?", ("2023-04-03", "2023-04-10")),
    ("What was shown on the Sunday before October 25, 2022?", ("2022-10-18", "2022-10-25")),
    ("Where was Tim in the week before 16 November 2023?", ("2023-11-09", "2023-11-16")),
    ("What happened three days after May 8, 2023?", ("2023-05-09", "2023-05-12")),
    ("What did we ship the month after October 2023?", ("2023-11-01", "2023-12-02")),
    ("What happened before May 8, 2023?", ("2023-05-08", "2023-05-09")),  # no span named: the date alone
])
def test_the_time_a_question_names(text, span):
    found = when.window(text, day("2023-11-01"))
    expected = None if span is None else (day(span[0]), day(span[1]))
    assert found == expected


def _conversation() -> SoulGraph:
    now = day("2023-07-01")
    graph = SoulGraph(clock=lambda: now)
    june = graph.add("Session 1", node_id="s1", created_at=day("2023-06-10"))
    graph.add("Caroline: What do you do to unwind after work?", parents=[june.id], node_id="t1",
              created_at=day("2023-06-10") + 1)
    graph.add("Melanie: I go hiking in the mountains, every single weekend.", parents=[june.id], node_id="t2",
              created_at=day("2023-06-10") + 2)
    may = graph.add("Session 0", node_id="s0", created_at=day("2023-05-02"))
    graph.add("Melanie: I painted a sunset with my kids.", parents=[may.id], node_id="t0",
              created_at=day("2023-05-02") + 1)
    for n in range(20):
        graph.add(f"Note {n} about the quarterly budget review and invoices", node_id=f"x{n}")
    return graph


def test_an_answer_is_found_through_the_question_written_before_it():
    graph = _conversation()
    # t2 shares only "Melanie" with the question, as t0 does; the turn before t2 shares "unwind".
    scores = {h.node.id: h.score for h in ranking.recall(graph, "What does Melanie do to unwind?", 5)}
    assert scores["t2"] > 2 * scores["t0"]
    without = {h.node.id: h.score for h in ranking.recall(graph, "What does Melanie do to unwind?", 5,
                                                            neighbours=False)}
    assert without["t2"] == pytest.approx(without["t0"], rel=1e-6)  # the same words; recency aside


def test_siblings_apart_or_at_one_moment_are_not_neighbours():
    graph = SoulGraph(clock=lambda: 10_000.0)
    graph.add("root", node_id="p", created_at=-2 * hybrid.NEIGHBOUR_GAP)  # long before: a continues no chain
    graph.add("a", parents=["p"], node_id="a", created_at=100.0)
    graph.add("b", parents=["p"], node_id="b", created_at=100.0)  # same moment as a
    graph.add("c", parents=["p"], node_id="c", created_at=200.0 + hybrid.NEIGHBOUR_GAP)
    siblings = hybrid.Siblings(graph)
    assert siblings.around("a") == ([], [])
    graph.add("d", parents=["p"], node_id="d", created_at=130.0)
    assert siblings.around("a") == ([], ["d"]) and siblings.around("d") == (["b"], [])


def _chain() -> SoulGraph:
    """Turns as sync_turn writes them: each the child of the one before, under a session node;
    a fact consolidation drew from t1 written at the session's end, under t1."""
    graph = SoulGraph(clock=lambda: 10_000.0)
    graph.add("Hermes session", node_id="s", created_at=0.0)
    for number, parent in enumerate(["s", "t1", "t2"], 1):
        graph.add(f"turn {number}", parents=[parent], node_id=f"t{number}", created_at=10.0 * number,
                  kind="episodic_event")
    graph.add("a fact from turn 1", parents=["t1"], node_id="m", created_at=100.0, kind="semantic_fact")
    graph.add("turn 4, the next morning", parents=["t3"], node_id="t4", created_at=40.0 + hybrid.NEIGHBOUR_GAP,
              kind="episodic_event")
    return graph


def test_a_chain_of_turns_is_a_conversation():
    """A memory continues its parent when it is the parent's first child, written after it
    within NEIGHBOUR_GAP: the turn before it and the turn after it are its neighbours."""
    siblings = hybrid.Siblings(_chain())
    assert siblings.around("t1") == (["s"], ["t2"])
    assert siblings.around("t2") == (["t1"], ["t3", "m"])  # m: t2's sibling under t1, written after it
    assert siblings.around("t3") == (["t2"], [])  # t4 came a sitting later
    assert siblings.around("m") == (["t2"], [])  # not t1's first child: it continues nothing
    assert siblings.sitting("t2", 10) == ["m", "t1", "s", "t3"]
    assert siblings.sitting("t2", 1) == ["m", "t1", "t3"]
    assert siblings.sitting("t4", 10) == []
    siblings.graph.add("turn 3b", parents=["t3"], node_id="t3b", created_at=35.0, kind="episodic_event")
    assert siblings.around("t3") == (["t2"], ["t3b"])  # a write makes the chain read again
    assert siblings.sitting("t2", 10) == ["m", "t1", "s", "t3", "t3b"]


def test_a_parent_over_several_of_one_kind_holds_siblings_not_a_chain():
    """A heading over its entries (or a session over its turns): the first entry does not
    continue the heading, so a search that finds it lends the heading nothing."""
    graph = SoulGraph(clock=lambda: 10_000.0)
    graph.add("Tooling", node_id="h", created_at=0.0)
    graph.add("atlas uses pnpm, not npm", parents=["h"], node_id="e1", created_at=1.0)
    graph.add("run tests with pnpm test --run", parents=["h"], node_id="e2", created_at=2.0)
    siblings = hybrid.Siblings(graph)
    assert siblings.around("e1") == ([], ["e2"]) and siblings.around("h") == ([], [])
    lone = SoulGraph(clock=lambda: 10_000.0)
    lone.add("Tooling", node_id="h", created_at=0.0)
    lone.add("atlas uses pnpm, not npm", parents=["h"], node_id="e1", created_at=1.0)
    lone.add("the entry's fact", parents=["h"], node_id="f", created_at=3.0, kind="semantic_fact")
    assert hybrid.Siblings(lone).around("e1") == (["h"], ["f"])  # one of its kind: it continues h


def test_a_child_written_with_its_parent_does_not_continue_it():
    graph = SoulGraph(clock=lambda: 10_000.0)
    graph.add("Session 1", node_id="s", created_at=50.0)
    graph.add("first", parents=["s"], node_id="a", created_at=50.0)  # the same moment
    graph.add("second", parents=["s"], node_id="b", created_at=60.0)
    siblings = hybrid.Siblings(graph)
    assert siblings.around("a") == ([], ["b"]) and siblings.around("s") == ([], [])


def test_an_answer_is_found_through_the_turn_before_it_in_a_chain(tmp_path):
    """Through the memory provider, where each turn is the child of the one before: the answer
    shares no word with the question but follows the turn that asked it."""
    service = memory_service.MemoryService(SoulFile(tmp_path / "soul.json"), embed=False)
    for turn in ("Caroline: What do you do to unwind after work?",
                 "Melanie: I go hiking in the mountains, every single weekend.",
                 *(f"Caroline: note {n} on the quarterly budget review and invoices" for n in range(6))):
        service.sync_turn(user=turn, session_id="june", platform="cli")
    graph = service.soul.graph()
    hiking = next(n.id for n in graph.nodes.values() if "hiking" in n.content)
    asked = next(n.id for n in graph.nodes.values() if "unwind" in n.content)
    scores = {h.node.id: h.score for h in ranking.recall(graph, "What does Melanie do to unwind?", 5)}
    assert hiking in scores and scores[hiking] >= 0.4 * scores[asked]
    alone = {h.node.id: h.score for h in ranking.recall(graph, "What does Melanie do to unwind?", 5, neighbours=False)}
    assert alone.get(hiking, 0.0) < 0.4 * alone[asked]
    words = [h.node.id for h in ranking.recall(graph, "unwind after work", 5)]  # words, not a question
    assert asked in words and hiking not in words


def test_a_date_in_the_question_lifts_memories_of_that_time():
    graph = SoulGraph(clock=lambda: day("2023-07-01"))
    graph.add("Melanie: we went to the beach with the kids", node_id="may", created_at=day("2023-05-03"))
    graph.add("Melanie: we went to the beach with the kids again", node_id="june", created_at=day("2023-06-20"))
    graph.splay("may", day("2023-06-30"))  # used lately: recency favours it
    assert ranking.recall(graph, "Where did Melanie go with the kids?", 2)[0].node.id == "may"
    assert ranking.recall(graph, "Where did Melanie go with the kids in June?", 2)[0].node.id == "june"
    # Counted from a date: the week before June 25 holds June 20, not the day itself.
    assert ranking.recall(graph, "Where did Melanie go with the kids the week before June 25, 2023?",
                          2)[0].node.id == "june"
    assert ranking.recall(graph, "Where did Melanie go with the kids two weeks before May 10, 2023?",
                          2)[0].node.id == "may"


def test_vectors_find_a_paraphrase_for_a_question_and_leave_titles_alone():
    graph = _conversation()
    graph.add("Melanie: honestly nothing beats a long trek up a mountain trail", node_id="t9",
              created_at=day("2023-06-20"))
    store = VectorStore(None, background=False)
    question = "Which outdoor pursuits does she love?"
    lexical = [h.node.id for h in ranking.recall(graph, question, 5)]
    hybrid_ids = [h.node.id for h in ranking.recall(graph, question, 5, vectors=store)]
    assert "t9" not in lexical and "t9" in hybrid_ids
    hit = next(h for h in ranking.recall(graph, question, 5, vectors=store) if h.node.id == "t9")
    assert hit.via == "vector"
    # Not a question: the same words, no vectors.
    title = "Outdoor pursuits she loves"
    assert [h.node.id for h in ranking.recall(graph, title, 5, vectors=store)] == \
        [h.node.id for h in ranking.recall(graph, title, 5)]


def test_the_vectors_bring_in_only_what_the_search_may_return():
    graph = _graph_with(["I go hiking in the mountains every weekend", "We adopted a puppy named Biscuit",
                         "Our trail runs start at dawn on Saturdays"])
    graph.tag("n3", "sport")
    store = VectorStore(None, background=False)
    question = "Which outdoor pursuits does she love?"
    assert "n1" in [h.node.id for h in ranking.recall(graph, question, 3, vectors=store)]
    lifecycle.archive(graph, "n1", writer="test")
    assert "n1" not in [h.node.id for h in ranking.recall(graph, question, 3, vectors=store)]
    assert "n1" in [h.node.id for h in ranking.recall(graph, question, 3, vectors=store, include_archived=True)]
    assert [h.node.id for h in ranking.recall(graph, question, 3, vectors=store, tag="sport")] == ["n3"]


def test_fused_scores_stay_on_the_word_scale():
    graph = _graph_with(["alpha", "beta", "gamma"])
    fused = hybrid.rerank(graph, {"n1": 6.0, "n2": 3.0}, 5, accept=lambda n: True, neighbours=False,
                          nearest=["n3", "n1"])
    assert fused[0].node.id == "n1" and fused[0].score == pytest.approx(6.0)
    assert {h.node.id for h in fused} == {"n1", "n2", "n3"}


def test_the_word_searchs_best_match_keeps_a_place_among_the_first_ten():
    """Twenty memories the vectors rank 1..20 and the words 2..21; the words' best match is
    nowhere in the vectors' list. Plain fusion would put it last; it stays within the first ten,
    and a word match the vectors also rank is not moved for it."""
    n = 22
    graph = _graph_with([f"memory {i}" for i in range(1, n + 1)])
    words = {f"n{i}": float(n + 1 - i) for i in range(1, n)}  # n1 best ... n21
    nearest = [f"n{i}" for i in range(2, n)]  # n2 .. n21: the vectors never see n1
    fused = [h.node.id for h in hybrid.rerank(graph, words, n, accept=lambda node: True, neighbours=False,
                                              nearest=nearest)]
    assert fused.index("n1") < hybrid.WORD_BEST_WITHIN
    assert fused[:hybrid.WORD_BEST_WITHIN - 1] == [f"n{i}" for i in range(2, hybrid.WORD_BEST_WITHIN + 1)]


# ---------------------------------------------------------------- over MCP
def test_soul_summary_names_the_search_mode_and_the_vectors_file_is_kept(tmp_path):
    soul = tmp_path / "soul.json"

    async def scenario(session):
        await session.call("soul_add", content="I go hiking in the mountains every weekend")
        await session.call("soul_prime", context="weekend plans")  # starts loading the vectors
        for _ in range(200):
            summary = await session.call("soul_summary")
            if summary["search"]["mode"] == "hybrid":
                break
            await asyncio.sleep(0.05)
        found = await session.call("soul_query", query="What outdoor activities do I enjoy?")
        # Written after the vectors were built: only the save at stop puts it in the file.
        await session.call("soul_add", content="We adopted a puppy named Biscuit")
        await session.call("soul_query", query="Who is Biscuit?")  # the new memory gets its vector
        return summary, found

    summary, found = with_server(soul, scenario)
    assert summary["search"]["mode"] == "hybrid" and summary["search"]["vectors"] == 1
    assert summary["search"]["model"] == MODEL.version
    assert found["results"] and found["results"][0]["content"].startswith("I go hiking")
    with np.load(vectors_path(soul)) as saved:  # written when the server stopped
        assert len(saved["ids"]) == 2

    async def lexical(session):
        await session.call("soul_prime")
        return (await session.call("soul_summary"))["search"]

    assert with_server(soul, lexical, extra_args=["--no-embed"]) == {
        "mode": "lexical", "reason": "vectors are switched off (--no-embed)"}


def test_a_soul_file_store_and_its_vectors_survive_a_reload(tmp_path):
    soul = SoulFile(tmp_path / "soul.json")
    with soul.change() as graph:
        graph.add("I go hiking in the mountains every weekend")
    store = VectorStore(vectors_path(soul.path), background=False)
    assert store.ready(soul.graph())
    store.save()
    again = VectorStore(vectors_path(soul.path), background=False)
    assert again.ready(SoulFile(tmp_path / "soul.json").graph()) and again.loaded_from == "file"


def test_scores_of_gives_the_search_score_of_any_node():
    graph = SoulGraph(clock=lambda: 5_000_000.0)
    texts = ["tea in the morning", "green tea with lemon", "coffee at noon", "the morning run", "lemon cake"]
    for n, text in enumerate(texts):
        graph.add(text, created_at=1_000_000.0 * n)
    graph.splay("n2", 4_900_000.0)
    found = {hit.node.id: hit.score for hit in graph.query("green tea morning lemon", 10)}
    assert graph.scores_of("green tea morning lemon", list(graph.nodes)) == pytest.approx(found, rel=1e-12)
    assert graph.scores_of("green tea", ["n3", "missing"]) == {}  # shares no word; not a node


def test_a_word_common_in_this_store_weighs_less_in_a_question():
    graph = _graph_with([f"Melanie: note number {n} about something else entirely" for n in range(30)]
                        + ["Caroline: I adopted a puppy last spring"])
    store = VectorStore(None, background=False)
    assert store.ready(graph)
    index, model = store.index, store.model
    melanie, puppy = model.token_ids("melanie puppy").tolist()
    weights = index.store_weights(np.array([melanie, puppy]), 1e-3)
    assert weights[0] * 10 < weights[1]  # in every memory but one, against in one memory only
    counted = int(index.token_counts[melanie])
    graph.remove("n1")
    store.ready(graph)
    assert int(index.token_counts[melanie]) == counted - 1  # a removal is uncounted exactly
    assert index.total_tokens == sum(len(index.tokens_of(node_id)) for node_id in index.row_of)


def test_a_question_is_searched_halfway_between_the_stores_weights_and_the_models():
    """A name in nearly every memory of this store says little about which one, but in a store of
    many people it is what tells them apart: the question's vector keeps it at half the model's
    weight. It is as close to the store-weighted vector as to the model-weighted one, and closer
    to each than they are to each other."""
    graph = _graph_with([f"Melanie: note number {n} about the garden" for n in range(30)]
                        + ["Caroline: We adopted a puppy last spring"])
    store = VectorStore(None, background=False)
    assert store.ready(graph)
    model, index = store.model, store.index
    ids = model.token_ids("What did Melanie adopt?")
    by_store, by_model = model.embed_ids(ids, index.store_weights(ids, STORE_WEIGHT_A)), model.embed_ids(ids)
    question = store.question_vector("What did Melanie adopt?")
    assert float(np.linalg.norm(question)) == pytest.approx(1.0, abs=1e-6)
    assert float(question @ by_store) == pytest.approx(float(question @ by_model), abs=1e-6)
    assert float(question @ by_store) > float(by_store @ by_model) + 0.01
    assert not store.question_vector("").any()  # no word: zeros, never a division by zero


def test_a_questions_vector_is_made_again_once_the_stores_words_change():
    """Recall and its reranking stage ask for one question's vector in turn, and the second gets
    the first's; a memory added or removed changes the store's weights, and so the vector."""
    graph = _graph_with([f"Melanie: note number {n} about the garden" for n in range(30)]
                        + ["Caroline: We adopted a puppy last spring"])
    store = VectorStore(None, background=False)
    assert store.ready(graph)
    first = store.question_vector("What did Melanie adopt?")
    assert store.question_vector("What did Melanie adopt?") is first
    assert not first.flags.writeable  # handed out twice: nobody may change it in place
    for n in range(30):
        graph.add(f"Caroline: another puppy story {n}")
    store.ready(graph)
    again = store.question_vector("What did Melanie adopt?")
    assert again is not first and not np.allclose(again, first)  # "Melanie" is rarer now
    graph.remove("n1")
    store.ready(graph)
    assert store.question_vector("What did Melanie adopt?") is not again  # a removal too
    assert store.question_vector("Who adopted a puppy?") is not store.question_vector("What did Melanie adopt?")


def test_the_vectors_file_is_written_again_after_enough_changes(tmp_path, monkeypatch):
    from soulgraph.store import vectors

    monkeypatch.setattr(vectors, "SAVE_EVERY", 3)
    path = vectors_path(tmp_path / "soul.json")
    graph = _graph_with(["one memory"])
    store = VectorStore(path, background=False)
    assert store.ready(graph)
    written = path.stat().st_mtime_ns
    for n in range(3):
        graph.add(f"memory number {n} about hiking")
    store.ready(graph)  # the third change starts a write, in a thread
    for _ in range(100):
        if path.stat().st_mtime_ns != written:
            break
        threading.Event().wait(0.05)
    again = VectorStore(path, background=False)
    assert again.ready(graph) and again.loaded_from == "file" and len(again.index) == 4


def test_a_save_reads_the_rows_in_place_and_is_dropped_when_a_write_overtakes_it(tmp_path, monkeypatch):
    """The save every SAVE_EVERY changes encodes the index's own float16 rows in a thread (no
    copy of them): if a row is written before the encoding ends, the file is not written (it
    could pair a vector with another text's digest) and the next save copies the rows."""
    monkeypatch.setattr(embeddings, "SHORTLIST_FROM", 8)
    path = vectors_path(tmp_path / "soul.json")
    graph = _graph_with([f"memory number {n} about a trip to lake {n % 5}" for n in range(20)])
    store = VectorStore(path, background=False)
    assert store.ready(graph) and store.index.matrix.dtype == np.float16
    written = path.stat().st_mtime_ns
    index = store.index
    payload = store._payload(store.model, index, shared=True)
    assert np.shares_memory(payload["matrix"], index.matrix)
    check = (index, index.writes)
    graph.add("a memory written while the save encodes")
    assert store.ready(graph)
    store._write_payload(payload, check)
    assert path.stat().st_mtime_ns == written and store._copy_next_save
    assert not np.shares_memory(store._payload(store.model, index)["matrix"], index.matrix)
    payload = store._payload(store.model, index, shared=True)
    store._write_payload(payload, (index, index.writes))  # nothing written meanwhile: saved
    again = VectorStore(path, background=False)
    assert again.ready(graph) and again.loaded_from == "file" and len(again.index) == 21
    assert np.array_equal(again.index.matrix[:21], index.matrix[:21])


def test_the_eval_names_what_hybrid_needs_when_numpy_is_missing(monkeypatch, capsys):
    from soulgraph.eval.__main__ import main

    monkeypatch.setattr(embeddings.importlib.util, "find_spec", lambda name: None)
    locomo = Path(__file__).parent / "fixtures" / "eval" / "locomo-shaped.json"
    assert main(["locomo", str(locomo), "--methods", "hybrid"]) == 2
    assert "method 'hybrid' needs the vectors: numpy is not installed" in capsys.readouterr().err


def test_the_eval_runs_the_new_methods_on_every_question():
    from soulgraph.eval.locomo import read_locomo, replay_locomo

    methods = ["recall_before", "recall", "hybrid", "hybrid_related"]
    result = replay_locomo(read_locomo(Path(__file__).parent / "fixtures" / "eval" / "locomo-shaped.json"), methods)
    assert result.questions
    for method in methods:  # each found some of the evidence in its 20
        assert any(question.ranks.get(method) for question in result.questions), method


def test_the_store_word_counts_come_back_from_the_file(tmp_path):
    path = vectors_path(tmp_path / "soul.json")
    graph = _graph_with(["Melanie: I go hiking", "Melanie: we painted a sunset", "Caroline: a puppy!"])
    first = VectorStore(path, background=False)
    assert first.ready(graph)
    first.save()
    written = path.stat().st_mtime_ns
    again = VectorStore(path, background=False, model_loader=lambda: MODEL)
    assert again.ready(graph) and again.loaded_from == "file"  # nothing tokenised or embedded again
    again.save()
    assert path.stat().st_mtime_ns == written  # nothing changed: the file is not written again
    assert again.index.total_tokens == first.index.total_tokens > 0
    assert (again.index.token_counts == first.index.token_counts).all()


def test_token_ids_take_two_bytes_and_a_file_with_four_byte_ids_still_loads(tmp_path):
    """The shipped vocabulary fits two bytes an id, in memory and in the file; a file an older
    runtime wrote with four-byte ids is read as it is and gives the same counts."""
    path = vectors_path(tmp_path / "soul.json")
    graph = _graph_with(["Melanie: I go hiking", "Melanie: we painted a sunset", "Caroline: a puppy!"])
    first = VectorStore(path, background=False)
    assert first.ready(graph)
    first.save()
    assert first.index.token_ids.dtype == np.uint16
    with np.load(path) as data:
        assert data["tokens"].dtype == np.uint16
        arrays = {name: data[name] for name in data.files}
    arrays["tokens"] = arrays["tokens"].astype(np.int32)  # as an older runtime wrote them
    np.savez(path.with_suffix(".old.npz"), **arrays)
    path.with_suffix(".old.npz").replace(path)
    again = VectorStore(path, background=False, model_loader=lambda: MODEL)
    assert again.ready(graph) and again.loaded_from == "file"
    assert again.index.token_ids.dtype == np.uint16
    assert (again.index.token_counts == first.index.token_counts).all() and again.index.total_tokens > 0
    assert embeddings.token_type(70_000) == np.int32  # a vocabulary past two bytes keeps four


def test_the_runtime_pins_blas_to_one_thread_unless_the_operator_said_otherwise():
    """Read by the BLAS library when numpy loads: the runtime sets it before that."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    runtime = str(Path(__file__).resolve().parents[1] / "runtime")
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import soulgraph.store.vectors, os; "
            "print(os.environ.get('OPENBLAS_NUM_THREADS'), os.environ.get('OMP_NUM_THREADS'))")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code, runtime], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["1", "1"], out.stderr
    out = subprocess.run([sys.executable, "-c", code, runtime], env={**env, "OPENBLAS_NUM_THREADS": "4"},
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["4", "1"], out.stderr


def test_before_anything_asks_for_the_vectors_the_status_says_why_search_is_lexical(tmp_path):
    store = VectorStore(vectors_path(tmp_path / "soul.json"))
    if not store.enabled:
        pytest.skip(store.status()["reason"])
    assert store.status() == {"mode": "lexical", "reason": vectors_module.NOT_STARTED}
