"""testinfra backends for verification: paramiko with strict host keys, and the local backend.

testinfra's own paramiko backend sets paramiko's WarningPolicy and loads no known_hosts at all, so
every key is "missing" and merely logged: an impostor would be verified as happily as the real
host. (An ssh_config does not help: the backend reads only `StrictHostKeyChecking no` from it,
and ignores UserKnownHostsFile.) StrictParamikoBackend replaces only how the client is made: by
the fleet's SSHConnection, so the target's known_hosts file is the sole source of trust and an
unknown or changed key is refused exactly as `fleet-update` refuses it. Running commands is left
to testinfra.
"""

from __future__ import annotations

import functools
import socket

import paramiko
from testinfra.backend.local import LocalBackend
from testinfra.backend.paramiko import ParamikoBackend
from testinfra.host import Host

from fleet.connections.base import CommandTimeout
from fleet.connections.local import LocalConnection
from fleet.connections.ssh import SSHConnection

from .target import VerifyTarget


# Longest a check's command may run on a host (soulgraph.check stops itself after 60 s).
COMMAND_TIMEOUT = 120.0


class StrictParamikoBackend(ParamikoBackend):
    """testinfra's paramiko backend, connecting only to hosts whose key known_hosts lists."""

    NAME = "paramiko"

    def __init__(self, target: VerifyTarget, timeout: int = 10):
        spec = f"{target.user}@{target.address}:{target.port}" if target.user else \
            f"{target.address}:{target.port}"
        super().__init__(spec, ssh_identity_file=target.key, timeout=timeout)
        self.target = target

    def get_pytest_id(self) -> str:
        return self.target.name

    @functools.cached_property
    def client(self) -> paramiko.SSHClient:
        # The fleet's own strict connection makes the client: one place decides which keys
        # are trusted (only the target's known_hosts; unknown and changed keys refused).
        target = self.target
        if target.connection is not None:  # as fleet-update reaches it (ssh_config, ProxyJump)
            connection = target.connection()
            connection.accept_new = False  # verify never writes known_hosts
        else:
            connection = SSHConnection(target.name, target.address, port=target.port, user=target.user,
                                       key=target.key, known_hosts=target.known_hosts, connect_timeout=self.timeout)
        self._connection = connection.connect()
        return self._connection.paramiko_client

    def _exec_command(self, command: bytes) -> tuple[int, bytes, bytes]:
        # testinfra's reader waits forever, so one hung command on one host would hang the
        # whole verification: the same exchange, but no read may wait past the deadline.
        chan = self.client.get_transport().open_session()
        chan.settimeout(COMMAND_TIMEOUT)
        try:
            chan.exec_command(command)
            stdout = b"".join(chan.makefile("rb"))
            stderr = b"".join(chan.makefile_stderr("rb"))
            if not chan.status_event.wait(COMMAND_TIMEOUT):
                raise socket.timeout()
        except socket.timeout:
            raise CommandTimeout(self.target.name, command.decode(), COMMAND_TIMEOUT) from None
        finally:
            chan.close()
        return chan.recv_exit_status(), stdout, stderr

    def put(self, data: bytes, path: str, mode: int) -> None:
        """Write a file on the host atomically (the fleet connection's own write)."""
        _ = self.client  # connects on first use
        self._connection.put(data, path, mode)

    def close(self) -> None:
        if "client" in self.__dict__:
            del self.__dict__["client"]
            self._connection.close()


class NamedLocalBackend(LocalBackend):
    """testinfra's local backend, reported under the target's name."""

    def __init__(self, target: VerifyTarget):
        super().__init__()
        self.target = target

    def get_pytest_id(self) -> str:
        return self.target.name

    def put(self, data: bytes, path: str, mode: int) -> None:
        """Write a file atomically (the fleet's local connection's own write)."""
        LocalConnection(self.target.name).put(data, path, mode)

    def close(self) -> None:
        pass


def host_for(target: VerifyTarget) -> Host:
    """A testinfra Host for the target; SSH targets connect lazily, on the first command."""
    backend = NamedLocalBackend(target) if target.local else StrictParamikoBackend(target)
    host = Host(backend)
    backend.set_host(host)
    return host
