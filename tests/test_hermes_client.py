"""The Hermes harness against the real Hermes CLI, plus its parsers on known output.

The throwaway MCP server below runs with this dev env's Python (mcp 2.x);
Hermes runs from its own venv (mcp 1.x) and starts the server over stdio.
"""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

import hermes_client as hc

PROBE_SERVER = textwrap.dedent('''
    import json, os, sys
    from mcp.server.mcpserver import MCPServer

    if len(sys.argv) > 1:  # record the environment Hermes gave us
        with open(sys.argv[1], "w") as fh:
            json.dump(dict(os.environ), fh)

    app = MCPServer("probe")

    @app.tool()
    def echo_text(text: str) -> str:
        """Return the text unchanged."""
        return text

    @app.tool()
    def add_numbers(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    app.run()
''')


@pytest.fixture(scope="session")
def hermes_exe():
    try:
        return hc.ensure_hermes_venv()
    except hc.HermesUnavailable as exc:
        pytest.skip(f"cannot create the Hermes venv ({hc.HERMES_REQUIREMENT}): {exc}")


@pytest.fixture
def home(hermes_exe, tmp_path):
    return hc.make_hermes_home(tmp_path / "hermes-home")


@pytest.fixture
def probe_server(tmp_path):
    path = tmp_path / "probe_server.py"
    path.write_text(PROBE_SERVER)
    return path


def probe_entry(script, *args, **extra):
    return {"command": sys.executable, "args": [str(script), *map(str, args)],
            "tools": {"resources": False, "prompts": False}, **extra}


@pytest.mark.hermes
def test_hermes_makes_a_fresh_home(home):
    config = (home / "config.yaml").read_text()
    assert "_config_version:" in config
    assert (home / "SOUL.md").is_file()
    assert (home / "memories").is_dir() and (home / "skills").is_dir()
    assert not list(home.glob("config.yaml.bak.*"))
    with pytest.raises(FileExistsError):
        hc.make_hermes_home(home)


@pytest.mark.hermes
def test_mcp_test_reports_connected_and_tool_count(home, probe_server):
    hc.add_mcp_server(home, "probe", probe_entry(probe_server))
    report = hc.mcp_test(home, "probe")
    assert report.connected, report.output
    assert report.tools_discovered == 2, report.output
    assert sorted(report.tools) == ["add_numbers", "echo_text"]
    assert report.error is None


@pytest.mark.hermes
def test_broken_server_is_not_connected(home, tmp_path):
    hc.add_mcp_server(home, "broken", {"command": str(tmp_path / "no" / "python"),
                                       "args": ["x"], "connect_timeout": 10})
    report = hc.mcp_test(home, "broken")
    assert report.returncode == 0  # the trap: Hermes exits 0 on failure
    assert not report.connected, report.output
    assert report.tools_discovered is None
    assert report.error


@pytest.mark.hermes
def test_unknown_server_is_not_connected(home):
    report = hc.mcp_test(home, "nosuch")
    assert not report.connected
    assert report.error == "not found in config"


@pytest.mark.hermes
def test_mcp_list_shows_enabled_and_disabled(home, probe_server):
    hc.add_mcp_server(home, "probe", probe_entry(probe_server))
    hc.add_mcp_server(home, "parked", probe_entry(probe_server, enabled=False))
    listing = hc.mcp_list(home)
    assert listing.get("probe").enabled, listing.output
    assert listing.get("parked").enabled is False
    assert listing.get("probe").tools == "all"


@pytest.mark.hermes
def test_stdio_server_gets_only_safe_env_plus_entry_env(home, probe_server, tmp_path):
    dump = tmp_path / "env.json"
    hc.add_mcp_server(home, "probe", probe_entry(probe_server, dump, env={"SOUL_MARK": "1"}))
    proc = hc.run_hermes(home, "mcp", "test", "probe",
                         extra_env={"OPENAI_API_KEY": "sk-test", "SOMETHING_ELSE": "x"})
    assert "✓ Connected" in proc.stdout, proc.stdout + proc.stderr
    env = json.loads(dump.read_text())
    assert env["SOUL_MARK"] == "1"
    for leaked in ("HERMES_HOME", "OPENAI_API_KEY", "SOMETHING_ELSE", "HTTPS_PROXY"):
        assert leaked not in env


@pytest.mark.hermes
def test_resources_prompts_false_suppresses_helper_tools(home, probe_server):
    hc.add_mcp_server(home, "quiet", probe_entry(probe_server))
    loud = probe_entry(probe_server)
    del loud["tools"]
    hc.add_mcp_server(home, "loud", loud)
    tools = hc.registered_mcp_tools(home)
    assert {n for n in tools if n.startswith("mcp__quiet__")} == {
        "mcp__quiet__echo_text", "mcp__quiet__add_numbers"}
    assert {n for n in tools if n.startswith("mcp__loud__")} == {
        "mcp__loud__echo_text", "mcp__loud__add_numbers", "mcp__loud__list_resources",
        "mcp__loud__read_resource", "mcp__loud__list_prompts", "mcp__loud__get_prompt"}
    assert tools["mcp__quiet__echo_text"] == "mcp-quiet"


@pytest.mark.hermes
def test_written_skill_appears_in_skills_list(home):
    skill = home / "skills" / "soulfleet-test" / "probe-skill" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text(textwrap.dedent("""\
        ---
        name: probe-skill
        description: A skill written by the soulfleet test suite.
        metadata:
          hermes:
            tags: [test]
            requires_toolsets: [mcp-probe]
        ---
        # Probe skill

        Nothing to do.
        """))
    listing = hc.skills_list(home)
    assert "probe-skill" in listing.names, listing.output
    row = next(s for s in listing.skills if s.name == "probe-skill")
    assert row.category == "soulfleet-test" and row.status == "enabled"


# ---- parsers on output captured from hermes-agent 0.19.0 (no Hermes needed) ----

OK_OUTPUT = """
  Testing 'exp'...
  Transport: stdio → /work/.venv/bin/python
  Auth: none
  ✓ Connected (1005ms)
  ✓ Tools discovered: 2

    ping                                 Answer pong.
    add                                  Add two integers.

"""

FAIL_OUTPUT = """
  Testing 'broken'...
  Transport: stdio → /nonexistent/python
  Auth: none
  ✗ Connection failed (7211ms): Connection closed
"""

LIST_OUTPUT = """
  MCP Servers:

  Name             Transport                      Tools        Status    
  ──────────────── ────────────────────────────── ──────────── ──────────
  exp              /work/wt-hermes/.venv/bin...   all          ✓ enabled
  a-much-longer-server-name /nonexistent/python x all          ✓ enabled
  parked           /bin/true                      -1 excluded  ✗ disabled
  inc              /work/wt-hermes/.venv/bin...   1 selected   ✓ enabled
"""


def test_parse_mcp_test_success():
    r = hc.parse_mcp_test("exp", OK_OUTPUT)
    assert (r.connected, r.tools_discovered, r.tools, r.elapsed_ms, r.error) == \
        (True, 2, ["ping", "add"], 1005, None)


def test_parse_mcp_test_failure():
    r = hc.parse_mcp_test("broken", FAIL_OUTPUT)
    assert (r.connected, r.tools_discovered, r.tools, r.elapsed_ms, r.error) == \
        (False, None, [], 7211, "Connection closed")


def test_parse_mcp_test_garbage_is_not_success():
    assert not hc.parse_mcp_test("x", "Traceback (most recent call last): ...").connected


def test_parse_mcp_list():
    r = hc.parse_mcp_list(LIST_OUTPUT)
    assert [(s.name, s.tools, s.enabled) for s in r.servers] == [
        ("exp", "all", True), ("a-much-longer-server-name", "all", True),
        ("parked", "-1 excluded", False), ("inc", "1 selected", True)]
    assert hc.parse_mcp_list("\n  No MCP servers configured.\n").servers == []


def test_parse_skills_list():
    out = """\
┏━━━━━━━━━━━━┳━━━━━━━━━━┳━━━━━━━━┳━━━━━━━┳━━━━━━━━━┓
┃ Name       ┃ Category ┃ Source ┃ Trust ┃ Status  ┃
┡━━━━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━╇━━━━━━━╇━━━━━━━━━┩
│ top-level  │          │ local  │ local │ enabled │
│ good-skill │ demo     │ local  │ local │ enabled │
└────────────┴──────────┴────────┴───────┴─────────┘
0 hub-installed, 0 builtin, 2 local — 2 enabled, 0 disabled
"""
    r = hc.parse_skills_list(out)
    assert r.names == ["top-level", "good-skill"]
    assert r.skills[1].category == "demo" and r.skills[0].category == ""
