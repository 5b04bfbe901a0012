"""The word index's image (`engine/index_image.py`, `store/index_file.py`): a large soul's load
reads its index back instead of building it, and only when the image is of exactly what it is
about to index.

- Property: an index built by `add_many`, dumped and restored into an empty index, is the same
  index (postings in the same form and order, masks, slots, the nodes' own id strings).
- Through a store: the second load of a soul uses the image (the build is never called) and
  gives the graph the first load gave; a changed snapshot, a changed text under the same ids,
  other index thresholds or a torn image are never used, and the image is written again; an
  image that cannot be written leaves the load as it was; the image has the soul's mode.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from soulgraph.engine import index as index_module
from soulgraph.engine import index_image
from soulgraph.engine.graph import SoulGraph
from soulgraph.engine.index import InvertedIndex
from soulgraph.store import SoulFile
from soulgraph.store.index_file import index_path

from tests.test_load import assert_same_answers, assert_same_internals

WORDS = "splay tree deploy host agent memory graph runtime lesson queue Σσ 2024 café".split()


def same_index(a: InvertedIndex, b: InvertedIndex) -> None:
    assert list(a._postings.items()) == list(b._postings.items())  # the same forms, in the same order
    assert [type(p) for p in a._postings.values()] == [type(p) for p in b._postings.values()]
    assert a._masks == b._masks and a._mask_sizes == b._mask_sizes
    assert a._slot_of == b._slot_of and a._id_at == b._id_at and a._unsorted_ids == b._unsorted_ids
    assert a._indexed == b._indexed and a._word_counts == b._word_counts and a._texts == b._texts


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(st.sampled_from(WORDS), max_size=8).map(" ".join) | st.text(max_size=12), max_size=40),
       st.sampled_from([0, 10**9]), st.sampled_from([2, 128]), st.sampled_from([1, 3]))
def test_an_image_restores_the_index_add_many_built(texts, sets_dropped_from, posting_set_from, min_df):
    ids = [f"n{position}" for position in range(len(texts))]
    with patch.object(index_module, "SETS_DROPPED_FROM", sets_dropped_from), \
            patch.object(index_module, "POSTING_SET_FROM", posting_set_from), \
            patch.object(index_module, "MASK_MIN_DF", min_df), patch.object(index_module, "MASK_SHARE", 10**9):
        built = InvertedIndex()
        built.add_many(ids, texts)
        key = index_image.key(ids, texts)
        image = index_image.dump(built, key)
        restored = InvertedIndex()
        assert index_image.restore(restored, image, ids, texts, key)
        same_index(restored, built)
        for word in list(built._postings)[:3]:
            assert all(any(member is node_id for node_id in ids) for member in restored._postings[word])
        # Not the image of other texts, nor of other ids, nor whole.
        if ids:
            other = [text + " extra" for text in texts]
            assert not index_image.restore(InvertedIndex(), image, ids, other, index_image.key(ids, other))
            renamed = [node_id + "x" for node_id in ids]
            assert not index_image.restore(InvertedIndex(), image, renamed, texts, index_image.key(renamed, texts))
        assert not index_image.restore(InvertedIndex(), image[:-3], ids, texts, key)


def test_the_key_tells_apart_lists_that_join_into_the_same_text():
    assert index_image.key(["ab", "c"], ["x", "y"]) != index_image.key(["a", "bc"], ["x", "y"])
    assert index_image.key(["a", "b"], ["xy", ""]) != index_image.key(["a", "b"], ["x", "y"])


# ----------------------------------------------------------------- through a store
@pytest.fixture
def small_images(monkeypatch):
    """Images from 30 memories, and masks as a large index has them (here from any size)."""
    monkeypatch.setattr(index_image, "IMAGE_FROM", 30)
    monkeypatch.setattr(index_module, "SETS_DROPPED_FROM", 0)
    monkeypatch.setattr(index_module, "MASK_MIN_DF", 4)


def soul_of(path: Path, count: int = 60) -> SoulFile:
    graph = SoulGraph(clock=lambda: 1_700_000_000.0)
    previous = None
    for number in range(count):
        words = " ".join(WORDS[(number * k) % len(WORDS)] for k in (1, 3, 7))
        node = graph.add(f"note {number}: {words}", ["lesson" if number % 2 else "project:x"],
                         parents=[previous.id] if previous is not None and number % 3 else [])
        previous = node
    soul = SoulFile(path)
    soul.save(graph)
    return soul


def load(path: Path) -> SoulGraph:
    return SoulFile(path, clock=lambda: 1_700_000_000.0).graph()


QUESTIONS = ["splay tree", "deploy host memory", "Σσ café 2024", "note 7", "lesson runtime queue"]


def test_a_second_load_reads_the_index_from_its_image(tmp_path, small_images):
    path = tmp_path / "soul.json"
    soul_of(path)
    first = load(path)
    image = index_path(path)
    assert image.is_file() and image.read_bytes().startswith(index_image.FORMAT)
    with patch.object(InvertedIndex, "add_many", side_effect=AssertionError("the index was built again")):
        second = load(path)
    assert_same_answers(second, first, QUESTIONS)
    assert_same_internals(second, first)
    assert second.index._masks == first.index._masks and second.index._masks  # masks came back too


def test_an_image_of_another_snapshot_is_not_used_and_is_replaced(tmp_path, small_images):
    path = tmp_path / "soul.json"
    soul = soul_of(path)
    load(path)
    old_image = index_path(path).read_bytes()
    with soul.change() as graph:
        graph.add("a new note about the splay tree", ["lesson"])
    soul.compact()  # a new snapshot holds it
    built = InvertedIndex.add_many
    calls = []
    with patch.object(InvertedIndex, "add_many", autospec=True, side_effect=lambda *a: calls.append(1) or built(*a)):
        graph = load(path)
    assert calls and index_path(path).read_bytes() != old_image
    assert [hit.node.content for hit in graph.query("new note", 1)] == ["a new note about the splay tree"]


def test_a_text_changed_under_the_same_ids_is_read_from_the_snapshot(tmp_path, small_images):
    """Another program edits soul.json's text in place: the ids are the same, the image is not
    of these texts."""
    path = tmp_path / "soul.json"
    soul_of(path)
    load(path)
    data = json.loads(path.read_text())
    data["nodes"][0]["content"] = "quokka"
    path.write_text(json.dumps(data))
    graph = load(path)
    assert [hit.node.id for hit in graph.query("quokka", 3)] == [data["nodes"][0]["id"]]
    with patch.object(index_image, "IMAGE_FROM", 10**9):  # built from the file, no image
        assert_same_internals(graph, load(path))


def test_an_image_made_with_other_thresholds_is_not_used(tmp_path, small_images, monkeypatch):
    path = tmp_path / "soul.json"
    soul_of(path)
    load(path)
    monkeypatch.setattr(index_module, "POSTING_SET_FROM", 3)  # another runtime's forms
    built, calls = InvertedIndex.add_many, []
    with patch.object(InvertedIndex, "add_many", autospec=True, side_effect=lambda *a: calls.append(1) or built(*a)):
        graph = load(path)
    assert calls
    assert_same_answers(graph, load(path), QUESTIONS)
    assert_same_internals(graph, load(path))  # and the image written again is of these forms


@pytest.mark.parametrize("damage", ["torn", "garbage", "empty"])
def test_a_damaged_image_is_built_again(tmp_path, small_images, damage):
    path = tmp_path / "soul.json"
    soul_of(path)
    expected = load(path)
    image = index_path(path)
    whole = image.read_bytes()
    image.write_bytes({"torn": whole[: len(whole) // 2], "garbage": index_image.FORMAT + b"\x00" * 64,
                       "empty": b""}[damage])
    graph = load(path)
    assert_same_answers(graph, expected, QUESTIONS)
    assert image.read_bytes() == whole  # written again, whole


def test_an_image_that_cannot_be_written_leaves_the_load_as_it_was(tmp_path, small_images, caplog):
    path = tmp_path / "soul.json"
    soul_of(path)
    index_path(path).mkdir()  # nothing can replace a folder with a file
    caplog.set_level(logging.INFO, logger="soulgraph.store.index_file")
    graph = load(path)
    assert len(graph.nodes) == 60 and graph.query("splay tree", 3)
    assert index_path(path).is_dir() and "was not written" in caplog.text
    assert {p.name for p in tmp_path.iterdir()} <= {"soul.json", "soul.json.index", "soul.json.journal", "soul.json.lock"}  # no temp file


def test_the_image_has_the_soul_files_mode_and_small_souls_have_none(tmp_path, small_images):
    path = tmp_path / "soul.json"
    soul_of(path)
    os.chmod(path, 0o600)
    load(path)
    assert stat.S_IMODE(index_path(path).stat().st_mode) == 0o600
    small = tmp_path / "small" / "soul.json"
    small.parent.mkdir()
    soul_of(small, count=29)
    load(small)
    assert not index_path(small).exists()
