"""SSH transport on paramiko, with strict host-key checking.

Host keys: the given known_hosts file is the only source of trust (not ~/.ssh/known_hosts unless
that is the file given). An unknown key is refused unless accept_new=True, which records it in the
file on first contact, like OpenSSH's StrictHostKeyChecking=accept-new. A changed key is always
refused. (fabric.Connection would auto-add unknown keys and also trust the system files, which is
why this module drives paramiko's SSHClient itself.)

One SSH connection per host is opened on first use and reused for every command and file.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import os
import secrets
import select
import socket
import threading
import time
from pathlib import Path, PurePosixPath

import paramiko

from .base import (Held, AuthenticationFailed, CommandTimeout, Connection, HostKeyRejected,
                   HostUnreachable, Result, decode)

DEFAULT_KNOWN_HOSTS = Path("~/.ssh/known_hosts")
# A host that stops answering: after SILENCE_PROBE seconds with nothing from a running
# command, a request that needs a reply is sent over the connection (OpenSSH answers even
# one it does not know); no reply within PROBE_TIMEOUT and the host is unreachable. A busy
# host (pip for a minute, quiet) answers the probe and the command goes on. So a dropped
# host is reported within SILENCE_PROBE + PROBE_TIMEOUT (+1 s) = 26 s of silence; docs/fleet.md.
SILENCE_PROBE = 10.0
PROBE_TIMEOUT = 15.0
KEEPALIVE = 5  # seconds: SSH keepalives, so NAT and firewalls keep an idle connection
_known_hosts_write = threading.Lock()  # accept_new appends from parallel workers


def fingerprint(key: paramiko.PKey) -> str:
    """OpenSSH-style `SHA256:...` fingerprint."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def _describe(key: paramiko.PKey | None) -> str:
    # paramiko reports no expected key when known_hosts lists the host with another key type.
    return f"{key.get_name()} {fingerprint(key)}" if key is not None else "a key of another type"


def known_hosts_name(address: str, port: int) -> str:
    return address if port == 22 else f"[{address}]:{port}"


class _RefuseUnknown(paramiko.MissingHostKeyPolicy):
    def __init__(self, conn: "SSHConnection"):
        self.conn = conn

    def missing_host_key(self, client, hostname, key):
        raise HostKeyRejected(self.conn.host, self.conn.address, "unknown", self.conn.known_hosts,
                              offered=f"{key.get_name()} {fingerprint(key)}")


class _AcceptNew(paramiko.MissingHostKeyPolicy):
    """First contact: trust the key and append it to known_hosts (never replaces an entry)."""

    def __init__(self, conn: "SSHConnection"):
        self.conn = conn

    def missing_host_key(self, client, hostname, key):
        path = self.conn.known_hosts
        line = f"{hostname} {key.get_name()} {key.get_base64()}\n"
        with _known_hosts_write:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            with open(path, "a") as f:
                fcntl.flock(f, fcntl.LOCK_EX)  # other fleet processes may append too
                f.write(line)
        client.get_host_keys().add(hostname, key.get_name(), key)


class SSHConnection(Connection):
    def __init__(self, host: str, address: str | None = None, *, port: int = 22,
                 user: str | None = None, key: str | os.PathLike | None = None,
                 known_hosts: str | os.PathLike | None = None, accept_new: bool = False,
                 connect_timeout: float = 10.0, proxy: "SSHConnection | None" = None):
        self.host = host
        self.address = address or host
        self.port = port
        self.user = user
        self.key = Path(key).expanduser() if key else None
        self.known_hosts = Path(known_hosts or DEFAULT_KNOWN_HOSTS).expanduser()
        self.accept_new = accept_new
        self.connect_timeout = connect_timeout
        self.proxy = proxy  # a ProxyJump host: this one is reached through a channel of that connection
        self._client: paramiko.SSHClient | None = None
        self._sftp: paramiko.SFTPClient | None = None
        self._lock = threading.Lock()  # guards connecting and the (not thread-safe) SFTP client

    def __repr__(self) -> str:
        return f"SSHConnection({self.host!r}, {self.user}@{self.address}:{self.port})"

    # -- connecting --------------------------------------------------------------------------

    def connect(self) -> "SSHConnection":
        """Open the connection now (otherwise the first call does). Raises HostConnectionError."""
        with self._lock:
            self._ensure_client()
        return self

    @property
    def paramiko_client(self) -> paramiko.SSHClient:
        """The underlying client, connected (for tools that drive paramiko themselves)."""
        with self._lock:
            return self._ensure_client()

    def _ensure_client(self) -> paramiko.SSHClient:
        if self._client is not None:
            transport = self._client.get_transport()
            if transport is not None and transport.is_active():
                return self._client
            self._drop()  # the host went away; try once to reconnect
        client = paramiko.SSHClient()
        if self.known_hosts.exists():
            client.load_host_keys(str(self.known_hosts))
        policy = _AcceptNew(self) if self.accept_new else _RefuseUnknown(self)
        client.set_missing_host_key_policy(policy)
        unreachable = lambda reason: HostUnreachable(self.host, self.address, self.port, reason)
        try:
            sock = self._tunnel() if self.proxy is not None else None
            # The agent is offered too when a key is named: a passphrase-protected key file
            # cannot be read here, but the agent holding it signs for us.
            client.connect(
                self.address, port=self.port, username=self.user,
                key_filename=str(self.key) if self.key else None,
                look_for_keys=self.key is None, allow_agent=True, sock=sock,
                timeout=self.connect_timeout, banner_timeout=self.connect_timeout,
                auth_timeout=self.connect_timeout, channel_timeout=self.connect_timeout)
        except HostKeyRejected:
            client.close()
            raise
        except paramiko.BadHostKeyException as e:
            client.close()
            raise HostKeyRejected(
                self.host, self.address, "changed", self.known_hosts,
                offered=_describe(e.key),
                expected=_describe(e.expected_key)) from None
        except paramiko.AuthenticationException as e:
            client.close()
            raise AuthenticationFailed(
                self.host, f"{self.host} ({self.address}:{self.port}): {self.user or 'default user'}"
                           f" was not let in with key {self.key or '(agent/default keys)'}: {e}") from None
        except (socket.timeout, TimeoutError):
            client.close()
            raise unreachable(f"no answer within {self.connect_timeout:g} s") from None
        except paramiko.ssh_exception.NoValidConnectionsError as e:
            client.close()
            reasons = {str(err.strerror or err) for err in e.errors.values()}
            raise unreachable("; ".join(sorted(reasons)) or str(e)) from None
        except (paramiko.SSHException, EOFError, OSError) as e:
            client.close()
            raise unreachable(f"{type(e).__name__}: {e}") from None
        # Commands are many small request/answer exchanges: without TCP_NODELAY each one can
        # stall ~40 ms on Nagle's algorithm meeting delayed ACKs.
        if self.proxy is None:
            client.get_transport().sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        client.get_transport().set_keepalive(KEEPALIVE)
        self._client = client
        return client

    def _tunnel(self) -> paramiko.Channel:
        """A channel through the ProxyJump host to this host's address and port."""
        jump = self.proxy.paramiko_client  # raises HostConnectionError naming the jump host
        try:
            return jump.get_transport().open_channel("direct-tcpip", (self.address, self.port), ("127.0.0.1", 0),
                                                     timeout=self.connect_timeout)
        except (paramiko.SSHException, EOFError, OSError) as e:
            raise HostUnreachable(self.host, self.address, self.port,
                                  f"the jump host {self.proxy.address} could not reach it: {e}") from None

    def _session(self) -> paramiko.Channel:
        with self._lock:
            client = self._ensure_client()
        try:
            return client.get_transport().open_session(timeout=self.connect_timeout)
        except (paramiko.SSHException, EOFError, OSError) as e:
            raise HostUnreachable(self.host, self.address, self.port,
                                  f"connection lost: {e}") from None

    # -- commands ----------------------------------------------------------------------------

    def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None,
            check: bool = False) -> Result:
        chan = self._session()
        out, err = bytearray(), bytearray()
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            self._exec(chan, command)
            if input is not None:
                # A thread, so a command that writes a lot before reading all its input
                # cannot deadlock us on a full window.
                feeder = threading.Thread(target=_feed, args=(chan, input), daemon=True)
                feeder.start()
            else:
                chan.shutdown_write()
            heard = time.monotonic()
            while True:
                got = len(out) + len(err)
                while chan.recv_ready():
                    out += chan.recv(65536)
                while chan.recv_stderr_ready():
                    err += chan.recv_stderr(65536)
                if chan.eof_received and not chan.recv_ready() and not chan.recv_stderr_ready():
                    break
                if chan.closed:
                    break
                now = time.monotonic()
                if len(out) + len(err) > got:
                    heard = now
                elif now - heard >= SILENCE_PROBE:
                    self._probe(command)  # raises HostUnreachable when the host is gone
                    heard = time.monotonic()
                wait = 1.0
                if deadline is not None:
                    wait = deadline - time.monotonic()
                    if wait <= 0:
                        raise CommandTimeout(self.host, command, timeout, decode(bytes(out)),
                                             decode(bytes(err)))
                select.select([chan], [], [], min(wait, 1.0))
            while chan.recv_ready():  # whatever arrived together with the close
                out += chan.recv(65536)
            while chan.recv_stderr_ready():
                err += chan.recv_stderr(65536)
            # Exit status follows EOF closely; don't wait forever if the host vanished.
            if not chan.status_event.wait(self.connect_timeout if deadline is None
                                          else max(0.0, deadline - time.monotonic())):
                if chan.get_transport() is None or not chan.get_transport().is_active():
                    raise HostUnreachable(self.host, self.address, self.port,
                                          f"connection lost while running: {command_summary(command)}")
                raise CommandTimeout(self.host, command, timeout or self.connect_timeout,
                                     decode(bytes(out)), decode(bytes(err)))
            rc = chan.exit_status
        except (paramiko.SSHException, EOFError, OSError) as e:
            raise HostUnreachable(self.host, self.address, self.port,
                                  f"connection lost while running: {command}: {e}") from None
        finally:
            chan.close()
        if rc == -1 and not self._transport_active():
            raise HostUnreachable(self.host, self.address, self.port,
                                  f"connection lost while running: {command_summary(command)}")
        return self._finish(Result(rc, decode(bytes(out)), decode(bytes(err)), command), check)

    def hold(self, command: str, *, timeout: float = 30.0) -> Held:
        chan = self._session()
        try:
            chan.set_combine_stderr(True)
            self._exec(chan, command)
            line = b""
            deadline = time.monotonic() + timeout
            while not line.endswith(b"\n") and time.monotonic() < deadline:
                if chan.recv_ready():
                    chunk = chan.recv(1)
                    if not chunk:
                        break
                    line += chunk
                elif chan.exit_status_ready() and not chan.recv_ready():
                    break
                else:
                    select.select([chan], [], [], min(0.5, max(0.0, deadline - time.monotonic())))
        except (paramiko.SSHException, EOFError, OSError) as e:
            chan.close()
            raise HostUnreachable(self.host, self.address, self.port, f"connection lost while running: {command}: {e}") from None
        def release() -> None:
            try:
                chan.shutdown_write()  # stdin closed: the held command ends
                chan.status_event.wait(5)
            except (paramiko.SSHException, EOFError, OSError):
                pass
            chan.close()

        return Held(decode(line).strip(), release)

    def _open_stream(self, address: str, port: int) -> paramiko.Channel:
        """A direct-tcpip channel: the host's sshd connects to address:port itself (its loopback
        for `fleet memories --web`); no port is opened on the host."""
        with self._lock:
            client = self._ensure_client()
        try:
            return client.get_transport().open_channel("direct-tcpip", (address, port), ("127.0.0.1", 0),
                                                       timeout=self.connect_timeout)
        except (paramiko.SSHException, EOFError, OSError) as e:
            raise HostUnreachable(self.host, self.address, self.port,
                                  f"cannot open a channel to its {address}:{port}: {e}") from None

    def _exec(self, chan: paramiko.Channel, command: str) -> None:
        """`chan.exec_command`, bounded: paramiko waits for the host's reply to the request with
        no deadline, so a host that stops answering between opening the channel and starting the
        command would hang the run. While the reply is awaited, the host is probed every
        SILENCE_PROBE seconds as a silent command is (`_probe`); one that does not answer is
        dropped, which ends the wait, and reported unreachable."""
        started = threading.Event()
        lost: list[HostUnreachable] = []

        def watch() -> None:
            while not started.wait(SILENCE_PROBE):
                try:
                    self._probe(command)
                except HostUnreachable as exc:
                    lost.append(exc)
                    return

        threading.Thread(target=watch, daemon=True).start()
        try:
            chan.exec_command(command)
        except (paramiko.SSHException, EOFError, OSError):
            if lost:
                raise lost[0] from None
            raise
        finally:
            started.set()
        if lost:
            raise lost[0]

    def _probe(self, command: str) -> None:
        """Is the host still there? A global request that wants a reply, waited for in a
        helper thread at most PROBE_TIMEOUT seconds (paramiko's own wait has no deadline)."""
        transport = self._client.get_transport() if self._client else None
        if transport is None or not transport.is_active():
            raise HostUnreachable(self.host, self.address, self.port, f"connection lost while running: {command_summary(command)}")
        answered = threading.Event()

        def ask() -> None:
            try:
                transport.global_request("keepalive@openssh.com", wait=True)
            except Exception:  # the transport died: no answer
                return
            answered.set()

        threading.Thread(target=ask, daemon=True).start()
        if not answered.wait(PROBE_TIMEOUT) or not transport.is_active():
            with self._lock:
                self._drop()  # unblocks whatever still waits on this connection
            raise HostUnreachable(self.host, self.address, self.port,
                                  f"stopped answering: nothing for {SILENCE_PROBE + PROBE_TIMEOUT:g} s "
                                  f"while running: {command_summary(command)}")

    def _transport_active(self) -> bool:
        transport = self._client.get_transport() if self._client else None
        return bool(transport and transport.is_active())

    # -- files -------------------------------------------------------------------------------

    def put(self, data: bytes, remote_path: str, mode: int | None = None) -> None:
        path = _sftp_path(remote_path)
        folder, name = str(PurePosixPath(path).parent), PurePosixPath(path).name
        tmp = str(PurePosixPath(folder) / f".{name}.{secrets.token_hex(6)}.tmp")
        with self._lock:
            sftp = self._ensure_sftp()
            try:
                if mode is None:
                    try:
                        mode = sftp.stat(path).st_mode & 0o7777
                    except FileNotFoundError:
                        pass  # new file: the server's default mode
                with sftp.open(tmp, "wbx") as f:
                    if mode is not None:
                        f.chmod(mode)  # before the data, so a private file is never readable
                    f.write(data)
                sftp.posix_rename(tmp, path)
            except (paramiko.SSHException, EOFError) as e:
                raise HostUnreachable(self.host, self.address, self.port,
                                      f"connection lost while writing {remote_path}: {e}") from None
            except BaseException:
                try:
                    sftp.remove(tmp)
                except Exception:
                    pass
                raise

    def get(self, remote_path: str) -> bytes:
        with self._lock:
            sftp = self._ensure_sftp()
            try:
                with sftp.open(_sftp_path(remote_path), "rb") as f:
                    f.prefetch()
                    return f.read()
            except (paramiko.SSHException, EOFError) as e:
                raise HostUnreachable(self.host, self.address, self.port,
                                      f"connection lost while reading {remote_path}: {e}") from None

    def _ensure_sftp(self) -> paramiko.SFTPClient:
        client = self._ensure_client()
        if self._sftp is None or self._sftp.get_channel().closed:
            try:
                self._sftp = client.open_sftp()
            except (paramiko.SSHException, EOFError, OSError) as e:
                raise HostUnreachable(self.host, self.address, self.port,
                                      f"cannot open SFTP: {e}") from None
        return self._sftp

    # -- closing -----------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self._drop()

    def _drop(self) -> None:
        if self._sftp is not None:
            self._sftp.close()
            self._sftp = None
        if self._client is not None:
            self._client.close()
            self._client = None
        if self.proxy is not None:
            self.proxy.close()


def _feed(chan: paramiko.Channel, data: bytes) -> None:
    try:
        chan.sendall(data)
        chan.shutdown_write()
    except (OSError, EOFError, paramiko.SSHException):
        pass  # the command exited or the connection dropped; run() reports that


def _sftp_path(remote_path: str) -> str:
    # SFTP paths are relative to the login home; it does not expand "~".
    if remote_path == "~":
        return "."
    if remote_path.startswith("~/"):
        return remote_path[2:]
    return remote_path


def command_summary(command: str, limit: int = 240) -> str:
    """A command for a message: whole when short, else cut at a space (never mid-path or
    mid-word) and saying how much was left out."""
    flat = " ".join(command.split())
    if len(flat) <= limit:
        return flat
    cut = flat.rfind(" ", 0, limit)
    head = flat[:cut if cut > limit // 2 else limit]
    return f"{head} … ({len(flat) - len(head):,} more characters)"
