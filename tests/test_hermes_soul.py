"""The real Hermes client (hermes-agent[mcp], its own venv and mcp 1.x) talks to our server."""

import sys

import pytest

from tests import hermes_client
from soulgraph.server import TOOL_NAMES

pytestmark = pytest.mark.hermes


def soul_entry(soul_file):
    # Hermes passes a stdio server no HERMES_HOME, so the entry names the soul file.
    return {
        "command": sys.executable,
        "args": ["-m", "soulgraph.mcp", "--soul-file", str(soul_file)],
        "tools": {"resources": False, "prompts": False},
    }


def test_hermes_mcp_test_sees_the_13_tools(hermes_home):
    hermes_client.add_mcp_server(hermes_home, "soul", soul_entry(hermes_home / "soul.json"))
    report = hermes_client.mcp_test(hermes_home, "soul")
    assert report.connected, report.output
    assert report.tools_discovered == 13, report.output
    assert sorted(report.tools) == sorted(TOOL_NAMES), report.output
    listed = hermes_client.mcp_list(hermes_home).get("soul")
    assert listed is not None and listed.enabled


def test_agent_sees_exactly_our_tools_in_the_mcp_soul_toolset(hermes_home):
    hermes_client.add_mcp_server(hermes_home, "soul", soul_entry(hermes_home / "soul.json"))
    registered = hermes_client.registered_mcp_tools(hermes_home)
    ours = {name: toolset for name, toolset in registered.items() if name.startswith("mcp__soul__")}
    assert sorted(ours) == sorted(f"mcp__soul__{name}" for name in TOOL_NAMES)
    assert set(ours.values()) == {"mcp-soul"}


def test_hermes_reports_a_server_that_cannot_start(hermes_home):
    # A corrupt soul file stops our server; Hermes must not report it connected.
    soul_file = hermes_home / "soul.json"
    soul_file.write_text("{broken")
    hermes_client.add_mcp_server(hermes_home, "soul", soul_entry(soul_file))
    report = hermes_client.mcp_test(hermes_home, "soul")
    assert not report.connected and report.tools_discovered is None
    assert soul_file.read_text() == "{broken"


def test_with_the_memory_toolset_hermes_sees_17_tools(hermes_home):
    """The installer's --toolsets graph,memory entry, read by the real client: 13 + 4 tools,
    and the agent's registry holds the lifecycle tools in the same toolset."""
    from soulgraph.hermes.install import install
    from soulgraph.server import TOOLSETS

    (hermes_home / "config.yaml").touch()
    report = install(hermes_home, python=sys.executable, toolsets=("graph", "memory"))
    assert report["status"] == "changed", report
    result = hermes_client.mcp_test(hermes_home, "soul")
    assert result.connected and result.tools_discovered == 17, result.output
    assert sorted(result.tools) == sorted(TOOLSETS["graph"] + TOOLSETS["memory"]), result.output
    registered = hermes_client.registered_mcp_tools(hermes_home)
    assert {"mcp__soul__soul_update", "mcp__soul__soul_forget", "mcp__soul__soul_history",
            "mcp__soul__soul_merge"} <= set(registered)
