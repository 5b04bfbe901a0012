"""A fault-injecting file layer for the store's tests: the store's own calls to `os` (and
`tempfile.mkstemp`) go through it, and a test arms it to fail one of them.

Every call that changes a file is a *fault point*: creating or opening a file for writing,
`write`, `pwrite`, `ftruncate`, `fsync`, `fdatasync`, `replace`, `unlink` and `mkstemp`. Armed
with `fail_at(k, errno)`, the k-th point from now raises that OSError once (a write may first
put part of its bytes down, as a full disk does); with `sticky=True` every point after it fails
too, as a disk that stays full (ENOSPC: only the calls that need space) or a file system gone
read-only or bad (EROFS, EIO: all of them). Armed with `crash_at(k)`, the k-th point is
where the process dies: a write puts down some prefix of its bytes, then `Crash` (a
BaseException, so nothing in the store can swallow it) is raised, and every later call to the
layer raises it again, so no clean-up runs that a killed process would not have run. What a
crash does not model: the loss of data the kernel had not yet written to the disk (a power
cut); a killed process leaves the page cache as it was, and so does this.

Reads are never faulted. Used by tests only: `installed(plan)` swaps the layer into the store's
modules and puts the real `os` back afterwards.
"""

from __future__ import annotations

import contextlib
import errno as errno_codes
import os as real_os
import random
import tempfile as real_tempfile
from typing import Any, Iterator

from soulgraph.store import atomic, journal, soulfile

STORE_MODULES = (soulfile, atomic, journal)
_WRITE_FLAGS = real_os.O_WRONLY | real_os.O_RDWR | real_os.O_CREAT | real_os.O_TRUNC | real_os.O_APPEND


class Crash(BaseException):
    """The process died at this point."""


class FaultPlan:
    """What the next fault is, and a record of the points passed."""

    def __init__(self, rng: random.Random | None = None):
        self.rng = rng or random.Random(0)
        self.countdown: int | None = None
        self.kind = ""  # "error" or "crash"
        self.errno = 0
        self.sticky = False
        self.failing = False  # a sticky fault has fired: later points fail too
        self.dead = False
        self.points: list[str] = []  # every fault point passed since the last arm, by name
        self.fired: str | None = None  # the point where the armed fault happened

    def fail_at(self, k: int, code: int, *, sticky: bool = False) -> None:
        self._arm(k, "error")
        self.errno, self.sticky = code, sticky

    def crash_at(self, k: int) -> None:
        self._arm(k, "crash")

    def _arm(self, k: int, kind: str) -> None:
        self.countdown, self.kind, self.points, self.fired = k, kind, [], None
        self.sticky = self.failing = False

    def disarm(self) -> None:
        self.countdown, self.dead, self.failing = None, False, False

    def point(self, name: str) -> str | None:
        """Called at each fault point: None to go on, else "error" or "crash"."""
        if self.dead:
            raise Crash(f"already dead (at {self.fired})")
        self.points.append(name)
        if self.failing:
            needs_space = name in ("write", "pwrite", "open", "mkstemp", "ftruncate")
            return "error" if self.errno != errno_codes.ENOSPC or needs_space else None
        if self.countdown is None:
            return None
        if self.countdown > 0:
            self.countdown -= 1
            return None
        self.countdown, self.fired = None, name
        self.failing = self.kind == "error" and self.sticky
        return self.kind

    def at(self, name: str) -> None:
        """A fault point where nothing is written first: fail or die here if armed so."""
        what = self.point(name)
        if what == "error":
            raise self.error(name)
        if what == "crash":
            raise self.die(name)

    def error(self, name: str) -> OSError:
        return OSError(self.errno, f"{real_os.strerror(self.errno)} (injected at {name})")

    def die(self, name: str) -> Crash:
        self.dead = True
        return Crash(f"killed at {name}")


class FaultyOS:
    """The `os` module as the store sees it while a plan is installed."""

    def __init__(self, plan: FaultPlan):
        self._plan = plan

    def __getattr__(self, name: str) -> Any:
        return getattr(real_os, name)

    def _simple(self, name: str, call, *args):
        self._plan.at(name)
        return call(*args)

    def open(self, path, flags, mode=0o777, *, dir_fd=None):
        if flags & _WRITE_FLAGS:
            self._plan.at("open")
        elif self._plan.dead:
            raise Crash("already dead")
        return real_os.open(path, flags, mode, dir_fd=dir_fd)

    def _write_part(self, name: str, data, put) -> int:
        """A write: all of it, or (armed) a prefix of it and then the fault."""
        what = self._plan.point(name)
        if what is None:
            return put(data)
        view = memoryview(data)
        part = self._plan.rng.randrange(len(view) + 1) if len(view) else 0
        if what == "crash":
            if part:
                put(view[:part])
            raise self._plan.die(name)
        if part and self._plan.errno == errno_codes.ENOSPC:
            return put(view[:part])  # a short write, as a full disk gives; the next one fails
        raise self._plan.error(name)

    def write(self, fd, data):
        return self._write_part("write", data, lambda chunk: real_os.write(fd, chunk))

    def pwrite(self, fd, data, offset):
        return self._write_part("pwrite", data, lambda chunk: real_os.pwrite(fd, chunk, offset))

    def ftruncate(self, fd, length):
        return self._simple("ftruncate", real_os.ftruncate, fd, length)

    def fsync(self, fd):
        return self._simple("fsync", real_os.fsync, fd)

    def fdatasync(self, fd):
        return self._simple("fdatasync", real_os.fdatasync, fd)

    def replace(self, src, dst):
        return self._simple("replace", real_os.replace, src, dst)

    def rename(self, src, dst):
        return self._simple("rename", real_os.rename, src, dst)

    def unlink(self, path):
        return self._simple("unlink", real_os.unlink, path)

    def remove(self, path):
        return self._simple("unlink", real_os.unlink, path)


class FaultyTempfile:
    """`tempfile` with `mkstemp` as a fault point (creating a file can fail on a full disk)."""

    def __init__(self, plan: FaultPlan):
        self._plan = plan

    def __getattr__(self, name: str) -> Any:
        return getattr(real_tempfile, name)

    def mkstemp(self, *args, **kwargs):
        self._plan.at("mkstemp")
        return real_tempfile.mkstemp(*args, **kwargs)


@contextlib.contextmanager
def installed(plan: FaultPlan) -> Iterator[FaultPlan]:
    """The store's modules call through the faulty layer inside the block."""
    layer, temp = FaultyOS(plan), FaultyTempfile(plan)
    saved = [(module, module.os) for module in STORE_MODULES]
    saved_temp = atomic.tempfile
    try:
        for module in STORE_MODULES:
            module.os = layer
        atomic.tempfile = temp
        yield plan
    finally:
        for module, original in saved:
            module.os = original
        atomic.tempfile = saved_temp
