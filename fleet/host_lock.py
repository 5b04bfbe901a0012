"""One fleet run per host at a time: a lock taken on the host for the whole of a run.

Two operators (or cron and a person) running `fleet-update` at once used to leave the fleet
split between two shas, each recap claiming success. Now each run, right after reading a
host's facts, takes an exclusive `flock` on `<runtime_dir>.lock` (beside the runtime folder, so
it exists before the first deploy) through a small Python process on the host that keeps it
until the run releases it, or until the connection drops (sshd then ends the process, and the
kernel drops the lock: a crashed operator never leaves a host locked). The lock file says who
holds it; a second run fails that host at once, naming the holder, and changes nothing there.
The host's own Python runs it (macOS has no flock(1)).
"""

from __future__ import annotations

import getpass
import os
import shlex
import socket
import time

from fleet.connections import Connection
from fleet.facts import sh_path

# argv: the lock file and the owner text. Prints LOCKED (and holds the lock until its stdin
# closes) or HELD <the holder's owner text> (exit 75, EX_TEMPFAIL).
LOCK_SCRIPT = r"""
import fcntl, os, sys
path, owner = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except OSError:
    held = os.pread(fd, 500, 0).decode("utf-8", "replace").strip() or "another run (no owner noted)"
    print("HELD " + held, flush=True)
    sys.exit(75)
os.ftruncate(fd, 0)
os.pwrite(fd, owner.encode() + b"\n", 0)
print("LOCKED", flush=True)
sys.stdin.read()
os.ftruncate(fd, 0)
"""


class HostLocked(Exception):
    """Another run holds the host; the message names it."""


def owner_text(title: str, sha: str) -> str:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return f"{getpass.getuser()}@{socket.gethostname()} pid {os.getpid()} since {stamp} ({title} {sha[:12]})"


def lock_path(runtime_dir: str) -> str:
    return runtime_dir.rstrip("/") + ".lock"


def take(conn: Connection, python: str, runtime_dir: str, owner: str):
    """The lock on this host, as a `Held` (call `.release()` at the end of the run)."""
    path = lock_path(runtime_dir)
    # -S: no site import (the script needs only the standard library), a third of the start-up.
    command = f"{sh_path(python)} -S -c {shlex.quote(LOCK_SCRIPT)} {sh_path(path)} {shlex.quote(owner)}"
    held = conn.hold(command, timeout=30)
    if held.first_line == "LOCKED":
        return held
    held.release()
    if held.first_line.startswith("HELD "):
        raise HostLocked(f"another fleet run holds {conn.host}: {held.first_line[5:]}; nothing was changed "
                         f"here (run again when it is done)")
    raise HostLocked(f"could not take the run lock {path} on {conn.host}: {held.first_line or 'no answer'}")
