"""The engine's behaviour, one structure at a time, with a clock the test controls."""

import math

import pytest

from soulgraph.engine.graph import DAY, CycleError, SoulGraph, SoulGraphError, UnknownNode
from soulgraph.engine.index import words


class Clock:
    def __init__(self, now: float = 1_700_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def graph(clock):
    return SoulGraph(clock=clock)


def test_add_records_content_tags_and_time(graph, clock):
    node = graph.add("  use a splay tree for recency  ", ["lesson"], metadata={"source": "x"})
    assert node.content == "use a splay tree for recency"
    assert node.tags == ["lesson"]
    assert node.created_at == node.last_accessed == clock.now
    assert node.access_count == 0 and not node.pinned
    assert graph.get(node.id) is node
    assert [n.id for n in graph.by_tag("lesson")] == [node.id]


@pytest.mark.parametrize("content", ["", "   ", None, 42])
def test_empty_or_non_text_content_is_refused(graph, content):
    with pytest.raises(SoulGraphError, match="non-empty string"):
        graph.add(content)
    assert len(graph) == 0


def test_unknown_parent_is_refused_and_nothing_is_added(graph):
    with pytest.raises(UnknownNode, match="'nope'"):
        graph.add("x", parents=["nope"])
    assert len(graph) == 0


def test_cycle_is_refused_naming_both_nodes(graph):
    a = graph.add("a")
    b = graph.add("b", parents=[a.id])
    c = graph.add("c", parents=[b.id])
    with pytest.raises(CycleError) as err:
        graph.link(c.id, a.id)
    assert a.id in str(err.value) and c.id in str(err.value)
    with pytest.raises(CycleError):
        graph.link(a.id, a.id)
    assert sorted(graph.edges()) == sorted([(a.id, b.id), (b.id, c.id)])


def test_link_is_idempotent(graph):
    a, b = graph.add("a"), graph.add("b")
    assert graph.link(a.id, b.id) is True
    assert graph.link(a.id, b.id) is False
    assert list(graph.edges()) == [(a.id, b.id)]


def test_ancestors_discover_and_path(graph):
    root = graph.add("root")
    mid = graph.add("mid", parents=[root.id])
    leaf = graph.add("leaf", parents=[mid.id])
    other = graph.add("other", parents=[root.id])
    assert [(n.id, d) for n, d in graph.ancestors(leaf.id)] == [(mid.id, 1), (root.id, 2)]
    assert {(n.id, d) for n, d in graph.discover(root.id, depth=1)} == {(mid.id, 1), (other.id, 1)}
    assert {n.id for n, _ in graph.discover(root.id, depth=2)} == {mid.id, other.id, leaf.id}
    assert [n.id for n in graph.path(root.id, leaf.id)] == [root.id, mid.id, leaf.id]
    assert graph.path(leaf.id, root.id) is None
    with pytest.raises(UnknownNode):
        graph.discover("missing")


def test_hot_puts_pins_first_then_most_recent(graph, clock):
    old = graph.add("old axiom")
    graph.pin(old.id)
    ids = []
    for i in range(5):
        clock.advance(3600)
        ids.append(graph.add(f"note {i}").id)
    hot = [n.id for n in graph.hot(3)]
    assert hot == [old.id, ids[4], ids[3]]
    clock.advance(60)
    graph.splay(ids[0])
    assert [n.id for n in graph.hot(3)] == [old.id, ids[0], ids[4]]


def test_frequent_use_outweighs_a_little_age(graph, clock):
    often = graph.add("often used")
    for _ in range(20):
        graph.splay(often.id)
    clock.advance(DAY)  # (20 + 1) * e^-1 ≈ 7.7 beats a fresh node's 1.0
    fresh = graph.add("fresh")
    assert [n.id for n in graph.hot(2)] == [often.id, fresh.id]
    graph.splay(fresh.id)
    clock.advance(5 * DAY)  # often: 21 * e^-6 ≈ 0.052; fresh, used once: 2 * e^-5 ≈ 0.013
    assert [n.id for n in graph.hot(2)] == [often.id, fresh.id]
    for _ in range(3):
        graph.splay(fresh.id)  # four uses now: 5 * e^0 = 5 beats 21 * e^-6
    assert [n.id for n in graph.hot(2)] == [fresh.id, often.id]


def test_query_weights_rare_words_and_respects_recency_weight(graph, clock):
    common = [graph.add(f"deploy note {i}") for i in range(10)]
    rare = graph.add("deploy the splay tree")
    hits = graph.query("splay deploy", 3)
    assert hits[0].node.id == rare.id
    # A shared rare word scores more than a shared common word.
    assert hits[0].score > hits[1].score
    # Recency off: equal lexical scores rank by id; on: the recently used one wins.
    clock.advance(DAY)
    graph.splay(common[7].id)
    top_with = graph.query("note", 1)[0].node.id
    top_without = graph.query("note", 1, recency_weight=0)[0].node.id
    assert top_with == common[7].id
    assert top_without == min(n.id for n in common)


def test_a_question_finds_another_form_of_its_words(graph):
    """The index keys words by their stems: "camped" finds "camping", "run" finds "running"."""
    for other in ("Melanie: the beach was cold this morning", "Caroline: db7 and db8 are the staging databases"):
        graph.add(other)  # as near the question but for the word's form, and first on any tie
    camping = graph.add("Melanie: my family went camping at the beach")
    hobby = graph.add("Caroline: I have been running farther every week")
    assert [hit.node.id for hit in graph.query("where has Melanie camped?", 1)] == [camping.id]
    assert [hit.node.id for hit in graph.query("how far does Caroline run?", 1)] == [hobby.id]
    assert words("camped camping camps") == {"camp"}
    assert words("db7 ran 3D") == {"db7", "ran", "3d"}  # digits and short words as they are


def test_query_with_hint_and_tag(graph):
    a = graph.add("alpha beta", ["x"])
    b = graph.add("gamma", ["y"])
    merged = {h.node.id for h in graph.query("alpha", 5, hint="gamma")}
    assert merged == {a.id, b.id}
    assert [h.node.id for h in graph.query("alpha gamma", 5, tag="y")] == [b.id]
    assert graph.query("nothing matches", 5) == []


def test_related_follows_hits_to_parents_and_children(graph):
    foundation = graph.add("consensus protocol design")
    sibling = graph.add("fee market change for blocks", parents=[foundation.id])
    child = graph.add("wallet support", parents=[sibling.id])
    graph.add("unrelated gardening note")
    found = graph.related("fee market blocks", 5)
    ids = [h.node.id for h in found]
    assert ids[0] == sibling.id
    assert foundation.id in ids and child.id in ids
    via = {h.node.id: h.via for h in found}
    assert via[foundation.id] == f"parent of {sibling.id}"
    assert via[child.id] == f"child of {sibling.id}"
    # Plain search would not have found the foundation: it shares no word.
    assert foundation.id not in [h.node.id for h in graph.query("fee market blocks", 5)]


def test_prime_returns_hot_nodes_and_a_walk_from_the_best_match(graph):
    axiom = graph.add("always verify a host after deploy")
    graph.pin(axiom.id)
    base = graph.add("fleet rollout plan")
    step = graph.add("switch the runtime venv atomically", parents=[base.id])
    primed = graph.prime("runtime venv switch", 5)
    assert primed["hot"][0].id == axiom.id
    assert primed["focus"].node.id == step.id
    assert [(n.id, rel) for n, _, rel in primed["walk"]] == [(base.id, "ancestor")]
    assert graph.prime("", 5)["focus"] is None


def test_exploration_branch_and_promote(graph):
    fact = graph.add("the gateway restarts via systemd")
    hypo = graph.explore("maybe launchd needs user domain", ["hypothesis"], parents=[fact.id])
    assert hypo.id not in graph and len(graph) == 1
    assert graph.query("launchd", 5) == []
    second = graph.explore("built on the first hypothesis", parents=[hypo.id])
    promoted = graph.promote(hypo.id)
    assert promoted.id in graph and hypo.id not in graph.branch
    assert list(graph.edges()) == [(fact.id, hypo.id)]
    assert graph.query("launchd", 5)[0].node.id == hypo.id
    # The second hypothesis now has its parent in the graph, so promoting keeps the edge.
    graph.promote(second.id)
    assert (hypo.id, second.id) in set(graph.edges())
    with pytest.raises(SoulGraphError, match="not a hypothesis"):
        graph.promote(fact.id)


def test_from_dag_labels_types_and_axioms():
    dag = {
        "nodes": [
            {"id": "a", "label": "Agents remember", "type": "axiom"},
            {"id": "b", "label": "Use a graph", "type": "decision", "weight": 2},
        ],
        "edges": [{"from": "a", "to": "b"}],
    }
    graph = SoulGraph.from_dag(dag, clock=Clock())
    a, b = graph.get("a"), graph.get("b")
    assert a.content == "Agents remember" and a.pinned and a.tags == ["axiom"]
    assert b.tags == ["decision"] and not b.pinned and b.metadata == {"weight": 2}
    assert list(graph.edges()) == [("a", "b")]
    with pytest.raises(SoulGraphError, match="cannot read edge"):
        SoulGraph.from_dag({"nodes": [], "edges": [{"x": 1}]})


def test_recency_key_orders_like_the_score():
    clock = Clock()
    graph = SoulGraph(clock=clock)
    a = graph.add("a")
    clock.advance(DAY)
    b = graph.add("b")
    graph.splay(a.id, at=clock.now - DAY / 2)
    # Same order from the key and from the score, at any later moment.
    for later in (0, DAY, 30 * DAY):
        now = clock.now + later
        by_score = sorted([a, b], key=lambda n: n.recency_score(now))
        by_key = sorted([a, b], key=lambda n: n.recency_key)
        assert [n.id for n in by_score] == [n.id for n in by_key]
    assert math.isclose(math.log(a.recency_score(clock.now)), a.recency_key - clock.now / DAY)
