"""Write a whole file so that a crash leaves the old file or the new one, never a mix.

The one way this runtime replaces a file (soul.json snapshots, config.yaml, SKILL.md):
a temp file in the same folder, written and fsynced, renamed over the target, then the
folder fsynced so the rename itself survives a power cut.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

TEMP_SUFFIX = ".tmp"


class FolderSyncError(OSError):
    """The new file is in place (the rename happened), but the folder could not be synced,
    so the rename may not survive a power cut. Unlike any other failure here, the file now
    holds the new data: a caller must not report the write as not made."""


def file_signature(st: os.stat_result) -> tuple[int, int, int, int]:
    """What tells one version of a file from another (a rename over it, a write to it)."""
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


def temp_prefix(path: Path) -> str:
    return f".{path.name}."


def fsync_folder(folder: Path) -> None:
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_atomically(path: Path, data: bytes, *, mode: int | None = None, default_mode: int = 0o644) -> None:
    """Replace `path` with `data`. `mode` forces the file's mode from the first byte on;
    otherwise an existing file keeps its mode and, when we may, its owner (a new one gets
    `default_mode`). A temp file left by a failed write is removed before raising."""
    owner = None
    if mode is None:
        try:
            st = path.stat()
            mode, owner = st.st_mode & 0o7777, (st.st_uid, st.st_gid)
        except FileNotFoundError:
            mode = default_mode
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=temp_prefix(path), suffix=TEMP_SUFFIX)
    try:
        os.fchmod(fd, mode)
        if owner and owner != (os.geteuid(), os.getegid()):
            with contextlib.suppress(PermissionError):
                os.fchown(fd, *owner)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(temp, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        Path(temp).unlink(missing_ok=True)
        raise
    try:
        fsync_folder(path.parent)
    except OSError as exc:
        raise FolderSyncError(exc.errno, exc.strerror, str(path.parent)) from None


def sweep_temp_files(path: Path) -> None:
    """Remove temp files a killed writer left beside `path`. Call only while holding the
    lock that serialises writers of `path`, or a live writer's temp file goes too."""
    for stale in path.parent.glob(temp_prefix(path) + "*" + TEMP_SUFFIX):
        with contextlib.suppress(OSError):
            stale.unlink()
