"""Memory that corrects itself: a later turn that changes a value marks or replaces the old memory.

Through the memory service Hermes' provider talks to (sync_turn, consolidate at session end,
recall as prefetch), and the rules of memory/updates.py on their own.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from soulgraph.hermes import consolidate as consolidation
from soulgraph.hermes import memory_service
from soulgraph.hermes.memory_service import MemoryService
from soulgraph.memory import lifecycle, ranking, updates
from soulgraph.store import SoulFile

ROOT = Path(__file__).resolve().parent.parent
DAY = 86400.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def service(tmp_path):
    clock = Clock()
    svc = MemoryService(SoulFile(tmp_path / "soul.json", clock=clock), embed=False)
    svc.clock = clock
    return svc


def session(service, session_id: str, *turns: str, scope: str = "") -> dict:
    for text in turns:
        service.clock.now += 60
        service.sync_turn(user=text, session_id=session_id, scope=scope)
    service.clock.now += 60
    return service.consolidate(session_id=session_id, scope=scope)


def test_a_move_and_a_new_favourite_replace_the_old_facts(service):
    first = session(service, "s1", "I live in Paris with my partner Sam", "My favourite drink is green tea")
    typed = {a["content"]: a["id"] for a in first["added"]}
    service.clock.now += 30 * DAY
    second = session(service, "s2", "we moved to Berlin last month, so I live in Berlin now",
                     "I quit green tea; these days my favourite drink is black coffee")
    changed = {(u["old"], u["new"]) for u in second["updated"]}
    assert changed == {("Paris", "Berlin"), ("green tea", "black coffee")}

    graph = service.soul.graph()
    old_home = graph.nodes[typed["I live in Paris with my partner Sam"]]
    assert old_home.status == "superseded" and "Berlin" in graph.nodes[old_home.superseded_by].content
    assert graph.nodes[typed["My favourite drink is green tea"]].status == "superseded"

    where = service.recall(query="where do I live?")["text"]
    lines = where.splitlines()
    assert "Berlin" in lines[0]
    paris = [line for line in lines if "Paris" in line]
    assert paris and all("since updated: Paris → Berlin" in line for line in paris)
    drink = service.recall(query="what is my favourite drink?")["text"].splitlines()
    assert "black coffee" in drink[0]
    assert all("since updated" in line for line in drink if "green tea" in line and "quit" not in line)


def test_a_changed_number_marks_the_turn_that_held_it(service):
    session(service, "s1", "My Zotero library has 45 sources, tagged by theme and date.")
    service.clock.now += 10 * DAY
    kept = session(service, "s2", "Good news: my Zotero library has now reached 52 sources.")
    assert [(u["old"], u["new"]) for u in kept["updated"]] == [("45", "52")]
    graph = service.soul.graph()
    old = graph.nodes[kept["updated"][0]["id"]]
    assert old.status == "active"  # a turn keeps the rest of what it says
    assert old.metadata[lifecycle.UPDATED][0]["new"] == "52"
    assert any(e["action"] == "revise" and e["node"] == old.id for e in graph.audit)
    text = service.recall(query="how many sources are in my Zotero library?")["text"]
    assert "since updated: 45 → 52" in text


@pytest.mark.parametrize("later", [
    "I increased my reading time by 25% this month.",  # a change by an amount, not a value
    "What if my Zotero library had 90 sources, would tagging still work?",  # a question
    "I'm planning to grow my Zotero library to 80 sources next year.",  # a plan
    "My rent went up to $1,200 a month.",  # another slot
    "My Zotero library has 45 sources, and now reached 45 sources again.",  # the same value
    "My Zotero library sources grew to 900 sources after the import.",  # twenty times as many: another count
])
def test_what_is_not_an_update_changes_nothing(service, later):
    session(service, "s1", "My Zotero library has 45 sources, tagged by theme and date.")
    service.clock.now += DAY
    assert session(service, "s2", later)["updated"] == []
    assert "since updated" not in service.recall(query="Zotero library sources")["text"]


def test_another_users_statement_never_changes_mine(service):
    session(service, "a1", "I live in Paris.", scope="telegram:1")
    service.clock.now += DAY
    assert session(service, "b1", "I live in Berlin now.", scope="telegram:2")["updated"] == []
    assert "since updated" not in service.recall(query="where do I live", scope="telegram:1")["text"]


def test_the_rules_read_cues_plans_and_code_apart():
    def cued(text):
        return [(v.text, v.was) for v in updates.values(text) if v.cued]

    assert cued("The dashboard API response time has recently improved to 250ms.") == [("250", "")]
    assert cued("I reduced the image size from 120MB to 85MB.") == [("85", "120")]
    assert cued("I won't meet the new April 25 deadline.") == [("April 25", "")]
    assert cued("How would increasing my bond allocation to 50% change the risk?") == []
    assert cued("I introduced a new data visualization technique on July 13.") == []
    assert cued("We volunteered at the New Gary Arts Festival on May 4.") == []
    assert cued("config.port = 8000; it was changed to 8080") == []  # code
    assert [v.type for v in updates.values("I moved to Lisbon.")] == ["lives in"]
    assert updates.values("I live in a small flat.") == []  # not a name
    # Each value is read in its own clause: a plan or a question elsewhere in the sentence does
    # not hold its change back, and the cue may come after it.
    assert cued("I'm considering new tools, given the commits merged into main, which has now reached 165.") \
        == [("165", "")]
    assert cued("My Zotero library has 52 sources since I just increased it.") == [("52", "")]
    assert cued("What if I had 90 sources, and then I increased it?") == []
    assert cued("I'm trying to adjust the deadline for my Instagram prototype to April 5, 2024.") \
        == [("April 5", "")]
    assert cued("I moved my attorney meeting from April 20 to May 1.") == [("May 1", "apr20")]
    assert cued("Upgrading my internet plan to 200 Mbps has been great.") == [("200", "")]  # a plan, the noun

    def aimed(text):
        return [(v.text, v.target) for v in updates.values(text) if v.type == "percent"]

    assert aimed("I'm trying to achieve 100% coverage, and I've currently reached 65%.") == [("100%", True),
                                                                                            ("65%", False)]
    assert aimed("It was adjusted to 40%, my new target.") == [("40%", True)]


def test_the_harness_scores_a_record_and_names_a_bad_line(tmp_path):
    history = [{"time": "2024-03-01", "speaker": "user", "text": "My Zotero library has 45 sources right now."},
               {"time": "2024-03-01", "speaker": "user", "text": "I also like long walks by the river."},
               {"time": "2024-03-09", "speaker": "user", "text": "My Zotero library has now reached 52 sources."}]
    record = {"id": "t-1-ku0", "history": history, "question": "How many sources are in my Zotero library?",
              "answer": "52", "current_evidence": [2], "stale_evidence": [0], "meta": {"tier": "t", "conversation": 1}}
    good = tmp_path / "updates.jsonl"
    good.write_text(json.dumps(record) + "\n", encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "soulgraph.eval", "updates", str(good), "--lexical", "--json"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["all"] == {"records": 1, "current_in_top": 1.0, "stale_shown_as_current": 0.0,
                             "current_above_stale": 1.0, "current_marked_older": 0.0, "notes": 1}
    assert report["revisions"][0]["from"] == "45" and report["revisions"][0]["to"] == "52"

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(record) + "\n{not json\n", encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "soulgraph.eval", "updates", str(bad)],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert run.returncode == 2 and f"{bad}:2: not JSON" in run.stderr


def test_prefetch_shows_only_what_is_valid_now(service):
    session(service, "s1", "The office wifi password rotates monthly; the office is on floor 3.",
            "The team lunch is on Fridays at the noodle bar.")
    graph = service.soul.graph()
    ids = {n.content: n.id for n in graph.nodes.values() if n.kind == "episodic_event" and "User:" in n.content}
    floor = next(i for c, i in ids.items() if "floor 3" in c)
    lunch = next(i for c, i in ids.items() if "noodle" in c)
    with service.soul.change() as graph:
        graph.update(floor, valid_to=service.clock.now - 1)  # ended
        graph.update(lunch, valid_from=service.clock.now + DAY)  # not yet
    text = service.recall(query="office floor and team lunch")["text"]
    assert "floor 3" not in text and "noodle" not in text
    service.clock.now += 2 * DAY
    assert "noodle" in service.recall(query="office floor and team lunch")["text"]


def test_consolidation_writes_every_kind_of_statement_without_its_filler(service):
    said = {
        "Also I prefer green tea.": ("preference", "I prefer green tea."),
        "I'm allergic to peanuts.": ("constraint", "I'm allergic to peanuts."),
        "Oh, I go running every morning.": ("routine", "I go running every morning."),
        "My colleague Priya reviews the deploys.": ("collaborator", "My colleague Priya reviews the deploys."),
        "I'm working on a budget tracker app.": ("project", "I'm working on a budget tracker app."),
        "I just finished my first marathon!": ("timeline_milestone", "I just finished my first marathon!"),
        "Restarting the router fixed the dropouts.": ("intervention_outcome",
                                                      "Restarting the router fixed the dropouts."),
        "That fixed it, thanks.": None,  # nothing a month later could read it by
        "What a day.": None,
    }
    kept = session(service, "s1", *said)
    assert {(a["kind"], a["content"]) for a in kept["added"]} == {v for v in said.values() if v}


def test_a_newer_value_for_what_the_question_asks_is_shown_above_the_older(service):
    """An update said with no cue ("I've got 52 sources in my Zotero library") supersedes nothing,
    but among what prefetch shows for a question about it, it stands above the older value."""
    session(service, "s1", "My Zotero library has 45 sources, my Zotero library sources are tagged by theme "
                           "and date in the Zotero library.")
    service.clock.now += 10 * DAY
    session(service, "s2", "I've got 52 sources in my Zotero library.",
            "My photo album has 300 photos from the trip.")
    question = "How many sources are in my Zotero library?"
    graph = service.soul.graph()
    turns_by_text = {n.content.removeprefix("User: "): n for n in graph.nodes.values() if n.kind == "episodic_event"}
    older = turns_by_text[next(t for t in turns_by_text if "45 sources" in t)]
    newer = turns_by_text[next(t for t in turns_by_text if "52 sources" in t)]
    photos = turns_by_text[next(t for t in turns_by_text if "photos" in t)]
    # On its own, the older turn ranks first (it says the question's words more often) ...
    assert updates.newer_first(question, [older, photos, newer]) == [newer, older, photos]
    # ... a value of another slot, or a question that names no slot, moves nothing.
    assert updates.newer_first("what about my photo album?", [older, newer]) == [older, newer]
    assert updates.newer_first("hello", [older, newer]) == [older, newer]
    shown = service.recall(query=question)["text"].splitlines()
    at = lambda words: next(i for i, line in enumerate(shown) if words in line)  # noqa: E731
    assert at("52 sources") < at("45 sources") and "since updated" not in "\n".join(shown)


def test_two_values_said_in_one_session_keep_the_order_they_were_said_in(service):
    """Consolidation writes a session's typed memories at its end, all at one moment; each is
    dated by the turn it came from, so the later of two values said in the session replaces the
    earlier, and recall shows that day."""
    # Words in a fifth of the memories or more tell no slot apart (updates._rare): a store this
    # small needs other memories for the challenge's words to count.
    session(service, "s0", *(f"Note {n}: the {thing} needs a look." for n, thing in enumerate((
        "boiler", "bike", "garden", "roof", "car", "printer", "fence", "shed", "sink", "oven", "door", "gate",
        "lamp", "stairs", "window", "chimney"))))
    service.clock.now += 3 * DAY
    kept = session(service, "s1", "I've joined a winter reading challenge and my goal is to read 10 books by March.",
                   "Something else: I'm repainting the kitchen this weekend.",
                   "My goal has been extended to 12 books for the winter reading challenge.")
    graph = service.soul.graph()
    typed = {n.content: n for n in graph.nodes.values() if n.source == consolidation.SOURCE}
    old = next(n for text, n in typed.items() if "10 books" in text)
    new = next(n for text, n in typed.items() if "12 books" in text)
    turn = lambda words: next(n for n in graph.nodes.values()  # noqa: E731
                              if n.kind == "episodic_event" and words in n.content)
    assert old.seen_at == turn("10 books").seen_at < new.seen_at == turn("12 books").seen_at < old.created_at
    assert old.status == "superseded" and old.superseded_by == new.id
    assert ("10", "12") in {(u["old"], u["new"]) for u in kept["updated"]}
    shown = service.recall(query="How many books am I aiming to read in my winter reading challenge?")["text"]
    first = shown.splitlines()[0]
    assert "12 books" in first
    assert time.strftime("%Y-%m-%d", time.gmtime(turn("12 books").created_at)) in first


def test_a_newer_count_whose_unit_is_only_in_its_words_is_shown_above_the_older(service):
    """"150 commits" and, later, "commits merged into main has now reached 165": the newer count
    names its unit before the number, and shares one question word with the older one's."""
    session(service, "s1", "I've tagged a release on GitHub with 150 commits and 12 branches merged.")
    service.clock.now += DAY
    session(service, "s2", "Given the growth of commits merged into the main branch, which has now reached 165, "
                           "how should I review them?", "My garden has 12 tomato plants.")
    graph = service.soul.graph()
    turn = lambda words: next(n for n in graph.nodes.values()  # noqa: E731
                              if n.kind == "episodic_event" and words in n.content)
    older, newer, garden = turn("150 commits"), turn("reached 165"), turn("tomato")
    question = "How many commits have been merged into the main branch?"
    assert updates.newer_first(question, [older, garden, newer]) == [newer, older, garden]
    assert updates.newer_first("How many plants are in my garden?", [older, newer, garden]) == [older, newer, garden]


def test_a_value_said_as_a_change_is_named_beside_the_older_one_recall_shows(service):
    """Too little shared to replace anything when written ("deadline" alone), but the question
    names the slot: the older line says what the later memory says, and both stay. A plan in
    another clause ("considering …") does not hold the change back; a newer value said with no
    cue only moves up."""
    session(service, "s1", "I'm applying for a senior producer role, with the application deadline being May 10.",
            "My portfolio has 12 finished projects.")
    service.clock.now += 2 * DAY
    session(service, "s2", "I'm considering a new reel, and I just found out the deadline was extended to May 20.",
            "I've got 14 finished projects in the portfolio too.")
    graph = service.soul.graph()
    assert not any(n.metadata.get(lifecycle.UPDATED) for n in graph.nodes.values())  # nothing changed when written
    lines = service.recall(query="When is the deadline for my senior producer application?")["text"].splitlines()
    old = next(line for line in lines if "May 10" in line)
    new = next(line for line in lines if "May 20" in line)
    assert lines.index(new) < lines.index(old)
    day = time.strftime("%Y-%m-%d", time.gmtime(service.clock.now))
    assert f"{memory_service.LATER_NOTE} May 20 ({day[:8]}" in old and memory_service.LATER_NOTE not in new
    shown = service.recall(query="How many finished projects are in my portfolio?")["text"].splitlines()
    assert "14 finished" in shown[0] and memory_service.LATER_NOTE not in "\n".join(shown)


def test_sizes_in_different_units_are_one_slot_at_read_time(service):
    session(service, "s1", "I set the Redis maxmemory setting to 512MB to reduce evictions.")
    service.clock.now += DAY
    session(service, "s2", "I'm going over the Redis notes, and I adjusted the maxmemory setting to 1GB.",
            "My laptop has 16GB of RAM.")
    lines = service.recall(query="What maxmemory setting should Redis use?")["text"].splitlines()
    at = lambda words: next(i for i, line in enumerate(lines) if words in line)  # noqa: E731
    assert at("1GB") < at("512MB")
    assert f"{memory_service.LATER_NOTE} 1" in lines[at("512MB")]


def test_a_memory_shown_as_since_updated_brings_the_memory_that_changed_it(service):
    """The question matches the old wording only; the newer memory, which changed its value,
    still comes in, right above it, in the place of the lowest-ranked line."""
    session(service, "s1", "My Zotero library has 45 sources, tagged by theme and date.",
            "My photo albums are tagged by theme and date as well.")
    service.clock.now += 10 * DAY
    kept = session(service, "s2", "Good news: my Zotero library has now reached 52 sources.")
    assert [(u["old"], u["new"]) for u in kept["updated"]] == [("45", "52")]
    question = "what is tagged by theme and date?"
    graph = service.soul.graph()
    ranked = [h.node.content for h in ranking.related(graph, question, 2)]
    assert "photo albums" in ranked[0] and "45 sources" in ranked[1]  # what the search alone gives
    shown = service.recall(query=question, limit=2)["text"].splitlines()
    assert "52 sources" in shown[0]
    assert "45 sources" in shown[1] and "since updated: 45 → 52" in shown[1]


def test_a_later_value_recall_did_not_show_is_found_and_shown_above_the_older(service):
    """The question says the older wording ("my scheduled safety inspection"), so the newer date,
    said with other words and no cue, ranks below what prefetch shows; the search for the older
    value's slot among later memories brings it in, right above it, in the place of the last
    line. Another thing's later date, another user's, and a question asking for another kind of
    value bring nothing."""
    session(service, "s0", *(f"Note {n}: the {thing} needs a look." for n, thing in enumerate((
        "boiler", "bike", "garden", "roof", "car", "printer", "fence", "shed", "sink", "oven"))))
    service.clock.now += DAY
    session(service, "s1", "I've scheduled a safety inspection for the apartment on March 23, focusing on smoke "
                           "detectors.",
            "The apartment lease I scheduled to sign is for the apartment with the safety rail.")
    service.clock.now += DAY
    session(service, "s2", "I've got a safety inspection coming up on March 25, what should I prepare?",
            "I've scheduled a dentist appointment on March 28.", "The balcony safety rail gets fitted on March 27.")
    session(service, "s3", "I've scheduled a dentist appointment on March 30.", scope="other")
    question = "When is my scheduled safety inspection for the apartment?"
    graph = service.soul.graph()
    ranked = [h.node.content for h in ranking.related(graph, question, 2)]
    assert "March 23" in ranked[0] and "lease" in ranked[1]  # what the search alone gives
    lines = service.recall(query=question, limit=2)["text"].splitlines()
    assert len(lines) == 2 and "March 25" in lines[0] and "March 23" in lines[1]
    # a question for a count searches for no later date; nor does one asking no kind of value
    assert not any("March 25" in line for line in service.recall(
        query="How many safety inspections are scheduled for the apartment?", limit=2)["text"].splitlines())
    assert not any("March 25" in line for line in service.recall(
        query="Tell me about my scheduled safety inspection for the apartment", limit=2)["text"].splitlines())
    nodes = {n.content.removeprefix("User: "): n for n in graph.nodes.values() if n.kind == "episodic_event"}
    older = next(n for text, n in nodes.items() if "March 23" in text)
    found = updates.later_statements(graph, question, [older], lambda n: True)
    assert [(f.old.text, f.new.text) for f in found] == [("March 23", "March 25")]
    # without it, the rail's date shares one word of the slot ("safety"), too little to be its value
    assert updates.later_statements(graph, question, [older], lambda n: "March 25" not in n.content) == []
    dentist = next(n for text, n in nodes.items() if "March 28" in text)
    assert updates.later_statements(graph, "When is my dentist appointment scheduled?", [dentist],
                                    lambda n: True) == []  # the later one (March 30) is another user's


def test_a_line_holding_the_kind_of_value_asked_for_stands_above_one_without(service):
    session(service, "s1", "Zara and I planned a woodworking market stall at the bazaar, for the spring.",
            "The woodworking market stall already has 25 pre-registrations from people who signed up.")
    graph = service.soul.graph()
    turn = lambda words: next(n for n in graph.nodes.values()  # noqa: E731
                              if n.kind == "episodic_event" and words in n.content)
    plan, count = turn("planned"), turn("25 pre-registrations")
    question = "How many people have signed up for the woodworking market stall?"
    assert updates.answers_first(question, [plan, count]) == [count, plan]
    assert updates.answers_first("When is the woodworking market stall?", [plan, count]) == [plan, count]
    assert updates.answers_first("Who planned the woodworking market stall?", [plan, count]) == [plan, count]


def test_soul_query_says_which_values_a_later_memory_changed(tmp_path):
    """The tools say it too: a turn a later one changed a value of carries `updated` in
    soul_query's results, over a real MCP connection."""
    from tests.mcp_session import with_server

    clock = Clock()
    service = MemoryService(SoulFile(tmp_path / "soul.json", clock=clock), embed=False)
    service.clock = clock
    session(service, "s1", "My Zotero library has 45 sources, tagged by theme and date.")
    clock.now += 10 * DAY
    kept = session(service, "s2", "Good news: my Zotero library has now reached 52 sources.")
    old, by = kept["updated"][0]["id"], kept["updated"][0]["by"]

    async def scenario(client):
        return await client.call("soul_query", query="Zotero library sources", limit=5)

    found = {r["id"]: r for r in with_server(tmp_path / "soul.json", scenario, extra_args=["--no-embed"])["results"]}
    assert found[old]["updated"] == [{"old": "45", "new": "52", "by": by}]
    assert "updated" not in found[by]
