"""The `local` target: this machine, as the current user, without SSH."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import select
import tempfile
import time
from pathlib import Path

from .base import CommandTimeout, Connection, Held, Result, decode


class LocalConnection(Connection):
    def __init__(self, host: str = "local", *, shell: str = "/bin/sh"):
        self.host = host
        self.shell = shell

    def run(self, command: str, *, input: bytes | None = None, timeout: float | None = None,
            check: bool = False) -> Result:
        # Own process group, so a timeout kills the whole command, not just the shell.
        proc = subprocess.Popen(
            [self.shell, "-c", command],
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            raise CommandTimeout(self.host, command, timeout, decode(out or b""),
                                 decode(err or b"")) from None
        except BaseException:
            _kill_group(proc)
            proc.wait()
            raise
        return self._finish(Result(proc.returncode, decode(out), decode(err), command), check)

    def put(self, data: bytes, remote_path: str, mode: int | None = None) -> None:
        target = Path(remote_path).expanduser()
        if mode is None:
            try:
                mode = target.stat().st_mode & 0o7777
            except FileNotFoundError:
                mode = 0o666 & ~_umask()
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fchmod(f.fileno(), mode)
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def get(self, remote_path: str) -> bytes:
        return Path(remote_path).expanduser().read_bytes()

    def hold(self, command: str, *, timeout: float = 30.0) -> Held:
        proc = subprocess.Popen([self.shell, "-c", command], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
        line = b""
        deadline = time.monotonic() + timeout
        while not line.endswith(b"\n") and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            chunk = os.read(proc.stdout.fileno(), 1)
            if not chunk:
                break
            line += chunk

        def release() -> None:
            try:
                proc.stdin.close()
                proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                _kill_group(proc)
                proc.wait()
            proc.stdout.close()

        return Held(decode(line).strip(), release)

    def _open_stream(self, address: str, port: int) -> socket.socket:
        stream = socket.create_connection((address, port), timeout=10)
        stream.settimeout(None)
        return stream

    def close(self) -> None:
        pass


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _umask() -> int:
    # Read, not os.umask(): setting the umask to peek at it races with other threads.
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    return 0o022
