"""The Hermes memory provider: the memory service (hermes/memory_service.py) in-process, and
the plugin shim loaded by Hermes' own plugin loader in Hermes' own venv, talking to the
service started from ours."""

import json
import select
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from soulgraph.hermes import plugin_files
from soulgraph.hermes.consolidate import CONSOLIDATED
from soulgraph.hermes.memory_service import MemoryService
from soulgraph.store import SoulFile
from tests import hermes_client

# A made-up key in the form of a real one (not an example the scanner lets through).
AWS_KEY = "AKIAZ3QXJ5LRTNOPQR7S"


@pytest.fixture
def service(tmp_path):
    return MemoryService(SoulFile(tmp_path / "soul.json"))


def ok(service, op, **args):
    answer = service.handle({"id": 1, "op": op, "args": args})
    assert answer["ok"], answer
    return answer["result"]


def test_turns_are_chained_episodes_with_provenance(service):
    first = ok(service, "sync_turn", user="hello there", assistant="hi!", session_id="s1", platform="cli",
               user_id="u7")
    second = ok(service, "sync_turn", user="what is the weather", assistant="sunny", session_id="s1")
    graph = service.soul.graph()
    a, b = graph.nodes[first["id"]], graph.nodes[second["id"]]
    session = next(iter(graph.parents[a.id]))
    assert graph.nodes[session].content.startswith("Hermes session s1 on cli")
    assert set(graph.parents[b.id]) == {a.id}  # turns in order
    assert (a.kind, a.source, a.source_ref, a.writer) == ("episodic_event", "hermes:sync_turn", "s1#1", "u7")
    assert a.content == "User: hello there\nAssistant: hi!" and b.source_ref == "s1#2"
    # Another session starts its own chain.
    other = ok(service, "sync_turn", user="new topic", assistant="ok", session_id="s2")
    assert graph.nodes[next(iter(graph.parents[other["id"]]))].content.startswith("Hermes session s2")


def test_long_tool_results_are_not_kept_short_ones_are(service):
    messages = [
        {"role": "user", "content": "read the file and check the date"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "date", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "x" * 5000},
        {"role": "tool", "tool_call_id": "c2", "content": "2026-11-30"},
    ]
    result = ok(service, "sync_turn", user="read the file and check the date", assistant="done",
                session_id="s", messages=messages)
    text = service.soul.graph().nodes[result["id"]].content
    assert "Tool read_file: (a result of 5,000 characters, not kept)" in text
    assert "Tool date: 2026-11-30" in text and "xxxx" not in text


def test_a_secret_in_a_turn_is_cut_out_and_never_reaches_the_disk(service, tmp_path):
    result = ok(service, "sync_turn", user=f"my key is {AWS_KEY} keep it safe", assistant="ok", session_id="s")
    assert result["redacted"] == ["aws-access-key-id"]
    assert "[secret removed: aws-access-key-id]" in service.soul.graph().nodes[result["id"]].content
    for path in tmp_path.iterdir():
        assert AWS_KEY.encode() not in path.read_bytes(), path


def test_a_pasted_bearer_token_is_cut_out_and_the_turn_kept(service, tmp_path):
    # The cut's own mark ("Bearer [secret removed: …]") reads like a token to a rule set whose
    # character class takes "[": the turn must still be kept, the token never.
    token = "eyJhbGciOiJIUzI1NiJ9" + "Qx7" * 12
    pasted = f'headers = {{"Authorization": "Bearer {token}"}} why does this 401?'
    result = ok(service, "sync_turn", user=pasted, assistant="the token expired", session_id="s")
    content = service.soul.graph().nodes[result["id"]].content
    assert "[secret removed:" in content and token not in content
    for path in tmp_path.iterdir():
        assert token.encode() not in path.read_bytes(), path


def test_consolidation_promotes_typed_memories_once_and_confirms_repeats(service):
    ok(service, "sync_turn", user="I prefer tea over coffee. My name is Ada. Nice weather.", assistant="noted",
       session_id="s")
    ok(service, "sync_turn", user="I will ship the release on Friday. We decided to use Postgres.",
       assistant="ok", session_id="s")
    ok(service, "sync_turn", user="Turns out the fix was a missing index. Please be concise.",
       assistant="ok", session_id="s")
    result = ok(service, "consolidate", session_id="s")
    kinds = {(a["kind"], a["content"]) for a in result["added"]}
    assert kinds == {
        ("preference", "I prefer tea over coffee."), ("semantic_fact", "My name is Ada."),
        ("goal_or_commitment", "I will ship the release on Friday."),
        ("semantic_fact", "We decided to use Postgres."),
        ("tool_or_workflow_lesson", "Turns out the fix was a missing index."),
        ("communication_preference", "Please be concise."),
    }
    graph = service.soul.graph()
    for added in result["added"]:
        turn = next(iter(graph.parents[added["id"]]))
        assert graph.nodes[turn].source == "hermes:sync_turn" and graph.nodes[turn].metadata[CONSOLIDATED]
    assert "- preference: I prefer tea over coffee." in result["summary"]
    assert ok(service, "consolidate", session_id="s")["added"] == []  # each turn once
    ok(service, "sync_turn", user="I prefer tea over coffee.", assistant="yes", session_id="s2")
    again = ok(service, "consolidate", session_id="s2")
    assert again["added"] == [] and [c["kind"] for c in again["confirmed"]] == ["preference"]
    tea = next(n for n in graph.nodes.values() if n.content == "I prefer tea over coffee.")
    assert tea.strength == pytest.approx(2.0, abs=1e-6)  # confirmed once, moments later


def test_memory_tool_writes_are_mirrored(service):
    added = ok(service, "memory_write", action="add", target="user", content="Ada uses vim",
               metadata={"session_id": "s"})
    replaced = ok(service, "memory_write", action="replace", target="user", content="Ada uses helix",
                  metadata={"old_text": "uses vim"})
    graph = service.soul.graph()
    assert replaced["superseded"] == added["id"]
    assert graph.nodes[added["id"]].status == "superseded" and graph.nodes[added["id"]].superseded_by == replaced["id"]
    assert graph.nodes[replaced["id"]].tags == ["user"] and graph.nodes[replaced["id"]].kind == "semantic_fact"
    removed = ok(service, "memory_write", action="remove", target="user", content="",
                 metadata={"old_text": "helix"})
    assert removed == {"archived": replaced["id"]} and graph.nodes[replaced["id"]].status == "archived"
    assert ok(service, "memory_write", action="remove", target="memory", metadata={"old_text": "nothing"})["archived"] is None


def test_recall_leaves_out_the_current_session_and_fits_the_budget(service):
    ok(service, "sync_turn", user="The staging database is db-7 in Frankfurt", assistant="ok", session_id="old")
    ok(service, "sync_turn", user="what is the staging database again?", assistant="checking", session_id="now")
    result = ok(service, "recall", query="staging database", skip_session="now")
    assert "db-7 in Frankfurt" in result["text"] and "checking" not in result["text"]
    assert ok(service, "recall", query="staging database", budget=60)["text"].count("\n") == 0
    assert len(ok(service, "recall", query="staging database", budget=60)["text"]) <= 60


def test_bad_requests_are_refused_with_a_reason(service):
    for request, words in ((["not", "an", "object"], "JSON object"), ({"id": 1, "op": "nope"}, "unknown op 'nope'"),
                           ({"id": 2, "op": "recall", "args": {"quer": "x"}}, "recall: unknown arg(s) 'quer'"),
                           ({"id": 3, "op": "memory_write", "args": {"action": "burn", "target": "user"}},
                            "unknown memory action"),
                           ({"id": 4, "op": "memory_write", "args": {"action": "add", "target": "diary"}},
                            "unknown memory target"),
                           ({"op": "status"}, "the request has no id")):
        answer = service.handle(request)
        assert not answer["ok"] and words in answer["error"] and answer["retry"] is False, answer
        assert answer["id"] == (request.get("id") if isinstance(request, dict) else None)


def test_a_turn_sent_twice_under_one_id_is_stored_once(service):
    first = ok(service, "sync_turn", user="deploys go out on Tuesdays", assistant="ok", session_id="s", turn_id="t-1")
    again = ok(service, "sync_turn", user="deploys go out on Tuesdays", assistant="ok", session_id="s", turn_id="t-1")
    other = ok(service, "sync_turn", user="deploys go out on Tuesdays", assistant="ok", session_id="s", turn_id="t-2")
    assert (first["stored"], again["stored"], other["stored"]) == ("now", "already", "now")
    assert again["id"] == first["id"] != other["id"]
    graph = service.soul.graph()
    assert graph.nodes[first["id"]].metadata["turn_id"] == "t-1"
    assert len([n for n in graph.nodes.values() if n.source == "hermes:sync_turn"]) == 2
    # A memory-tool write sent twice is mirrored once, a replace supersedes once.
    added = ok(service, "memory_write", action="add", target="user", content="Ada uses vim", write_id="w-1")
    assert ok(service, "memory_write", action="add", target="user", content="Ada uses vim", write_id="w-1") == {
        "id": added["id"], "stored": "already", "superseded": None, "warnings": []}
    replaced = ok(service, "memory_write", action="replace", target="user", content="Ada uses helix",
                  metadata={"old_text": "vim"}, write_id="w-2")
    assert ok(service, "memory_write", action="replace", target="user", content="Ada uses helix",
              metadata={"old_text": "vim"}, write_id="w-2")["id"] == replaced["id"]
    assert sorted(n.content for n in graph.nodes.values() if n.source == "hermes:memory_tool:user") == [
        "Ada uses helix", "Ada uses vim"]


# ---------------------------------------------------------------------- the shim, in Hermes' venv
DRIVER = textwrap.dedent("""
    import json, sys, time
    from plugins.memory import load_memory_provider, discover_memory_providers
    out = {"discovered": [name for name, _desc, available in discover_memory_providers() if available]}
    provider = load_memory_provider("soulgraph")
    context = sys.argv[1]
    provider.initialize("sess-1", hermes_home=sys.argv[2], platform="cli", agent_context=context, user_id="u1")
    out["block"] = provider.system_prompt_block()
    started = time.monotonic()
    provider.sync_turn("I prefer green tea. My name is Ada.", "Noted, Ada.", session_id="sess-1")
    out["sync_turn_s"] = time.monotonic() - started
    provider.on_memory_write("add", "memory", "The deploy key lives in the vault", metadata={})
    out["flushed"] = provider.flush(10)
    out["pre_compress"] = provider.on_pre_compress([])
    provider.on_session_switch("sess-2", parent_session_id="sess-1", reset=True)
    started = time.monotonic()
    out["prefetch"] = provider.prefetch("what tea does Ada like?")
    out["prefetch_s"] = time.monotonic() - started
    out["backup_paths"] = provider.backup_paths()
    provider.shutdown()
    print(json.dumps(out))
""")


def install_plugin(home: Path, soul_file: Path, python: str = sys.executable) -> None:
    plugin_files.write(plugin_files.plan(home, python, soul_file))
    config = home / "config.yaml"
    config.write_text(config.read_text() + "\nmemory:\n  provider: soulgraph\n")


def drive(home: Path, context: str = "primary", timeout: float = 120) -> dict:
    python = hermes_client.ensure_hermes_venv().parent / "python"
    proc = subprocess.run([str(python), "-c", DRIVER, context, str(home)], capture_output=True, text=True,
                          timeout=timeout, env=hermes_client.hermes_env(home))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_hermes_loads_the_shim_and_it_drives_the_graph(hermes_home):
    soul_file = hermes_home / "soul.json"
    install_plugin(hermes_home, soul_file)
    out = drive(hermes_home)
    assert "soulgraph" in out["discovered"]
    assert out["sync_turn_s"] < 0.05  # queued, never waited on
    assert out["flushed"] is True
    assert "- preference: I prefer green tea." in out["pre_compress"]
    assert "I prefer green tea." in out["prefetch"] and out["prefetch"].startswith("From the soul graph")
    # For `hermes backup`: one consistent copy made by the store, not the live pair of files.
    copy = hermes_home / "soul-hermes-backup.json"
    assert out["backup_paths"] == [str(copy)]
    graph = SoulFile(soul_file).graph()
    sources = sorted(n.source for n in graph.nodes.values())
    assert "hermes:sync_turn" in sources and "hermes:memory_tool:memory" in sources
    assert not copy.with_name(copy.name + ".journal").exists()
    assert sorted(n.content for n in SoulFile(copy).graph().nodes.values()) == \
        sorted(n.content for n in graph.nodes.values())
    # A second session's frozen block shows what the first one taught.
    assert "I prefer green tea." in drive(hermes_home)["block"]


def test_backup_paths_name_the_live_files_outside_the_home_when_no_copy_can_be_made(hermes_home, tmp_path):
    """Hermes asks without initialize() and without network: the plugin answers from its settings.
    Here the soul file does not exist yet, so `store backup` refuses and the live names stand."""
    elsewhere = tmp_path / "data" / "soul.json"
    install_plugin(hermes_home, elsewhere)
    python = hermes_client.ensure_hermes_venv().parent / "python"
    script = ("import json; from plugins.memory import load_memory_provider; "
              "print(json.dumps(load_memory_provider('soulgraph').backup_paths()))")
    proc = subprocess.run([str(python), "-c", script], capture_output=True, text=True, timeout=60,
                          env=hermes_client.hermes_env(hermes_home))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [str(elsewhere), f"{elsewhere}.journal"]


def test_a_cron_context_writes_nothing(hermes_home):
    soul_file = hermes_home / "soul.json"
    install_plugin(hermes_home, soul_file)
    out = drive(hermes_home, context="cron")
    assert out["pre_compress"] == "" and out["flushed"] is True
    assert not soul_file.exists() or len(SoulFile(soul_file).graph()) == 0


# The driver above, with the caller's own wait in flush() at 1 s instead of 10: against a service
# that never answers, that wait is spent in full and proves nothing more at 10 s. Every call still
# meets the service and the plugin's own deadlines (DEADLINES) as they are.
STUCK_DRIVER = DRIVER.replace("provider.flush(10)", "provider.flush(1)")


def drive_stuck(home: Path, timeout: float = 120) -> dict:
    assert STUCK_DRIVER != DRIVER, "the driver no longer calls provider.flush(10)"
    python = hermes_client.ensure_hermes_venv().parent / "python"
    proc = subprocess.run([str(python), "-c", STUCK_DRIVER, "primary", str(home)], capture_output=True, text=True,
                          timeout=timeout, env=hermes_client.hermes_env(home))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_service_that_never_answers_costs_a_turn_its_deadline_only(hermes_home, tmp_path):
    # A "python" that reads its input forever and answers nothing.
    stuck = tmp_path / "stuck-python"
    stuck.write_text("#!/bin/sh\nexec cat > /dev/null\n")
    stuck.chmod(0o755)
    install_plugin(hermes_home, hermes_home / "soul.json", python=str(stuck))
    started = time.monotonic()
    out = drive_stuck(hermes_home, timeout=120)
    assert out["prefetch"] == "" and out["prefetch_s"] < 1.0
    assert out["block"] == ""
    assert time.monotonic() - started < 90


def test_the_service_and_the_mcp_server_share_one_soul_file(tmp_path):
    """Both processes at once on one file, under the store's lock: each answers with what the
    other wrote before it asked."""
    from tests.mcp_session import Session, with_server

    soul_file = tmp_path / "soul.json"
    service = subprocess.Popen([sys.executable, "-m", "soulgraph.hermes.memory_service", "--soul-file", str(soul_file)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(op, **args):
        service.stdin.write(json.dumps({"id": 1, "op": op, "args": args}) + "\n")
        service.stdin.flush()
        # A deadline on the answer: a broken service fails the test instead of hanging it.
        ready, _, _ = select.select([service.stdout], [], [], 30)
        assert ready, f"the memory service gave no answer to {op} within 30 s"
        answer = json.loads(service.stdout.readline())
        assert answer["ok"], answer
        return answer["result"]

    async def scenario(s: Session):
        written = ask("sync_turn", user="The staging database is db-7 in Frankfurt", assistant="ok", session_id="a")
        found = await s.call("soul_query", query="staging database Frankfurt")
        added = await s.call("soul_add", content="Backups run nightly at 02:00 to the NAS")
        recalled = ask("recall", query="when do backups run?")
        return written, found, added, recalled

    try:
        written, found, added, recalled = with_server(soul_file, scenario)
    finally:
        service.stdin.close()
        service.wait(10)
    assert [r["id"] for r in found["results"]][:1] == [written["id"]]
    assert "Backups run nightly at 02:00" in recalled["text"] and added["id"] in recalled["ids"]
