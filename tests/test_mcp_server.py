"""The MCP server as an agent sees it: a subprocess driven by the MCP SDK's stdio client."""

import json
import subprocess
import sys

import pytest

from tests.mcp_session import with_server
from soulgraph.server import TOOL_NAMES
from soulgraph.store import SCHEMA

READ_TOOLS = {"soul_prime", "soul_related", "soul_query", "soul_hot", "soul_discover", "soul_by_tag", "soul_summary"}


def test_lists_exactly_the_13_tools_with_schemas_and_annotations(tmp_path):
    async def scenario(s):
        return (await s.client.list_tools()).tools

    tools = with_server(tmp_path / "soul.json", scenario)
    assert sorted(t.name for t in tools) == sorted(TOOL_NAMES) and len(tools) == 13
    for tool in tools:
        assert len(tool.description) > 40, f"{tool.name} needs a description an agent can act on"
        assert tool.input_schema["type"] == "object"
        assert tool.annotations.read_only_hint is (tool.name in READ_TOOLS), tool.name
    by_name = {t.name: t for t in tools}
    add = by_name["soul_add"].input_schema
    assert add["required"] == ["content"]
    assert add["properties"]["tags"]["type"] == "array"
    assert by_name["soul_hot"].input_schema["properties"]["limit"]["default"] == 10
    assert not (tmp_path / "soul.json").exists(), "listing tools must not create the soul file"


def test_every_tool_and_restart_persistence(tmp_path):
    soul_file = tmp_path / "home" / "soul.json"

    async def first_session(s):
        axiom = await s.call("soul_add", content="Never leave a host between two runtime versions", tags=["axiom"])
        assert axiom["id"] and axiom["content"].startswith("Never leave")
        pinned = await s.call("soul_pin", node_id=axiom["id"])
        assert pinned["pinned"] is True
        plan = await s.call("soul_add", content="Fleet rollout plan: build a wheel per sha", tags=["project:fleet"])
        venv = await s.call("soul_add", content="Switch the runtime venv with an atomic symlink rename",
                            tags=["project:fleet", "lesson"], parents=[plan["id"]])
        check = await s.call("soul_add", content="Import check before the switch", tags=["project:fleet"])
        link = await s.call("soul_link", parent_id=venv["id"], child_id=check["id"])
        assert link == {"parent": venv["id"], "child": check["id"], "linked": True, "already_linked": False}
        again = await s.call("soul_link", parent_id=venv["id"], child_id=check["id"])
        assert again["already_linked"] is True

        query = await s.call("soul_query", query="atomic symlink venv")
        assert query["results"][0]["id"] == venv["id"] and query["results"][0]["score"] > 0
        tagged = await s.call("soul_query", query="rollout venv check", tag="lesson")
        assert [r["id"] for r in tagged["results"]] == [venv["id"]]

        related = await s.call("soul_related", query="atomic symlink rename")
        ids = [r["id"] for r in related["results"]]
        assert ids[0] == venv["id"] and plan["id"] in ids and check["id"] in ids
        assert {r["id"]: r["via"] for r in related["results"]}[plan["id"]] == f"parent of {venv['id']}"

        discovered = await s.call("soul_discover", node_id=plan["id"], depth=2)
        assert [(r["id"], r["depth"]) for r in discovered["results"]] == [(venv["id"], 1), (check["id"], 2)]

        by_tag = await s.call("soul_by_tag", tag="project:fleet")
        assert by_tag["total"] == 3

        splayed = await s.call("soul_splay", node_id=plan["id"])
        assert splayed["access_count"] == 1
        hot = await s.call("soul_hot", limit=2)
        assert [r["id"] for r in hot["results"]] == [axiom["id"], plan["id"]]

        hypothesis = await s.call("soul_explore", content="Maybe launchd needs the user domain over SSH",
                                  parents=[plan["id"]])
        hypo_id = hypothesis["hypothesis"]["id"]
        assert hypo_id not in [r["id"] for r in (await s.call("soul_query", query="launchd"))["results"]]
        summary = await s.call("soul_summary")
        assert (summary["nodes"], summary["edges"], summary["pinned"], summary["hypotheses"]) == (4, 2, 1, 1)
        assert summary["scanner"]["detector"] == "rules and a linear model" and summary["scanner"]["rules"] > 20
        return {"axiom": axiom["id"], "plan": plan["id"], "venv": venv["id"], "check": check["id"], "hypo": hypo_id}

    ids = with_server(soul_file, first_session)

    async def after_restart(s):
        summary = await s.call("soul_summary")
        assert (summary["nodes"], summary["edges"], summary["hypotheses"]) == (4, 2, 1)
        promoted = await s.call("soul_promote", node_id=ids["hypo"])
        assert promoted["parents"] == [ids["plan"]]
        assert (await s.call("soul_query", query="launchd"))["results"][0]["id"] == ids["hypo"]
        primed = await s.call("soul_prime", context="import check before switching")
        assert primed["hot"][0]["id"] == ids["axiom"] and primed["hot"][0]["pinned"]
        assert primed["focus"]["id"] == ids["check"]
        assert [(w["id"], w["relation"]) for w in primed["walk"]][:2] == [(ids["venv"], "ancestor"), (ids["plan"], "ancestor")]

    with_server(soul_file, after_restart)
    # Everything the server acknowledged is on disk: soul.json plus its journal, exported whole.
    exported = subprocess.run([sys.executable, "-m", "soulgraph.store", "export", str(soul_file)],
                              capture_output=True, text=True, timeout=60, check=True)
    saved = json.loads(exported.stdout)
    assert len(saved["nodes"]) == 5 and saved["exploration"]["nodes"] == []


def test_bad_calls_are_tool_errors_that_change_nothing(tmp_path):
    soul_file = tmp_path / "soul.json"

    async def scenario(s):
        a = await s.call("soul_add", content="a")
        b = await s.call("soul_add", content="b", parents=[a["id"]])
        before = soul_file.read_bytes()
        messages = {
            "unknown id": await s.refused("soul_splay", node_id="n999"),
            "unknown parent": await s.refused("soul_add", content="x", parents=["n999"]),
            "cycle": await s.refused("soul_link", parent_id=b["id"], child_id=a["id"]),
            "empty": await s.refused("soul_add", content=""),
            "blank": await s.refused("soul_add", content="   "),
            "wrong type": await s.refused("soul_hot", limit="many"),
            "out of range": await s.refused("soul_hot", limit=10_000),
            "huge": await s.refused("soul_add", content="x" * 10_001),
            "too many tags": await s.refused("soul_add", content="x", tags=[f"t{i}" for i in range(33)]),
            "not a hypothesis": await s.refused("soul_promote", node_id=a["id"]),
            "unknown tool": await s.refused("soul_forget", node_id=a["id"]),
        }
        assert soul_file.read_bytes() == before, "a refused call must not touch the file"
        # The server is still serving.
        assert (await s.call("soul_summary"))["nodes"] == 2
        return messages, a, b

    messages, a, b = with_server(soul_file, scenario)
    assert "unknown node id 'n999'" in messages["unknown id"]
    assert "'n999'" in messages["unknown parent"]
    assert a["id"] in messages["cycle"] and b["id"] in messages["cycle"] and "cycle" in messages["cycle"]
    assert "content" in messages["empty"] and "non-empty" in messages["blank"]
    assert "limit" in messages["wrong type"] and "limit" in messages["out of range"]
    assert "at most 10000" in messages["huge"]
    assert "tags" in messages["too many tags"]
    assert "not a hypothesis" in messages["not a hypothesis"]
    assert "soul_forget" in messages["unknown tool"]


def test_server_refuses_to_start_on_an_unreadable_soul_file(tmp_path):
    soul_file = tmp_path / "soul.json"
    soul_file.write_text('{"format": "someone-else"}')
    proc = subprocess.run([sys.executable, "-m", "soulgraph.mcp", "--soul-file", str(soul_file)],
                          input="", capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert str(soul_file) in proc.stderr and "not a soul graph file" in proc.stderr
    assert soul_file.read_text() == '{"format": "someone-else"}'


@pytest.mark.parametrize("flag", ["--help"])
def test_cli_help_names_the_soul_file_default(flag):
    proc = subprocess.run([sys.executable, "-m", "soulgraph.mcp", flag], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "HERMES_HOME" in proc.stdout


def big_soul_file(path, n_nodes=6000):
    """A soul file over the eager-load size, so the server reads it in the background."""
    from soulgraph.engine.graph import SoulGraph
    from soulgraph.store import EAGER_LOAD_BYTES, SoulFile

    graph = SoulGraph()
    for i in range(n_nodes):
        graph.add(f"memory {i} about deploying host number {i % 97} " + "padding " * 20)
    SoulFile(path).save(graph)
    assert path.stat().st_size > EAGER_LOAD_BYTES
    return path


def test_a_large_soul_file_is_loaded_in_the_background(tmp_path):
    soul_file = big_soul_file(tmp_path / "soul.json")

    async def scenario(s):
        assert len(await s.tool_names()) == 13
        return (await s.call("soul_summary"))["nodes"], (await s.call("soul_query", query="host 42"))["results"]

    nodes, results = with_server(soul_file, scenario)
    assert nodes == 6000 and results


def test_a_large_file_with_a_damaged_body_is_reported_by_every_call_and_kept(tmp_path):
    soul_file = big_soul_file(tmp_path / "soul.json")
    damaged = soul_file.read_bytes()[:-5000]  # header intact, body cut short
    soul_file.write_bytes(damaged)

    async def scenario(s):
        return await s.refused("soul_summary"), await s.refused("soul_add", content="would overwrite")

    read_error, write_error = with_server(soul_file, scenario)
    for message in (read_error, write_error):
        assert str(soul_file) in message and "not valid JSON" in message
    assert soul_file.read_bytes() == damaged


def test_a_large_file_of_a_newer_schema_stops_the_server_at_once(tmp_path):
    soul_file = big_soul_file(tmp_path / "soul.json", 5000)
    data = soul_file.read_bytes().replace(f'"schema": {SCHEMA},'.encode(), b'"schema": 7,', 1)
    soul_file.write_bytes(data)
    proc = subprocess.run([sys.executable, "-m", "soulgraph.mcp", "--soul-file", str(soul_file)],
                          input="", capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "schema 7 is newer" in proc.stderr
    assert soul_file.read_bytes() == data


def test_a_write_the_disk_refuses_reaches_the_agent_with_the_reason_and_is_not_kept(tmp_path):
    """Reproduction from the field: the write fails, the file later must not hold it."""
    soul_file = tmp_path / "soul.json"

    async def scenario(s):
        await s.call("soul_add", content="kept")
        soul_file.chmod(0o444)
        refused = await s.refused("soul_add", content="REFUSED")
        soul_file.chmod(0o600)
        await s.call("soul_add", content="later")
        found = [r["content"] for r in (await s.call("soul_query", query="REFUSED kept later"))["results"]]
        return refused, found

    refused, found = with_server(soul_file, scenario)
    assert str(soul_file) in refused and "read-only (mode 0444); not written" in refused
    assert sorted(found) == ["kept", "later"]
    exported = subprocess.run([sys.executable, "-m", "soulgraph.store", "export", str(soul_file)],
                              capture_output=True, text=True, timeout=60, check=True)
    assert sorted(n["content"] for n in json.loads(exported.stdout)["nodes"]) == ["kept", "later"]
