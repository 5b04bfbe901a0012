"""testinfra backends for verification: paramiko with strict host keys, and the local backend.

testinfra's own paramiko backend sets paramiko's WarningPolicy and loads no known_hosts at all, so
every key is "missing" and merely logged: an impostor would be verified as happily as the real
host. (An ssh_config does not help: the backend reads only `StrictHostKeyChecking no` from it,
and ignores UserKnownHostsFile.) StrictParamikoBackend replaces only how the client is made: the
target's known_hosts file is the sole source of trust, an unknown key is refused, a changed key is
refused (paramiko's BadHostKeyException, or an entry of another key type). Running commands is
left to testinfra.
"""

from __future__ import annotations

import functools
import socket
from pathlib import Path

import paramiko
from testinfra.backend.local import LocalBackend
from testinfra.backend.paramiko import ParamikoBackend
from testinfra.host import Host

from fleet.connections.base import AuthenticationFailed, HostKeyRejected, HostUnreachable
from fleet.connections.ssh import fingerprint

from .target import VerifyTarget


def _describe(key: paramiko.PKey | None) -> str:
    return f"{key.get_name()} {fingerprint(key)}" if key is not None else "a key of another type"


class _RefuseMissingKey(paramiko.MissingHostKeyPolicy):
    """Called by paramiko when known_hosts has no key of the offered type for the host."""

    def __init__(self, target: VerifyTarget):
        self.target = target

    def missing_host_key(self, client, hostname, key):
        listed = client.get_host_keys().lookup(hostname)
        # Listed with another key type: the host now offers something we were never told about.
        reason, expected = ("changed", ", ".join(listed.keys())) if listed else ("unknown", "")
        raise HostKeyRejected(self.target.name, self.target.address, reason,
                              self.target.known_hosts, offered=_describe(key), expected=expected)


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
        target = self.target
        client = paramiko.SSHClient()
        known_hosts = Path(target.known_hosts).expanduser()
        if known_hosts.exists():
            client.load_host_keys(str(known_hosts))  # not the system files: only what we were given
        client.set_missing_host_key_policy(_RefuseMissingKey(target))
        try:
            client.connect(
                target.address, port=target.port, username=target.user,
                key_filename=str(Path(target.key).expanduser()) if target.key else None,
                look_for_keys=target.key is None, allow_agent=target.key is None,
                timeout=self.timeout, banner_timeout=self.timeout, auth_timeout=self.timeout)
        except HostKeyRejected:
            client.close()
            raise
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise HostKeyRejected(target.name, target.address, "changed", known_hosts,
                                  offered=_describe(exc.key),
                                  expected=_describe(exc.expected_key)) from None
        except paramiko.AuthenticationException as exc:
            client.close()
            raise AuthenticationFailed(
                target.name, f"{target.name} ({target.address}:{target.port}): {target.user} "
                             f"was not let in with key {target.key}: {exc}") from None
        except (socket.timeout, TimeoutError):
            client.close()
            raise HostUnreachable(target.name, target.address, target.port,
                                  f"no answer within {self.timeout} s") from None
        except (paramiko.SSHException, EOFError, OSError) as exc:
            client.close()
            reason = "; ".join(sorted({str(e.strerror or e) for e in exc.errors.values()})) \
                if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError) else str(exc)
            raise HostUnreachable(target.name, target.address, target.port,
                                  reason or type(exc).__name__) from None
        return client

    def close(self) -> None:
        if "client" in self.__dict__:
            self.__dict__.pop("client").close()


class NamedLocalBackend(LocalBackend):
    """testinfra's local backend, reported under the target's name."""

    def __init__(self, target: VerifyTarget):
        super().__init__()
        self.target = target

    def get_pytest_id(self) -> str:
        return self.target.name

    def close(self) -> None:
        pass


def host_for(target: VerifyTarget) -> Host:
    """A testinfra Host for the target; SSH targets connect lazily, on the first command."""
    backend = NamedLocalBackend(target) if target.local else StrictParamikoBackend(target)
    host = Host(backend)
    backend.set_host(host)
    return host
