"""A serving process keeps no memory per write: the real MCP server (`--no-embed`) on a 20,000
memory soul, its resident set (VmRSS) read before and after 30 soul_add and 2 hard soul_forget
calls. Each forget, each compaction, and the first write to a soul.json that has no journal
beside it writes a whole snapshot; that snapshot's per-node lines must not stay in the process
(at 04df4cc they did: ~22 MB here, ~100 MB at 100,000 memories)."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from pathlib import Path

import pytest

from mcp import Client
from mcp.client.stdio import StdioServerParameters, get_default_environment

from soulgraph.store import SoulFile

BENCH = Path(__file__).resolve().parent.parent / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))
import synthetic  # noqa: E402
from bench_rss import rss_mb, server_pid  # noqa: E402  (the benchmark's own readers of /proc)

SIZE = 20_000
ADDS = 30
# What may stay after the writes: their own nodes and index entries (well under 1 MB), the
# word masks the server builds in the background after its start (~2 MB at this size), and
# the snapshot lines the store keeps for its next snapshot (~7 MB), the allocator's slack.
# At 04df4cc the snapshot's freed buffers stayed resident too: ~22 MB.
MOST_GROWTH_MB = 15.0


@pytest.fixture(scope="module")
def soul_source(tmp_path_factory):
    source = tmp_path_factory.mktemp("rss") / "soul.json"
    SoulFile(source).save(synthetic.build(SIZE))
    return source


def growth_over_writes(soul_file: Path) -> tuple[float, int]:
    """(MB of VmRSS the server gained over the writes, the most seen after the adds or after
    the forgets; nodes in the file afterwards)."""
    # The server runs the runtime this test imports (PYTHONPATH, when set, names it).
    env = {**get_default_environment(), **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"}}
    params = StdioServerParameters(command=sys.executable, env=env,
                                   args=["-m", "soulgraph.mcp", "--soul-file", str(soul_file), "--no-embed",
                                         "--toolsets", "graph,memory"])

    async def scenario() -> float:
        async with Client(params) as client:
            await client.list_tools()
            await asyncio.sleep(0.3)  # the background read starts 50 ms after tools/list ...
            await client.call_tool("soul_summary", {})  # ... and this answer waits for it
            pid = server_pid(soul_file)
            before = rss_mb(pid)
            added = []
            for i in range(ADDS):
                result = await client.call_tool("soul_add", {"content": f"memory {i} about w1 w2 w{i + 7}",
                                                             "parents": [f"n{1 + i}"]})
                assert not result.is_error, result.content[0].text
                added.append(result.structured_content["id"])
            after_adds = rss_mb(pid)
            for node_id in added[:2]:
                result = await client.call_tool("soul_forget", {"node_id": node_id, "reason": "test"})
                assert not result.is_error, result.content[0].text
            return max(after_adds, rss_mb(pid)) - before

    grown = asyncio.run(scenario())
    return grown, len(SoulFile(soul_file).graph().nodes)


@pytest.mark.parametrize("journal", [True, False], ids=["with its journal", "soul.json alone"])
def test_writes_leave_no_snapshot_behind_in_the_server(soul_source, tmp_path, journal):
    soul_file = tmp_path / "soul.json"
    shutil.copyfile(soul_source, soul_file)
    if journal:
        shutil.copyfile(soul_source.with_name("soul.json.journal"), tmp_path / "soul.json.journal")
    grown, nodes = growth_over_writes(soul_file)
    assert nodes == SIZE + ADDS - 2  # every write made it
    assert grown < MOST_GROWTH_MB, f"the server kept {grown:.1f} MB over {ADDS} adds and 2 forgets"
