"""The markdown toolset through real Hermes: the installer's `--toolsets graph,markdown` entry
lists 18 tools to Hermes' client, and in a real session against the local model stub the
model's call of `soul_remember` lands in Hermes' own memory file, in its format, and in the graph."""

from __future__ import annotations

import sys

import pytest

from soulgraph.hermes.install import install
from soulgraph.server.toolsets import TOOLSETS
from soulgraph.store import SoulFile
from tests import hermes_chat, hermes_client
from tests.openai_stub import OpenAIStub, call, text_reply, tool_reply

pytestmark = pytest.mark.hermes


def test_hermes_lists_the_markdown_tools_and_the_model_can_call_them(hermes_exe, tmp_path):
    note = "The greenhouse key is under the blue pot."
    with OpenAIStub(replies=[tool_reply(call("mcp__soul__soul_remember", {"note": note})),
                             text_reply("Remembered.")]) as stub:
        home = hermes_chat.make_stub_home(tmp_path / "home", stub.base_url)
        report = install(home, python=sys.executable, toolsets=("graph", "markdown"), memory_provider="none")
        assert report["status"] == "changed", report
        listed = hermes_client.mcp_test(home, "soul")
        assert listed.connected and listed.tools_discovered == 18, listed.output
        assert set(TOOLSETS["markdown"]) <= set(listed.tools)
        run = hermes_chat.chat_once(home, "Please remember where the greenhouse key is.", timeout=120)
        assert not run.timed_out and run.returncode == 0, run.describe()
        tool_names = [t["function"]["name"] for t in stub.requests[0]["tools"]]
        tool_result = stub.requests[1]["messages"][-1]
    assert "mcp__soul__soul_ask" in tool_names and "mcp__soul__soul_status" in tool_names
    assert tool_result["role"] == "tool" and '"status": "success"' in tool_result["content"]
    memory = home / "memories" / "MEMORY.md"
    assert memory.read_text().split("\n§\n")[-1] == note  # Hermes' file, Hermes' format
    graph = SoulFile(home / "soul.json").graph()
    assert any(n.content == note and n.writer == "tool:soul_remember" for n in graph.nodes.values())
