"""One fleet run per inventory at a time, on the operator: the fleet-wide run lock.

The per-host lock (fleet/host_lock.py) keeps two runs apart host by host, but two runs started
together could still leave the fleet split between two shas, each host consistent and the fleet
not. So fleet-update, bootstrap, restore and backup first take an exclusive `flock` on a file
under the operator's state folder ($XDG_STATE_HOME/soulfleet/run-locks, else
~/.local/state/soulfleet/run-locks), one per inventory, named after the inventory's resolved
path. The file says who holds it (pid, user, command, start time). A second run exits at once
naming the holder (exit 75, EX_TEMPFAIL: "try again later"), or with `--wait SECONDS` waits that
long for it. The kernel drops the lock when the holder dies, so a killed run never leaves the
fleet locked. `--check` runs change nothing and take no lock.

Runs with no inventory file (`local`) take a lock of their own, per user.
"""

from __future__ import annotations

import fcntl
import getpass
import hashlib
import json
import os
import re
import socket
import time
from pathlib import Path

EXIT_LOCKED = 75
POLL_SECONDS = 0.2


class RunLocked(Exception):
    """Another run holds this inventory's lock; the message names it."""


def state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "soulfleet" / "run-locks"


def lock_path(inventory: str | os.PathLike[str] | None) -> Path:
    """The lock file of an inventory (None: runs on this machine only, without one)."""
    if inventory is None:
        return state_dir() / "local.lock"
    resolved = str(Path(inventory).expanduser().resolve())
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(resolved).name)[:40] or "inventory"
    return state_dir() / f"{readable}-{hashlib.sha256(resolved.encode()).hexdigest()[:16]}.lock"


def describe_holder(text: str) -> str:
    try:
        held = json.loads(text)
        return (f"{held['command']!r} (pid {held['pid']}, {held['user']}@{held['host']}, "
                f"since {held['started']})")
    except (ValueError, KeyError, TypeError):
        return text.strip() or "another run (no owner noted)"


class RunLock:
    """The lock held for the length of a run; release() or the process's end lets it go."""

    def __init__(self, path: Path, fd: int):
        self.path, self._fd = path, fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.ftruncate(fd, 0)
            finally:
                os.close(fd)  # closing the file drops the flock

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def take(inventory: str | os.PathLike[str] | None, command: str, wait: float = 0.0) -> RunLock:
    """The run lock of this inventory, waiting at most `wait` seconds for it; raises RunLocked."""
    path = lock_path(inventory)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + max(0.0, wait)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() >= deadline:
                    holder = describe_holder(os.pread(fd, 4000, 0).decode("utf-8", "replace"))
                    where = f" for {Path(inventory).expanduser().resolve()}" if inventory else " (runs on this machine)"
                    waited = f" after waiting {wait:g} s" if wait > 0 else ""
                    raise RunLocked(f"another fleet run holds the run lock{where}{waited}: {holder}. Nothing was "
                                    f"done. Run again when it is done, or give --wait SECONDS to wait for it "
                                    f"(lock file: {path})")
                time.sleep(POLL_SECONDS)
    except BaseException:
        os.close(fd)
        raise
    owner = {"pid": os.getpid(), "user": getpass.getuser(), "host": socket.gethostname(), "command": command,
             "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(owner) + "\n").encode(), 0)
    return RunLock(path, fd)
