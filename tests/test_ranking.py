"""Recall's ranking (memory/ranking.py): trust from confidence and reinforcement, replacements of
superseded memories, and the MMR pass against near-copies; and that with nothing to act on it
returns exactly what the engine's exact search returns."""

import pytest
from hypothesis import given, settings, strategies as st

from soulgraph.engine.graph import SoulGraph
from soulgraph.memory import lifecycle, ranking
from soulgraph.memory.filters import where
from tests.mcp_session import Session, with_server

DAY = 86400.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def ids(hits):
    return [hit.node.id for hit in hits]


def test_lower_confidence_ranks_below_the_same_words_at_the_default():
    graph = SoulGraph(clock=Clock(), recency_weight=0.0)
    unsure = graph.add("the staging database lives on db2", confidence=0.2)
    sure = graph.add("the staging database lives on db3")
    assert ids(ranking.recall(graph, "staging database", 2)) == [sure.id, unsure.id]
    assert ids(graph.query("staging database", 2)) == [unsure.id, sure.id]  # the engine alone: by id


def test_a_confirmed_memory_ranks_higher_and_the_lift_fades_back_to_a_fresh_ones():
    graph = SoulGraph(clock=Clock(), recency_weight=0.0)
    plain = graph.add("release notes go in CHANGES.md")
    confirmed = graph.add("release notes go in NEWS.md")
    for _ in range(3):
        lifecycle.confirm(graph, confirmed.id, writer="t")
    assert ids(ranking.recall(graph, "release notes", 2)) == [confirmed.id, plain.id]
    node, now = graph.nodes[confirmed.id], graph.clock()
    assert ranking.ranking_strength(node, now) == pytest.approx(4.0)
    assert ranking.ranking_strength(node, now + 30 * DAY) == pytest.approx(2.0)
    assert ranking.ranking_strength(node, now + 3650 * DAY) == 1.0  # back to a fresh memory's, no lower
    # Age alone costs an unconfirmed memory nothing.
    assert ranking.ranking_strength(graph.nodes[plain.id], now + 3650 * DAY) == 1.0


def test_a_weakened_memory_stays_below_until_confirmed_again():
    graph = SoulGraph(clock=Clock(), recency_weight=0.0)
    doubted = graph.add("the VPN needs split tunnelling")
    other = graph.add("the VPN needs a hardware key")
    lifecycle.weaken(graph, doubted.id, writer="t")
    graph.clock.now += 365 * DAY
    assert ids(ranking.recall(graph, "VPN needs", 2)) == [other.id, doubted.id]
    lifecycle.confirm(graph, doubted.id, writer="t")
    assert ids(ranking.recall(graph, "VPN needs", 2)) == [doubted.id, other.id]


def test_the_strength_half_life_is_a_setting():
    graph = SoulGraph(clock=Clock())
    node = graph.add("x marks the spot")
    lifecycle.confirm(graph, node.id, writer="t")  # stored strength 2
    now = graph.clock() + 10 * DAY
    assert ranking.ranking_strength(node, now) == pytest.approx(2 * 2 ** (-10 / 30))
    graph.strength_half_life = 10 * DAY
    assert ranking.ranking_strength(node, now, graph.strength_half_life) == pytest.approx(1.0)
    graph.clock.now = now
    lifecycle.confirm(graph, node.id, writer="t")  # what was left (1.0) plus one
    assert graph.nodes[node.id].strength == pytest.approx(2.0)


NEAR_COPIES = [
    "The user prefers dark mode in the code editor",
    "User prefers the code editor in dark mode",
    "The user prefers dark mode for the code editor",
    "In the code editor the user prefers dark mode",
    "The user prefers a dark mode code editor",
]


def test_five_near_copies_do_not_fill_a_top_five():
    graph = SoulGraph(clock=Clock(), recency_weight=0.0)
    copies = [graph.add(text).id for text in NEAR_COPIES]
    others = [graph.add("dark mode also in the terminal, says the user").id,
              graph.add("the user wants dark mode dashboards").id]
    top = ids(ranking.recall(graph, "user dark mode editor", 5))
    assert set(others) <= set(top) and top[0] in copies
    # Without the pass (lambda 1) the copies take every place: the pass is what changed it.
    assert set(ids(ranking.recall(graph, "user dark mode editor", 5, mmr_lambda=1.0))) == set(copies)
    # Nothing else matches: the copies still come back rather than nothing.
    assert set(ids(ranking.recall(graph, "code editor", 5))) == set(copies)


def test_short_names_that_match_are_not_taken_for_copies():
    graph = SoulGraph(clock=Clock(), recency_weight=0.0)
    first = graph.add("Token Standard")
    second = graph.add("Token Standard")
    graph.add("Payable Token extension for vending")
    assert ids(ranking.recall(graph, "token standard", 2)) == [first.id, second.id]


def test_a_search_in_words_ranks_the_shorter_of_two_equal_matches_first():
    """A title-like search: both memories hold its words, the engine ties them (and breaks the
    tie by id, the long one first); recall weighs their lengths and puts the short one, which
    is about those words, first. A question is left in the engine's order."""
    graph = SoulGraph(clock=Clock())
    long = graph.add("Fee market change for the chain, with notes on burning, block elasticity, "
                     "wallet defaults, miner tips and the plan for existing clients")
    short = graph.add("Fee market change")
    graph.clock.now += 30 * DAY  # recency long gone: the words alone decide
    title = "fee market change"
    engine = graph.query(title, 2)
    assert ids(engine) == [long.id, short.id] and engine[0].score == engine[1].score
    assert ids(ranking.recall(graph, title, 2)) == [short.id, long.id]
    assert ids(ranking.recall(graph, "what is the fee market change?", 2)) == [long.id, short.id]
    # Bounded: of mean length, a match keeps its score; far longer, it keeps three quarters.
    factors = ranking.length_factors(graph, engine)
    assert factors[0] < 1.0 < factors[1] < 1.2
    assert ranking.length_factors(graph, engine[:1]) == [1.0]
    among_short = ranking.length_factors(graph, [engine[1]] * 99 + [engine[0]])[-1]  # 5x the mean: capped at 4x
    assert among_short == pytest.approx(2.2 / (1 + 1.2 * (0.8 + 0.2 * 4))) and among_short > 0.75


def test_a_superseded_memory_that_matches_brings_its_replacement():
    graph = SoulGraph(clock=Clock())
    tea = graph.add("The user drinks green tea every morning", kind="preference")
    graph.add("The office kitchen has a kettle")
    graph.clock.now += 40 * DAY
    espresso = graph.add("Switched to a double espresso", kind="preference")
    lifecycle.supersede(graph, tea.id, espresso.id, writer="user")
    assert ids(graph.query("green tea morning", 5)) == []  # the new one shares no word
    found = ranking.recall(graph, "green tea morning", 5)
    assert [(h.node.id, h.via) for h in found] == [(espresso.id, f"replaces {tea.id}")]
    # A chain is followed to the memory current now.
    graph.clock.now += DAY
    latte = graph.add("Now a flat white, no more espresso", kind="preference")
    lifecycle.supersede(graph, espresso.id, latte.id, writer="user")
    assert ids(ranking.recall(graph, "green tea morning", 5)) == [latte.id]
    # Filters apply to the replacement as to any result.
    assert ranking.recall(graph, "green tea morning", 5, where=where(kinds=("routine",))) == []
    assert ranking.recall(graph, "green tea morning", 5, tag="drinks") == []


def test_a_weak_match_on_a_replaced_memory_brings_nothing():
    graph = SoulGraph(clock=Clock(), recency_weight=0.0)
    old = graph.add("meetings on the fourth floor")
    new = graph.add("meetings moved upstairs")
    lifecycle.supersede(graph, old.id, new.id, writer="t")
    strong = [graph.add(f"floor plan revision {i} of the fourth floor").id for i in range(3)]
    found = ranking.recall(graph, "fourth floor plan revision", 3)
    assert ids(found) == sorted(strong) and all(h.via == "match" for h in found)


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta"]),
                               min_size=1, max_size=4), min_size=1, max_size=40),
       question=st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta", "omega"]), min_size=1, max_size=3),
       k=st.integers(1, 12))
def test_with_default_records_and_no_pass_recall_is_the_engine_search(texts, question, k):
    """Trust is the same factor for every default memory, no memory is superseded: recall
    without the MMR pass must return the engine's matches, each weighed by its length
    (`length_factors`: a search in words), best first; asked as a question, the engine's
    exact top k, in order."""
    graph = SoulGraph(clock=Clock())
    for i, text in enumerate(texts):
        graph.clock.now += 3600
        node = graph.add(" ".join(text))
        if i % 3 == 0:
            graph.splay(node.id)
    query = " ".join(question)
    found = graph.query(query, max(ranking.pool(k), ranking.CONTEXT_DEPTH))
    weighed = sorted(zip(found, ranking.length_factors(graph, found) if found else []),
                     key=lambda pair: (-pair[0].score * pair[1], pair[0].node.id))
    assert ids(ranking.recall(graph, query, k, mmr_lambda=1.0)) == [hit.node.id for hit, _ in weighed[:k]]
    assert ids(ranking.recall(graph, query + "?", k, mmr_lambda=1.0)) == ids(graph.query(query + "?", k))
    # With the pass: k results (or all there are), each once, all from the engine's matches.
    diverse = ids(ranking.recall(graph, query, k))
    matching = ids(graph.query(query, len(texts)))
    assert len(diverse) == len(set(diverse)) == min(k, len(matching)) and set(diverse) <= set(matching)


def test_soul_query_and_soul_related_rank_through_recall(tmp_path):
    async def scenario(s: Session):
        old = await s.call("soul_add", content="Backups go to the NAS in the basement")
        new = await s.call("soul_add", content="Offsite copies now land in object storage")
        await s.call("soul_update", node_id=old["id"], action="supersede", by_id=new["id"])
        unsure = await s.call("soul_add", content="ci runners use ubuntu images", confidence=0.1)
        sure = await s.call("soul_add", content="ci runners use debian images", confidence=0.9)
        return (old["id"], new["id"], unsure["id"], sure["id"],
                await s.call("soul_query", query="backups NAS basement"),
                await s.call("soul_query", query="ci runners images"),
                await s.call("soul_related", query="backups NAS basement"),
                await s.call("soul_query", query="backups NAS basement offsite", status="superseded"),
                await s.refused("soul_query", query="backups", status="forgotten"))

    old, new, unsure, sure, replaced, trusted, related, superseded, bad_status = with_server(
        tmp_path / "soul.json", scenario, extra_args=["--toolsets", "graph,memory", "--strength-half-life-days", "7"])
    assert [(r["id"], r["via"]) for r in replaced["results"]] == [(new, f"replaces {old}")]
    assert [r["id"] for r in trusted["results"]] == [sure, unsure]
    assert related["results"][0]["id"] == new
    assert [(r["id"], r["via"]) for r in superseded["results"]] == [(old, "archived")]
    assert "status" in bad_status and "forgotten" in bad_status


def _plain_mmr(ranked, k, mmr_lambda, question):
    """MMR as its definition reads, every candidate re-valued at every pick: the reference for
    `diversify`, whose shortcuts (a copy-free head returned as it is, a lazy look in score order)
    must change nothing."""
    head = min(k, ranking.MMR_DEPTH)
    left = list(ranked[:ranking.pool(head)])
    sets = {hit.node.id: ranking._copy_words(hit.node.content, question) for hit in left}

    def similarity(a, b):
        if not sets[a] or not sets[b]:
            return 0.0
        value = len(sets[a] & sets[b]) / len(sets[a] | sets[b])
        return value if value >= ranking.DUPLICATE_OVERLAP else 0.0

    best = ranked[0].score or 1.0
    picked = []
    while left and len(picked) < head:
        def value(position):
            hit = left[position]
            overlap = max((similarity(hit.node.id, p.node.id) for p in picked), default=0.0)
            return (mmr_lambda * hit.score / best - (1 - mmr_lambda) * overlap, hit.score, -position)
        picked.append(left.pop(max(range(len(left)), key=value)))
    chosen = {hit.node.id for hit in picked}
    return picked + [hit for hit in ranked if hit.node.id not in chosen][: k - len(picked)]


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(st.lists(st.sampled_from(["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"]),
                               min_size=1, max_size=6), min_size=1, max_size=30),
       question=st.lists(st.sampled_from(["alpha", "beta", "omega"]), min_size=1, max_size=2),
       k=st.integers(1, 14), mmr_lambda=st.sampled_from([0.0, 0.3, 0.5, 0.9]))
def test_the_variety_pass_is_plain_greedy_mmr(texts, question, k, mmr_lambda):
    graph = SoulGraph(clock=Clock())
    for i, text in enumerate(texts):
        graph.clock.now += 3600
        graph.add(" ".join(text))
    ranked = graph.query(" ".join(question + ["eta", "theta"]), 40)
    if not ranked:
        return
    words = frozenset(question)
    assert ids(ranking.diversify(ranked, k, mmr_lambda, words)) == ids(_plain_mmr(ranked, k, mmr_lambda, words))
