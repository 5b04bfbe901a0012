"""A hard forget takes a note out of every file of ours that holds it: soul_remember writes the
note to the graph and to MEMORY.md (which Hermes puts into its prompt), so soul_forget removes
that entry too, exactly that entry, atomically and with the file's mode kept, or refuses and
names the file that still holds the text. Through the real MCP server."""

from __future__ import annotations

import json
import os

from soulgraph.hermes.memory_service import MemoryService
from soulgraph.store import SoulFile
from tests.mcp_session import Session, with_server

TOOLSETS = ["--toolsets", "graph,memory,markdown", "--no-embed"]
SECRET_NOTE = "The vault combination is kept in the blue ledger zq7xv"


def hermes_home(tmp_path):
    home = tmp_path / "home"
    (home / "memories").mkdir(parents=True)
    (home / "config.yaml").write_text("memory:\n  memory_char_limit: 2200\n")
    return home


def files_holding(root, text: str) -> list[str]:
    """Every file under `root` whose bytes hold `text`, as written or JSON-escaped."""
    needles = {text.encode("utf-8"), json.dumps(text)[1:-1].encode("utf-8"),
               json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8")}
    found = []
    for folder, _, names in os.walk(root):
        for name in names:
            data = open(os.path.join(folder, name), "rb").read()
            if any(needle in data for needle in needles):
                found.append(os.path.relpath(os.path.join(folder, name), root))
    return sorted(found)


def test_a_hard_forget_leaves_the_note_in_no_file_of_the_hermes_home(tmp_path):
    home = hermes_home(tmp_path)
    memory = home / "memories" / "MEMORY.md"

    async def scenario(s: Session):
        kept = await s.call("soul_remember", note="The garden hose lives in the shed")
        secret = await s.call("soul_remember", note=SECRET_NOTE)
        longer = await s.call("soul_remember", note=f"{SECRET_NOTE}, behind the atlas")
        await s.call("soul_add", content="An unrelated memory about the weather")
        os.chmod(memory, 0o640)
        held_before = files_holding(home, SECRET_NOTE)
        forgot = await s.call("soul_forget", node_id=secret["node_id"], reason="must not be kept")
        return kept, longer, held_before, forgot

    kept, longer, held_before, forgot = with_server(home / "soul.json", scenario, extra_args=TOOLSETS)
    assert "memories/MEMORY.md" in held_before and "soul.json.journal" in held_before
    assert forgot["scrubbed"] == ["memories/MEMORY.md"]
    # Exactly that entry: another entry that starts with the same words stays, and says so.
    assert forgot["warnings"] == ["memories/MEMORY.md still holds the text inside another entry; edit that entry by hand"]
    assert memory.read_text() == f"The garden hose lives in the shed\n§\n{SECRET_NOTE}, behind the atlas"
    assert memory.stat().st_mode & 0o777 == 0o640
    graph = SoulFile(home / "soul.json").graph()
    assert kept["node_id"] in graph.nodes and longer["node_id"] in graph.nodes

    # Forgetting the longer one too: then no file under the home holds the words at all.
    async def forget_longer(s: Session):
        return await s.call("soul_forget", node_id=longer["node_id"], reason="must not be kept")

    again = with_server(home / "soul.json", forget_longer, extra_args=TOOLSETS)
    assert again == {"forgotten": longer["node_id"], "reason": "must not be kept", "scrubbed": ["memories/MEMORY.md"]}
    assert files_holding(home, SECRET_NOTE) == []
    assert files_holding(home, "blue ledger") == []
    assert memory.read_text() == "The garden hose lives in the shed"


def test_a_plain_markdown_file_loses_the_bullet_and_only_that_bullet(tmp_path):
    folder = tmp_path / "agent"
    folder.mkdir()

    async def scenario(s: Session):
        await s.call("soul_init")
        first = await s.call("soul_remember", note="Buy seeds")
        await s.call("soul_remember", note="Buy seeds\nfor the spring beds")
        await s.call("soul_remember", note="Water on Sundays")
        return await s.call("soul_forget", node_id=first["node_id"], reason="done")

    forgot = with_server(folder / "soul.json", scenario, extra_args=TOOLSETS)
    assert forgot["scrubbed"] == ["MEMORY.md"]
    assert (folder / "MEMORY.md").read_text() == "# Memory\n- Buy seeds\n  for the spring beds\n- Water on Sundays\n"


def test_a_file_that_cannot_be_rewritten_refuses_the_forget_and_names_it(tmp_path):
    home = hermes_home(tmp_path)
    memory = home / "memories" / "MEMORY.md"

    async def scenario(s: Session):
        note = await s.call("soul_remember", note=SECRET_NOTE)
        memory.write_bytes(memory.read_bytes() + b"\n\xa7\nan entry edited by hand in Latin-1: caf\xe9")
        before = memory.read_bytes()
        refused = await s.refused("soul_forget", node_id=note["node_id"], reason="must not be kept")
        history = await s.call("soul_history", node_id=note["node_id"])
        return note, before, refused, history

    note, before, refused, history = with_server(home / "soul.json", scenario, extra_args=TOOLSETS)
    assert "memories/MEMORY.md still holds the text" in refused and "not UTF-8" in refused, refused
    assert f"{note['node_id']} was not forgotten" in refused
    assert memory.read_bytes() == before
    assert history["entries"] == []  # no forget entry: the change was taken back
    assert SoulFile(home / "soul.json").graph().nodes[note["node_id"]].content == SECRET_NOTE


def test_a_note_hermes_memory_tool_wrote_leaves_memory_md_with_its_mirror(tmp_path):
    """The provider mirrors Hermes' memory tool into the graph; Hermes itself wrote the entry
    to MEMORY.md. Forgetting the mirror takes Hermes' entry out too (or Hermes would keep
    putting the forgotten text into its prompt)."""
    home = hermes_home(tmp_path)
    memory = home / "memories" / "MEMORY.md"
    memory.write_text(f"Ada prefers tea\n§\n{SECRET_NOTE}")  # as Hermes' memory tool leaves it
    service = MemoryService(SoulFile(home / "soul.json"), embed=False)
    answer = service.handle({"id": 1, "op": "memory_write",
                             "args": {"action": "add", "target": "memory", "content": SECRET_NOTE}})
    mirrored = answer["result"]["id"]

    async def scenario(s: Session):
        return await s.call("soul_forget", node_id=mirrored, reason="must not be kept")

    forgot = with_server(home / "soul.json", scenario, extra_args=["--toolsets", "graph,memory", "--no-embed"])
    assert forgot["scrubbed"] == ["memories/MEMORY.md"]
    assert memory.read_text() == "Ada prefers tea"
    assert files_holding(home, SECRET_NOTE) == []
