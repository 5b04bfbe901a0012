"""fleet-update against the real SSH lab: five sshd hosts on loopback.

The tests run in order and build on each other (first deploy, then `fleet verify` on what it
left, then re-runs, then faults), like an operator's day. The runtime wheel and wheelhouse are
cached per sha, so each sha is built once.
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import time

import pytest

from fleet.build import resolve_sha
from tests import hermes_client
from tests.fleet_helpers import (MINIMAL_CONFIG, clone_repo, commit_file, reset_to_bare_hermes, run_fleet, run_update,
                                 snapshot)
from tests.lab import FakeCommand

pytestmark = pytest.mark.lab
RESTART = 'echo restart >> "$HOME/gateway-restarts"'


@pytest.fixture(scope="module")
def fleet_lab(_ssh_lab_session, tmp_path_factory):
    """The session lab with clean homes, a minimal Hermes config.yaml on each host (owned by
    its user), an inventory, and a clone of this repository to make new commits in."""
    lab = _ssh_lab_session
    reset_to_bare_hermes(lab)
    root = tmp_path_factory.mktemp("fleet")
    inventory = lab.write_inventory(root / "inventory.yml",
                                    common_vars={"gateway_restart_command": RESTART})
    repo = clone_repo(root / "repo")
    yield lab, inventory, repo
    lab.heal()


def install_fake_hermes(host, python) -> None:
    """A Hermes install bootstrap can find: its venv's python (the host's own Python stands in)."""
    python.parent.mkdir(parents=True, exist_ok=True)
    if not python.is_symlink():
        python.symlink_to("/usr/bin/python3")
    owner = pwd.getpwnam(host.user)
    for path in [python, *python.parents]:
        if path == host.home:
            break
        os.lchown(path, owner.pw_uid, owner.pw_gid)


def current_sha(host) -> str | None:
    link = host.home / ".soulfleet" / "current"
    return link.readlink().name if link.is_symlink() else None


def soul_entry_command(host) -> str:
    import yaml
    config = yaml.safe_load((host.home / ".hermes" / "config.yaml").read_text())
    return config["mcp_servers"]["soul"]["command"]


def recap_rows(output: str) -> dict[str, list[str]]:
    lines = output[output.index("HOST  "):].splitlines()[1:]
    rows = {}
    for line in lines:
        if not line.strip():
            break
        cells = line.split()
        rows[cells[0]] = cells[1:]
    return rows


TIMINGS: dict[str, float] = {}
LOOKED_AT: dict[str, str] = {}  # the sha test_check_mode_changes_nothing looked at, never deployed


def test_first_deploy_changes_every_host(fleet_lab):
    lab, inventory, repo = fleet_lab
    sha = resolve_sha("HEAD", repo)
    started = time.monotonic()
    code, out = run_update("--yes", "-i", str(inventory), "all", sha, repo=repo)
    TIMINGS["first"] = time.monotonic() - started
    assert code == 0, out
    rows = recap_rows(out)
    assert set(rows) == {h.name for h in lab.hosts}
    for h in lab.hosts:
        ok, changed, failed, unreachable, row_sha, _ = rows[h.name]
        assert int(changed) >= 3 and failed == "0" and unreachable == "0", out
        assert current_sha(h) == sha
        python = f"{h.home}/.soulfleet/releases/{sha}/venv/bin/python"
        assert soul_entry_command(h) == python
        assert (h.home / ".hermes" / "soul.json").exists()
        assert (h.home / ".hermes" / "skills" / "soul-graph" / "SKILL.md").exists()
        # Everything on the host belongs to its user, not to root.
        assert (h.home / ".soulfleet" / "releases" / sha).owner() == h.user
    # No --hermes: no gateway restarts.
    assert not any((h.home / "gateway-restarts").exists() for h in lab.hosts)


# -- `fleet verify` after the first deploy: every host passes, by the CLI -------------------------
# The hosts as the real fleet-update above left them, checked with an inventory of their own: no
# gateway_restart_command, so the gateway check asks systemd (stand-ins here).

@pytest.fixture(scope="module")
def verify_inventory(fleet_lab, tmp_path_factory):
    lab, _, _ = fleet_lab
    return lab.write_inventory(tmp_path_factory.mktemp("verify-fleet") / "inventory.yml")


def test_fleet_verify_passes_on_every_host(fleet_lab, verify_inventory):
    lab, _, repo = fleet_lab
    sha = resolve_sha("HEAD", repo)
    assert all(current_sha(h) == sha for h in lab.hosts)  # as test_first_deploy left them
    code, out = run_fleet("verify", "-i", str(verify_inventory), "--sha", sha, "all")
    assert code == 0, out
    assert f"{len(lab.hosts)}/{len(lab.hosts)} hosts passed every check" in out


def test_fleet_verify_with_hermes_checks_the_gateway(fleet_lab, verify_inventory):
    lab, _, _ = fleet_lab
    status = "  Provider:  soulgraph\n  Plugin:    installed \u2713\n  Status:    available \u2713\n"
    for h in lab.hosts:
        lab.fake_commands(h, {"systemctl": FakeCommand(stdout="active\n"), "hermes": FakeCommand(stdout=status, by_args={
            "mcp test soul": "  \u2713 Connected (700ms)\n  \u2713 Tools discovered: 13\n"})})
    lab.fake_commands(lab.hosts[-1], {"systemctl": FakeCommand(stdout="failed\n", rc=3),
                                      "hermes": FakeCommand(stdout=status, by_args={
                                          "mcp test soul": "  \u2713 Connected (700ms)\n  \u2713 Tools discovered: 13\n"})})
    try:
        code, out = run_fleet("verify", "-i", str(verify_inventory), "--hermes", "all")
    finally:
        lab.heal()
    assert code == 2, out
    assert f"{lab.hosts[-1].name}: gateway_active: the gateway (hermes-gateway.service) is not running: failed" in out
    assert f"{len(lab.hosts) - 1}/{len(lab.hosts)} hosts passed every check" in out


def test_fleet_verify_refuses_a_tampered_key(fleet_lab, verify_inventory):
    lab, _, _ = fleet_lab
    lab.tamper_known_hosts(lab.hosts[0])
    try:
        code, out = run_fleet("verify", "-i", str(verify_inventory), "all")
    finally:
        lab.heal()
    assert code == 4, out
    assert f"{lab.hosts[0].name}: key refused: " in out and "HOST KEY CHANGED" in out


# -- re-runs ---------------------------------------------------------------------------------------

def test_second_deploy_changes_nothing(fleet_lab):
    lab, inventory, repo = fleet_lab
    # The first deploy ran without --hermes: the first --hermes run makes up the missed restart,
    # once per host (issue 14), and records it; from then on a --hermes run with nothing to do
    # changes nothing and restarts nothing.
    code, out = run_update("--yes", "--hermes", "-i", str(inventory), "all", repo=repo)
    assert code == 0 and out.count("gateway runs this runtime: changed") == len(lab.hosts), out
    assert all((h.home / "gateway-restarts").read_text() == "restart\n" for h in lab.hosts)
    before = {h.name: snapshot(h.home) for h in lab.hosts}
    started = time.monotonic()
    code, out = run_update("--yes", "--hermes", "-i", str(inventory), "all", repo=repo)
    TIMINGS["no-change"] = time.monotonic() - started
    assert code == 0, out
    for name, row in recap_rows(out).items():
        assert row[1] == "0", out  # changed
    assert {h.name: snapshot(h.home) for h in lab.hosts} == before
    assert all((h.home / "gateway-restarts").read_text() == "restart\n" for h in lab.hosts)
    print(f"\n5 lab hosts: first deploy {TIMINGS.get('first', 0):.1f} s, "
          f"no-change re-run {TIMINGS['no-change']:.1f} s")


def test_a_no_change_deploy_starts_no_installer_until_the_user_edits_config(fleet_lab):
    """The installer's record holds on a no-change run (it is not started); a config.yaml the user
    edits since (here: our entry taken out) makes the next run start it, and it puts the entry back."""
    lab, inventory, repo = fleet_lab
    records = {h.name: h.home / ".hermes" / ".soulgraph" / "install-record" for h in lab.hosts}
    written = {name: path.stat().st_mtime_ns for name, path in records.items()}
    # With the release's python out of the way, an installer started would fail its host.
    pythons = [h.home / ".soulfleet" / "current" / "venv" / "bin" / "python" for h in lab.hosts]
    for python in pythons:
        python.rename(python.with_name("python.away"))
    try:
        code, out = run_update("--yes", "-i", str(inventory), "all", repo=repo)
    finally:
        for python in pythons:
            python.with_name("python.away").rename(python)
    assert code == 0 and all(row[1] == "0" for row in recap_rows(out).values()), out
    first = lab.hosts[0]
    config = first.home / ".hermes" / "config.yaml"
    stat = config.stat()
    config.write_text(MINIMAL_CONFIG)  # the user's edit, in place (owner and mode kept)
    os.chown(config, stat.st_uid, stat.st_gid)
    code, out = run_update("--yes", "-i", str(inventory), "all", repo=repo)
    assert code == 0, out
    rows = recap_rows(out)
    assert rows[first.name][1] == "1", out  # changed: the installer ran there, and only there
    assert all(rows[h.name][1] == "0" for h in lab.hosts[1:]), out
    assert soul_entry_command(first).endswith("/venv/bin/python")
    assert records[first.name].stat().st_mtime_ns > written[first.name]
    assert all(records[h.name].stat().st_mtime_ns == written[h.name] for h in lab.hosts[1:])


def test_check_mode_changes_nothing(fleet_lab):
    lab, inventory, repo = fleet_lab
    new_sha = commit_file(repo, "runtime/soulgraph/_release_note.py", "NOTE = 'check'\n",
                          "a release only looked at")
    LOOKED_AT["check"] = new_sha  # the next test deploys it: its wheelhouse is built already
    before = {h.name: snapshot(h.home) for h in lab.hosts}
    code, out = run_update("--check", "--diff", "--hermes", "-i", str(inventory), "all",
                           new_sha, repo=repo)
    assert code == 0, out
    assert "would switch" in out and "would restart" in out
    # The config.yaml change the new sha would make, as a unified diff (issue 14, item 8)
    assert f"+    command: {lab.hosts[0].home}/.soulfleet/releases/{new_sha}/venv/bin/python" in out, out
    assert {h.name: snapshot(h.home) for h in lab.hosts} == before
    assert all((h.home / "gateway-restarts").read_text() == "restart\n" for h in lab.hosts)


def test_new_sha_switches_runtime_and_hermes_entry(fleet_lab):
    lab, inventory, repo = fleet_lab
    old_sha = current_sha(lab.hosts[0])
    # A sha no host has had: the one check mode only looked at, else one made here.
    new_sha = LOOKED_AT.pop("check", None) or commit_file(repo, "runtime/soulgraph/_release_note.py",
                                                          "NOTE = 'new'\n", "a new release")
    assert all(current_sha(h) != new_sha for h in lab.hosts)
    code, out = run_update("--yes", "--hermes", "-i", str(inventory), "all", new_sha, repo=repo)
    assert code == 0, out
    for h in lab.hosts:
        assert current_sha(h) == new_sha
        assert soul_entry_command(h) == f"{h.home}/.soulfleet/releases/{new_sha}/venv/bin/python"
        # The previous release stays for a rollback; the gateway restarted exactly once.
        assert (h.home / ".soulfleet" / "releases" / old_sha / "venv").is_dir()
        assert (h.home / "gateway-restarts").read_text() == "restart\n" * 2  # the one before, and this
    code, out = run_fleet("status", "-i", str(inventory), "all", "--json")
    assert code == 0, out
    for line in out.splitlines():
        report = json.loads(line)
        assert report["sha"] == new_sha and report["hermes_entry"].endswith("/venv/bin/python")


def test_tampered_host_key_and_unreachable_host_are_reported_while_others_deploy(fleet_lab):
    """One run of a new sha with two faults at once, each checked on its own host: host 2's key in
    known_hosts is an impostor's (refused with HOST KEY CHANGED, counted unreachable, left on its
    release), and host 3 is down (reported unreachable, left on its release); the other three
    hosts deploy the sha all the same."""
    lab, inventory, repo = fleet_lab
    victim, down = lab.hosts[1], lab.hosts[2]
    before = {h.name: current_sha(h) for h in (victim, down)}
    lab.tamper_known_hosts(victim)
    lab.stop(down)
    sha = commit_file(repo, "runtime/soulgraph/_release_note.py", "NOTE = 'faults'\n", "tamper and down")
    try:
        code, out = run_update("--yes", "-i", str(inventory), "all", sha, repo=repo)
    finally:
        lab.heal()
    assert code == 4, out
    rows = recap_rows(out)
    # The tampered key:
    assert "HOST KEY CHANGED" in out
    assert rows[victim.name][3] == "1"
    assert current_sha(victim) == before[victim.name]
    # The host that is down:
    assert "unreachable" in out and rows[down.name][3] == "1"
    assert current_sha(down) == before[down.name]
    # Everyone else:
    assert all(current_sha(h) == sha for h in lab.hosts if h not in (victim, down))


def test_broken_runtime_fails_import_check_and_keeps_old_runtime(fleet_lab):
    lab, inventory, repo = fleet_lab
    # Each host's release before (the previous test left two hosts on an older one than the rest).
    good = {h.name: current_sha(h) for h in lab.hosts}
    assert all(good.values())
    mcp = repo / "runtime" / "soulgraph" / "mcp.py"
    broken = commit_file(repo, "runtime/soulgraph/mcp.py",
                         "raise ImportError('broken on purpose')\n" + mcp.read_text(), "broken")
    code, out = run_update("--yes", "--hermes", "-i", str(inventory), "all", broken, repo=repo)
    assert code == 2, out
    assert "import_check" in out
    for h in lab.hosts:
        assert current_sha(h) == good[h.name]
        assert soul_entry_command(h) == f"{h.home}/.soulfleet/releases/{good[h.name]}/venv/bin/python"
    # Put the good runtime back on top for the tests after this one.
    commit_file(repo, "runtime/soulgraph/mcp.py", mcp.read_text().split("\n", 1)[1], "fixed")


@pytest.mark.hermes
def test_real_hermes_client_sees_13_tools(fleet_lab, hermes_exe):
    lab, inventory, repo = fleet_lab
    host = lab.hosts[0]
    assert current_sha(host)
    report = hermes_client.mcp_test(host.home / ".hermes", "soul")
    assert report.connected, report.output
    assert report.tools_discovered == 13, report.output


def test_macos_command_sequence_with_stand_ins(fleet_lab, tmp_path):
    """A lab host that says it is macOS: uname/sw_vers/launchctl stand-ins record the calls.
    The runtime itself stays the Linux one already deployed (same sha, nothing shipped)."""
    lab, inventory, repo = fleet_lab
    host = lab.hosts[4]
    sha = current_sha(host)
    launchctl = ('for a in "$@"; do case "$a" in gui/*) echo "Could not find domain" >&2; '
                 'exit 113;; esac; done; exit 0\n')
    lab.fake_commands(host, {
        "uname": FakeCommand(by_args={"-s": "Darwin\n", "-m": "arm64\n"}),
        "sw_vers": FakeCommand(stdout="ProductName: macOS\n"),
        "launchctl": launchctl,
    })
    # The Hermes entry must change for the gateway to be restarted: drop it.
    (host.home / ".hermes" / "config.yaml").write_text(MINIMAL_CONFIG)
    install_fake_hermes(host, host.home / ".hermes" / "hermes-agent" / "venv" / "bin" / "python")
    inv = lab.write_inventory(tmp_path / "inv.yml")  # no restart override: the real launchctl path
    code, out = run_fleet("bootstrap", "--yes", "--hermes", "--repo", str(repo), "--sha", sha,
                          "-i", str(inv), host.name)
    assert code == 0, out
    uid = pwd.getpwnam(host.user).pw_uid
    plist = host.home / "Library" / "LaunchAgents" / "ai.hermes.gateway.plist"
    assert "<string>ai.hermes.gateway</string>" in plist.read_text()
    calls = [c for c in lab.fake_calls(host) if c[0] == "launchctl"]
    assert calls == [
        ["launchctl", "bootstrap", f"gui/{uid}", str(plist)],
        ["launchctl", "bootstrap", f"user/{uid}", str(plist)],
        ["launchctl", "kickstart", "-k", f"gui/{uid}/ai.hermes.gateway"],
        ["launchctl", "kickstart", "-k", f"user/{uid}/ai.hermes.gateway"],
    ]
    assert ["uname", "-s"] in lab.fake_calls(host)
    lab.heal()


def test_soul_embed_adds_the_vectors_to_a_deployed_release(fleet_lab, tmp_path):
    """soul_embed: true ships numpy and the model's package in the wheelhouse and adds them to the
    release venv already deployed (in place: nothing is taken out of a venv in use); a second
    run has nothing to do, and the host's runtime then embeds. Without it neither ships."""
    lab, inventory, repo = fleet_lab
    # The release hosts 1 and 4 run (the earlier tests deployed it; on its own, this test deploys HEAD).
    host, other = lab.hosts[0], lab.hosts[3]
    sha = current_sha(host) or resolve_sha("HEAD", repo)
    assert run_update("--yes", "-i", str(inventory), f"{host.name},{other.name}", sha, repo=repo)[0] == 0
    assert current_sha(host) == current_sha(other) == sha
    venv = host.home / ".soulfleet" / "releases" / sha / "venv"
    marker = venv / ".soulfleet-complete"
    assert marker.read_text() == "soulgraph\n"
    embed_inventory = lab.write_inventory(tmp_path / "embed.yml", host_vars={host.name: {"soul_embed": True}},
                                          common_vars={"gateway_restart_command": RESTART})
    code, out = run_update("--yes", "-i", str(embed_inventory), host.name, sha, repo=repo)
    assert code == 0 and "added soulgraph[embed], soulgraph-model" in out, out
    assert marker.read_text() == "soulgraph\nsoulgraph-model\nsoulgraph[embed]\n"
    probe = ("from soulgraph.engine import embeddings; import numpy; "
             "print(embeddings.available(), embeddings.default_model().embed('hiking').shape)")
    shown = subprocess.run([str(venv / "bin" / "python"), "-c", probe], capture_output=True, text=True, timeout=120)
    assert shown.stdout.strip() == "True (384,)", shown.stderr
    code, out = run_update("--yes", "-i", str(embed_inventory), host.name, sha, repo=repo)
    assert code == 0 and f"{host.name}: OK" in out, out
    # The other hosts were left without it.
    other = other.home / ".soulfleet" / "releases" / sha
    assert (other / "venv" / ".soulfleet-complete").read_text() == "soulgraph\n"
    assert not list((other / "wheels").glob("numpy-*")) and not list((other / "wheels").glob("soulgraph_model-*"))
