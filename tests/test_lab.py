"""The lab itself: real sshd hosts, strict host keys, fault injection."""

from __future__ import annotations

import os
import pwd
import socket
import subprocess
from concurrent.futures import ThreadPoolExecutor

import paramiko
import pytest
import yaml

from tests.conftest import lab_fixture
from tests.lab import FakeCommand, Lab, LabHost, inventory_data, unavailable_reason

pytestmark = pytest.mark.lab

big_lab = lab_fixture(20)


def strict_client(lab: Lab) -> paramiko.SSHClient:
    client = paramiko.SSHClient()
    client.load_host_keys(str(lab.known_hosts))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    return client


def run(lab: Lab, host: LabHost, command: str) -> str:
    client = strict_client(lab)
    try:
        client.connect(host.address, port=host.port, username=host.user, key_filename=str(lab.key),
                       look_for_keys=False, allow_agent=False, timeout=10)
        _, stdout, _ = client.exec_command(command)
        return stdout.read().decode()
    finally:
        client.close()


def test_every_host_answers_as_its_own_user(ssh_lab):
    assert len(ssh_lab.hosts) == 5
    assert len({h.address for h in ssh_lab.hosts}) == 5
    for host in ssh_lab.hosts:
        assert run(ssh_lab, host, "id -un").strip() == host.user
        assert run(ssh_lab, host, "echo $HOME").strip() == str(host.home)


def test_known_hosts_lists_each_real_key(ssh_lab):
    lines = ssh_lab.known_hosts.read_text().splitlines()
    assert len(lines) == len(ssh_lab.hosts)
    for host, line in zip(ssh_lab.hosts, lines):
        name, kind, blob = line.split()
        assert name == host.address  # port 22: plain address, no [brackets]
        assert f"{kind} {blob}" == host.public_host_key()


def test_unknown_host_is_refused_by_reject_policy(ssh_lab, tmp_path):
    host = ssh_lab.hosts[0]
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    client = paramiko.SSHClient()
    client.load_host_keys(str(empty))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    with pytest.raises(paramiko.SSHException, match="not found in known_hosts"):
        client.connect(host.address, username=host.user, key_filename=str(ssh_lab.key),
                       look_for_keys=False, allow_agent=False, timeout=10)


def test_tampered_key_is_refused_and_others_still_work(ssh_lab):
    bad, good = ssh_lab.hosts[1], ssh_lab.hosts[2]
    impostor = ssh_lab.tamper_known_hosts(bad)
    assert impostor != bad.public_host_key()
    assert impostor in ssh_lab.known_hosts.read_text()
    with pytest.raises(paramiko.BadHostKeyException):
        run(ssh_lab, bad, "true")
    assert run(ssh_lab, good, "id -un").strip() == good.user


def test_heal_restores_known_hosts(ssh_lab):
    host = ssh_lab.hosts[1]
    ssh_lab.tamper_known_hosts(host)
    ssh_lab.heal()
    assert run(ssh_lab, host, "id -un").strip() == host.user


def test_stopped_host_refuses_connections_and_comes_back(ssh_lab):
    host = ssh_lab.stop(3)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((host.address, host.port), timeout=2).close()
    with pytest.raises(paramiko.ssh_exception.NoValidConnectionsError):
        run(ssh_lab, host, "true")
    assert run(ssh_lab, ssh_lab.hosts[4], "id -un").strip() == ssh_lab.hosts[4].user
    ssh_lab.start(host)
    assert run(ssh_lab, host, "id -un").strip() == host.user


def test_fake_commands_shadow_path_and_record_calls(ssh_lab):
    mac, linux = ssh_lab.hosts[0], ssh_lab.hosts[1]
    ssh_lab.fake_commands(mac, {
        "uname": FakeCommand(stdout="Darwin\n", by_args={"-m": "arm64\n", "-s": "Darwin\n"}),
        "sw_vers": FakeCommand(by_args={"-productVersion": "14.5\n"}),
        "launchctl": 'echo "launchctl $*"\n',
    })
    out = run(ssh_lab, mac, "uname -s; uname -m; sw_vers -productVersion; "
                            "launchctl kickstart -k gui/501/ai.hermes.gateway")
    assert out.splitlines() == ["Darwin", "arm64", "14.5",
                                "launchctl kickstart -k gui/501/ai.hermes.gateway"]
    assert ssh_lab.fake_calls(mac) == [
        ["uname", "-s"], ["uname", "-m"], ["sw_vers", "-productVersion"],
        ["launchctl", "kickstart", "-k", "gui/501/ai.hermes.gateway"]]
    # Only that host is faked.
    assert run(ssh_lab, linux, "uname -s").strip() == "Linux"
    ssh_lab.remove_fakes(mac)
    assert run(ssh_lab, mac, "uname -s").strip() == "Linux"


def test_fake_command_exit_code(ssh_lab):
    host = ssh_lab.hosts[0]
    ssh_lab.fake_commands(host, {"launchctl": FakeCommand(stderr="Boot-out failed\n", rc=5)})
    assert run(ssh_lab, host, "launchctl kickstart x; echo rc=$?").strip() == "rc=5"


def test_inventory_shape(ssh_lab, tmp_path):
    path = ssh_lab.write_inventory(tmp_path / "inventory.yml")
    data = yaml.safe_load(path.read_text())
    workers = data["all"]["children"]["workers"]["hosts"]
    assert list(workers) == [h.name for h in ssh_lab.hosts]
    first = ssh_lab.hosts[0]
    assert workers[first.name] == {"address": first.address, "port": 22, "user": first.user,
                                   "key": str(ssh_lab.key)}
    assert data["all"]["vars"]["known_hosts"] == str(ssh_lab.known_hosts)


def test_homes_are_private_enough_for_strict_modes(ssh_lab):
    for host in ssh_lab.hosts:
        for path in (host.home, host.home / ".ssh", host.home / ".ssh" / "authorized_keys"):
            assert path.stat().st_mode & 0o022 == 0, path


def test_twenty_hosts_twenty_parallel_connections(big_lab):
    assert len(big_lab.hosts) == 20
    print(f"20-host bring-up: {big_lab.timings}")
    with ThreadPoolExecutor(max_workers=20) as pool:
        users = list(pool.map(lambda h: run(big_lab, h, "id -un").strip(), big_lab.hosts))
    assert users == [h.user for h in big_lab.hosts]


def test_twenty_parallel_connections_to_one_host(ssh_lab):
    host = ssh_lab.hosts[0]
    with ThreadPoolExecutor(max_workers=20) as pool:
        users = list(pool.map(lambda _: run(ssh_lab, host, "id -un").strip(), range(20)))
    assert users == [host.user] * 20


def test_openssh_client_agrees(ssh_lab):
    host = ssh_lab.hosts[0]
    out = subprocess.run(
        ["ssh", "-i", str(ssh_lab.key), "-o", f"UserKnownHostsFile={ssh_lab.known_hosts}",
         "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "GlobalKnownHostsFile=/dev/null",
         f"{host.user}@{host.address}", "id -un"],
        capture_output=True, text=True, timeout=30)
    assert out.stdout.strip() == host.user, out.stderr


def test_leftovers_of_a_killed_lab_are_cleaned():
    """A lab whose owner died without teardown is cleaned by the next lab in that slot."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    dead = Lab(2).up()
    slot, root, names = dead.slot, dead.root, [h.name for h in dead.hosts]
    pids = [p.pid for p in dead._sshd.values()]
    os.close(dead._lock_fd)  # what the kernel does when the owner is killed
    with Lab(2, slot=slot) as again:
        assert again.slot == slot
        assert not any(_alive(pid) for pid in pids)
        assert run(again, again.hosts[0], "id -un").strip() == names[0]
    for name in names:
        with pytest.raises(KeyError):
            pwd.getpwnam(name)
    assert not (root / f"slot{slot}").exists()


def _alive(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_hosts_can_build_a_venv_with_system_python(ssh_lab):
    """Hosts use Debian's /usr/bin/python3 (the dev pyenv under /root is private to root)."""
    host = ssh_lab.hosts[0]
    out = run(ssh_lab, host, "command -v python3; python3 -m venv ~/probe-venv && "
                             "~/probe-venv/bin/python -c 'import sys; print(sys.prefix)'; "
                             "rm -rf ~/probe-venv")
    assert out.splitlines() == ["/usr/bin/python3", f"{host.home}/probe-venv"]


def test_inventory_data_groups_and_vars(tmp_path):
    hosts = [LabHost(name=f"h{i}", address=f"127.0.9.{i}", port=2200 + i, user=f"u{i}",
                     home=tmp_path / f"h{i}", key=tmp_path / "key", known_hosts=tmp_path / "kh",
                     state_dir=tmp_path / f"s{i}") for i in (1, 2, 3)]
    data = inventory_data(hosts, groups={"hub": ["h1"], "workers": ["h2", "h3"]},
                          host_vars={"h1": {"platform": "macos"}},
                          common_vars={"runtime_root": "~/.soulfleet"})
    children = data["all"]["children"]
    assert children["hub"]["hosts"]["h1"] == {"address": "127.0.9.1", "port": 2201, "user": "u1",
                                              "key": str(tmp_path / "key"), "platform": "macos"}
    assert list(children["workers"]["hosts"]) == ["h2", "h3"]
    assert data["all"]["vars"] == {"known_hosts": str(tmp_path / "kh"),
                                   "runtime_root": "~/.soulfleet"}
    assert hosts[1].known_hosts_name == "[127.0.9.2]:2202"


def test_unavailable_reason_names_the_problem(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "root" in unavailable_reason()
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert "openssh-server" in unavailable_reason(str(tmp_path / "no-sshd"))
