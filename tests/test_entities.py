"""Entities (memory/entities.py): the recogniser on sentences of our own, the links turn capture
writes through the real memory service, scopes, prefetch's boost, and soul_query's `about`
through the MCP SDK's client."""

import json

import pytest

from soulgraph.engine.graph import Hit, SoulGraph
from soulgraph.hermes.memory_service import MemoryService
from soulgraph.memory import entities
from soulgraph.memory.write import remember
from soulgraph.store import SoulFile
from tests.mcp_session import with_server

ALICE, BOB = "telegram:alice-1001", "telegram:bob-2002"
AWS_KEY = "AKIAZ3QXJ5LRTNOPQR7S"  # a made-up key in the form of a real one


def names(text, speakers=(), known=()):
    return [(e.name, e.type) for e in entities.recognise(text, speakers, known)]


def keys(text, speakers=(), known=()):
    return [e.key for e in entities.recognise(text, speakers, known)]


# ------------------------------------------------------------------ the recogniser
def test_names_inside_sentences_are_found_and_typed():
    assert names("We had lunch with Priya and then drove to Lisbon.") == [("Priya", "other"), ("Lisbon", "place")]
    assert names("I asked Priya about it.", speakers=["Priya"]) == [("Priya", "person")]
    assert names("My sister works at Northwind Labs in Ohio now.") == [("Northwind Labs", "organisation"),
                                                                       ("Ohio", "place")]
    assert names("We met Dr. Amara Osei yesterday; Amara was kind.") == [("Dr. Amara Osei", "person"),
                                                                         ("Amara", "person")]
    assert names('Have you read "The Quiet Harbour" yet?') == [("The Quiet Harbour", "work")]
    assert names("We toured the University of Leeds with the kids.") == [("University of Leeds", "organisation")]


def test_one_entity_whatever_the_case_the_possessive_or_the_title():
    assert entities.key("Priya") == entities.key("priya") == entities.key("Priya's") == entities.key("PRIYA’s") == "priya"
    assert entities.key("Dr. Priya Patel") == entities.key("priya patel") == "priya-patel"
    assert entities.key("New York") == "new-york" and entities.tag("Priya's") == "entity:priya"
    assert keys("Priya's garden is lovely, and priya knows it. Priya said so.", speakers=["Priya"]) == ["priya"]


def test_a_word_opening_a_sentence_needs_evidence():
    # Common words opening a sentence are no names ...
    assert names("Blue calms me. Dance is my passion. Nature heals.") == []
    # ... nor greetings and interjections before a name, which is kept.
    assert keys("Hey Tomas! Thanks Ines, that helps. Wow Rafael, well done.") == ["tomas", "ines", "rafael"]
    # Evidence: a speaker, a place of the gazetteer, an inner capital, a known entity, the same
    # word capitalised inside a sentence of the same text.
    assert keys("Tomas called.", speakers=["Tomas"]) == ["tomas"]
    assert keys("Portugal was sunny.") == ["portugal"]
    assert keys("McAllister won again.") == ["mcallister"]
    assert keys("Biscuit chewed my shoe.") == [] and keys("Biscuit chewed my shoe.", known={"biscuit"}) == ["biscuit"]
    assert keys("Biscuit chewed my shoe. I love Biscuit anyway.") == ["biscuit"]
    # A run of capitalised words at a start is a name; a function word before it is not.
    assert keys("Rosa Delgado called. It's Valencia, next week.") == ["rosa-delgado", "valencia"]


def test_what_is_not_a_name():
    assert names("I think I'm fine, and on Monday in June I'll call Mom for Christmas.") == []
    assert names("OK, LOL, that was fun.") == []
    # Code, paths and addresses are not read; ids and keys are no names.
    assert names("Run `SoulGraph.query` from src/Engine/Graph.py or mail Ana@example.com.") == []
    assert names(f"the key {AWS_KEY} and the id Ab3c4d5E leaked") == []
    assert names("") == [] and names("all lower case, nothing here") == []


def test_many_names_are_capped_and_each_key_comes_once():
    text = ", ".join(f"Name{chr(65 + i)}x" for i in range(26))
    found = entities.recognise("We invited " + text + ".")
    assert len(found) == entities.MAX_ENTITIES and len({e.key for e in found}) == len(found)


# ------------------------------------------------------------------ links through the service
@pytest.fixture
def service(tmp_path):
    return MemoryService(SoulFile(tmp_path / "soul.json"), embed=False)


def ok(service, op, **args):
    answer = service.handle({"id": 1, "op": op, "args": args})
    assert answer["ok"], answer
    return answer["result"]


def test_a_turn_is_tagged_with_the_entities_it_names(service):
    first = ok(service, "sync_turn", user="My neighbour Priya Anand lent me her ladder for the garden.",
               assistant="That was kind of Priya.", session_id="s1")["id"]
    plain = ok(service, "sync_turn", user="what time is it", assistant="noon", session_id="s1")["id"]
    graph = service.soul.graph()
    node = graph.nodes[first]
    assert {"entity:priya-anand", "entity:priya"} <= set(node.tags) and "turn" in node.tags
    assert node.metadata["entities"] == {"Priya Anand": "other", "Priya": "other"}
    # The labels of the turn's text ("User:", "Assistant:") are no entities, nor is anything in a plain turn.
    assert not [t for t in graph.nodes[plain].tags if t.startswith(entities.TAG_PREFIX)]
    assert "entity:user" not in graph.tags and "entity:assistant" not in graph.tags
    # Once known, a name that opens a sentence is recognised too.
    later = ok(service, "sync_turn", user="Priya called again.", assistant="Nice.", session_id="s2")["id"]
    assert "entity:priya" in service.soul.graph().nodes[later].tags
    assert [n.id for n in entities.about(service.soul.graph(), "Priya")] == [later, first]


def test_a_secret_never_becomes_an_entity(service):
    written = ok(service, "sync_turn", user=f"Here is my key {AWS_KEY} for Ferdinand to use.", assistant="Removed it.",
                 session_id="s1")
    graph = service.soul.graph()
    node = graph.nodes[written["id"]]
    assert written["redacted"] and AWS_KEY not in json.dumps(node.to_dict())
    assert [t for t in node.tags if t.startswith(entities.TAG_PREFIX)] == ["entity:ferdinand"]


def test_another_user_entity_memories_are_never_returned(service):
    ok(service, "sync_turn", user="My daughter Lucia starts school in Porto.", assistant="Exciting!",
       session_id="a1", scope=ALICE)
    # Alice's Lucia is no evidence for a name opening Bob's sentence: Bob's scope knows none yet.
    opening = ok(service, "sync_turn", user="Lucia never called.", assistant="Hm.", session_id="b1", scope=BOB)["id"]
    assert "entity:lucia" not in service.soul.graph().nodes[opening].tags
    ok(service, "sync_turn", user="My colleague Lucia owes me lunch.", assistant="Ha.", session_id="b1", scope=BOB)
    with service.soul.change() as graph:
        remember(graph, "Lucia Ferreira runs the office in Porto", writer="operator", kind="semantic_fact",
                 tags=entities.link_tags(entities.recognise("Lucia Ferreira runs the office in Porto")))
    graph = service.soul.graph()
    for reader, mine, theirs in ((ALICE, "daughter", "owes me"), (BOB, "owes me", "daughter")):
        found = [n.content for n in entities.about(graph, "Lucia", scope=reader)]
        assert any(mine in c for c in found) and not any(theirs in c for c in found), found
        assert any("runs the office" in c for c in found)  # the shared memory reaches both
        assert found[0].startswith("Lucia Ferreira")  # a typed memory before the turns
        assert "entity:lucia" in entities.resolve(graph, "lucia", reader)
    shared = [n.content for n in entities.about(graph, "Lucia")]
    assert shared == ["Lucia Ferreira runs the office in Porto"]
    # Known entities are a scope's own: Bob's "Lucia" is no evidence in Alice's turns.
    assert "lucia" in entities.Known(graph, BOB) and "lucia" not in entities.Known(graph, "telegram:carol-3")
    assert [e["key"] for e in entities.entity_list(graph, ALICE)][:1] in (["lucia"], ["porto"])


def test_prefetch_boosts_memories_about_the_turn_entities():
    graph = SoulGraph(clock=lambda: 1000.0)
    about_ines = remember(graph, "Ines prefers window seats on trains", ["entity:ines"], writer="t",
                          kind="preference").node
    other = remember(graph, "The train to Faro leaves at nine", ["entity:faro"], writer="t").node
    mine = remember(graph, "Ines is allergic to peanuts", ["entity:ines"], writer="t", scope=ALICE).node
    assert entities.query_tags(graph, "Should I book a train for Ines?") == ["entity:ines"]
    assert entities.query_tags(graph, "Should I book a train for Marta?") == []
    hits = [Hit(other, 2.0, "match"), Hit(about_ines, 1.5, "match")]
    boosted = entities.boost(graph, hits, ["entity:ines"])
    assert [h.node.id for h in boosted] == [about_ines.id, other.id] and boosted[0].score == pytest.approx(2.25)
    # A memory about the entity the search did not reach comes in, only if the reader sees it.
    assert mine.id not in [h.node.id for h in entities.boost(graph, hits[:1], ["entity:ines"])]
    added = entities.boost(graph, hits[:1], ["entity:ines"], scope=ALICE)
    assert {h.node.id for h in added} == {other.id, about_ines.id, mine.id}
    assert entities.boost(graph, hits, []) == hits


def test_prefetch_lifts_what_is_held_of_a_rare_entity_of_the_turn_not_of_one_named_everywhere(service):
    """The people who do the talking are named in most turns ("Caroline: …"): boosting them would
    favour whatever mentions them; a name the turn brings up that few memories hold is lifted."""
    for i in range(12):
        ok(service, "sync_turn", user=f"Caroline told me about her week, part {i}, and the garden plans.",
           assistant="Noted.", session_id="s1")
    priya = ok(service, "sync_turn", user="My neighbour Priya grows tomatoes and basil.",
               assistant="Lovely.", session_id="s2")["id"]
    graph = service.soul.graph()
    question = "What does Caroline think of Priya and the garden plans?"
    # Caroline is in 12 of 13 memories: no query tag (without the rule she would be one)
    assert entities.query_tags(graph, question) == ["entity:priya"]
    shown = service.recall(query=question, limit=3)
    assert shown["ids"][0] == priya, shown["text"]


# ------------------------------------------------------------------ soul_query(about=...)
def test_soul_query_about_through_the_mcp_client(tmp_path):
    soul_file = tmp_path / "soul.json"
    service = MemoryService(SoulFile(soul_file), embed=False)
    ok(service, "sync_turn", user="Priya Patel is moving to Denver in May.", assistant="Noted.", session_id="s1")
    ok(service, "sync_turn", user="Yesterday Priya's dog Miso chewed a shoe.", assistant="Cute.", session_id="s1")
    ok(service, "sync_turn", user="The garden needs water.", assistant="OK.", session_id="s1")
    ok(service, "sync_turn", user="Priya from my team hates mornings.", assistant="Noted.", session_id="b1",
       scope=BOB)
    with service.soul.change() as graph:
        remember(graph, "Old note: Oskar fixed the boiler", writer="operator")  # written with no entity tag

    async def scenario(session):
        everything = await session.call("soul_query", about="Priya")
        narrowed = await session.call("soul_query", query="dog", about="priya")
        full_name = await session.call("soul_query", about="Priya Patel")
        nobody = await session.call("soul_query", about="Zbigniew")
        by_words = await session.call("soul_query", about="Oskar")
        return everything, narrowed, full_name, nobody, by_words

    everything, narrowed, full_name, nobody, by_words = with_server(soul_file, scenario, ["--no-embed"])
    contents = [r["content"] for r in everything["results"]]
    assert len(contents) == 2 and "Miso" in contents[0] and "Denver" in contents[1], contents  # newest first
    assert all(r["via"] == "about Priya" for r in everything["results"])
    assert not any("mornings" in c for c in contents)  # Bob's, and the server serves the shared scope
    assert [r["content"] for r in narrowed["results"]] == [contents[0]]
    assert [r["content"] for r in full_name["results"]] == [contents[1]]
    assert nobody["results"] == []
    assert [r["content"] for r in by_words["results"]] == ["Old note: Oskar fixed the boiler"]


def test_a_typed_memory_consolidation_makes_is_linked_to_the_entities_it_names(service):
    ok(service, "sync_turn", user="I prefer meeting Priya Anand in Lisbon on Fridays.", assistant="Noted.",
       session_id="s1")
    made = ok(service, "consolidate", session_id="s1")["added"]
    assert made, "the preference was not consolidated"
    graph = service.soul.graph()
    typed = graph.nodes[made[0]["id"]]
    assert typed.kind != "episodic_event"
    assert {"entity:priya-anand", "entity:lisbon"} <= set(typed.tags)
    assert typed.metadata["entities"]["Priya Anand"] in entities.TYPES
    assert entities.about(graph, "Priya Anand")[0].id == typed.id  # typed memories first
