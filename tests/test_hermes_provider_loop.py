"""The soul graph provider in real Hermes sessions (hermes-agent 0.19.0, `hermes chat -q`)
against the local model stub (tests/openai_stub.py): installed by our installer, it
remembers what session 1 said and puts it in front of the model in session 2.

What the stub does not prove (a real model's use of the injected block, real token counts) is
in docs/hermes-facts.md and docs/memory-provider.md.
"""

from __future__ import annotations

import pytest

from soulgraph.hermes.install import install
from soulgraph.store import SoulFile
from tests import hermes_chat
from tests.openai_stub import OpenAIStub, call, is_agent_turn, request_text, text_reply, tool_reply

pytestmark = pytest.mark.hermes

RUN_TIMEOUT = 90


@pytest.fixture
def stub_home(hermes_exe, tmp_path):
    """A stub-backed Hermes home with soulgraph installed as our installer does it."""

    def make(stub: OpenAIStub, **kwargs):
        home = hermes_chat.make_stub_home(tmp_path / "home", stub.base_url, **kwargs)
        report = install(home)
        assert report["memory_provider"] == "selected" and report["plugin"] == "installed", report
        return home

    return make


def graph_of(home):
    return SoulFile(home / "soul.json").graph()


def by_source(graph, source):
    return [n for n in graph.nodes.values() if n.source == source]


def ok(run):
    assert not run.timed_out and run.returncode == 0, run.describe()


def test_what_session_one_said_reaches_the_model_in_session_two(stub_home):
    with OpenAIStub(replies=[text_reply("Noted, Ada."), text_reply("Green tea, then.")]) as stub:
        home = stub_home(stub)
        first = hermes_chat.chat_once(home, "My name is Ada. I prefer green tea in the morning.", timeout=RUN_TIMEOUT)
        ok(first)
        graph = graph_of(home)
        (turn,) = by_source(graph, "hermes:sync_turn")
        assert turn.content == "User: My name is Ada. I prefer green tea in the morning.\nAssistant: Noted, Ada."
        assert turn.source_ref == f"{first.session_id}#1"
        promoted = {(n.kind, n.content) for n in by_source(graph, "hermes:consolidate")}  # on_session_end
        assert promoted == {("semantic_fact", "My name is Ada."), ("preference", "I prefer green tea in the morning.")}

        second = hermes_chat.chat_once(home, "Which tea should I buy for tomorrow morning?", timeout=RUN_TIMEOUT)
        ok(second)
    body = stub.requests[-1]
    system, user = body["messages"][0], body["messages"][-1]
    # The frozen block: the snapshot, with what session 1 taught.
    assert "# Soul graph (long-term memory)" in system["content"]
    assert "- I prefer green tea in the morning." in system["content"]
    # The prefetch: recall for this very question, fenced by Hermes after the user's words.
    assert user["content"].startswith("Which tea should I buy for tomorrow morning?\n\n<memory-context>")
    recalled = user["content"].split("<memory-context>", 1)[1]
    assert "From the soul graph" in recalled and "green tea" in recalled
    assert len(by_source(graph_of(home), "hermes:sync_turn")) == 2


def test_the_models_memory_tool_edits_are_mirrored(stub_home):
    add = call("memory", {"action": "add", "target": "user", "content": "Ada's editor is vim."})
    replace = call("memory", {"action": "replace", "target": "user", "old_text": "editor is vim",
                              "content": "Ada's editor is helix."})
    with OpenAIStub(replies=[tool_reply(add), text_reply("Saved."), tool_reply(replace), text_reply("Updated.")]) as stub:
        home = stub_home(stub)
        ok(hermes_chat.chat_once(home, "Remember my editor is vim.", timeout=RUN_TIMEOUT))
        ok(hermes_chat.chat_once(home, "Actually I switched to helix.", timeout=RUN_TIMEOUT))
    graph = graph_of(home)
    mirrored = {n.content: n for n in by_source(graph, "hermes:memory_tool:user")}
    assert set(mirrored) == {"Ada's editor is vim.", "Ada's editor is helix."}
    old, new = mirrored["Ada's editor is vim."], mirrored["Ada's editor is helix."]
    assert (old.status, old.superseded_by, new.status) == ("superseded", new.id, "active")
    assert new.tags == ["user"] and new.kind == "semantic_fact"


def test_compression_flushes_and_hands_the_promoted_memories_to_the_summary(stub_home):
    # The helper's recipe (docs/hermes-facts.md): a 64,000-token window, a reply reporting
    # 60,000 prompt tokens, a long message in the middle, protect_first_n 0 / last 1.
    notes = " ".join(f"note{i}: the sky was colour{i % 7}." for i in range(2000))
    query = "I will ship the release on Friday. Read these notes. " + notes

    def todo(n, **kwargs):
        return tool_reply(call("todo", {"todos": [{"id": str(n), "content": f"step {n}", "status": "pending"}]}),
                          **kwargs)

    replies = [todo(1), todo(2), todo(3, usage={"prompt_tokens": 60_000}), text_reply("Done after compaction.")]
    with OpenAIStub(replies=replies, context_length=64_000, takes_script=is_agent_turn,
                    default_reply="SUMMARY: notes about the sky.") as stub:
        home = stub_home(stub, extra_config={"compression": {"protect_first_n": 0, "protect_last_n": 1,
                                                             "target_ratio": 0.1}})
        ok(hermes_chat.chat_once(home, query, timeout=RUN_TIMEOUT))
    (summary_request,) = [s for s in stub.chat_requests if not s.scripted]
    text = request_text(summary_request.body)
    assert "<memory-provider-context>" in text and "Kept in the soul graph" in text
    assert "goal_or_commitment: I will ship the release on Friday." in text
    commitments = [n for n in by_source(graph_of(home), "hermes:consolidate") if n.kind == "goal_or_commitment"]
    assert [n.content for n in commitments] == ["I will ship the release on Friday."]  # once, not per pass


def test_a_cron_job_writes_nothing(stub_home):
    with OpenAIStub(replies=[text_reply("All builds green.")]) as stub:
        home = stub_home(stub)
        before = {n.id: n.content for n in graph_of(home).nodes.values()}
        job_id = hermes_chat.cron_create(home, "I prefer red builds. Summarise the overnight builds.", name="nightly")
        run = hermes_chat.cron_run(home, job_id, timeout=RUN_TIMEOUT)
    ok(run)
    assert len(stub.requests) == 1  # the job ran against the stub
    assert {n.id: n.content for n in graph_of(home).nodes.values()} == before


def test_the_block_never_repeats_what_hermes_puts_in_its_own_prompt(stub_home, tmp_path):
    memory_entries = ["The fleet runs on three hosts.", "Backups run nightly at 02:00."]
    user_entries = ["Ada prefers short answers.", "Ada's timezone is UTC+1."]
    axiom = "I am Orion, the keeper of the fleet's memory."
    with OpenAIStub(replies=[text_reply("Noted."), text_reply("Green tea.")]) as stub:
        home = hermes_chat.make_stub_home(tmp_path / "home", stub.base_url)
        (home / "memories").mkdir(exist_ok=True)
        (home / "memories" / "MEMORY.md").write_text("\n§\n".join(memory_entries), encoding="utf-8")
        (home / "memories" / "USER.md").write_text("\n§\n".join(user_entries), encoding="utf-8")
        (home / "SOUL.md").write_text(f"# Orion\n\n- {axiom}\n", encoding="utf-8")
        report = install(home)  # seeds the soul graph from those three files
        assert report["memory_provider"] == "selected", report
        seeded = {n.content for n in graph_of(home).nodes.values()}
        assert set(memory_entries + user_entries) | {axiom} <= seeded
        ok(hermes_chat.chat_once(home, "I prefer green tea in the morning.", timeout=RUN_TIMEOUT))
        ok(hermes_chat.chat_once(home, "Which tea should I buy?", timeout=RUN_TIMEOUT))
    system = stub.requests[-1]["messages"][0]["content"]
    block = system.split("# Soul graph (long-term memory)", 1)[1]
    assert "I prefer green tea in the morning." in block  # what the soul graph adds
    for entry in memory_entries + user_entries + [axiom]:
        assert system.count(entry) == 1, entry  # Hermes' own copy, and no second one in our block
        assert entry not in block
