"""The installer against the real Hermes CLI (hermes-agent[mcp] 0.19 in its own venv).

The home is made by Hermes itself; the installer runs as it does on a host
(`python -m soulgraph.install`, this dev env's Python as the server's Python); then
Hermes' own commands must see the server, connect to it and list the skill.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests import hermes_client as hc
from tests.seed_fixtures import snapshot, write_home

pytestmark = pytest.mark.hermes


def run_install(*args: str) -> tuple[int, dict]:
    proc = subprocess.run([sys.executable, "-m", "soulgraph.install", *args],
                          capture_output=True, text=True, timeout=120)
    return proc.returncode, json.loads(proc.stdout)


def assert_hermes_sees_soul(home: Path) -> None:
    listed = hc.mcp_list(home).get("soul")
    assert listed is not None and listed.enabled, hc.mcp_list(home).output
    tested = hc.mcp_test(home, "soul")
    assert tested.connected, tested.output
    assert tested.tools_discovered == 13, tested.output
    assert "soul-graph" in hc.skills_list(home).names


def test_install_into_a_home_made_by_hermes(hermes_exe, tmp_path):
    home = hc.make_hermes_home(tmp_path / "hermes-home")
    code, report = run_install("--hermes-home", str(home))
    assert code == 0, report
    assert (report["mcp_server"], report["seed"], report["skill"], report["status"]) == (
        "added", "created", "installed", "changed")
    assert report["seed_nodes"] == 1  # Hermes' default SOUL.md: one paragraph, one axiom
    assert Path(report["backup"]).is_file()

    before = snapshot(home)
    code, again = run_install("--hermes-home", str(home))
    assert code == 0
    assert (again["mcp_server"], again["seed"], again["skill"], again["status"]) == (
        "unchanged", "exists", "unchanged", "unchanged")
    assert snapshot(home) == before

    assert_hermes_sees_soul(home)
    # What the agent gets: our 13 tools in toolset mcp-soul, no resource/prompt helpers.
    registered = hc.registered_mcp_tools(home)
    assert sorted(registered) == sorted(f"mcp__soul__{name}" for name in (
        "soul_prime", "soul_related", "soul_query", "soul_hot", "soul_discover", "soul_by_tag",
        "soul_add", "soul_link", "soul_pin", "soul_splay", "soul_explore", "soul_promote", "soul_summary"))
    assert set(registered.values()) == {"mcp-soul"}


def test_seeded_memories_and_other_servers_survive_in_a_hermes_home(hermes_exe, tmp_path):
    home = hc.make_hermes_home(tmp_path / "hermes-home")
    write_home(home)  # real-looking SOUL.md and memories over Hermes' defaults
    hc.add_mcp_server(home, "other", {"command": "/bin/true", "enabled": False})
    code, report = run_install("--hermes-home", str(home))
    assert code == 0 and report["seed_nodes"] == 16  # the backup-only entry is skipped
    assert_hermes_sees_soul(home)
    other = hc.mcp_list(home).get("other")
    assert other is not None and not other.enabled


def test_install_follows_the_active_profile_like_hermes(hermes_exe, tmp_path):
    root = hc.make_hermes_home(tmp_path / "root")
    created = hc.run_hermes(root, "profile", "create", "work")
    assert (root / "profiles" / "work").is_dir(), created.stdout + created.stderr
    hc.make_hermes_home(root / "profiles" / "work")  # a profile starts without config.yaml
    hc.run_hermes(root, "profile", "use", "work")
    assert (root / "active_profile").read_text().strip() == "work"

    code, report = run_install("--hermes-home", str(root))
    assert code == 0
    assert (report["profile"], report["hermes_home"]) == ("work", str(root / "profiles" / "work"))
    # Hermes pointed at the root follows the same redirect and finds the server.
    assert_hermes_sees_soul(root)
    assert hc.mcp_list(root / "profiles" / "work").get("soul") is not None
    assert "soul" not in (root / "config.yaml").read_text()
