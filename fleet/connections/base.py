"""What every transport offers the fleet: run a command, put a file, close.

Commands are shell command strings, run by the target's shell (POSIX sh syntax is the portable
subset). Outputs are decoded as UTF-8 with replacement, so a stray byte never crashes a run.
"""

from __future__ import annotations

import abc
import select
import socket
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable


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

    def forward(self, remote_port: int | None = None, *, remote_host: str = "127.0.0.1") -> "Forward":
        """A listener on this machine's 127.0.0.1 only (a free port: `Forward.port`) whose every
        connection is carried to `remote_host:remote_port` as the host sees it (the port may be
        set later, `Forward.remote_port`: the local port is known first). Over SSH each one is
        a direct-tcpip channel of this connection, so nothing new listens on the host."""
        return Forward(self._open_stream, remote_port, remote_host=remote_host)

    def _open_stream(self, address: str, port: int) -> Any:
        """A stream (recv, sendall, fileno, close) to address:port as the host sees it."""
        raise NotImplementedError(f"{type(self).__name__} cannot forward a port")

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


class Forward:
    """A local port carried to a host's (Connection.forward). Connections accepted before
    `remote_port` is set, or that the host cannot open, are closed at once (`error` says why)."""

    CHUNK = 65536

    def __init__(self, open_stream: Callable[[str, int], Any], remote_port: int | None = None, *,
                 remote_host: str = "127.0.0.1", local_port: int = 0):
        self.remote_host, self.remote_port = remote_host, remote_port
        self.error: str | None = None
        self._open = open_stream
        self._closed = threading.Event()
        self._streams: set[Any] = set()
        self._lock = threading.Lock()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", local_port))  # loopback only: never another machine's
        self._listener.listen(16)
        self.port: int = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, name=f"forward-{self.port}", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                ready, _, _ = select.select([self._listener], [], [], 0.5)
                if not ready:
                    continue
                client, _ = self._listener.accept()
            except (OSError, ValueError):  # closed under us
                return
            threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _relay(self, client: socket.socket) -> None:
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        far = None
        try:
            if self.remote_port is None:
                return
            try:
                far = self._open(self.remote_host, self.remote_port)
            except Exception as exc:  # the host refused or the connection is gone
                self.error = f"{self.remote_host}:{self.remote_port} could not be reached: {exc or type(exc).__name__}"
                return
            with self._lock:
                self._streams.update((client, far))
            while not self._closed.is_set():
                ready, _, _ = select.select([client, far], [], [], 0.5)
                for source in ready:
                    data = source.recv(self.CHUNK)
                    if not data:
                        return
                    (far if source is client else client).sendall(data)
        except (OSError, EOFError, ValueError):
            return
        except Exception:  # a channel's own errors (paramiko.SSHException): the stream ends
            return
        finally:
            with self._lock:
                self._streams.discard(client)
                self._streams.discard(far)
            for stream in (client, far):
                if stream is not None:
                    try:
                        stream.close()
                    except Exception:
                        pass

    def close(self) -> None:
        """Stop listening and end every stream; safe to call twice."""
        self._closed.set()
        try:
            self._listener.close()
        except OSError:
            pass
        with self._lock:
            streams, self._streams = list(self._streams), set()
        for stream in streams:
            try:
                stream.close()
            except Exception:
                pass


def decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")
