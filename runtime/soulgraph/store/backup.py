"""A consistent copy of a live soul file, and putting one back.

soul.json alone is not the memory: the changes since it was last written whole sit in
soul.json.journal, and a compaction can replace both at any moment. So a copy made file by
file (`cp`, a backup tool, `hermes backup`) can miss recent writes or pair a snapshot with a
journal that does not continue it. `backup()` instead reads the graph the way a server does,
under the write lock, and writes it as one snapshot (soul.json's own format, no journal):

- The lock is held only to catch up on the journal, which makes the copy a point in time:
  every change acknowledged before the backup began is in it. The graph was read before the
  lock was taken, and the encoding is done after it is let go (the graph in hand is this
  process's own, nothing changes it), so writers wait about as long as for one small read.
- The copy is written atomically with mode 0600, then read back as a soul file and compared
  with what was meant to be written; a copy that does not verify is removed.

`restore()` installs a backup's graph through `SoulFile.save()`: the new snapshot is numbered
above anything on disk, so servers still serving the file read it whole at their next call,
and a fresh journal starts. It refuses to replace a soul that holds memories unless told to,
and when it replaces one it first keeps a verified backup of it, all under one hold of the
lock, so no write lands between the copy it keeps and the replacement.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from soulgraph.engine.graph import SoulGraph
from soulgraph.store import snapshot
from soulgraph.store.atomic import write_atomically
from soulgraph.store.soulfile import SoulFile, SoulFileError
from soulgraph.store.image_file import image_path
from soulgraph.store.vectors import SUFFIX as VECTORS_SUFFIX


class BackupError(Exception):
    """The backup or restore was not made; the message names the file and the problem."""


def soul_exists(soul: SoulFile) -> bool:
    """Is there anything at this path to read (a soul.json, its journal, or a link to one)?"""
    return soul.path.exists() or soul.journal_path.exists() or soul.given_path.is_symlink()


def backup(soul_path: str | os.PathLike[str], dest: str | os.PathLike[str], *, force: bool = False,
           lock_timeout: float = 30.0) -> dict[str, Any]:
    """Write a consistent, verified copy of the soul at `soul_path` to `dest` (a file, or a
    folder: then `<name>-<UTC time>.json` inside it). Refuses an existing file unless
    `force`. Returns the report the CLI prints; raises BackupError."""
    started = time.monotonic()
    soul = SoulFile(soul_path, lock_timeout=lock_timeout)
    if not soul_exists(soul):
        raise BackupError(f"no soul file at {soul.given_path} (neither it nor {soul.journal_path.name} exists)")
    target = _destination(dest, soul, force)
    try:
        soul.graph()  # the whole read, before the lock: writers wait only for the catch-up below
        with soul._locked():
            locked_at = time.monotonic()
            graph = soul.graph()
            seq = soul.seq
            lock_seconds = time.monotonic() - locked_at
    except SoulFileError as exc:
        raise BackupError(f"{exc}; no backup made") from None
    size = _write_verified(graph, seq, soul, target)
    return {"soul_file": str(soul.path), "path": str(target), "seq": seq, "nodes": len(graph),
            "hypotheses": len(graph.branch), "bytes": size, "lock_seconds": round(lock_seconds, 6),
            "seconds": round(time.monotonic() - started, 6), "ok": True}


def restore(backup_path: str | os.PathLike[str], soul_path: str | os.PathLike[str], *, force: bool = False,
            lock_timeout: float = 30.0) -> dict[str, Any]:
    """Replace the soul at `soul_path` with the graph in `backup_path` (a backup, or any soul
    file). A soul that holds memories is replaced only with `force`, and is first kept as a
    verified backup beside it (named in the report). Raises BackupError."""
    started = time.monotonic()
    source = SoulFile(backup_path)
    if not soul_exists(source):
        raise BackupError(f"no backup at {source.given_path}")
    target = SoulFile(soul_path, lock_timeout=lock_timeout)
    if _same_file(source.path, target.path):
        raise BackupError(f"{source.path} is the soul file itself; nothing to restore")
    try:
        graph = source.graph()
    except SoulFileError as exc:
        raise BackupError(f"{exc}; cannot be restored, {target.path} not touched") from None
    restored_seq = source.seq
    expected = _image(graph)  # before save() takes the graph over
    kept: dict[str, Any] | None = None
    try:
        target.vet(graph)  # the scan of every string, before the writers' lock (save would do it under it)
        with target._locked():
            locked_at = time.monotonic()
            if soul_exists(target):
                try:
                    current = target.graph()
                except SoulFileError as exc:
                    raise BackupError(f"the soul there cannot be read ({exc}), so it cannot be kept before it "
                                      "is replaced; not restored. Move soul.json and its journal aside first") from None
                if (len(current) or current.branch) and not force:
                    raise BackupError(f"{target.path} holds {len(current)} memories; not replaced. Give --force to "
                                      "replace it (it is kept as a backup beside it first)")
                kept_path = _destination(target.path.parent, target, False, label="before-restore")
                kept_size = _write_verified(current, target.seq, target, kept_path)
                kept = {"path": str(kept_path), "seq": target.seq, "nodes": len(current), "bytes": kept_size}
            target.save(graph)
            lock_seconds = time.monotonic() - locked_at
    except SoulFileError as exc:
        raise BackupError(f"{exc}; not restored{_kept_note(kept)}") from None
    # What a server opening the file now would read.
    check = SoulFile(target.path)
    try:
        installed = check.graph()
    except SoulFileError as exc:
        raise BackupError(f"the restored soul does not load ({exc}){_kept_note(kept)}") from None
    if _image(installed) != expected:
        raise BackupError(f"the restored soul does not hold what {source.path} holds{_kept_note(kept)}")
    return {"soul_file": str(target.path), "restored_from": str(source.path), "backup_seq": restored_seq,
            "seq": check.seq, "nodes": len(installed), "hypotheses": len(installed.branch), "kept": kept,
            "lock_seconds": round(lock_seconds, 6), "seconds": round(time.monotonic() - started, 6), "ok": True}


def _kept_note(kept: dict[str, Any] | None) -> str:
    return f"; the soul it replaced is kept at {kept['path']}" if kept else ""


def _destination(dest: str | os.PathLike[str], soul: SoulFile, force: bool, label: str = "") -> Path:
    """The backup file `dest` names: itself, or a new timestamped name when it is a folder
    (an existing one, or a path written with a trailing slash)."""
    text = os.fspath(dest)
    path = Path(text).expanduser().absolute()
    if path.is_dir() or text.endswith(os.sep):
        stem = soul.path.name.removesuffix(".json") or soul.path.name
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        base = "-".join(part for part in (stem, label, stamp) if part)
        path = path / f"{base}.json"
        number = 1
        while path.exists() or path.with_name(path.name + ".journal").exists():
            number += 1
            path = path.with_name(f"{base}-{number}.json")
        return path
    for part, name in ((soul.path, "the soul file itself"), (soul.journal_path, "its journal"),
                       (soul.lock_path, "its lock file"), (soul.path.with_name(soul.path.name + VECTORS_SUFFIX),
                                                           "its vectors file"),
                       (image_path(soul.path), "its load image")):
        if _same_file(path, part):
            raise BackupError(f"{path} is {name}; a backup goes to another file")
    if path.exists() and not force:
        raise BackupError(f"{path} already exists; not overwritten (give --force to replace it)")
    journal = path.with_name(path.name + ".journal")
    if journal.exists():
        # A snapshot is always read with the journal beside it: this one would be too.
        raise BackupError(f"{journal} exists beside {path}, and would be read as part of the backup; "
                          "choose another name")
    return path


def _same_file(a: Path, b: Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _image(graph: SoulGraph, seq: int = 0, saved_at: float = 0.0) -> bytes:
    """The graph as a snapshot encodes it: two graphs with the same image hold the same
    memories, edges, pins, hypotheses and audit, field for field. (Encoding marks the graph
    clean, so this is only for graphs no soul file will write again.)"""
    return snapshot.encode(graph, seq, saved_at, {})


def _write_verified(graph: SoulGraph, seq: int, soul: SoulFile, target: Path) -> int:
    """Write `graph` at `seq` as a snapshot at `target` (atomically, 0600), read it back and
    compare. Returns its size; removes it and raises BackupError when it does not verify."""
    saved_at = soul.clock()
    data = _image(graph, seq, saved_at)
    try:
        write_atomically(target, data, mode=0o600)
    except OSError as exc:
        raise BackupError(f"{target}: cannot be written ({exc.strerror or exc}); no backup made") from None
    copy = SoulFile(target)
    try:
        problem = None
        written = copy.graph()
        if copy.seq != seq:
            problem = f"it holds change {copy.seq}, not {seq}"
        elif len(written) != len(graph):
            problem = f"it holds {len(written)} memories where {len(graph)} were written"
        elif _image(written, seq, saved_at) != data:
            problem = "what it holds differs from what was written"
    except SoulFileError as exc:
        problem = str(exc)
    if problem:
        target.unlink(missing_ok=True)
        raise BackupError(f"{target}: the backup did not verify ({problem}); removed")
    return len(data)
