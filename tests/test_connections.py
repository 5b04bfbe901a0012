"""The fleet's transports: local (subprocess) and SSH (paramiko, strict host keys) on the lab."""

from __future__ import annotations

import hashlib
import os
import socket
import stat
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from fleet.connections import (AuthenticationFailed, CommandFailed, CommandTimeout,
                               HostKeyRejected, HostUnreachable, LocalConnection, Result,
                               SSHConnection)
from tests.lab import Lab, LabHost, _keygen


def ssh(lab: Lab, host: LabHost, **kwargs) -> SSHConnection:
    options = dict(port=host.port, user=host.user, key=lab.key, known_hosts=lab.known_hosts)
    options.update(kwargs)
    return SSHConnection(host.name, host.address, **options)


# -- local ---------------------------------------------------------------------------------------

class TestLocal:
    def test_run_reports_rc_and_both_streams(self):
        with LocalConnection() as conn:
            result = conn.run("echo out; echo err >&2; exit 3")
        assert result == Result(3, "out\n", "err\n", "echo out; echo err >&2; exit 3")
        assert not result.ok
        assert conn.host == "local"

    def test_input_and_check(self):
        conn = LocalConnection()
        assert conn.run("tr a-z A-Z", input=b"soul").stdout == "SOUL"
        with pytest.raises(CommandFailed, match="exited 4") as info:
            conn.run("echo broken >&2; exit 4", check=True)
        assert info.value.result.stderr == "broken\n"

    def test_timeout_kills_the_whole_command(self, tmp_path):
        marker = tmp_path / "late"
        started = time.monotonic()
        with pytest.raises(CommandTimeout):
            LocalConnection().run(f"(sleep 1; touch {marker}) & sleep 5", timeout=0.3)
        assert time.monotonic() - started < 2
        time.sleep(1.2)
        assert not marker.exists()  # the background child died with its process group

    def test_put_is_atomic_and_keeps_mode(self, tmp_path):
        conn = LocalConnection()
        target = tmp_path / "soul.json"
        conn.put(b"{}", str(target), mode=0o600)
        assert target.read_bytes() == b"{}"
        assert stat.S_IMODE(target.stat().st_mode) == 0o600
        conn.put(b'{"v": 2}', str(target))  # replacing keeps 0600
        assert stat.S_IMODE(target.stat().st_mode) == 0o600
        assert conn.get(str(target)) == b'{"v": 2}'
        assert os.listdir(tmp_path) == ["soul.json"]  # no temp files left behind

    def test_put_new_file_follows_umask(self, tmp_path):
        LocalConnection().put(b"x", str(tmp_path / "new"))
        assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o666 & ~_current_umask()

    def test_get_missing_file(self, tmp_path):
        with pytest.raises(FileNotFoundError):
            LocalConnection().get(str(tmp_path / "absent"))


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# -- ssh -----------------------------------------------------------------------------------------

@pytest.mark.lab
class TestSSHCommands:
    def test_run_as_the_host_user(self, ssh_lab):
        for host in ssh_lab.hosts:
            with ssh(ssh_lab, host) as conn:
                result = conn.run("id -un; echo err >&2; exit 7")
            assert (result.rc, result.stdout, result.stderr) == (7, f"{host.user}\n", "err\n")

    def test_one_connection_for_many_commands(self, ssh_lab):
        host = ssh_lab.hosts[0]
        accepted_before = host.log_file.read_text().count("Accepted publickey")
        with ssh(ssh_lab, host) as conn:
            for i in range(20):
                assert conn.run(f"echo {i}").stdout == f"{i}\n"
        accepted_after = host.log_file.read_text().count("Accepted publickey")
        assert accepted_after - accepted_before == 1

    def test_large_input_and_output(self, ssh_lab):
        data = os.urandom(3_000_000)
        with ssh(ssh_lab, ssh_lab.hosts[0]) as conn:
            result = conn.run("sha256sum; head -c 4000000 /dev/zero | tr '\\0' a", input=data)
        digest_line, rest = result.stdout.split("\n", 1)
        assert digest_line.split()[0] == hashlib.sha256(data).hexdigest()
        assert rest == "a" * 4_000_000

    def test_check_and_timeout(self, ssh_lab):
        with ssh(ssh_lab, ssh_lab.hosts[0]) as conn:
            with pytest.raises(CommandFailed, match="sflab"):
                conn.run("false", check=True)
            started = time.monotonic()
            with pytest.raises(CommandTimeout):
                conn.run("sleep 5", timeout=0.3)
            assert time.monotonic() - started < 2
            assert conn.run("echo alive").stdout == "alive\n"  # connection still usable

    def test_parallel_commands_share_one_connection(self, ssh_lab):
        with ssh(ssh_lab, ssh_lab.hosts[0]) as conn:
            with ThreadPoolExecutor(max_workers=20) as pool:
                outs = list(pool.map(lambda i: conn.run(f"sleep 0.2; echo {i}").stdout, range(20)))
        assert outs == [f"{i}\n" for i in range(20)]

    def test_parallel_hosts(self, ssh_lab):
        def whoami(host):
            with ssh(ssh_lab, host) as conn:
                return conn.run("id -un", check=True).stdout.strip()
        with ThreadPoolExecutor(max_workers=len(ssh_lab.hosts)) as pool:
            assert list(pool.map(whoami, ssh_lab.hosts)) == [h.user for h in ssh_lab.hosts]


@pytest.mark.lab
class TestSSHFiles:
    def test_put_atomic_with_modes(self, ssh_lab):
        host = ssh_lab.hosts[0]
        with ssh(ssh_lab, host) as conn:
            conn.run("rm -rf ~/files && mkdir ~/files", check=True)
            conn.put(b'{"nodes": []}', "~/files/soul.json", mode=0o600)
            assert conn.run("stat -c %a ~/files/soul.json").stdout == "600\n"
            conn.put(b'{"nodes": [1]}', f"{host.home}/files/soul.json")  # absolute path too
            assert conn.run("stat -c %a ~/files/soul.json").stdout == "600\n"  # mode kept
            assert conn.get("~/files/soul.json") == b'{"nodes": [1]}'
            conn.put(b"#!/bin/sh\necho hi\n", "~/files/run.sh", mode=0o755)
            assert conn.run("~/files/run.sh").stdout == "hi\n"
            conn.put(b"plain", "~/files/new.txt")
            assert conn.run("stat -c %a ~/files/new.txt").stdout == "644\n"
            assert conn.run("ls -A ~/files").stdout.split() == ["new.txt", "run.sh", "soul.json"]
            assert (host.home / "files" / "soul.json").stat().st_uid == _uid(host)

    def test_put_binary_and_get_missing(self, ssh_lab):
        data = bytes(range(256)) * 1000
        with ssh(ssh_lab, ssh_lab.hosts[1]) as conn:
            conn.put(data, "~/blob.bin")
            assert conn.get("~/blob.bin") == data
            with pytest.raises(FileNotFoundError):
                conn.get("~/no-such-file")
            with pytest.raises(FileNotFoundError):
                conn.put(b"x", "~/no-such-dir/file")


def _uid(host: LabHost) -> int:
    import pwd
    return pwd.getpwnam(host.user).pw_uid


@pytest.mark.lab
class TestSSHHostKeys:
    def test_unknown_key_is_refused_with_a_clear_message(self, ssh_lab, tmp_path):
        host = ssh_lab.hosts[0]
        empty = tmp_path / "known_hosts"
        empty.write_text("")
        with pytest.raises(HostKeyRejected) as info:
            ssh(ssh_lab, host, known_hosts=empty).run("true")
        err = info.value
        assert err.reason == "unknown" and err.host == host.name
        message = str(err)
        assert host.name in message and host.address in message and str(empty) in message
        assert "SHA256:" in message
        assert empty.read_text() == ""  # nothing was added

    def test_missing_known_hosts_file_refuses_too(self, ssh_lab, tmp_path):
        with pytest.raises(HostKeyRejected, match="unknown|not in"):
            ssh(ssh_lab, ssh_lab.hosts[0], known_hosts=tmp_path / "nope").connect()
        assert not (tmp_path / "nope").exists()

    def test_accept_new_records_the_key_on_first_contact(self, ssh_lab, tmp_path):
        host = ssh_lab.hosts[0]
        fresh = tmp_path / "ssh" / "known_hosts"
        with ssh(ssh_lab, host, known_hosts=fresh, accept_new=True) as conn:
            assert conn.run("id -un").stdout.strip() == host.user
        assert fresh.read_text().split()[:3] == [host.address, *host.public_host_key().split()]
        with ssh(ssh_lab, host, known_hosts=fresh) as conn:  # now known: strict mode works
            assert conn.run("true").ok

    def test_accept_new_from_parallel_workers(self, ssh_lab, tmp_path):
        fresh = tmp_path / "known_hosts"

        def first_contact(host):
            with ssh(ssh_lab, host, known_hosts=fresh, accept_new=True) as conn:
                return conn.run("id -un").stdout.strip()
        with ThreadPoolExecutor(max_workers=5) as pool:
            assert list(pool.map(first_contact, ssh_lab.hosts)) == [h.user for h in ssh_lab.hosts]
        lines = sorted(fresh.read_text().splitlines())
        assert lines == sorted(f"{h.address} {h.public_host_key()}" for h in ssh_lab.hosts)

    def test_key_of_another_type_counts_as_changed(self, ssh_lab, tmp_path):
        host = ssh_lab.hosts[0]
        other = tmp_path / "ecdsa_key"
        subprocess.run(["ssh-keygen", "-q", "-t", "ecdsa", "-N", "", "-f", str(other)], check=True)
        kind, blob = (tmp_path / "ecdsa_key.pub").read_text().split()[:2]
        known = tmp_path / "known_hosts"
        known.write_text(f"{host.address} {kind} {blob}\n")
        with pytest.raises(HostKeyRejected) as info:
            ssh(ssh_lab, host, known_hosts=known, accept_new=True).connect()
        assert info.value.reason == "changed"

    def test_changed_key_is_refused_even_with_accept_new(self, ssh_lab):
        bad, good = ssh_lab.hosts[2], ssh_lab.hosts[3]
        ssh_lab.tamper_known_hosts(bad)
        before = ssh_lab.known_hosts.read_text()
        for accept_new in (False, True):
            with pytest.raises(HostKeyRejected) as info:
                ssh(ssh_lab, bad, accept_new=accept_new).run("true")
            assert info.value.reason == "changed"
            message = str(info.value)
            assert "CHANGED" in message and bad.address in message
            assert str(ssh_lab.known_hosts) in message
        assert ssh_lab.known_hosts.read_text() == before  # never rewritten
        with ssh(ssh_lab, good) as conn:
            assert conn.run("id -un").stdout.strip() == good.user


@pytest.mark.lab
class TestSSHFailures:
    def test_stopped_host_is_unreachable_quickly(self, ssh_lab):
        host = ssh_lab.stop(4)
        started = time.monotonic()
        with pytest.raises(HostUnreachable) as info:
            ssh(ssh_lab, host).run("true")
        assert time.monotonic() - started < 2
        assert host.name in str(info.value) and host.address in str(info.value)

    def test_silent_server_times_out_as_unreachable(self, ssh_lab):
        # Accepts TCP but never speaks SSH: only the timeout can save us.
        silent = socket.socket()
        silent.bind(("127.0.0.2", 0))
        silent.listen(5)
        port = silent.getsockname()[1]
        host = ssh_lab.hosts[0]
        try:
            conn = SSHConnection("silent", "127.0.0.2", port=port, user=host.user,
                                 key=ssh_lab.key, known_hosts=ssh_lab.known_hosts,
                                 connect_timeout=0.5)
            started = time.monotonic()
            with pytest.raises(HostUnreachable):
                conn.connect()
            assert time.monotonic() - started < 3
        finally:
            silent.close()

    def test_a_host_frozen_before_it_answers_the_exec_request_is_unreachable_within_the_bound(self, ssh_lab):
        """paramiko waits for the reply to a channel's exec request with no deadline: a host
        whose link went down between the channel's opening and that reply hung the run."""
        from fleet.connections.ssh import PROBE_TIMEOUT, SILENCE_PROBE

        host = ssh_lab.hosts[2]
        conn = ssh(ssh_lab, host)
        assert conn.run("true").ok
        opened = conn._session

        def open_then_freeze():
            chan = opened()
            ssh_lab.freeze(host)  # the channel is open; the exec request goes unanswered
            return chan

        conn._session = open_then_freeze
        started = time.monotonic()
        try:
            with pytest.raises(HostUnreachable, match="stopped answering"):
                conn.run("true")
            assert time.monotonic() - started <= SILENCE_PROBE + PROBE_TIMEOUT + 3
        finally:
            ssh_lab.thaw(host)
            conn.close()

    def test_wrong_key_is_an_authentication_failure(self, ssh_lab, tmp_path):
        stranger = tmp_path / "id_stranger"
        _keygen(stranger, "stranger")
        with pytest.raises(AuthenticationFailed, match=ssh_lab.hosts[0].name):
            ssh(ssh_lab, ssh_lab.hosts[0], key=stranger).connect()

    def test_host_lost_mid_session_then_back(self, ssh_lab):
        host = ssh_lab.hosts[1]
        conn = ssh(ssh_lab, host)
        assert conn.run("true").ok
        ssh_lab.stop(host)
        with pytest.raises(HostUnreachable):
            conn.run("true")
        ssh_lab.start(host)
        assert conn.run("id -un").stdout.strip() == host.user  # reconnects
        conn.close()
        conn.close()  # idempotent

    def test_command_killed_with_the_host(self, ssh_lab):
        host = ssh_lab.hosts[2]
        conn = ssh(ssh_lab, host)
        conn.connect()
        stopper = threading.Timer(0.5, ssh_lab.stop, args=(host,))
        stopper.start()
        try:
            with pytest.raises(HostUnreachable):
                conn.run("sleep 10", timeout=8)
        finally:
            stopper.join()
            conn.close()


def test_a_long_command_in_an_unreachable_message_is_cut_between_words_and_says_how_much_is_left():
    from fleet.connections.ssh import command_summary

    paths = " ".join(f"/home/agent/.soulfleet/releases/{'a' * 40}/venv/lib/python3.11/site-packages/pkg{i}"
                     for i in range(6))
    text = command_summary(f"cd /tmp && tar -xzf {paths}")
    head, _, tail = text.partition(" … (")
    assert tail.endswith(" more characters)") and len(head) <= 240
    # Every path shown is whole: the cut fell between two of them.
    shown = [w for w in head.split() if w.startswith("/home/")]
    assert shown and all(w in paths.split() for w in shown)
    assert command_summary("uname -a") == "uname -a"
