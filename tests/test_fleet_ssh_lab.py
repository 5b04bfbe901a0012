"""SSH as real fleets have it (issue 14, item 6), on the SSH lab: Ansible's inventory names, hosts
known only by an alias in ~/.ssh/config, an ssh-agent holding a passphrase-protected key, and a
host reachable only through a ProxyJump bastion (a network namespace the test creates)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
import yaml

from fleet.build import resolve_sha
from tests.fleet_helpers import clone_repo, reset_to_bare_hermes, run_fleet, run_update
from tests.hidden_host import HIDDEN_PORT, HiddenBehindJump

pytestmark = pytest.mark.lab


@pytest.fixture
def lab(_ssh_lab_session):
    yield _ssh_lab_session
    _ssh_lab_session.heal()


def write_inventory(path, hosts: dict, common: dict):
    path.write_text(yaml.safe_dump({"all": {"vars": common, "hosts": hosts}}, sort_keys=False))
    return path


def statuses(out: str) -> dict[str, dict]:
    return {r["host"]: r for r in map(json.loads, out.splitlines())}


def test_an_ansible_inventory_works_as_it_is(lab, tmp_path):
    hosts = {f"web{i}": {"ansible_host": h.address, "ansible_user": h.user, "ansible_port": h.port,
                         "ansible_ssh_private_key_file": str(h.key)} for i, h in enumerate(lab.hosts[:2])}
    inventory = write_inventory(tmp_path / "hosts.yml", hosts, {"known_hosts": str(lab.known_hosts)})
    code, out = run_fleet("status", "-i", str(inventory), "all", "--json")
    assert code == 0, out
    assert all(r["reachable"] for r in statuses(out).values()), out


def test_hosts_known_by_an_ssh_config_alias(lab, tmp_path, monkeypatch):
    config = tmp_path / "ssh_config"
    config.write_text("".join(f"Host box{i}\n  HostName {h.address}\n  User {h.user}\n  Port {h.port}\n"
                              f"  IdentityFile {h.key}\n" for i, h in enumerate(lab.hosts[:2])))
    monkeypatch.setenv("SOULFLEET_SSH_CONFIG", str(config))
    inventory = write_inventory(tmp_path / "hosts.yml", {"box0": None, "box1": None}, {"known_hosts": str(lab.known_hosts)})
    code, out = run_fleet("status", "-i", str(inventory), "all", "--json")
    assert code == 0, out
    assert set(statuses(out)) == {"box0", "box1"} and all(r["reachable"] for r in statuses(out).values()), out


def test_an_agent_signs_for_a_passphrase_protected_key(lab, tmp_path):
    host = lab.hosts[0]
    key = tmp_path / "locked_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "not-a-secret-passphrase", "-f", str(key),
                    "-C", "locked"], check=True, timeout=30)
    authorized = host.home / ".ssh" / "authorized_keys"
    before = authorized.read_text()
    authorized.write_text(before + key.with_suffix(".pub").read_text())
    agent = subprocess.run(["ssh-agent", "-s", "-a", str(tmp_path / "agent.sock")], capture_output=True, text=True,
                           check=True, timeout=30).stdout
    pid = int(agent.split("SSH_AGENT_PID=")[1].split(";")[0])
    askpass = tmp_path / "askpass"
    askpass.write_text("#!/bin/sh\necho not-a-secret-passphrase\n")
    askpass.chmod(0o700)
    env = {**os.environ, "SSH_AUTH_SOCK": str(tmp_path / "agent.sock"), "SSH_ASKPASS": str(askpass),
           "SSH_ASKPASS_REQUIRE": "force", "DISPLAY": ":0"}
    try:
        subprocess.run(["ssh-add", str(key)], env=env, check=True, capture_output=True, timeout=30,
                       stdin=subprocess.DEVNULL)
        inventory = write_inventory(tmp_path / "hosts.yml", {"locked": {
            "address": host.address, "user": host.user, "key": str(key)}}, {"known_hosts": str(lab.known_hosts)})
        old = os.environ.get("SSH_AUTH_SOCK")
        os.environ["SSH_AUTH_SOCK"] = env["SSH_AUTH_SOCK"]
        try:
            code, out = run_fleet("status", "-i", str(inventory), "all", "--json")
        finally:
            os.environ.pop("SSH_AUTH_SOCK") if old is None else os.environ.__setitem__("SSH_AUTH_SOCK", old)
        assert code == 0 and statuses(out)["locked"]["reachable"], out
    finally:
        os.kill(pid, 15)
        authorized.write_text(before)


def test_a_host_reachable_only_through_a_jump_host(lab, tmp_path, monkeypatch):
    jump, hidden = lab.hosts[3], lab.hosts[4]
    reset_to_bare_hermes(lab)
    with HiddenBehindJump(lab, jump.name, hidden.name) as net:
        known = tmp_path / "known_hosts"
        known.write_text(lab.known_hosts.read_text() + net.known_hosts_lines())
        config = tmp_path / "ssh_config"
        config.write_text(f"Host hidden\n  HostName 127.0.0.1\n  Port {HIDDEN_PORT}\n  User {hidden.user}\n"
                          f"  IdentityFile {hidden.key}\n  ProxyJump {jump.user}@{net.jump_address}\n"
                          f"Host {net.jump_address}\n  IdentityFile {jump.key}\n")
        monkeypatch.setenv("SOULFLEET_SSH_CONFIG", str(config))
        inventory = write_inventory(tmp_path / "hosts.yml", {"hidden": None}, {"known_hosts": str(known)})
        # Not reachable directly: nothing outside the namespace listens there.
        direct = write_inventory(tmp_path / "direct.yml", {"hidden-direct": {
            "address": "127.0.0.1", "port": HIDDEN_PORT, "user": hidden.user, "key": str(hidden.key)}},
            {"known_hosts": str(known)})
        code, out = run_fleet("status", "-i", str(direct), "all", "--json")
        assert code == 4 and not statuses(out)["hidden-direct"]["reachable"], out
        # Through the jump host: a whole deploy.
        repo = clone_repo(tmp_path / "repo")
        sha = resolve_sha("HEAD", repo)
        code, out = run_update("--yes", "-i", str(inventory), "all", sha, repo=repo)
        assert code == 0, out
        assert (hidden.home / ".soulfleet" / "current").readlink().name == sha
        code, out = run_fleet("status", "-i", str(inventory), "all", "--json")
        assert code == 0 and statuses(out)["hidden"]["sha"] == sha, out
        # And verified the same way (verify makes its connections as fleet-update does).
        code, out = run_fleet("verify", "-i", str(inventory), "--sha", sha, "all")
        assert code == 0 and "1/1 hosts passed every check" in out, out
    shutil.rmtree(tmp_path / "repo", ignore_errors=True)
