"""Memories as lines of a prompt block (memory/snippets.py): within the budget, every memory a
share, a long one shown by its sentences that hold the question's words; and the memory
service's prefetch block built that way."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from soulgraph.engine.index import words
from soulgraph.hermes.memory_service import MemoryService
from soulgraph.memory import snippets
from soulgraph.store import SoulFile

FILLER = ("Hey, how have you been lately? It has been such a long week at work for all of us. "
          "The weather was grey and the trains were late again on every single day. ")


def weights(*asked: str) -> dict[str, float]:
    """The question's words as the index keys them (stemmed), each weighing 1."""
    return dict.fromkeys(words(" ".join(asked)), 1.0)


def test_lines_that_fit_are_shown_whole_in_their_order():
    heads = ["- [a] ", "- [b] ", "- [c] "]
    texts = ["one  memory\nover two lines", "two", "three"]
    assert snippets.fit(heads, texts, 200, weights()) == [
        (0, "- [a] one memory over two lines"), (1, "- [b] two"), (2, "- [c] three")]


def test_a_long_first_memory_no_longer_pushes_out_the_ones_after_it():
    long_turn = "User: " + FILLER * 8 + "The staging database moved to Frankfurt on Monday. " + FILLER * 4
    heads = [f"- [{n}] " for n in range(8)]
    texts = [long_turn] + [f"Short memory number {n} about the release." for n in range(1, 8)]
    lines = snippets.fit(heads, texts, 1500, weights("staging", "database"))
    assert [i for i, _ in lines] == list(range(8))
    block = "\n".join(line for _, line in lines)
    assert len(block) <= 1500
    first = lines[0][1]
    # The first keeps more than its fair share, its label, and the sentence the question is about.
    assert len(first) > 1500 // 8 and first.startswith("- [0] User: ")
    assert "The staging database moved to Frankfurt on Monday." in first and "…" in first
    assert all(line == heads[i] + texts[i] for i, line in lines[1:])


def test_a_snippet_keeps_the_matching_sentence_then_the_one_after_it():
    text = ("Caroline: Hey Mel! I went to a support group yesterday. It was so powerful. "
            "My cat knocked over a vase. Anyway, what are you painting these days?")
    wanted = "Caroline: … I went to a support group yesterday. It was so powerful. …"
    assert snippets.snippet(text, len(wanted), weights("support", "group")) == wanted
    # With more room, the sentence before it too.
    assert snippets.snippet(text, len(wanted) + 8, weights("support", "group")).startswith("Caroline: Hey Mel! I went")
    # A room too small for the best sentence: its start, cut at a word's end, and still the label;
    # mid-word when no word ends near.
    assert snippets.snippet(text, 30, weights("support")) == "Caroline: … I went to a…"
    assert snippets.snippet("Supercalifragilisticexpialidocious-and-more-words-joined here", 30,
                            weights("here")) == "Supercalifragilisticexpialido…"


def test_each_part_keeps_its_own_label():
    text = "User: Where is the staging database? We need it today.\nAssistant: It is db-7 in Frankfurt. Ask ops for access."
    wanted = "User: Where is the staging database? … Assistant: It is db-7 in Frankfurt. …"
    assert snippets.snippet(text, len(wanted), weights("db", "7", "frankfurt", "staging", "database")) == wanted


def test_the_last_lines_are_left_out_when_each_could_not_have_its_least():
    heads = [f"- [{n}] " for n in range(8)]
    texts = ["x " * 200] * 8
    lines = snippets.fit(heads, texts, 500, weights())
    assert len(lines) == 500 // (snippets.MIN_LINE + 1) and [i for i, _ in lines] == list(range(len(lines)))
    assert len("\n".join(line for _, line in lines)) <= 500


_word = st.sampled_from("the staging database moved Frankfurt db-7 and we met Caroline at noon".split())
_sentence = st.lists(_word, min_size=1, max_size=12).map(" ".join).flatmap(
    lambda s: st.sampled_from([".", "!", "?", ""]).map(lambda end: s + end))
_text = st.lists(
    st.tuples(st.sampled_from(["", "User: ", "Assistant: ", "User: Caroline: "]),
              st.lists(_sentence, min_size=1, max_size=6)),
    min_size=1, max_size=3).map(lambda parts: "\n".join(label + " ".join(s) for label, s in parts))


@settings(max_examples=200, deadline=None)
@given(texts=st.lists(_text, min_size=1, max_size=8), budget=st.integers(40, 1600),
       asked=st.sets(_word.map(str.lower), max_size=3))
def test_a_block_never_exceeds_its_budget_and_shows_only_the_memories_words(texts, budget, asked):
    heads = [f"- [{n}, episodic_event] " for n in range(len(texts))]
    lines = snippets.fit(heads, texts, budget, weights(*asked))
    block = "\n".join(line for _, line in lines)
    assert len(block) <= budget
    places = [i for i, _ in lines]
    assert places == sorted(set(places))
    whole = [heads[i] + snippets.flat(texts[i]) for i in range(len(texts))]
    if sum(map(len, whole)) + len(whole) - 1 <= budget:
        assert [line for _, line in lines] == whole
    for i, line in lines:
        assert line.startswith(heads[i])
        # What is shown is the memory's own text, with "…" where text was left out.
        pieces = [piece.strip() for piece in line[len(heads[i]):].split("…") if piece.strip()]
        assert pieces and all(piece in snippets.flat(texts[i]) for piece in pieces), (line, texts[i])


def test_prefetch_shows_every_memory_when_one_long_turn_comes_first(tmp_path):
    service = MemoryService(SoulFile(tmp_path / "soul.json"), embed=False)
    long_user = FILLER * 6 + "Our staging database is db-7 in Frankfurt. " + FILLER * 4
    service.handle({"id": 1, "op": "sync_turn", "args": {"user": long_user, "assistant": "noted", "session_id": "a"}})
    for n in range(5):
        service.handle({"id": 2, "op": "sync_turn",
                        "args": {"user": f"Note {n}: the staging database backup runs at {n} am.", "assistant": "ok",
                                 "session_id": f"b{n}"}})
    answer = service.handle({"id": 3, "op": "recall", "args": {"query": "Frankfurt staging database db-7", "budget": 900}})
    assert answer["ok"], answer
    result = answer["result"]
    assert len(result["text"]) <= 900 and len(result["ids"]) == 6 == result["text"].count("\n") + 1
    assert "Our staging database is db-7 in Frankfurt." in result["text"]
    assert all(f"backup runs at {n} am." in result["text"] for n in range(5))
