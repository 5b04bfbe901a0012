"""Loading a graph in bulk (`soulgraph.engine.load`) builds what inserting the nodes one
by one builds, and refuses a damaged record naming the record and the field.

- Property (hypothesis): a random graph, written out as soul.json records (in its own
  order, or shuffled so edges point backwards), loads into a graph that answers every
  question exactly as the original does and as a one-by-one insertion of the same
  records does, internals included (posting and edge set orders, the splay tree's root);
  after the load, the same further changes keep the two equal.
- One test per kind of malformed record, and the graph-level refusals.
- The benchmark's synthetic graph at 20,000 nodes, loaded both ways.
"""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from soulgraph.engine import edges
from soulgraph.engine.graph import DAY, CycleError, Node, SoulGraph
from soulgraph.engine.index import InvertedIndex, words
from soulgraph.engine.load import load_graph, parse_node_record
from soulgraph.engine.splay import SplayTree

BENCH = Path(__file__).resolve().parent.parent / "bench"


class Clock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# ----------------------------------------------------------------- helpers
def records_of(graph: SoulGraph) -> list[dict]:
    """The graph's nodes as soul.json stores them, in the graph's order."""
    return [{**node.to_dict(), "parents": sorted(graph.parents[node_id])} for node_id, node in graph.nodes.items()]


def exploration_of(graph: SoulGraph) -> dict:
    return {"nodes": [{**node.to_dict(), "parents": sorted(graph.branch_parents.get(node_id, ()))}
                      for node_id, node in graph.branch.items()]}


def insert_one_by_one(records: list, next_id: int, exploration: dict | None, clock) -> SoulGraph:
    """What loading did before `load_graph`: `_insert` each record, then the edges."""
    graph = SoulGraph(clock=clock)
    links = []
    for record in records:
        node = Node.from_dict(record)
        assert node.id not in graph.nodes
        graph._insert(node)
        links.extend((str(parent), node.id) for parent in record.get("parents", []))
    for parent, child in links:
        graph.get(parent)
        graph.children[parent] = edges.joined(graph.children[parent], child)
        graph.parents[child] = edges.joined(graph.parents[child], parent)
    for record in (exploration or {}).get("nodes", []):
        node = Node.from_dict(record)
        graph.branch[node.id] = node
        graph.branch_parents[node.id] = {str(p) for p in record.get("parents", [])}
    graph.next_id = next_id
    graph.dirty.clear()
    graph.branch_dirty = False
    return graph


def load(graph: SoulGraph, records: list | None = None) -> SoulGraph:
    return load_graph(records_of(graph) if records is None else records, next_id=graph.next_id,
                      exploration=exploration_of(graph), clock=graph.clock, recency_weight=graph.recency_weight)


def hits(results) -> list[tuple]:
    return [(hit.node.id, hit.score, hit.via) for hit in results]


def assert_same_answers(a: SoulGraph, b: SoulGraph, questions: list[str]) -> None:
    """Everything a client can ask of the two graphs gets the same answer, bit for bit."""
    assert {i: n.to_dict() for i, n in a.nodes.items()} == {i: n.to_dict() for i, n in b.nodes.items()}
    assert set(a.edges()) == set(b.edges())
    assert a.tags == b.tags and a.pinned == b.pinned
    assert list(a.order.ascending()) == list(b.order.ascending())
    assert a.next_id == b.next_id
    assert {i: n.to_dict() for i, n in a.branch.items()} == {i: n.to_dict() for i, n in b.branch.items()}
    assert a.branch_parents == b.branch_parents
    assert [n.id for n in a.hot(7)] == [n.id for n in b.hot(7)]
    for tag in ["lesson", "axiom", "project:x", "missing"]:
        assert [n.id for n in a.by_tag(tag)] == [n.id for n in b.by_tag(tag)]
    for question in questions:
        for k in (1, 4):
            for weight in (0.0, 0.5, 2.0):
                assert hits(a.query(question, k, recency_weight=weight)) == \
                       hits(b.query(question, k, recency_weight=weight))
        assert hits(a.query(question, 5, hint="graph memory")) == hits(b.query(question, 5, hint="graph memory"))
        assert hits(a.query(question, 5, tag="lesson")) == hits(b.query(question, 5, tag="lesson"))
        assert hits(a.related(question, 6)) == hits(b.related(question, 6))
        prime_a, prime_b = a.prime(question, 4), b.prime(question, 4)
        assert [n.id for n in prime_a["hot"]] == [n.id for n in prime_b["hot"]]
        assert (prime_a["focus"] and (prime_a["focus"].node.id, prime_a["focus"].score)) == \
               (prime_b["focus"] and (prime_b["focus"].node.id, prime_b["focus"].score))
        assert [(n.id, d, r) for n, d, r in prime_a["walk"]] == [(n.id, d, r) for n, d, r in prime_b["walk"]]


def assert_same_internals(a: SoulGraph, b: SoulGraph, fresh: bool = True) -> None:
    """The loaded graph is the one-by-one graph down to orders nobody should rely on."""
    assert list(a.nodes) == list(b.nodes)
    assert all(a.nodes[i] == b.nodes[i] for i in b.nodes)
    for mine, theirs in ((a.parents, b.parents), (a.children, b.children), (a.tags, b.tags)):
        assert list(mine) == list(theirs)
        assert all(list(mine[key]) == list(theirs[key]) for key in theirs)
    assert list(a.pinned) == list(b.pinned)
    assert list(a.order.ascending()) == list(b.order.ascending())
    assert a.order.root == b.order.root and len(a.order) == len(b.order)
    ia, ib = a.index, b.index
    assert ia._postings == ib._postings  # a set sized once at a load iterates in another order; a tuple in node order
    assert ia._slot_of == ib._slot_of and ia._id_at == ib._id_at
    assert ia.ids_by_id() == ib.ids_by_id()
    assert ia._indexed == ib._indexed and ia._texts is ib._texts is None  # texts read from the nodes
    if fresh:
        assert a.dirty == set() and not a.branch_dirty


# ----------------------------------------------------------------- the property
VOCABULARY = ["splay", "tree", "trees", "deploy", "host", "Memory", "graph", "agent", "hermes", "venv",
              "axiom", "the", "a", "café", "ΟΔΟΣ", "naïve", "queries", "w1", "über-Host"]
texts = st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=6).map(" ".join)
tag_lists = st.lists(st.sampled_from(["lesson", "axiom", "project:x", "Émigré"]), max_size=2)


def apply(graph: SoulGraph, step: tuple) -> None:
    """One change; a refused link (cycle) changes nothing, on either graph."""
    kind, *args = step
    ids = sorted(graph.nodes)
    if kind == "add":
        content, tags, picks = args
        graph.add(content, tags, parents=[ids[p % len(ids)] for p in picks] if ids else [])
    elif kind == "time":
        graph.clock.now += args[0]
    elif kind == "explore":
        graph.explore(args[0])
    elif kind == "promote" and graph.branch:
        graph.promote(sorted(graph.branch)[args[0] % len(graph.branch)])
    elif ids and kind == "link":
        try:
            graph.link(ids[args[0] % len(ids)], ids[args[1] % len(ids)])
        except CycleError:
            pass
    elif ids and kind == "splay":
        graph.splay(ids[args[0] % len(ids)])
    elif ids and kind == "pin":
        graph.pin(ids[args[0] % len(ids)], args[1])
    elif ids and kind == "tag":
        graph.tag(ids[args[0] % len(ids)], *args[1])


add_steps = st.tuples(st.just("add"), texts, tag_lists, st.lists(st.integers(0, 99), max_size=2))
steps = st.one_of(
    add_steps,
    st.tuples(st.just("link"), st.integers(0, 99), st.integers(0, 99)),
    st.tuples(st.just("splay"), st.integers(0, 99)),
    st.tuples(st.just("pin"), st.integers(0, 99), st.booleans()),
    st.tuples(st.just("tag"), st.integers(0, 99), tag_lists),
    st.tuples(st.just("time"), st.floats(0, 3 * DAY)),
    st.tuples(st.just("explore"), texts),
    st.tuples(st.just("promote"), st.integers(0, 99)),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(adds=st.lists(add_steps, min_size=1, max_size=15), before=st.lists(steps, max_size=40),
       after=st.lists(steps, max_size=15),
       questions=st.lists(texts, min_size=1, max_size=3), shuffle=st.randoms(use_true_random=False),
       shuffled=st.booleans())
def test_loaded_graph_equals_the_graph_it_was_saved_from(adds, before, after, questions, shuffle, shuffled):
    original = SoulGraph(clock=Clock())
    for step in adds + before:
        apply(original, step)
    records = records_of(original)
    if shuffled:  # a file in another order: edges may point backwards, slots differ
        shuffle.shuffle(records)
    loaded = load(original, records)
    one_by_one = insert_one_by_one(records, original.next_id, exploration_of(original), original.clock)
    assert_same_internals(loaded, one_by_one)
    assert_same_answers(loaded, original, questions)
    assert_same_answers(loaded, one_by_one, questions)
    # Later changes keep them equal (the loaded structures are ordinary ones).
    for step in after:
        apply(original, step)
        apply(loaded, step)
        apply(one_by_one, step)
    assert_same_answers(loaded, original, questions)
    assert_same_answers(loaded, one_by_one, questions)
    assert_same_internals(loaded, one_by_one, fresh=False)


# ----------------------------------------------------------------- the parts
@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 100, 1023, 1024, 1025])
def test_tree_from_sorted_is_balanced_and_ordered(n):
    items = [(float(i // 2), f"n{i:05d}") for i in range(n)]
    tree = SplayTree.from_sorted(items)
    assert list(tree.ascending()) == items and list(tree.descending()) == items[::-1] and len(tree) == n

    def depth(entry) -> int:
        return 0 if entry is None else 1 + max(depth(entry.left), depth(entry.right))

    assert depth(tree._root) == n.bit_length()
    rng = random.Random(n)
    for item in rng.sample(items, min(n, 40)):  # it is a working splay tree
        tree.remove(item)
        items.remove(item)
    tree.insert((0.25, "new"))
    assert list(tree.ascending()) == sorted(items + [(0.25, "new")])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(st.characters(codec="utf-8"), max_size=30) | st.text("aB9 _-.'\n\x00ΣσςÉİ", max_size=20),
                max_size=12), st.sampled_from([2, 3, 128]))
def test_add_many_indexes_like_add(texts, posting_set_from):
    """The same postings, in the same form: a tuple (in node order) below `POSTING_SET_FROM`
    ids, a set from there on; here from 2 or 3 on too, so the bulk path makes sets."""
    from unittest.mock import patch

    from soulgraph.engine import index as index_module

    with patch.object(index_module, "POSTING_SET_FROM", posting_set_from):
        one = InvertedIndex()
        for position, text in enumerate(texts):
            one.add(f"n{position}", text)
        many = InvertedIndex()
        many.add_many([f"n{position}" for position in range(len(texts))], texts)
    assert many._postings == one._postings
    assert {type(posting) for posting in many._postings.values()} <= {tuple, set}
    assert many._slot_of == one._slot_of and many._texts == one._texts and len(many) == len(one)
    for position, text in enumerate(texts):
        assert many.document_words(f"n{position}") == frozenset(words(text))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text("ab cd ef gh  Σσ", max_size=24), max_size=16), st.sampled_from([1, 2, 3]),
       st.sampled_from([2, 128]), st.sampled_from([0, 3]))
def test_add_many_in_a_large_index_makes_the_common_words_masks(texts, min_df, posting_set_from, already):
    """In a large index (here from 0 slots) the bulk path leaves what `add` of each node and then
    `build_common_masks` leave: the common words (here in `min_df` nodes or more) as masks
    only, the others' postings in the same form; also onto an index already holding nodes."""
    from unittest.mock import patch

    from soulgraph.engine import index as index_module

    with patch.object(index_module, "SETS_DROPPED_FROM", 0), patch.object(index_module, "MASK_MIN_DF", min_df), \
            patch.object(index_module, "MASK_SHARE", 10**9), patch.object(index_module, "POSTING_SET_FROM", posting_set_from):
        one, many = InvertedIndex(), InvertedIndex()
        for index in (one, many):
            for position, text in enumerate(texts[:already]):
                index.add(f"n{position}", text)
        for position, text in enumerate(texts[already:], already):
            one.add(f"n{position}", text)
        one.build_common_masks()
        many.add_many([f"n{position}" for position in range(already, len(texts))], texts[already:])
        built = many.build_common_masks()  # onto an index in use, the old words' masks are left to it
        assert built == 0 or already
        for index in (one, many):
            assert not index._masks.keys() & index._postings.keys()
            assert all(len(index.posting(word)) < min_df for word in index._postings)
    assert many._masks == one._masks and many._mask_sizes == one._mask_sizes
    assert {w: set(p) for w, p in many._postings.items()} == {w: set(p) for w, p in one._postings.items()}
    assert many._slot_of == one._slot_of and many._texts == one._texts


def test_add_many_on_an_index_in_use_and_with_masks():
    index = InvertedIndex()
    index.add("a", "splay tree")
    index.add_many(["b", "c"], ["splay host", "tree tree"])
    assert index.posting("splay") == {"a", "b"} and index.posting("tree") == {"a", "c"}
    index.mask("splay")
    index.add_many(["d", "a"], ["splay", "host"])  # masks and a re-indexed node: one by one
    assert index.posting("splay") == {"b", "d"} and index.mask("splay") == index.mask_of(["b", "d"])
    assert index.slot("a") == 0 and index.slot("d") == 3


# ----------------------------------------------------------------- malformed records
GOOD = {"id": "n1", "content": "Switch the runtime", "tags": ["lesson"], "created_at": 1_700_000_000.0,
        "last_accessed": 1_700_000_100.0, "access_count": 2, "pinned": False, "metadata": {"kind": "note"},
        "parents": []}


def with_field(**changes) -> dict:
    record = dict(GOOD)
    for field, value in changes.items():
        if value is ...:
            del record[field]
        else:
            record[field] = value
    return record


BAD_RECORDS = [
    ("not an object", ["n1"], "record", "object"),
    ("id missing", with_field(id=...), "id", "missing"),
    ("id a number", with_field(id=7), "id", "non-empty string"),
    ("id empty", with_field(id=""), "id", "non-empty string"),
    ("content missing", with_field(content=...), "content", "missing"),
    ("content not a string", with_field(content=["text"]), "content", "string"),
    ("tags a string", with_field(tags="lesson"), "tags", "list of strings"),
    ("tags holding a number", with_field(tags=["lesson", 3]), "tags", "list of strings"),
    ("created_at a string", with_field(created_at="yesterday"), "created_at", "number"),
    ("created_at a bool", with_field(created_at=True), "created_at", "number"),
    ("created_at infinite", with_field(created_at=math.inf), "created_at", "finite"),
    ("last_accessed nan", with_field(last_accessed=math.nan), "last_accessed", "finite"),
    ("last_accessed too large", with_field(last_accessed=10**400), "last_accessed", "finite"),
    ("last_accessed null", with_field(last_accessed=None), "last_accessed", "number"),
    ("access_count negative", with_field(access_count=-1), "access_count", "integer"),
    ("access_count a bool", with_field(access_count=True), "access_count", "integer"),
    ("access_count a float", with_field(access_count=2.0), "access_count", "integer"),
    ("access_count huge", with_field(access_count=10**30), "access_count", "integer"),
    ("pinned a number", with_field(pinned=1), "pinned", "true or false"),
    ("pinned a string", with_field(pinned="yes"), "pinned", "true or false"),
    ("metadata a list", with_field(metadata=[["kind", "note"]]), "metadata", "object"),
    ("parents a string", with_field(parents="n0"), "parents", "list of strings"),
    ("parents holding a number", with_field(parents=[0]), "parents", "list of strings"),
]


@pytest.mark.parametrize("case, record, field, phrase", BAD_RECORDS, ids=[case[0] for case in BAD_RECORDS])
def test_a_malformed_record_is_refused_naming_the_field(case, record, field, phrase):
    with pytest.raises(ValueError) as refused:
        parse_node_record(record, "node 17")
    message = str(refused.value)
    assert message.startswith("node 17: ") and field in message and phrase in message and "\n" not in message
    # The same record in a file: refused by the loader, naming its position (and id), on
    # the bulk path (other records clean) as on the record-by-record one.
    others = [with_field(id=f"x{i}") for i in range(3)]
    with pytest.raises(ValueError) as refused:
        load_graph([*others, record], next_id=1, exploration=None)
    assert str(refused.value).startswith("node 3") and field in str(refused.value)


def test_missing_optional_fields_take_the_old_defaults():
    record = {"id": "n1", "content": "bare", "created_at": 5}
    node, parents = parse_node_record(record, "node 0")
    assert node == Node.from_dict(record) and parents == []
    assert node.created_at == 5.0 and type(node.created_at) is float and node.last_accessed == 5.0
    second = {**GOOD, "id": "n2"}
    graph = load_graph([record, second], next_id=3, exploration=None)
    assert graph.nodes["n1"] == Node.from_dict(record) and graph.nodes["n2"] == Node.from_dict(second)


def test_integer_times_are_read_as_floats_on_the_bulk_path():
    records = [with_field(id=f"n{i}", created_at=1_700_000_000 + i, last_accessed=1_700_000_000 + i) for i in range(5)]
    graph = load_graph(records, next_id=6, exploration=None)
    assert all(type(node.created_at) is float and type(node.last_accessed) is float for node in graph.nodes.values())
    assert_same_internals(graph, insert_one_by_one(records, 6, None, graph.clock))


def test_the_loader_keeps_no_reference_to_the_records():
    records = [dict(GOOD)]
    graph = load_graph(records, next_id=2, exploration=None)
    records[0]["tags"].append("changed")
    records[0]["metadata"]["kind"] = "changed"
    assert graph.nodes["n1"].tags == ["lesson"] and graph.nodes["n1"].metadata == {"kind": "note"}


@pytest.mark.parametrize("records, phrase", [
    ([with_field(id="a"), with_field(id="a")], "'a' appears twice"),
    ([with_field(id="a", parents=["ghost"])], "parent 'ghost' is not a node"),
    ([with_field(id="a", parents=["b"]), with_field(id="b", parents=["a"])], "cycle through a, b"),
    ([with_field(id="a", parents=["a"])], "cycle through a"),
    ("nodes", "nodes must be a list"),
])
def test_a_damaged_graph_is_refused(records, phrase):
    with pytest.raises(ValueError, match=phrase):
        load_graph(records, next_id=1, exploration=None)


def test_edges_pointing_backwards_without_a_cycle_load():
    records = [with_field(id="a", parents=["b"]), with_field(id="b", parents=["c"]), with_field(id="c")]
    graph = load_graph(records, next_id=1, exploration=None)
    assert {i: set(p) for i, p in graph.parents.items()} == {"a": {"b"}, "b": {"c"}, "c": set()}
    assert {i: set(c) for i, c in graph.children.items()} == {"a": set(), "b": {"a"}, "c": {"b"}}


@pytest.mark.parametrize("exploration, phrase", [
    ("none", "exploration must be null or an object"),
    ({"hypotheses": []}, "exploration must be null or an object"),
    ({"nodes": {"id": "h"}}, "exploration must be null or an object"),
    ({"nodes": [with_field(id="h", tags="x")]}, "hypothesis 0 (id 'h'): tags"),
    ({"nodes": [with_field(id="n1")]}, "'n1' appears twice"),
    ({"nodes": [with_field(id="h", parents=["ghost"])]}, "parent 'ghost' is not a node or a hypothesis"),
])
def test_a_bad_exploration_branch_is_refused(exploration, phrase):
    with pytest.raises(ValueError) as refused:
        load_graph([dict(GOOD)], next_id=2, exploration=exploration)
    assert phrase in str(refused.value)


def test_the_exploration_branch_loads():
    hypothesis = with_field(id="h1", parents=["n1"], metadata={"hypothesis": True})
    graph = load_graph([dict(GOOD)], next_id=3, exploration={"nodes": [hypothesis]})
    assert graph.branch == {"h1": Node.from_dict(hypothesis)} and graph.branch_parents == {"h1": {"n1"}}
    assert load_graph([dict(GOOD)], next_id=3, exploration=None).branch == {}
    assert not graph.changed
    graph.promote("h1")
    assert set(graph.parents["h1"]) == {"n1"} and set(graph.children["n1"]) == {"h1"}


@pytest.mark.parametrize("next_id", [0, -3, "5", 5.0, True, None])
def test_next_id_must_be_a_positive_integer(next_id):
    with pytest.raises(ValueError, match="next_id"):
        load_graph([], next_id=next_id, exploration=None)


def test_an_empty_graph_loads():
    graph = load_graph([], next_id=4, exploration={"nodes": []}, clock=Clock())
    assert len(graph) == 0 and graph.next_id == 4 and graph.query("anything") == [] and graph.hot() == []
    assert graph.add("first").id == "n4"


# ----------------------------------------------------------------- the benchmark's graph
def test_synthetic_20k_graph_loads_equal():
    sys.path.insert(0, str(BENCH))
    try:
        import synthetic
    finally:
        sys.path.remove(str(BENCH))
    original = synthetic.build(20000)
    rng = random.Random(7)
    for _ in range(50):  # a few edges pointing backwards in the file, so the load runs its cycle check
        try:
            original.link(f"n{rng.randrange(15000, 20001)}", f"n{rng.randrange(1, 100)}")
        except CycleError:
            pass
    records = records_of(original)
    loaded = load(original, records)
    one_by_one = insert_one_by_one(records, original.next_id, exploration_of(original), original.clock)
    assert_same_internals(loaded, one_by_one)
    questions = synthetic.questions(60)
    assert_same_answers(loaded, one_by_one, questions[:20])
    for question in questions:
        assert hits(loaded.query(question, 10)) == hits(original.query(question, 10))
        assert hits(loaded.related(question, 10)) == hits(original.related(question, 10))
    assert [n.id for n in loaded.hot(30)] == [n.id for n in original.hot(30)]


def test_a_consuming_load_keeps_none_of_the_parsed_objects():
    """`consume=True` (what a store's load passes): the records are emptied once read, and the
    graph holds objects of its own, so the parse's memory is whole and free afterwards."""
    import json

    clock = Clock()
    graph = SoulGraph(clock=clock)
    for i in range(40):
        graph.add(f"note {i} about the splay tree", ["project:soul", f"topic:{i % 3}"],
                  parents=[f"n{i}"] if i else [], metadata={"sources": [f"s{i}"]} if i % 2 else None)
    text = json.dumps(records_of(graph))
    records = json.loads(text)
    parsed = [value for record in records for value in (record["content"], record["created_at"], *record["tags"])]
    kept = set(map(id, parsed))  # `parsed` holds them, so no new object can take their addresses
    loaded = load_graph(records, next_id=graph.next_id, exploration=None, clock=clock, consume=True)
    assert records == []
    assert_same_internals(loaded, load_graph(json.loads(text), next_id=graph.next_id, exploration=None, clock=clock))
    mine = {id(value) for node in loaded.nodes.values() for value in (node.content, node.created_at, *node.tags)}
    assert not mine & kept
    tags = [node.tags[0] for node in loaded.nodes.values()]
    assert all(tag is tags[0] for tag in tags)  # a tag seen 40 times is one object
