"""A node's parents and children: tuples while few, a set once many (engine/edges.py), and a
graph that behaves the same either way, loaded or built one change at a time."""

from __future__ import annotations

from soulgraph.engine import edges
from soulgraph.engine.graph import SoulGraph
from soulgraph.store import SoulFile


def test_packed_drops_repeats_keeps_order_and_turns_to_a_set_when_many():
    assert edges.packed(["b", "a", "b"]) == ("b", "a")
    assert edges.packed([]) is edges.NONE
    many = edges.packed(f"n{i}" for i in range(edges.SET_FROM))
    assert type(many) is set and len(many) == edges.SET_FROM


def test_joined_and_parted_change_what_they_must_and_nothing_else():
    few = edges.joined(edges.NONE, "a")
    assert few == ("a",) and edges.joined(few, "a") is few  # already in: the same container
    assert edges.parted(few, "zzz") is few and edges.parted(few, "a") == ()
    grown = edges.NONE
    for i in range(edges.SET_FROM + 3):
        grown = edges.joined(grown, f"n{i}")
        assert len(grown) == i + 1
    assert type(grown) is set
    assert edges.parted(grown, "n0") is grown and "n0" not in grown  # a set is changed in place


def hub_graph(children: int) -> SoulGraph:
    graph = SoulGraph(clock=lambda: 1_700_000_000.0)
    hub = graph.add("a session with many turns", ["session"])
    for i in range(children):
        graph.add(f"turn {i} about splay trees", ["turn"], parents=[hub.id])
    return graph


def test_a_hub_and_its_children_survive_a_save_and_a_load(tmp_path):
    graph = hub_graph(edges.SET_FROM * 3)
    assert type(graph.children["n1"]) is set and type(graph.parents["n2"]) is tuple
    SoulFile(tmp_path / "soul.json").save(graph)
    loaded = SoulFile(tmp_path / "soul.json").graph()
    for node_id in graph.nodes:
        assert set(loaded.parents[node_id]) == set(graph.parents[node_id])
        assert set(loaded.children[node_id]) == set(graph.children[node_id])
        assert type(loaded.children[node_id]) is type(graph.children[node_id])
    assert {n.id for n, _ in loaded.discover("n1", depth=1)} == set(graph.children["n1"])
    loaded.remove("n5")
    assert "n5" not in loaded.children["n1"] and len(loaded.children["n1"]) == edges.SET_FROM * 3 - 1


def test_a_removed_parent_leaves_no_edge_behind_in_small_edge_lists():
    graph = SoulGraph(clock=lambda: 1_700_000_000.0)
    a = graph.add("first note", [])
    b = graph.add("second note", [], parents=[a.id])
    c = graph.add("third note", [], parents=[a.id, b.id])
    graph.remove(b.id)
    assert set(graph.parents[c.id]) == {a.id} and set(graph.children[a.id]) == {c.id}
    assert list(graph.edges()) == [(a.id, c.id)]


def test_packed_all_leaves_plain_groups_and_packs_the_others():
    hub = tuple(f"n{i}" for i in range(edges.SET_FROM + 1))
    groups = [("a",), (), ("b", "b"), hub, ("c", "d")]
    packed = edges.packed_all(groups)
    assert packed[0] is groups[0] and packed[4] is groups[4]
    assert packed[2] == ("b",) and type(packed[3]) is set and packed[3] == set(hub)
    assert edges.packed_all([["x", "x"]]) == [("x",)]  # lists: each packed
