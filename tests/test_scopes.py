"""Scopes (memory/scopes.py): one user's memories never reach another, on every read and write path.

The memory service in-process (what the provider calls), the MCP server through the real SDK
client, the operator's CLI, and the plugin's own scope key in Hermes' venv."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from soulgraph.engine.graph import SoulGraph
from soulgraph.hermes.memory_service import MemoryService
from soulgraph.memory import scopes
from soulgraph.memory.write import remember
from soulgraph.store import SoulFile
from soulgraph.memories.__main__ import main as memories_main
from tests import hermes_client
from tests.mcp_session import with_server

ALICE, BOB = "telegram:alice-1001", "telegram:bob-2002"
ALICE_SAYS = "My locker combination at the gym is 4-19-33 and I keep my passport in the blue drawer."


@pytest.fixture
def service(tmp_path):
    return MemoryService(SoulFile(tmp_path / "soul.json"), embed=False)


def ok(service, op, **args):
    answer = service.handle({"id": 1, "op": op, "args": args})
    assert answer["ok"], answer
    return answer["result"]


def test_the_scope_key_is_hermes_participant_key():
    assert scopes.user_scope("telegram", "1001") == "telegram:1001"
    assert scopes.user_scope("Signal", "+15550001", "uuid-7") == "signal:uuid-7"  # the stable alias wins
    assert scopes.user_scope("cli", "") == scopes.user_scope("cli", None) == ""
    assert scopes.user_scope("", "bob") == "unknown:bob"
    assert scopes.parse("shared") == "" and scopes.parse(" slack:U1 ") == "slack:U1"
    for bad in ("alice", "telegram:", ":alice", "Tele gram:1", "telegram:a\nb", "x:" + "y" * 400):
        with pytest.raises(scopes.ScopeError):
            scopes.parse(bad)


def test_a_bob_question_never_gets_alice_memories_from_the_service(service):
    """The issue's own case: Alice's locker and passport, Bob asks where his passport is."""
    ok(service, "sync_turn", user=ALICE_SAYS, assistant="Noted.", session_id="a1", platform="telegram",
       user_id="alice-1001", scope=ALICE)
    ok(service, "memory_write", action="add", target="user", content="Alice drinks jasmine tea", scope=ALICE)
    ok(service, "consolidate", session_id="a1", scope=ALICE)
    ok(service, "sync_turn", user="I moved flats last week.", assistant="OK.", session_id="b1", scope=BOB)
    for question in ("where is my passport?", "what is my locker combination", "what tea do I drink?"):
        bob = ok(service, "recall", query=question, scope=BOB)["text"]
        assert "4-19-33" not in bob and "blue drawer" not in bob and "jasmine" not in bob, bob
    assert "blue drawer" in ok(service, "recall", query="where is my passport?", scope=ALICE)["text"]
    assert "jasmine" in ok(service, "recall", query="what tea do I drink?", scope=ALICE)["text"]
    for reader in (BOB, ""):  # nor the snapshot of Bob's session, nor a session without a user
        snap = ok(service, "snapshot", scope=reader)["text"]
        assert "4-19-33" not in snap and "jasmine" not in snap
    assert "jasmine" in ok(service, "snapshot", scope=ALICE)["text"]
    graph = service.soul.graph()
    assert {n.scope for n in graph.nodes.values()} == {ALICE, BOB}
    assert ok(service, "status")["users"] == 2


def test_shared_memories_reach_every_user(service):
    with service.soul.change() as graph:
        remember(graph, "The office closes at six on Fridays", ["office"], writer="operator", kind="semantic_fact")
    for reader in (ALICE, BOB, ""):
        assert "closes at six" in ok(service, "recall", query="when does the office close on Friday?",
                                     scope=reader)["text"]


def test_one_user_saying_what_another_said_confirms_nothing_of_theirs(service):
    """'sam' saying "I prefer green tea" once confirmed Dana's memory."""
    for user, session in ((ALICE, "a"), (BOB, "b")):
        ok(service, "sync_turn", user="I prefer green tea.", assistant="Noted.", session_id=session, scope=user)
        ok(service, "consolidate", session_id=session, scope=user)
    graph = service.soul.graph()
    prefs = sorted((n.scope, n.strength) for n in graph.nodes.values() if n.kind == "preference")
    assert prefs == [(ALICE, 1.0), (BOB, 1.0)]


def test_a_client_naming_another_user_session_never_reaches_it(service):
    """API clients choose their session ids: Bob sending Alice's must not chain into her session,
    consolidate her turns, or pass for one of her resent turns."""
    first = ok(service, "sync_turn", user=ALICE_SAYS, assistant="ok", session_id="s1", scope=ALICE, turn_id="t1")
    bob = ok(service, "sync_turn", user="I will call the bank tomorrow.", assistant="ok", session_id="s1",
             scope=BOB, turn_id="t1")
    assert bob["stored"] == "now" and bob["id"] != first["id"]
    graph = service.soul.graph()
    assert graph.nodes[first["id"]].id not in graph.parents[bob["id"]]
    assert all(graph.nodes[p].scope == BOB for p in graph.parents[bob["id"]])
    result = ok(service, "consolidate", session_id="s1", scope=BOB)
    assert result["turns"] == 1 and all(a["content"] != ALICE_SAYS for a in result["added"])
    assert not graph.nodes[first["id"]].metadata.get("consolidated")


def test_a_memory_tool_replace_or_remove_finds_only_the_user_own_entries(service):
    alice = ok(service, "memory_write", action="add", target="memory", content="Parking spot 14", scope=ALICE)
    assert ok(service, "memory_write", action="remove", target="memory", content="Parking spot 14",
              scope=BOB)["archived"] is None
    replaced = ok(service, "memory_write", action="replace", target="memory", content="Parking spot 9",
                  metadata={"old_text": "Parking spot 14"}, scope=BOB)
    assert replaced["superseded"] is None
    graph = service.soul.graph()
    assert graph.nodes[alice["id"]].status == "active" and graph.nodes[replaced["id"]].scope == BOB


def test_the_service_refuses_a_scope_that_is_not_one(service):
    answer = service.handle({"id": 3, "op": "recall", "args": {"query": "x", "scope": "alice"}})
    assert not answer["ok"] and "args.scope must be" in answer["error"] and answer["retry"] is False


def test_engine_reads_pass_the_reader_predicate_everywhere():
    graph = SoulGraph()
    shared = graph.add("the team wiki lives on the intranet", ["wiki"], pinned=True)
    mine = graph.add("my wiki password hint is a cat", ["wiki"], parents=[shared.id], scope=ALICE)
    other = graph.add("bob wiki notes about the cat", ["wiki"], parents=[shared.id], scope=BOB)
    graph.explore("bob thinks the wiki moves", parents=[shared.id], scope=BOB)
    where = scopes.Reader(ALICE).where(graph)
    assert scopes.Reader(ALICE).where(SoulGraph()) is None  # nothing to hide: no cost
    seen = {shared.id, mine.id}
    assert {n.id for n in graph.hot(10, where=where)} == seen
    assert {n.id for n in graph.by_tag("wiki", where=where)} == seen
    assert {h.node.id for h in graph.related("wiki cat", 10, where=where)} == seen
    assert {n.id for n, _ in graph.discover(shared.id, where=where)} == {mine.id}
    primed = graph.prime("wiki cat", 10, where=where)
    assert {n.id for n in primed["hot"]} | {n.id for n, _d, _r in primed["walk"]} <= seen
    summary = graph.summary(5, where=where)
    assert (summary["nodes"], summary["edges"], summary["hypotheses"]) == (2, 1, 0)
    assert other.id not in {n.id for n in summary["hot"]}
    assert graph.hypotheses(where=where) == []
    with pytest.raises(KeyError):
        scopes.Reader(ALICE).get(graph, other.id)


def test_a_write_cannot_be_built_on_another_user_memory():
    graph = SoulGraph()
    theirs = graph.add("bob's note", scope=BOB)
    with pytest.raises(KeyError, match="unknown node id"):
        remember(graph, "built on it", writer="t", parents=[theirs.id], scope=ALICE)


# ---------------------------------------------------------------------- the MCP server
def _two_user_soul(path: Path) -> dict[str, str]:
    soul = SoulFile(path)
    with soul.change() as graph:
        ids = {"shared": remember(graph, "The team wiki lives on the intranet", ["wiki"], writer="operator").node.id}
        ids["alice"] = remember(graph, ALICE_SAYS, ["wiki"], writer="alice", scope=ALICE).node.id
        ids["bob"] = remember(graph, "Bob keeps his passport at his mother's flat", ["wiki"], writer="bob",
                              scope=BOB).node.id
    return ids


def test_the_mcp_server_serves_the_shared_scope_unless_started_with_one(tmp_path):
    soul_file = tmp_path / "soul.json"
    ids = _two_user_soul(soul_file)

    async def shared_only(session):
        texts = [json.dumps(await session.call("soul_query", query="passport drawer wiki", limit=20)),
                 json.dumps(await session.call("soul_related", query="where is my passport", limit=20)),
                 json.dumps(await session.call("soul_prime", context="passport", limit=20)),
                 json.dumps(await session.call("soul_hot", limit=20)),
                 json.dumps(await session.call("soul_by_tag", tag="wiki")),
                 json.dumps(await session.call("soul_discover", node_id=ids["shared"]))]
        summary = await session.call("soul_summary")
        for node in ("alice", "bob"):  # another user's memory is an unknown id to every id tool
            for name, args in (("soul_discover", {"node_id": ids[node]}), ("soul_splay", {"node_id": ids[node]}),
                               ("soul_pin", {"node_id": ids[node]}),
                               ("soul_link", {"parent_id": ids["shared"], "child_id": ids[node]}),
                               ("soul_add", {"content": "x", "parents": [ids[node]]})):
                assert f"unknown node id '{ids[node]}'" in await session.refused(name, **args)
        added = await session.call("soul_add", content="The wiki moved to a new host")
        return "\n".join(texts), summary, added

    text, summary, added = with_server(soul_file, shared_only, ["--no-embed"])
    assert "4-19-33" not in text and "mother" not in text and "intranet" in text
    assert summary["nodes"] == 1 and summary["scope"]["serves"] == "shared"
    assert summary["scope"]["users_not_served"] == 2 and "--scope" in summary["scope"]["note"]
    assert "scope" not in added and SoulFile(soul_file).graph().nodes[added["id"]].scope == ""

    async def alice(session):
        found = json.dumps(await session.call("soul_query", query="passport drawer wiki", limit=20))
        summary = await session.call("soul_summary")
        added = await session.call("soul_add", content="Alice's gym is on Elm street", parents=[ids["alice"]])
        refused = [await session.refused("soul_pin", node_id=ids["shared"]),
                   await session.refused("soul_link", parent_id=ids["alice"], child_id=ids["shared"])]
        return found, summary, added, refused

    found, summary, added, refused = with_server(soul_file, alice, ["--no-embed", "--scope", ALICE])
    assert "4-19-33" in found and "intranet" in found and "mother" not in found
    assert summary["scope"] == {"serves": ALICE, "users_not_served": 1, "note": summary["scope"]["note"]}
    assert added["scope"] == ALICE and added["parents"] == [ids["alice"]]
    assert all("may change that user's memories only" in r for r in refused), refused


def test_a_history_and_the_audit_show_the_scope_and_only_to_that_scope(tmp_path):
    soul_file = tmp_path / "soul.json"
    ids = _two_user_soul(soul_file)

    async def confirm(session):
        await session.call("soul_update", node_id=ids["alice"], action="confirm")
        return await session.call("soul_history", node_id=ids["alice"])

    history = with_server(soul_file, confirm, ["--no-embed", "--toolsets", "graph,memory", "--scope", ALICE])
    assert [(e["action"], e["scope"]) for e in history["entries"]] == [("confirm", ALICE)]

    async def peek(session):
        return await session.call("soul_history", node_id=ids["alice"])

    assert with_server(soul_file, peek, ["--no-embed", "--toolsets", "graph,memory", "--scope", BOB])["entries"] == []


def test_a_bad_scope_stops_the_server_with_a_clear_error(tmp_path):
    _two_user_soul(tmp_path / "soul.json")
    done = subprocess.run([sys.executable, "-m", "soulgraph.mcp", "--soul-file", str(tmp_path / "soul.json"),
                           "--scope", "alice"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "is not 'platform:user'" in done.stderr


# ---------------------------------------------------------------------- the operator's CLI
def run_store(capsys, command, soul_file, *args):
    """`python -m soulgraph.memories COMMAND --soul-file SOUL ARGS` (forget-user with --yes: no terminal asks)."""
    code = memories_main([command, "--soul-file", str(soul_file), *map(str, args),
                          *(["--yes"] if command == "forget-user" else [])])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


def test_users_share_and_forget_user_from_the_command_line(tmp_path, capsys):
    soul_file = tmp_path / "soul.json"
    service = MemoryService(SoulFile(soul_file), embed=False)
    memories = tmp_path / "memories"
    memories.mkdir()
    # Hermes' memory tool wrote Alice's entry into USER.md; the provider mirrored it.
    (memories / "USER.md").write_text("Alice drinks jasmine tea\n§\nThe operator likes short answers")
    ok(service, "memory_write", action="add", target="user", content="Alice drinks jasmine tea", scope=ALICE)
    turn = ok(service, "sync_turn", user=ALICE_SAYS, assistant="ok", session_id="a", scope=ALICE)
    ok(service, "consolidate", session_id="a", scope=ALICE)
    kept = ok(service, "sync_turn", user="I keep my bike in the shed.", assistant="ok", session_id="b", scope=BOB)
    with service.soul.change() as graph:
        graph.update(kept["id"], metadata={**graph.nodes[kept["id"]].metadata, "note": "kept"})
    code, report, _ = run_store(capsys, "users", soul_file)
    assert code == 0 and {u["scope"] for u in report["users"]} == {ALICE, BOB}

    code, report, _ = run_store(capsys, "share", soul_file, turn["id"], "--reason", "the team should know")
    assert code == 0 and report["shared"] == [{"id": turn["id"], "was": ALICE}]
    graph = SoulFile(soul_file).graph()
    assert graph.nodes[turn["id"]].scope == "" and graph.audit[-1]["action"] == "share"
    code, _, err = run_store(capsys, "share", soul_file, turn["id"], "--reason", "again")
    assert code == 1 and "shared already; nothing changed" in err
    with SoulFile(soul_file).change() as graph:  # take it back: Alice is to be forgotten whole
        graph.update(turn["id"], scope=ALICE)

    code, report, _ = run_store(capsys, "forget-user", soul_file, ALICE)
    assert code == 0 and report["scope"] == ALICE and report["forgotten"] == 3  # entry, session, turn
    assert report["markdown_scrubbed"] == ["memories/USER.md"]
    assert (memories / "USER.md").read_text() == "The operator likes short answers"
    for path in tmp_path.rglob("*"):  # no file of the home holds her words or her name any more
        if path.is_file():
            data = path.read_bytes()
            assert b"4-19-33" not in data and b"jasmine" not in data and b"alice-1001" not in data, path
    graph = SoulFile(soul_file).graph()
    assert set(graph.scopes) == {BOB} and kept["id"] in graph.nodes
    assert {e.get("scope") for e in graph.audit if e["action"] == "forget"} == {report["audit_name"]}

    code, _, err = run_store(capsys, "forget-user", soul_file, ALICE)
    assert code == 1 and "no memory of telegram:alice-1001" in err
    code, _, err = run_store(capsys, "forget-user", soul_file, "shared")
    assert code == 1 and "not the shared scope" in err


# ---------------------------------------------------------------------- the plugin's key, in Hermes' venv
PLUGIN_KEYS = textwrap.dedent("""
    import json, sys
    from plugins.memory import load_memory_provider
    provider = load_memory_provider("soulgraph")
    module = sys.modules[type(provider).__module__]
    cases = json.loads(sys.stdin.read())
    print(json.dumps([[module.scope_of(*c) for c in cases["users"]],
                      [module.session_scope(k) for k in cases["sessions"]]]))
""")


def test_the_plugin_names_users_as_the_service_checks_them(hermes_home):
    """The plugin may import nothing of ours, so it has its own copy of the key: the same on
    awkward ids, and what a session with no user gets on each kind of platform."""
    from tests.test_hermes_provider import install_plugin

    install_plugin(hermes_home, hermes_home / "soul.json")
    users = [("telegram", "1001", ""), ("Signal", "+1555", "uuid-7"), ("discord", " 42 ", ""),
             ("Web Hook", "webhook:alice", ""), ("", "bob", ""), ("slack", "\x01\x02", ""),
             ("matrix", "@ada:example.org", ""), ("x" * 60, "é" * 400, ""), ("feishu", "ou_1", "on_9")]
    sessions = [{"platform": "cli", "session_id": "s"}, {"platform": "api_server", "session_id": "s2"},
                {"platform": "api_server", "gateway_session_key": "user:alice", "session_id": "s3"},
                {"platform": "telegram", "user_id": "7", "session_id": "s4"}, {"session_id": "s5"}]
    python = hermes_client.ensure_hermes_venv().parent / "python"
    proc = subprocess.run([str(python), "-c", PLUGIN_KEYS], input=json.dumps({"users": users, "sessions": sessions}),
                          capture_output=True, text=True, timeout=120, env=hermes_client.hermes_env(hermes_home))
    assert proc.returncode == 0, proc.stderr[-2000:]
    keys, session_keys = json.loads(proc.stdout.strip().splitlines()[-1])
    assert keys == [scopes.user_scope(p, u, a) for p, u, a in users]
    assert all(scopes.check(k) == k for k in keys)
    assert session_keys == ["", "api_server:session:s2", "api_server:key:user:alice", "telegram:7", ""]


DELEGATION = textwrap.dedent("""
    import json, sys
    from agent.memory_manager import MemoryManager
    from plugins.memory import load_memory_provider
    manager = MemoryManager()
    manager.add_provider(load_memory_provider("soulgraph"))
    manager.initialize_all(session_id="parent-1", hermes_home=sys.argv[1], platform="telegram",
                           agent_context="primary", user_id="1001")
    manager.on_delegation("Find the cheapest train from Leeds to York on Friday",
                          "The 07:12 for 8.40 GBP; I prefer the later one at 09:00.", child_session_id="child-9")
    manager.flush_pending(timeout=30)
    manager.on_session_end([])  # consolidation reads the session's turns
    manager.shutdown_all()
""")


def test_what_a_subagent_did_is_written_for_the_parent_sessions_user(hermes_home):
    """Hermes 0.19 starts no provider for a subagent; its parent hears of it (on_delegation)
    and that lands in the parent's user's scope, in the assistant's part (never promoted)."""
    from tests.test_hermes_provider import install_plugin

    install_plugin(hermes_home, hermes_home / "soul.json")
    python = hermes_client.ensure_hermes_venv().parent / "python"
    proc = subprocess.run([str(python), "-c", DELEGATION, str(hermes_home)], capture_output=True, text=True,
                          timeout=120, env=hermes_client.hermes_env(hermes_home))
    assert proc.returncode == 0, proc.stderr[-2000:]
    graph = SoulFile(hermes_home / "soul.json").graph()
    (turn,) = [n for n in graph.nodes.values() if "Leeds to York" in n.content]
    assert turn.scope == "telegram:1001" and "session:parent-1" in turn.tags
    assert turn.content.startswith("User: \nAssistant: A subagent (child-9) was asked: Find the cheapest train")
    assert not [n for n in graph.nodes.values() if n.kind == "preference"]  # the subagent's "I prefer" is not the user's
