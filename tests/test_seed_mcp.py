"""A seeded home answers soul_prime through the real MCP server over stdio (MCP SDK client)."""

from __future__ import annotations

import sys

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.seed_fixtures import CONFIG_WITH_SERVERS, write_home
from soulgraph.hermes.install import install


async def _prime(python: str, args: list[str], context: str):
    # The exact command line the installer wrote into config.yaml, with the bare
    # environment Hermes gives a stdio server (no HERMES_HOME).
    params = StdioServerParameters(command=python, args=args, env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    async with Client(params) as client:
        tools = await client.list_tools()
        result = await client.call_tool("soul_prime", {"context": context, "limit": 10})
        return [t.name for t in tools.tools], result


def test_seeded_home_answers_soul_prime_over_stdio(tmp_path):
    home = write_home(tmp_path / "home")
    (home / "config.yaml").write_text(CONFIG_WITH_SERVERS)
    report = install(home, python=sys.executable)
    assert report["status"] == "changed" and report["seed_nodes"] == 16  # not the entry only in a backup
    assert report["seed_skipped"] == ["memories/MEMORY.md.bak.1714000000"]

    from ruamel.yaml import YAML
    entry = YAML(typ="safe").load((home / "config.yaml").read_text())["mcp_servers"]["soul"]
    names, result = anyio.run(_prime, entry["command"], entry["args"], "clean the staging disk")

    assert len(names) == 13 and "soul_prime" in names
    assert not result.is_error
    primed = result.structured_content
    hot = primed["hot"]
    # Pins take a share (3 of 10), in SOUL.md's own order; the rest is the agent's other memories
    assert [n["pinned"] for n in hot] == [True] * 3 + [False] * 7
    assert all("axiom" in n["tags"] for n in hot[:3])
    assert [n["id"] for n in hot[:3]] == sorted((n["id"] for n in hot[:3]), key=lambda i: int(i[1:]))
    assert primed["focus"]["content"].startswith("The staging host stg-01 fills its disk")
    assert primed["focus"]["metadata"]["sources"] == [{"file": "memories/MEMORY.md", "line": 3}]
    # a walk from a nested bullet reaches the section and heading it sits in
    _, bullet = anyio.run(_prime, entry["command"], entry["args"], "backup before editing config")
    walked = {n["content"]: n["relation"] for n in bullet.structured_content["walk"]}
    assert bullet.structured_content["focus"]["content"] == "Take a backup before editing any config file."
    assert walked == {"Prefer small, reversible changes.": "ancestor", "Values": "ancestor"}
