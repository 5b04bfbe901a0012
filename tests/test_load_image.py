"""A large soul's load image (`engine/load_image.py`, `store/image_file.py`): the next load of the
same snapshot reads the checked columns and the built word index back instead of parsing the
file, and only when the image was made from exactly these bytes.

- Property: a random graph's snapshot, decoded twice with a place for images, gives the second
  time (from the image: no JSON parsed, no index built) the graph the first gave, internals
  included, and both stay equal under the same later changes.
- Memories out of recall, users' scopes, metadata, hypotheses and the audit come back too.
- Through a store: a changed snapshot, an edit of its text in place, other index thresholds or
  a damaged image are never used, and a new image replaces it; an image that cannot be written
  leaves the load as it was; the image has the soul's mode; small souls get none.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path
from types import SimpleNamespace
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from soulgraph.engine import index as index_module
from soulgraph.engine import load_image
from soulgraph.engine.graph import SoulGraph
from soulgraph.engine.index import InvertedIndex
from soulgraph.memory import lifecycle
from soulgraph.store import SoulFile, snapshot
from soulgraph.store.image_file import image_path

from tests.test_load import Clock, add_steps, apply, assert_same_answers, assert_same_internals, steps, texts

WORDS = "splay tree deploy host agent memory graph runtime lesson queue Σσ 2024 café".split()
QUESTIONS = ["splay tree", "deploy host memory", "Σσ café 2024", "note 7", "lesson runtime queue"]


class Kept:
    """An image store in memory."""

    def __init__(self) -> None:
        self.image: bytes | None = None
        self.writes = 0

    def read(self) -> bytes | None:
        return self.image

    def write(self, image: bytes) -> None:
        self.image, self.writes = image, self.writes + 1


def not_parsed():
    """Inside: a decode that parses JSON or builds an index fails the test."""
    failing = AssertionError("the snapshot was parsed or its index built again")

    def loads(*args, **kwargs):
        raise failing

    return patch.object(snapshot, "json", SimpleNamespace(loads=loads, dumps=json.dumps)), \
        patch.object(InvertedIndex, "add_many", side_effect=failing)


def same_graphs(a: SoulGraph, b: SoulGraph, questions: list[str], fresh: bool = True) -> None:
    assert_same_internals(a, b, fresh=fresh)
    assert_same_answers(a, b, questions)
    for mine, theirs in ((a.index, b.index), (a.archive_index, b.archive_index)):
        assert list(mine._postings.items()) == list(theirs._postings.items())
        assert mine._masks == theirs._masks and mine._mask_sizes == theirs._mask_sizes
        assert mine._indexed == theirs._indexed and mine._word_counts == theirs._word_counts
    assert a.kinds == b.kinds and a.scopes == b.scopes and a.audit == b.audit
    assert {i: (n.to_dict(), sorted(a.branch_parents.get(i, ()))) for i, n in a.branch.items()} == \
        {i: (n.to_dict(), sorted(b.branch_parents.get(i, ()))) for i, n in b.branch.items()}


def decoded_twice(graph: SoulGraph) -> tuple[SoulGraph, SoulGraph, Kept]:
    raw = snapshot.encode(graph, 7, 1_700_000_000.0, {})
    kept = Kept()
    first, schema, seq = snapshot.decode(raw, graph.clock, graph.recency_weight, kept)
    assert kept.writes == 1
    parse, build = not_parsed()
    with parse, build:
        second, schema_again, seq_again = snapshot.decode(raw, graph.clock, graph.recency_weight, kept)
    assert (schema_again, seq_again) == (schema, seq) == (snapshot.SCHEMA, 7) and kept.writes == 1
    return first, second, kept


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(adds=st.lists(add_steps, min_size=1, max_size=15), before=st.lists(steps, max_size=30),
       after=st.lists(steps, max_size=10), questions=st.lists(texts, min_size=1, max_size=3),
       sets_dropped_from=st.sampled_from([0, 10**9]))
def test_a_snapshot_read_from_its_image_is_the_graph_its_bytes_give(adds, before, after, questions, sets_dropped_from):
    with patch.object(load_image, "IMAGE_FROM", 1), patch.object(index_module, "SETS_DROPPED_FROM", sets_dropped_from), \
            patch.object(index_module, "MASK_MIN_DF", 2):
        original = SoulGraph(clock=Clock())
        for step in adds + before:
            apply(original, step)
        first, second, _ = decoded_twice(original)
        same_graphs(second, first, questions)
        for step in after:  # the structures an image gives are ordinary ones
            apply(first, step)
            apply(second, step)
        same_graphs(second, first, questions, fresh=False)
        assert second.dirty == first.dirty


def test_memory_fields_scopes_hypotheses_and_the_audit_come_back(monkeypatch):
    monkeypatch.setattr(load_image, "IMAGE_FROM", 1)
    graph = SoulGraph(clock=Clock())
    for number in range(12):
        node = graph.add(f"note {number} about the splay tree and host {number % 3}", ["lesson"],
                         metadata={"source": "test", "nested": {"n": number, "list": [1, 2.5, None, True]}})
        if number % 4 == 0:
            graph.update(node.id, status="archived")
        if number % 3 == 0:
            graph.update(node.id, scope="user:ana", confidence=0.25, source="mcp:soul_add")
    graph.explore("a hypothesis about the host")
    graph.audit = [{"at": 1.0, "what": "forget", "ids": ["n99"]}]
    first, second, kept = decoded_twice(graph)
    same_graphs(second, first, QUESTIONS)
    assert second.archive_index._indexed and second.scopes and second.branch and second.audit == graph.audit
    assert [n.to_dict() for n in second.nodes.values()] == [n.to_dict() for n in graph.nodes.values()]


def test_the_image_is_not_read_for_other_bytes():
    kept = Kept()
    with patch.object(load_image, "IMAGE_FROM", 1):
        graph = SoulGraph(clock=Clock())
        graph.add("one note")
        raw = snapshot.encode(graph, 1, 1.0, {})
        snapshot.decode(raw, graph.clock, images=kept)
    other = raw.replace(b"one note", b"two note")
    assert load_image.read(kept.image, load_image.key(raw), object()) is not None
    assert load_image.read(kept.image, load_image.key(other), object()) is None
    assert load_image.read(kept.image[:-5], load_image.key(raw), object()) is None  # torn
    flipped = bytearray(kept.image)
    flipped[-10] ^= 1
    assert load_image.read(bytes(flipped), load_image.key(raw), object()) is None  # a bit gone bad
    decoded, _, _ = snapshot.decode(other, graph.clock, images=kept)
    assert [node.content for node in decoded.nodes.values()] == ["two note"]


# ----------------------------------------------------------------- through a store
@pytest.fixture
def small_images(monkeypatch):
    """Images from 30 memories, and masks as a large index has them (here from any size)."""
    monkeypatch.setattr(load_image, "IMAGE_FROM", 30)
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


def load(path: Path, keep_image: bool = True) -> SoulGraph:
    """A load as the MCP server and the memory service make it."""
    return SoulFile(path, clock=lambda: 1_700_000_000.0, keep_image=keep_image).graph()


def test_a_second_load_reads_the_soul_from_its_image(tmp_path, small_images):
    path = tmp_path / "soul.json"
    soul_of(path)
    first = load(path)
    image = image_path(path)
    assert image.is_file() and image.read_bytes().startswith(load_image.FORMAT)
    parse, build = not_parsed()
    with parse, build:
        second = load(path)
    same_graphs(second, first, QUESTIONS)
    assert second.index._masks  # masks came back too


def counting_builds():
    built, calls = InvertedIndex.add_many, []
    return calls, patch.object(InvertedIndex, "add_many", autospec=True,
                               side_effect=lambda *args: calls.append(1) or built(*args))


def test_an_image_of_another_snapshot_is_not_used_and_is_replaced(tmp_path, small_images):
    path = tmp_path / "soul.json"
    soul = soul_of(path)
    load(path)
    old_image = image_path(path).read_bytes()
    with soul.change() as graph:
        graph.add("a new note about the splay tree", ["lesson"])
    soul.compact()  # a new snapshot holds it
    calls, counting = counting_builds()
    with counting:
        graph = load(path)
    assert calls and image_path(path).read_bytes() != old_image
    assert [hit.node.content for hit in graph.query("new note", 1)] == ["a new note about the splay tree"]


def test_a_snapshot_edited_in_place_is_read_from_its_bytes(tmp_path, small_images):
    """Another program edits soul.json's text in place: the same ids, the same size even."""
    path = tmp_path / "soul.json"
    soul_of(path)
    load(path)
    data = json.loads(path.read_text())
    data["nodes"][0]["content"] = "quokka" + data["nodes"][0]["content"][6:]
    path.write_text(json.dumps(data))
    graph = load(path)
    assert [hit.node.id for hit in graph.query("quokka", 3)] == [data["nodes"][0]["id"]]
    with patch.object(load_image, "IMAGE_FROM", 10**9):  # read from the file, no image
        same_graphs(graph, load(path), QUESTIONS)


def test_an_image_made_with_other_thresholds_is_not_used(tmp_path, small_images, monkeypatch):
    path = tmp_path / "soul.json"
    soul_of(path)
    load(path)
    monkeypatch.setattr(index_module, "POSTING_SET_FROM", 3)  # another runtime's forms
    calls, counting = counting_builds()
    with counting:
        graph = load(path)
    assert calls
    same_graphs(graph, load(path), QUESTIONS)  # and the image written again is of these forms


def test_an_image_made_under_another_stemmer_is_not_used(tmp_path, small_images, monkeypatch):
    """The image keeps the index's words by their stems: another stemmer's forms are no use."""
    path = tmp_path / "soul.json"
    soul_of(path)
    load(path)
    monkeypatch.setattr(index_module, "STEMMER", "none: every word as it is")
    monkeypatch.setattr(index_module, "stem", lambda word: word)
    monkeypatch.setattr(index_module, "_forms", {})
    calls, counting = counting_builds()
    with counting:
        graph = load(path)
    assert calls
    same_graphs(graph, load(path), QUESTIONS)


@pytest.mark.parametrize("damage", ["torn", "garbage", "empty", "columns"])
def test_a_damaged_image_is_made_again(tmp_path, small_images, damage):
    path = tmp_path / "soul.json"
    soul_of(path)
    expected = load(path)
    image = image_path(path)
    whole = image.read_bytes()
    if damage == "columns":  # an image that reads, but whose parts do not fit together
        import marshal
        import zlib
        start = len(load_image.FORMAT) + 24  # the key and the CRC
        header, columns, memory, index = marshal.loads(whole[start:])
        columns[0] = columns[0][:-1]
        payload = marshal.dumps((header, columns, memory, index))
        image.write_bytes(whole[:start - 4] + zlib.crc32(payload).to_bytes(4, "little") + payload)
    else:
        image.write_bytes({"torn": whole[: len(whole) // 2], "garbage": load_image.FORMAT + b"\x00" * 64,
                           "empty": b""}[damage])
    graph = load(path)
    same_graphs(graph, expected, QUESTIONS)
    assert image.read_bytes() == whole  # written again, whole


def test_an_image_that_cannot_be_written_leaves_the_load_as_it_was(tmp_path, small_images, caplog):
    path = tmp_path / "soul.json"
    soul_of(path)
    image_path(path).mkdir()  # nothing can replace a folder with a file
    caplog.set_level(logging.INFO, logger="soulgraph.store.image_file")
    graph = load(path)
    assert len(graph.nodes) == 60 and graph.query("splay tree", 3)
    assert image_path(path).is_dir() and "was not written" in caplog.text
    assert {p.name for p in tmp_path.iterdir()} <= {"soul.json", "soul.json.image", "soul.json.journal", "soul.json.lock"}


def test_the_image_has_the_soul_files_mode_and_small_souls_have_none(tmp_path, small_images):
    path = tmp_path / "soul.json"
    soul_of(path)
    os.chmod(path, 0o600)
    load(path)
    assert stat.S_IMODE(image_path(path).stat().st_mode) == 0o600
    small = tmp_path / "small" / "soul.json"
    small.parent.mkdir()
    soul_of(small, count=29)
    load(small)
    assert not image_path(small).exists()


def test_a_hard_forget_removes_the_image_which_holds_the_forgotten_text(tmp_path, small_images):
    path = tmp_path / "soul.json"
    soul = soul_of(path)
    graph = soul.graph()
    secret = graph.add("the door code is 4411 quokka", ["lesson"])
    soul.compact()
    load(path)  # a load of that snapshot makes an image that holds the text
    assert b"4411 quokka" in image_path(path).read_bytes()
    with soul.change() as graph:
        lifecycle.forget(graph, secret.id, "a test", writer="test")
    assert not image_path(path).exists()
    assert all(b"4411 quokka" not in p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert secret.id not in load(path).nodes


def test_an_image_of_a_snapshot_replaced_while_it_was_made_does_not_stay(tmp_path, small_images):
    """A load that made its image while another process's hard forget replaced the snapshot:
    the image of the old snapshot goes once it is written."""
    from soulgraph.store.image_file import ImageFile

    path = tmp_path / "soul.json"
    soul_of(path)
    before = os.stat(path)
    from soulgraph.store.atomic import file_signature

    late = ImageFile(path, file_signature(before))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000))  # soul.json is another version now
    late.write(load_image.FORMAT + b"old snapshot's image")
    assert not image_path(path).exists()
    ImageFile(path, file_signature(os.stat(path))).write(load_image.FORMAT + b"current")
    assert image_path(path).read_bytes() == load_image.FORMAT + b"current"


def test_a_tool_reads_the_image_a_server_left_and_writes_none(tmp_path, small_images):
    path = tmp_path / "soul.json"
    soul_of(path)
    load(path, keep_image=False)
    assert not image_path(path).exists()  # a tool, a backup's check: no file left beside the soul
    first = load(path)
    parse, build = not_parsed()
    with parse, build:
        same_graphs(load(path, keep_image=False), first, QUESTIONS)
