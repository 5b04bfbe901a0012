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


def run(soul_file, scenario, *extra):
    return with_server(soul_file, scenario, extra_args=[*MARKDOWN, *extra])


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
    assert len(names) == 17 and {"soul_status", "soul_init", "soul_remember", "soul_reset"} <= set(names)
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
