"""The markdown toolset (seed 001) through the real MCP SDK client: SOUL.md and MEMORY.md, in a
plain folder and in a Hermes home (Hermes' § format, budget and lock), kept in step with the
graph; paths confined to the server's folder; Hermes' own memory tool writing at the same time."""

from __future__ import annotations

import json
import subprocess
import textwrap
import threading

import pytest

from soulgraph.store import SoulFile
from tests import hermes_client
from tests.mcp_session import Session, with_server

MARKDOWN = ["--toolsets", "graph,markdown"]
AWS_KEY = "AKIAZ3QXJ5LRTNOPQR7S"


def hermes_like_home(tmp_path):
    home = tmp_path / "home"
    (home / "memories").mkdir(parents=True)
    (home / "config.yaml").write_text("memory:\n  memory_char_limit: 120\n")
    return home


def run(soul_file, scenario, *extra, extra_env=None):
    return with_server(soul_file, scenario, extra_args=[*MARKDOWN, *extra], extra_env=extra_env)


def test_status_init_and_remember_in_a_plain_folder(tmp_path):
    async def scenario(s: Session):
        names = await s.tool_names()
        before = await s.call("soul_status")
        init = await s.call("soul_init", agent_name="Ada", description="You help with the garden.")
        again = await s.call("soul_init")
        remembered = await s.call("soul_remember", note="The tomatoes go in the south bed.")
        after = await s.call("soul_status")
        reset = await s.call("soul_reset")
        return names, before, init, again, remembered, after, reset

    names, before, init, again, remembered, after, reset = run(tmp_path / "soul.json", scenario)
    assert len(names) == 18 and {"soul_status", "soul_init", "soul_ask", "soul_remember", "soul_reset"} <= set(names)
    assert before == {"status": "success", "soul_path": "SOUL.md", "memory_path": "MEMORY.md", "soul_exists": False,
                      "soul_size_bytes": 0, "memory_exists": False, "memory_size_bytes": 0, "memory_format": "markdown"}
    assert init == {"status": "success", "created": ["SOUL.md", "MEMORY.md"], "skipped": []}
    assert again == {"status": "success", "created": [], "skipped": ["SOUL.md", "MEMORY.md"]}
    assert (tmp_path / "SOUL.md").read_text() == "# Ada\n\nYou help with the garden.\n"
    assert (tmp_path / "MEMORY.md").read_text() == "# Memory\n- The tomatoes go in the south bed.\n"
    assert remembered["status"] == "success" and remembered["memory_format"] == "markdown"
    node = SoulFile(tmp_path / "soul.json").graph().nodes[remembered["node_id"]]
    assert (node.content, node.writer, node.source) == ("The tomatoes go in the south bed.", "tool:soul_remember",
                                                        "markdown:MEMORY.md")
    assert after["soul_exists"] and after["memory_size_bytes"] == len((tmp_path / "MEMORY.md").read_bytes())
    assert reset == {"status": "success", "note": "In-session history cleared. MEMORY.md is unchanged."}


def test_hermes_memory_file_keeps_its_format_and_its_budget(tmp_path):
    home = hermes_like_home(tmp_path)
    memory = home / "memories" / "MEMORY.md"
    memory.write_text("User likes tea\n§\nDeploys on Fridays")

    async def scenario(s: Session):
        first = await s.call("soul_remember", note="The VPN needs a hardware key")
        status = await s.call("soul_status")
        over = await s.call("soul_remember", note="x" * 80)
        return first, status, over

    first, status, over = run(home / "soul.json", scenario)
    assert memory.read_text() == "User likes tea\n§\nDeploys on Fridays\n§\nThe VPN needs a hardware key"
    assert (first["memory_format"], first["memory_entries"], first["memory_remaining_chars"]) == ("hermes", 3, 54)
    assert (status["memory_entries"], status["memory_budget_chars"], status["memory_remaining_chars"]) == (3, 120, 54)
    assert over["status"] == "error" and "over its budget of 120" in over["message"] and "file unchanged" in over["message"]
    assert memory.read_text().endswith("hardware key")
    graph = SoulFile(home / "soul.json").graph()
    assert sorted(n.content for n in graph.nodes.values()) == ["The VPN needs a hardware key"]  # the refused one too


def test_bad_input_is_an_error_dict_and_changes_nothing(tmp_path):
    home = hermes_like_home(tmp_path)
    (home / "memories" / "MEMORY.md").write_bytes(b"caf\xe9 latte")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (home / "escape.md").symlink_to(outside / "target.md")

    async def scenario(s: Session):
        return {
            "not utf-8": await s.call("soul_remember", note="hello"),
            "dotdot": await s.call("soul_status", memory_path="../elsewhere/MEMORY.md"),
            "absolute": await s.call("soul_init", soul_path=str(outside / "SOUL.md")),
            "symlink": await s.call("soul_remember", note="hi", memory_path="escape.md"),
            "secret": await s.call("soul_remember", note=f"the key is {AWS_KEY}", memory_path="notes.md"),
        }

    answers = run(home / "soul.json", scenario)
    assert all(a["status"] == "error" for a in answers.values()), answers
    assert "not UTF-8" in answers["not utf-8"]["message"]
    assert "outside" in answers["dotdot"]["message"] and "--allow-outside-soul-dir" in answers["absolute"]["message"]
    assert "leads outside" in answers["symlink"]["message"]
    assert "aws-access-key-id" in answers["secret"]["message"] and AWS_KEY not in answers["secret"]["message"]
    assert (home / "memories" / "MEMORY.md").read_bytes() == b"caf\xe9 latte"
    assert not (outside / "SOUL.md").exists() and not (outside / "target.md").exists()
    assert not (home / "notes.md").exists()
    for path in home.rglob("*"):
        if path.is_file():
            assert AWS_KEY.encode() not in path.read_bytes(), path


def test_the_operator_can_allow_paths_outside(tmp_path):
    outside = tmp_path / "shared"

    async def scenario(s: Session):
        return await s.call("soul_init", soul_path=str(outside / "SOUL.md"), memory_path=str(outside / "MEMORY.md"))

    answer = run(tmp_path / "home" / "soul.json", scenario, "--allow-outside-soul-dir")
    assert answer["created"] == [str(outside / "SOUL.md"), str(outside / "MEMORY.md")]


HERMES_WRITER = textwrap.dedent('''
    import sys
    from tools.memory_tool import MemoryStore
    store = MemoryStore(memory_char_limit=100_000)
    store.load_from_disk()
    for i in range(int(sys.argv[1])):
        result = store.add("memory", f"hermes entry {i}")
        assert result.get("success"), result
''')


def test_hermes_writing_its_memory_at_the_same_time_loses_nothing(hermes_exe, tmp_path):
    """Hermes' own memory tool (its MemoryStore, in its venv) and soul_remember, 40 entries each,
    at once on one MEMORY.md: all 80 are there."""
    home = tmp_path / "home"
    (home / "memories").mkdir(parents=True)
    (home / "config.yaml").write_text("memory:\n  memory_char_limit: 100000\n")
    python = hermes_exe.parent / "python"
    results = {}

    def hermes():
        results["hermes"] = subprocess.run([str(python), "-c", HERMES_WRITER, "40"], capture_output=True, text=True,
                                           timeout=120, env=hermes_client.hermes_env(home))

    async def scenario(s: Session):
        writer = threading.Thread(target=hermes)
        writer.start()
        answers = [await s.call("soul_remember", note=f"soul entry {i}") for i in range(40)]
        writer.join(120)
        return answers

    answers = run(home / "soul.json", scenario)
    assert results["hermes"].returncode == 0, results["hermes"].stderr[-2000:]
    assert all(a["status"] == "success" for a in answers)
    entries = (home / "memories" / "MEMORY.md").read_text().split("\n§\n")
    assert sorted(entries) == sorted([f"hermes entry {i}" for i in range(40)] + [f"soul entry {i}" for i in range(40)])


# ---------------------------------------------------------------------- soul_ask
OPENAI_KEY = "sk-test-Zq8xV2mN4bL7wP1rT6yU"


def ask_home(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "SOUL.md").write_text("# Ada\n\nYou are Ada, a gardener's assistant.\n")
    (home / "MEMORY.md").write_text("# Memory\n- The tomatoes go in the south bed.\n")
    return home


def test_soul_ask_through_the_openai_client(tmp_path):
    from tests.openai_stub import OpenAIStub, text_reply

    home = ask_home(tmp_path)
    with OpenAIStub(replies=[text_reply("In the south bed."), text_reply("Basil, next to them.")]) as stub:
        async def scenario(s: Session):
            first = await s.call("soul_ask", question="Where do the tomatoes go?", provider="openai",
                                 base_url=stub.base_url, model="stub-model")
            second = await s.call("soul_ask", question="And what grows with them?", provider="openai",
                                  base_url=stub.base_url, model="stub-model", remember=False)
            return first, second

        first, second = run(home / "soul.json", scenario, extra_env={"OPENAI_API_KEY": OPENAI_KEY})
        bodies, headers = stub.requests, [seen.headers for seen in stub.chat_requests]
    assert first == {"status": "success", "response": "In the south bed.", "remembered": True}
    assert second == {"status": "success", "response": "Basil, next to them.", "remembered": False}
    system = bodies[0]["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("# Ada\n\nYou are Ada, a gardener's assistant.")
    assert "- The tomatoes go in the south bed." in system["content"]  # MEMORY.md as context
    # The second question carries the session's first exchange.
    assert [m["content"] for m in bodies[1]["messages"][1:]] == [
        "Where do the tomatoes go?", "In the south bed.", "And what grows with them?"]
    assert {k.lower(): v for k, v in headers[0].items()}["authorization"] == f"Bearer {OPENAI_KEY}"
    assert (home / "MEMORY.md").read_text().endswith("- Q: Where do the tomatoes go?\n  A: In the south bed.\n")
    for path in home.rglob("*"):
        if path.is_file():
            assert OPENAI_KEY.encode() not in path.read_bytes(), path


def test_soul_ask_through_the_anthropic_client_and_reset(tmp_path):
    from tests.anthropic_stub import MessagesStub

    home = ask_home(tmp_path)
    with MessagesStub(reply="Water at dawn.") as stub:
        async def scenario(s: Session):
            first = await s.call("soul_ask", question="When to water?", base_url=stub.base_url, model="claude-stub")
            reset = await s.call("soul_reset")
            second = await s.call("soul_ask", question="Again?", base_url=stub.base_url, remember=False)
            return first, reset, second

        first, reset, second = run(home / "soul.json", scenario, extra_env={"ANTHROPIC_API_KEY": "sk-ant-test-key-123"})
        requests, headers = stub.requests, stub.headers
    assert first["response"] == "Water at dawn." and first["remembered"] and second["response"] == "Water at dawn."
    assert requests[0]["system"].startswith("# Ada") and requests[0]["model"] == "claude-stub"
    assert requests[0]["messages"] == [{"role": "user", "content": "When to water?"}]
    assert requests[1]["messages"] == [{"role": "user", "content": "Again?"}]  # reset cleared the session
    assert "sk-ant-test-key-123" in headers[0].get("x-api-key", "") + headers[0].get("authorization", "")
    graph = SoulFile(home / "soul.json").graph()
    assert [n.content for n in graph.nodes.values()] == ["Q: When to water?\nA: Water at dawn."]


def test_soul_ask_failures_are_error_dicts_and_change_nothing(tmp_path):
    from tests.anthropic_stub import MessagesStub

    home = ask_home(tmp_path)
    before = {p: p.read_bytes() for p in home.iterdir()}
    with MessagesStub(status=500) as failing, MessagesStub(delay=5) as slow:
        async def scenario(s: Session):
            return {
                "unknown": await s.call("soul_ask", question="hi", provider="llamacorp"),
                "500": await s.call("soul_ask", question="hi", base_url=failing.base_url),
                "500 openai": await s.call("soul_ask", question="hi", provider="openai", base_url=failing.base_url + "/v1"),
                "timeout": await s.call("soul_ask", question="hi", base_url=slow.base_url),
                "no soul": await s.call("soul_ask", question="hi", soul_path="missing.md", base_url=slow.base_url),
                "no key": await s.call("soul_ask", question="hi", provider="openai"),
            }

        answers = run(home / "soul.json", scenario, "--ask-timeout", "1")
    assert all(a["status"] == "error" for a in answers.values()), answers
    assert "unknown provider 'llamacorp'" in answers["unknown"]["message"]
    assert "answered HTTP 500" in answers["500"]["message"] and "answered HTTP 500" in answers["500 openai"]["message"]
    assert "no answer within 1 s" in answers["timeout"]["message"]
    assert "missing.md does not exist" in answers["no soul"]["message"]
    assert "OPENAI_API_KEY" in answers["no key"]["message"]
    assert {p: p.read_bytes() for p in home.iterdir() if p.name in {q.name for q in before}} == before


def test_without_the_sdk_soul_ask_names_the_extra(monkeypatch):
    import sys

    from soulgraph.memory import ask

    monkeypatch.setitem(sys.modules, "anthropic", None)  # import fails as if not installed
    with pytest.raises(ask.AskError, match=r"pip install 'soulgraph\[ask\]'"):
        ask.ask("anthropic", ask.prompt("soul", "", [], "hi"), base_url="http://127.0.0.1:9")
