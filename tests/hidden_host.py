"""A lab host that can be reached only through another (the ProxyJump case), in a network
namespace the test creates.

Inside namespace `sflabj<slot>`: one sshd for the jump host's user on the namespace's side of a
veth pair (10.241.<slot>.2:22, reachable from the operator), and one for the hidden host's user
on the namespace's own loopback (127.0.0.1:2222, which no process outside the namespace can
reach). Both use the lab hosts' real host keys; `known_hosts_lines` lists them under these
addresses. The namespace and both sshds are removed on exit.
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

HIDDEN_PORT = 2222


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=20)


class HiddenBehindJump:
    def __init__(self, lab, jump, hidden):
        self.lab, self.jump, self.hidden = lab, lab.host(jump), lab.host(hidden)
        slot = lab.slot or 0
        self.netns = f"sflabj{slot}"
        self.outer, self.inner = f"sfj{slot}a", f"sfj{slot}b"
        self.jump_address = f"10.241.{slot}.2"
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> "HiddenBehindJump":
        self._remove()
        _ip("netns", "add", self.netns)
        _ip("link", "add", self.outer, "type", "veth", "peer", "name", self.inner)
        _ip("link", "set", self.inner, "netns", self.netns)
        _ip("addr", "add", f"10.241.{self.lab.slot or 0}.1/30", "dev", self.outer)
        _ip("link", "set", self.outer, "up")
        for args in (("addr", "add", f"{self.jump_address}/30", "dev", self.inner), ("link", "set", self.inner, "up"),
                     ("link", "set", "lo", "up")):
            _ip("netns", "exec", self.netns, "ip", *args)
        self._sshd(self.jump, f"{self.jump_address}:22", "jump")
        self._sshd(self.hidden, f"127.0.0.1:{HIDDEN_PORT}", "hidden")
        self._wait()
        return self

    def _sshd(self, host, listen: str, role: str) -> None:
        config = Path(host.sshd_config).read_text()
        config = "\n".join(
            f"ListenAddress {listen}" if line.startswith("ListenAddress ") else
            f"PidFile {host.state_dir}/sshd-{role}.pid" if line.startswith("PidFile ") else line
            for line in config.splitlines()) + "\n"
        path = host.state_dir / f"sshd_config.{role}"
        path.write_text(config)
        self.procs.append(subprocess.Popen(
            ["ip", "netns", "exec", self.netns, self.lab.sshd, "-D", "-f", str(path),
             "-E", str(host.state_dir / f"sshd-{role}.log")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))

    def _wait(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        probe = f"import socket; socket.create_connection(('127.0.0.1', {HIDDEN_PORT}), 1).close()"
        while time.monotonic() < deadline:
            try:
                socket.create_connection((self.jump_address, 22), 1).close()
                subprocess.run(["ip", "netns", "exec", self.netns, "python3", "-c", probe], check=True,
                               capture_output=True, timeout=5)
                return
            except (OSError, subprocess.CalledProcessError):
                time.sleep(0.1)
        raise RuntimeError("the sshds in the namespace did not start listening")

    def known_hosts_lines(self) -> str:
        return (f"{self.jump_address} {self.jump.public_host_key()}\n"
                f"[127.0.0.1]:{HIDDEN_PORT} {self.hidden.public_host_key()}\n")

    def __exit__(self, *exc) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait(timeout=10)
        self._remove()

    def _remove(self) -> None:
        subprocess.run(["ip", "netns", "del", self.netns], capture_output=True, timeout=20)
        subprocess.run(["ip", "link", "del", self.outer], capture_output=True, timeout=20)
