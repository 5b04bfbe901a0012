"""Invariants that must hold after any sequence of operations (hypothesis, stateful).

After every step: the splay tree's order is the recency score's order computed from
scratch; the edges form a DAG; the index answers what a brute-force scan answers;
and saving then loading gives an equal graph. A change can be taken back exactly
(`rollback`), and replaying its record (`pending`) on a copy gives the same graph.
"""

import math
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from soulgraph.engine.graph import DAY, CycleError, SoulGraph, SoulGraphError
from soulgraph.engine.index import InvertedIndex, words
from soulgraph.store import SoulFile

VOCABULARY = ["splay", "tree", "deploy", "host", "memory", "graph", "agent", "hermes", "venv", "axiom", "the", "a"]
texts = st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=6).map(" ".join)


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def brute_force_query(graph: SoulGraph, text: str, k: int, weight: float) -> list[tuple[str, float]]:
    """The scoring rule written out plainly over every node, for comparison."""
    query = words(text)
    recall = [node for node in graph.nodes.values() if node.status == "active"]  # default recall only
    n_docs = len(recall)
    df = {w: sum(1 for node in recall if w in words(node.content + " " + " ".join(node.tags))) for w in query}
    order = sorted((w for w in query if df[w]), key=lambda w: (-math.log1p(n_docs / df[w]), w))
    results = []
    for node in recall:
        doc = words(node.content + " " + " ".join(node.tags))
        lexical = 0.0
        for w in order:
            if w in doc:
                lexical += math.log1p(n_docs / df[w])
        if lexical:
            recency = node.recency_score(graph.clock())
            boost = 1.0 + weight * recency / (1.0 + recency) if weight else 1.0
            results.append((node.id, lexical * boost))
    results.sort(key=lambda pair: (-pair[1], pair[0]))
    return results[:k]


def state_of(graph: SoulGraph) -> tuple:
    """Everything observable about a graph, for equality checks."""
    return (
        {i: graph.record(i) for i in graph.nodes},
        sorted(graph.edges()),
        {i: n.to_dict() for i, n in graph.branch.items()},
        {i: sorted(p) for i, p in graph.branch_parents.items()},
        graph.next_id,
        [n.id for n in graph.hot(50)],
        {tag: sorted(ids) for tag, ids in graph.tags.items()},
        sorted(graph.pinned),
        [(h.node.id, h.score) for h in graph.query("splay tree deploy host", 10)],
        [(h.node.id, h.score, h.via) for h in graph.related("memory graph agent", 10)],
    )


def replica_of(graph: SoulGraph) -> SoulGraph:
    """A copy built the way another process replays a journal: from records alone."""
    replica = SoulGraph(clock=graph.clock)
    replica.apply_change({"nodes": [graph.record(i) for i in graph.nodes], "next_id": graph.next_id,
                          "branch": graph.branch_records()})
    return replica


class GraphMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = Clock()
        self.graph = SoulGraph(clock=self.clock)
        self.folder = tempfile.TemporaryDirectory()
        self.soul = SoulFile(Path(self.folder.name) / "soul.json", clock=self.clock)

    def teardown(self) -> None:
        self.folder.cleanup()

    def ids(self) -> list[str]:
        return sorted(self.graph.nodes)

    @rule(content=texts, tags=st.lists(st.sampled_from(["lesson", "axiom", "project:x"]), max_size=2),
          n_parents=st.integers(0, 2), data=st.data())
    def add(self, content, tags, n_parents, data):
        ids = self.ids()
        parents = data.draw(st.lists(st.sampled_from(ids), max_size=n_parents)) if ids else []
        self.graph.add(content, tags, parents=parents)

    @precondition(lambda self: len(self.graph) >= 2)
    @rule(data=st.data())
    def link(self, data):
        parent = data.draw(st.sampled_from(self.ids()))
        child = data.draw(st.sampled_from(self.ids()))
        edges_before = set(self.graph.edges())
        try:
            self.graph.link(parent, child)
        except CycleError:
            assert set(self.graph.edges()) == edges_before  # a refusal changes nothing

    @precondition(lambda self: len(self.graph) >= 1)
    @rule(data=st.data())
    def splay(self, data):
        self.graph.splay(data.draw(st.sampled_from(self.ids())))

    @precondition(lambda self: len(self.graph) >= 1)
    @rule(data=st.data(), pinned=st.booleans())
    def pin(self, data, pinned):
        self.graph.pin(data.draw(st.sampled_from(self.ids())), pinned)

    @precondition(lambda self: len(self.graph) >= 1)
    @rule(data=st.data(), status=st.sampled_from(["active", "archived", "superseded", "contradicted"]))
    def set_status(self, data, status):
        """Out of default recall and back: search, hot and related must follow."""
        self.graph.update(data.draw(st.sampled_from(self.ids())), status=status)
        hot = self.graph.hot(50)
        assert all(node.status == "active" for node in hot)

    @rule(seconds=st.floats(0, 10 * DAY))
    def time_passes(self, seconds):
        self.clock.now += seconds

    @rule(content=texts)
    def explore(self, content):
        self.graph.explore(content)

    @precondition(lambda self: bool(self.graph.branch))
    @rule(data=st.data())
    def promote(self, data):
        self.graph.promote(data.draw(st.sampled_from(sorted(self.graph.branch))))

    @rule(steps=st.lists(st.sampled_from(["add", "splay", "pin", "link", "tag", "explore", "promote"]),
                         min_size=1, max_size=5),
          keep=st.booleans(), content=texts, data=st.data())
    def change_kept_or_rolled_back(self, steps, keep, content, data):
        """What the store does around every change: keep it and journal its record (a
        replica replaying that record must equal the graph), or take it back exactly."""
        started, before = self.clock.now, state_of(self.graph)
        replica = replica_of(self.graph)
        self.graph.begin()
        for step in steps:
            ids, hypotheses = self.ids(), sorted(self.graph.branch)
            pick = lambda choices: data.draw(st.sampled_from(choices))  # noqa: E731
            try:
                if step == "add":
                    self.graph.add(content, ["lesson"], parents=[pick(ids)] if ids else [])
                elif step == "explore":
                    self.graph.explore(content)
                elif step == "promote" and hypotheses:
                    self.graph.promote(pick(hypotheses))
                elif ids and step == "splay":
                    self.graph.splay(pick(ids))
                elif ids and step == "pin":
                    self.graph.pin(pick(ids), data.draw(st.booleans()))
                elif ids and step == "tag":
                    self.graph.tag(pick(ids), "project:x")
                elif ids and step == "link":
                    self.graph.link(pick(ids), pick(ids))
            except SoulGraphError:
                pass  # refused before it changed anything
            self.clock.now += 1
        change = self.graph.pending()
        if keep:
            self.graph.end()
            if change is not None:
                replica.apply_change(change)
            assert state_of(replica) == state_of(self.graph)
        else:
            self.graph.rollback()
            later, self.clock.now = self.clock.now, started  # compare at the same moment
            assert state_of(self.graph) == before
            self.clock.now = later

    @rule(text=texts, k=st.integers(1, 8), weight=st.sampled_from([0.0, 0.5, 2.0]))
    def query_matches_brute_force(self, text, k, weight):
        got = [(h.node.id, h.score) for h in self.graph.query(text, k, recency_weight=weight)]
        assert got == brute_force_query(self.graph, text, k, weight)

    @invariant()
    def tree_order_is_score_order(self):
        now = self.clock.now
        ascending = [node_id for _, node_id in self.graph.order.ascending()]
        assert sorted(ascending) == sorted(self.graph.nodes)
        scores = [self.graph.nodes[i].recency_score(now) for i in ascending]
        for lower, higher in zip(scores, scores[1:]):
            assert lower <= higher * (1 + 1e-9) or lower <= 1e-300

    @invariant()
    def edges_are_acyclic(self):
        # Kahn's algorithm: every node is removed iff there is no cycle.
        indegree = {i: len(self.graph.parents[i]) for i in self.graph.nodes}
        ready = [i for i, d in indegree.items() if d == 0]
        removed = 0
        while ready:
            node_id = ready.pop()
            removed += 1
            for child in self.graph.children[node_id]:
                indegree[child] -= 1
                if indegree[child] == 0:
                    ready.append(child)
        assert removed == len(self.graph.nodes)

    @invariant()
    def indexes_hold_each_nodes_words_as_it_is_now(self):
        """The indexes keep no copy of a node's text: what they hold must still be the words a
        fresh index finds in each node's content and tags (tags change, status moves a node
        between the two indexes, a rollback puts old nodes back)."""
        for index, active in ((self.graph.index, True), (self.graph.archive_index, False)):
            fresh = InvertedIndex()
            for node in self.graph.nodes.values():
                if (node.status == "active") == active:
                    fresh.add(node.id, node.content + " " + " ".join(node.tags))
            held = index._postings.keys() | index._masks.keys()
            assert held == fresh._postings.keys()
            assert {word: set(index.holders(word)) for word in held} == {w: set(p) for w, p in fresh._postings.items()}
            assert set(self.graph.nodes) >= index._indexed == fresh._indexed
            assert all(index.word_count(i) == fresh.word_count(i) for i in fresh._indexed)

    @invariant()
    def save_then_load_is_equal(self):
        self.soul.save(self.graph)
        loaded = SoulFile(self.soul.path, clock=self.clock).graph()
        assert {i: n.to_dict() for i, n in loaded.nodes.items()} == {i: n.to_dict() for i, n in self.graph.nodes.items()}
        assert set(loaded.edges()) == set(self.graph.edges())
        assert {i: n.to_dict() for i, n in loaded.branch.items()} == {i: n.to_dict() for i, n in self.graph.branch.items()}
        assert loaded.branch_parents == self.graph.branch_parents
        assert [n.id for n in loaded.hot(10)] == [n.id for n in self.graph.hot(10)]
        assert loaded.next_id == self.graph.next_id


GraphMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestGraphProperties = GraphMachine.TestCase


# Skewed word frequencies, so that queries mix rare and common words and the pruned
# search really does skip candidates.
ZIPF_WORDS = [f"w{i}" for i in range(30)]
zipf_text = st.lists(st.integers(0, 29).map(lambda i: ZIPF_WORDS[min(i, (i * i) // 29)]), min_size=1, max_size=8).map(" ".join)


def graph_of(docs: list[tuple[str, int, float]]) -> SoulGraph:
    """A graph of (text, uses, age) notes, each used `uses` times when it was written."""
    clock = Clock()
    graph = SoulGraph(clock=clock)
    for text, uses, age in docs:
        node = graph.add(text, created_at=clock.now - age)
        for _ in range(uses):
            graph.splay(node.id, at=clock.now - age)
    return graph


@settings(max_examples=200, deadline=None)
@given(
    docs=st.lists(st.tuples(zipf_text, st.integers(0, 5), st.floats(0, 3 * DAY)), min_size=1, max_size=60),
    question=zipf_text,
    k=st.integers(1, 10),
    weight=st.sampled_from([0.0, 0.3, 0.5, 3.0]),
)
def test_pruned_search_equals_brute_force(docs, question, k, weight):
    graph = graph_of(docs)
    got = [(h.node.id, h.score) for h in graph.query(question, k, recency_weight=weight)]
    assert got == brute_force_query(graph, question, k, weight)


@settings(max_examples=200, deadline=None)
@given(
    docs=st.lists(st.tuples(zipf_text, st.integers(0, 5), st.floats(0, 3 * DAY)), min_size=1, max_size=60),
    later=st.lists(st.tuples(zipf_text, st.integers(0, 2)), max_size=10),
    questions=st.lists(zipf_text, min_size=1, max_size=3),
    k=st.integers(1, 10),
    weight=st.sampled_from([0.0, 0.3, 0.5, 3.0]),
    idle=st.sampled_from([0.0, 40 * DAY, 800 * DAY]),
    min_df=st.sampled_from([1, 3, 8]),
    sets_dropped_from=st.sampled_from([0, 10**9]),
)
def test_bitmask_search_equals_brute_force(docs, later, questions, k, weight, idle, min_df, sets_dropped_from):
    """The same comparison with the bitmask machinery forced on at this small size:
    masks for every word in `min_df` nodes, recency tiers from 2 nodes up, groups of more
    than 2 equal scores taken through the tiers; then nodes added, re-tagged and used
    after the masks exist; then time passes (40 days: boosts almost equal; 800 days:
    exactly 1.0, so only ids break ties). Masked words keep their sets, or lose them
    (`sets_dropped_from` 0: what a large index does)."""
    from unittest.mock import patch

    from soulgraph.engine import graph as graph_module, index as index_module
    from soulgraph.engine.bitsets import RecencyTiers

    with patch.object(index_module, "MASK_MIN_DF", min_df), patch.object(index_module, "MASK_SHARE", 10**9), \
            patch.object(index_module, "SETS_DROPPED_FROM", sets_dropped_from), \
            patch.object(graph_module, "_SMALL_GROUP", 2), patch.object(RecencyTiers, "SMALLEST", 2):
        graph = graph_of(docs)
        clock = graph.clock
        for question in questions:
            graph.query(question, k, recency_weight=weight)  # builds masks and tiers
        for position, (text, uses) in enumerate(later):
            node = graph.add(text)
            for _ in range(uses):
                graph.splay(node.id)
            graph.tag(f"n{1 + position % len(docs)}", ZIPF_WORDS[position % 5])
            clock.now += 60
        clock.now += idle
        for question in questions:
            got = [(h.node.id, h.score) for h in graph.query(question, k, recency_weight=weight)]
            assert got == brute_force_query(graph, question, k, weight)


SCOPES = ("", "telegram:1", "telegram:2", "slack:U3")


@settings(max_examples=150, deadline=None)
@given(
    docs=st.lists(st.tuples(zipf_text, st.integers(0, 5), st.floats(0, 3 * DAY), st.sampled_from(SCOPES)),
                  min_size=1, max_size=60),
    later=st.lists(st.tuples(zipf_text, st.sampled_from(SCOPES)), max_size=8),
    rescope=st.lists(st.tuples(st.integers(0, 59), st.sampled_from(SCOPES)), max_size=5),
    removed=st.lists(st.integers(0, 59), max_size=4),
    questions=st.lists(zipf_text, min_size=1, max_size=3),
    reader=st.sampled_from(SCOPES),
    k=st.integers(1, 10),
    weight=st.sampled_from([0.0, 0.5, 3.0]),
    min_df=st.sampled_from([1, 3]),
    sets_dropped_from=st.sampled_from([0, 10**9]),
)
def test_a_search_that_excludes_other_users_equals_brute_force_over_what_the_reader_sees(
        docs, later, rescope, removed, questions, reader, k, weight, min_df, sets_dropped_from):
    """`exclude=hidden_from(scope)` keeps the pruned search and its mask groups (forced on
    here) and must give exactly the brute-force ranking of the reader's own nodes, also after
    memories are added, moved to another scope and removed once the hidden set exists."""
    from unittest.mock import patch

    from soulgraph.engine import graph as graph_module, index as index_module
    from soulgraph.engine.bitsets import RecencyTiers

    with patch.object(index_module, "MASK_MIN_DF", min_df), patch.object(index_module, "MASK_SHARE", 10**9), \
            patch.object(index_module, "SETS_DROPPED_FROM", sets_dropped_from), \
            patch.object(graph_module, "_SMALL_GROUP", 2), patch.object(RecencyTiers, "SMALLEST", 2):
        clock = Clock()
        graph = SoulGraph(clock=clock)
        for text, uses, age, scope in docs:
            node = graph.add(text, created_at=clock.now - age, scope=scope)
            for _ in range(uses):
                graph.splay(node.id, at=clock.now - age)
        hidden = graph.hidden_from(reader)
        for question in questions:
            graph.query(question, k, recency_weight=weight, exclude=hidden)  # builds masks and tiers
        for text, scope in later:
            graph.add(text, scope=scope)
        ids = sorted(graph.nodes)
        for at, scope in rescope:
            graph.update(ids[at % len(ids)], scope=scope)
        for at in removed:
            left = sorted(graph.nodes)
            if len(left) > 1:
                graph.remove(left[at % len(left)])
        assert graph.hidden_from(reader) is hidden
        assert hidden == {i for i, n in graph.nodes.items() if n.scope not in ("", reader)}
        assert hidden.mask == graph.index.mask_of(hidden)
        for question in questions:
            got = [(h.node.id, h.score) for h in graph.query(question, k, recency_weight=weight, exclude=hidden)]
            every = brute_force_query(graph, question, len(graph.nodes), weight)
            assert got == [(i, score) for i, score in every if i not in hidden][:k]


@settings(max_examples=150, deadline=None)
@given(
    docs=st.lists(st.tuples(zipf_text, st.integers(0, 3), st.floats(0, 3 * DAY)), min_size=1, max_size=50),
    later=st.lists(zipf_text, max_size=8),
    removed=st.lists(st.integers(0, 49), max_size=5),
    question=zipf_text,
    chosen=st.lists(st.integers(0, 59), max_size=20),
    k=st.integers(1, 10),
    weight=st.sampled_from([0.0, 0.5]),
    min_df=st.sampled_from([1, 3]),
    sets_dropped_from=st.sampled_from([0, 20]),
    posting_set_from=st.sampled_from([2, 3, 128]),
)
def test_common_words_kept_as_masks_only_score_as_their_sets_did(
        docs, later, removed, question, chosen, k, weight, min_df, sets_dropped_from, posting_set_from):
    """Once a word's mask is built its set is dropped (in a large index: here from 0 or 20
    slots, so masks made while small lose their sets as the graph grows): every reader of
    postings (the scores of given candidates, a search with a filter, which sums every
    posting, df and idf) must give exactly the brute-force answers, also after adds and
    removals once the masks exist. A rare word's posting is a tuple below `posting_set_from`
    ids and a set from there (here from 2 or 3 on, so words cross over as nodes come and go)."""
    from unittest.mock import patch

    from soulgraph.engine import index as index_module

    with patch.object(index_module, "MASK_MIN_DF", min_df), patch.object(index_module, "MASK_SHARE", 10**9), \
            patch.object(index_module, "SETS_DROPPED_FROM", sets_dropped_from), \
            patch.object(index_module, "POSTING_SET_FROM", posting_set_from):
        graph = graph_of(docs)
        built = graph.index.build_common_masks()
        assert built == len(graph.index._masks)
        for text in later:
            graph.add(text)
        graph.index.build_common_masks()
        if graph.index.n_slots >= sets_dropped_from:
            assert not graph.index._masks.keys() & graph.index._postings.keys()  # the mask is the posting
        for at in removed:
            left = sorted(graph.nodes)
            if len(left) > 1:
                graph.remove(left[at % len(left)])
        every = dict(brute_force_query(graph, question, len(graph.nodes), 0.0))
        ids = sorted(graph.nodes)
        asked = {ids[at % len(ids)] for at in chosen} | {"no-such-node"}
        assert graph.scores_of(question, asked, recency_weight=0.0) == {i: s for i, s in every.items() if i in asked}
        odd = {i for position, i in enumerate(ids) if position % 2}
        got = [(h.node.id, h.score) for h in graph.query(question, k, recency_weight=weight, where=lambda n: n.id in odd)]
        ranked = brute_force_query(graph, question, len(graph.nodes), weight)
        assert got == [(i, s) for i, s in ranked if i in odd][:k]
        for word in words(question):
            holders = {i for i, n in graph.nodes.items() if word in words(n.content + " " + " ".join(n.tags))}
            assert graph.index.posting(word) == holders and set(graph.index.holders(word)) == holders
            assert graph.index.df(word) == len(holders)
        for word, posting in graph.index._postings.items():  # a tuple only while few, never a repeat
            assert posting and (type(posting) is set or (type(posting) is tuple and len(posting) < posting_set_from
                                                         and len(set(posting)) == len(posting))), (word, posting)


@settings(max_examples=300, deadline=None)
@given(n_slots=st.integers(0, 5000), data=st.data())
def test_a_mask_of_slots_has_exactly_their_bits(n_slots, data):
    """Whatever the order and repeats of the slots; a slot past the last byte is refused."""
    from soulgraph.engine.bitsets import mask_of_slots

    slots = data.draw(st.lists(st.integers(0, max(0, n_slots - 1)), max_size=3 * n_slots)) if n_slots else []
    assert mask_of_slots(slots, n_slots) == sum(1 << slot for slot in set(slots))
    assert mask_of_slots(iter(slots), n_slots) == mask_of_slots(tuple(reversed(slots)), n_slots)
    with pytest.raises(IndexError):
        mask_of_slots([(n_slots + 7) // 8 * 8], n_slots)
