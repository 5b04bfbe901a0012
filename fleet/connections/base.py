"""What every transport offers the fleet: run a command, put a file, close.

Commands are shell command strings, run by the target's shell (POSIX sh syntax is the portable
subset). Outputs are decoded as UTF-8 with replacement, so a stray byte never crashes a run.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Result:
    """What a command did: exit code and its decoded output."""

    rc: int
    stdout: str
    stderr: str
    command: str = ""

    @property
    def ok(self) -> bool:
        return self.rc == 0


class HostConnectionError(Exception):
    """Base of everything that keeps the fleet from talking to a host."""

    def __init__(self, host: str, message: str):
        super().__init__(message)
        self.host = host


class HostUnreachable(HostConnectionError):
    """Nothing answered (refused, timed out, no route) or the connection was lost."""

    def __init__(self, host: str, address: str, port: int, reason: str):
        super().__init__(host, f"{host} ({address}:{port}) is unreachable: {reason}")
        self.address, self.port, self.reason = address, port, reason


class HostKeyRejected(HostConnectionError):
    """The host's key is not the one known_hosts says ('changed') or is not there ('unknown')."""

    def __init__(self, host: str, address: str, reason: str, known_hosts: Path | str,
                 offered: str = "", expected: str = ""):
        if reason not in ("unknown", "changed"):
            raise ValueError(f"reason must be 'unknown' or 'changed', not {reason!r}")
        if reason == "unknown":
            message = (f"{host} ({address}): host key {offered} is not in {known_hosts}; refusing "
                       f"to connect. Add the host's key to that file after checking its "
                       f"fingerprint, or allow first contact explicitly (accept_new).")
        else:
            message = (f"{host} ({address}): HOST KEY CHANGED — offered {offered}, but "
                       f"{known_hosts} expects {expected}. This may be an attack or a "
                       f"reinstalled host; refusing to connect. Fix the entry in {known_hosts} "
                       f"once you know why.")
        super().__init__(host, message)
        self.address, self.reason, self.known_hosts = address, reason, Path(known_hosts)
        self.offered, self.expected = offered, expected


class AuthenticationFailed(HostConnectionError):
    """The host answered but did not accept our key."""


class CommandFailed(Exception):
    """A command run with check=True exited non-zero."""

    def __init__(self, host: str, result: Result):
        detail = (result.stderr or result.stdout).strip()
        super().__init__(f"{host}: command exited {result.rc}: {result.command}"
                         + (f"\n{detail[-2000:]}" if detail else ""))
        self.host, self.result = host, result


class CommandTimeout(Exception):
    """A command did not finish within its timeout; it was abandoned (and killed where we can)."""

    def __init__(self, host: str, command: str, timeout: float, stdout: str = "", stderr: str = ""):
        super().__init__(f"{host}: command did not finish in {timeout:g} s: {command}")
        self.host, self.command, self.timeout = host, command, timeout
        self.stdout, self.stderr = stdout, stderr


class Connection(abc.ABC):
    """One host's transport. Reuses one underlying connection for every call until close()."""

    host: str

    @abc.abstractmethod
    def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None,
            check: bool = False) -> Result:
        """Run a shell command string; with check=True a non-zero exit raises CommandFailed."""

    @abc.abstractmethod
    def put(self, data: bytes, remote_path: str, mode: int | None = None) -> None:
        """Write a file atomically (temp file in the same folder, then rename).

        mode=None keeps the mode of the file being replaced (a 0600 file stays 0600), or uses
        the default for new files.
        """

    @abc.abstractmethod
    def get(self, remote_path: str) -> bytes:
        """Read a whole file; FileNotFoundError when it is not there."""

    @abc.abstractmethod
    def hold(self, command: str, *, timeout: float = 30.0) -> "Held":
        """Start `command`, wait (at most `timeout` s) for its first line of output, and keep it
        running with its stdin open until `Held.release()`; if the connection drops, the host
        ends it. For a lock held for the length of a run (fleet/host_lock.py)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connection; safe to call twice."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _finish(self, result: Result, check: bool) -> Result:
        if check and result.rc != 0:
            raise CommandFailed(self.host, result)
        return result


class Held:
    """A command started by `Connection.hold`: its first output line, and how to end it
    (closing its stdin)."""

    def __init__(self, first_line: str, release):
        self.first_line, self._release = first_line, release

    def release(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()


def decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")
