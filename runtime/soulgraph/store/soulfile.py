"""A soul graph on disk: soul.json (the snapshot) plus soul.json.journal (changes since).

Guarantees:
- Durable before acknowledged: a change is one checksummed journal record, written and
  fdatasynced before `change()` returns. The cost does not grow with the graph.
- Exact failure semantics: a change that could not be made durable is taken back in
  memory too (the graph's own undo), and the error names the file and the OS's reason.
- Crash-safe: a crash leaves the snapshot whole (it is only ever replaced atomically)
  and at most a torn last journal record, which was never acknowledged and is ignored.
- Compaction: when the journal passes `journal_share` of the snapshot's size (and
  `journal_min_bytes`), the writer rewrites soul.json whole with the journal folded in,
  then starts an empty journal. soul.json stays a complete JSON document throughout.
- Shared: several processes may serve one file (Hermes' CLI and gateway each start a
  server). Writers take an exclusive lock (`soul.json.lock`, waited on for at most
  `lock_timeout` seconds). Before every answer a process reads only the journal records
  it has not applied yet; after another process compacted, it finishes the old journal
  through its open handle and carries on with the new one, without reading soul.json.
- Never overwrites what it cannot read: a damaged, foreign or newer-schema snapshot, a
  damaged journal, or a journal that does not continue the snapshot stops every read
  and write with `SoulFileError`, and both files are left as they are.
- A symlinked soul.json is followed: the target is read and replaced, the link stays.
  A dangling link, a read-only soul.json or journal is refused with a clear message.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gc
import json
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Iterator

from soulgraph.engine import record
from soulgraph.engine.graph import Clock, DEFAULT_RECENCY_WEIGHT, SoulGraph
from soulgraph.engine.heap import give_back_freed_memory
from soulgraph.engine.load import paused_gc
from soulgraph.store import write_guard
from soulgraph.store import journal, snapshot
from soulgraph.store.atomic import FolderSyncError, fsync_folder, sweep_temp_files, write_atomically
from soulgraph.store.atomic import file_signature as _signature
from soulgraph.store.journal import JournalError
from soulgraph.store.image_file import ImageFile, image_path
from soulgraph.store.snapshot import FORMAT, SCHEMA, SnapshotError

# Files up to this size are read whole before the server answers; larger ones are checked
# by their header and read in the background, so start-up does not grow with the graph.
EAGER_LOAD_BYTES = 1 << 20
_JOURNAL_READ = 1 << 16


class SoulFileError(Exception):
    """The soul file cannot be used; the message names the file and the problem."""

    def __init__(self, path: Path, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path, self.problem = path, problem


class ChangeKept(SoulFileError):
    """The change is in the files and stays (in memory too), but something after it failed:
    the message says what. Raised instead of acknowledging, never instead of refusing."""


class ForgetIncomplete(ChangeKept):
    """A forget is in soul.json, but a file of this store still holds the forgotten text
    (`path`). The forget is not done until that file is gone, which the message says how
    to do."""


class NotSynced(ChangeKept):
    """soul.json was replaced, but its folder could not be synced: the change is in the file
    (every process reads it) and may not survive a power cut."""


def default_soul_file(environ: dict[str, str] | None = None) -> Path:
    """`$HERMES_HOME/soul.json`, else `~/.hermes/soul.json`. Never an OpenClaw path."""
    env = os.environ if environ is None else environ
    home = env.get("HERMES_HOME")
    base = Path(home).expanduser() if home else Path(env.get("HOME") or Path.home()) / ".hermes"
    return base / "soul.json"


# Opening for writing failed, but the file may still be read.
_READ_ONLY_ERRNOS = (errno.EACCES, errno.EPERM, errno.EROFS)
# A load reads soul.json, then its journal, without the lock: another process's compaction may
# replace both in between. The load then starts again, at most this many times in all.
LOAD_ATTEMPTS = 5


class _SnapshotReplaced(Exception):
    """soul.json was replaced after this load read it (a compaction elsewhere)."""


def _os_reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


class SoulFile:
    """One soul.json and its journal, and the graph they hold, kept in step with other
    processes."""

    def __init__(self, path: str | os.PathLike[str], clock: Clock = time.time,
                 recency_weight: float = DEFAULT_RECENCY_WEIGHT, *, journal_share: float = 0.25,
                 journal_min_bytes: int = 1 << 20, lock_timeout: float = 30.0, freeze: bool = False,
                 strength_half_life: float = record.STRENGTH_HALF_LIFE, keep_image: bool = False):
        """`freeze`: for a process that serves this one graph for its whole life (the MCP
        server). After each full read the process's objects are frozen out of the garbage
        collector's sight (`gc.freeze`), so no collection walks a big graph during a tool
        call. Freezing is process-wide and a frozen graph is never freed, so a process that
        opens many soul files (tests, tools, harnesses) must leave it off.

        `keep_image`: for a process that will be started again on this soul (the MCP server,
        the memory service): a load of a large snapshot leaves its image beside it, so the next
        load of the same snapshot reads that instead of parsing the file (`store/image_file.py`).
        Any process reads an image that is there."""
        self.given_path = Path(path).expanduser().absolute()
        # A symlink is followed: its target is the file read and replaced, the link stays.
        self.path = Path(os.path.realpath(self.given_path)) if self.given_path.is_symlink() else self.given_path
        self.journal_path = self.path.with_name(self.path.name + ".journal")
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.clock = clock
        self.recency_weight = recency_weight
        self.strength_half_life = strength_half_life  # given to every graph this file holds
        self.journal_share = journal_share
        self.journal_min_bytes = journal_min_bytes
        self.lock_timeout = lock_timeout
        self.freeze = freeze
        self.keep_image = keep_image
        self._graph: SoulGraph | None = None
        self._mutex = threading.RLock()  # a background preload and a tool call may both read
        self._preloading: threading.Thread | None = None
        # node id -> its JSON line, while a snapshot is being made. Not kept after it (0.37 kB a
        # memory, 37 MB at 100,000): the next snapshot takes the unchanged lines from the file
        # (`_reuse_snapshot_lines`), a tenth of what encoding them again costs.
        self._encoded: dict[str, str] = {}
        self._seq = 0  # the last change applied to the graph in memory
        self._schema: int | None = None  # of soul.json on disk; None: there is none
        self._snapshot_seq = 0
        self._snapshot_sig: tuple[int, int, int, int] | None = None
        self._snapshot_size = 0
        self._journal_fd = -1  # the journal we follow, kept open across compactions
        self._journal_writable = False
        self._journal_sig: tuple[int, int] | None = None  # (dev, inode) of that journal
        self._journal_base = -1
        self._journal_offset = 0  # end of the last sound record read
        self.torn_tail_bytes = 0  # bytes after it that were not a sound record when last read
        self.compactions = 0
        self.warnings: list[str] = []
        # The thread of this object that holds soul.json.lock (None: none). While it is held no
        # writer is mid-append, and that thread may take the lock again (restore keeps the old
        # soul and saves the new one under one hold).
        self._lock_holder: int | None = None

    def __del__(self) -> None:
        if self._journal_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._journal_fd)

    @property
    def seq(self) -> int:
        """The number of the last change this process has applied."""
        return self._seq

    # ------------------------------------------------------------------ reading
    @property
    def loaded(self) -> SoulGraph:
        """The graph as last read or written, without looking at the files again."""
        return self._graph if self._graph is not None else self.graph()

    def graph(self) -> SoulGraph:
        """The graph as the files hold it now: the records other processes have appended
        since the last look are applied; only a replaced snapshot is read again."""
        with self._mutex:
            return self._current()

    def _current(self) -> SoulGraph:
        if self._graph is None:
            self._load()
        else:
            self._catch_up()
        assert self._graph is not None
        return self._graph

    def _load(self) -> None:
        """Read soul.json and replay its journal: the whole state, from scratch."""
        if self.given_path.is_symlink() and not os.path.exists(self.path):
            raise SoulFileError(self.given_path, f"is a symlink to {self.path}, which does not exist; not read")
        self._close_journal()
        if self._graph is not None and self.freeze:
            # The old graph was frozen out of the collector's sight (below); a graph is a
            # reference cycle, so without this a re-read would keep it in memory for good.
            self._graph = None
            gc.unfreeze()
        with paused_gc():  # a load makes ~10 objects per node, none garbage: no collections meanwhile
            self._load_paused()
            if self.freeze:
                # A big graph is hundreds of thousands of long-lived objects: frozen, no later
                # collection walks them, so a tool call never pays tens of milliseconds for one.
                gc.freeze()
        # What the load freed among what it keeps (the parse, each word's list of memories) goes
        # back to the system: 20 MB at 100,000 memories, for 2 ms.
        give_back_freed_memory()

    def _load_paused(self) -> None:
        for _ in range(LOAD_ATTEMPTS):
            try:
                return self._read_snapshot_and_journal()
            except _SnapshotReplaced:
                continue  # the journal now follows a newer soul.json: read that one
        raise SoulFileError(self.path, f"was replaced by another process's compaction {LOAD_ATTEMPTS} times while "
                                       "it was read; not loaded (try again)")

    def _read_snapshot_and_journal(self) -> None:
        try:
            with open(self.path, "rb") as handle:
                st = os.fstat(handle.fileno())
                raw = handle.read()
        except FileNotFoundError:
            graph, schema, seq, sig, size = SoulGraph(clock=self.clock, recency_weight=self.recency_weight), None, 0, None, 0
        except IsADirectoryError:
            raise SoulFileError(self.path, "is a directory, not a soul file") from None
        except OSError as exc:
            raise SoulFileError(self.path, f"cannot be read ({_os_reason(exc)})") from None
        else:
            try:
                sig, size = _signature(st), len(raw)
                graph, schema, seq = snapshot.decode(raw, self.clock, self.recency_weight,
                                                     ImageFile(self.path, sig, writable=self.keep_image))
            except SnapshotError as exc:
                raise SoulFileError(self.path, f"{exc}; left untouched") from None
            del raw
        graph.strength_half_life = self.strength_half_life
        # Every write to a graph this store holds passes the write guard (memory/guard.py, installed
        # through store/write_guard.py): what the files hold was vetted when written; a `save`
        # elsewhere vets it again.
        graph.guard = write_guard.new_guard(vetted=not graph.nodes and not graph.branch)
        self._graph, self._schema, self._snapshot_seq, self._snapshot_sig = graph, schema, seq, sig
        self._snapshot_size, self._seq, self._encoded = size, seq, {}
        self._open_journal()

    def _open_journal(self) -> bool:
        """Open the journal beside the snapshot and apply its records. Returns False when
        there is none."""
        try:
            fd = os.open(self.journal_path, os.O_RDWR)
            writable = True
        except FileNotFoundError:
            return False  # none yet (a new file, schema 1): the first write starts one
        except OSError as exc:
            if exc.errno not in _READ_ONLY_ERRNOS:
                raise SoulFileError(self.journal_path, f"cannot be read ({_os_reason(exc)})") from None
            try:  # a 0444 journal or a read-only file system: reading still works, writes are refused
                fd, writable = os.open(self.journal_path, os.O_RDONLY), False
            except OSError as exc:
                raise SoulFileError(self.journal_path, f"cannot be read ({_os_reason(exc)})") from None
        try:
            st = os.fstat(fd)
            data, found = self._scan_journal(fd, 0)
            if not data:
                raise JournalError(f"{self.journal_path}: empty journal (no header)")
            if not found.records:
                raise JournalError(f"{self.journal_path}: no sound header line")
            base = journal.parse_header(found.records[0], self.journal_path)
            if found.damaged_at is not None:
                raise JournalError(f"{self.journal_path}: {found.damage()}")
            if (self._schema is None or base > self._snapshot_seq) and self._snapshot_replaced():
                raise _SnapshotReplaced  # a compaction wrote soul.json, then this journal, since our read
            if self._schema is None:
                raise JournalError(f"{self.path} is missing but its journal {self.journal_path.name} is there "
                                   f"(continuing change {base}); restore soul.json or move the journal aside")
            if base > self._snapshot_seq:
                raise JournalError(f"{self.journal_path} continues change {base} but soul.json holds only "
                                   f"{self._snapshot_seq}: soul.json is older than its journal (restored from a "
                                   "backup?); move one of them aside")
            self._journal_fd, self._journal_writable = fd, writable
            self._journal_sig = (st.st_dev, st.st_ino)
            self._journal_base = base
            self._apply(found.records[1:])
            self._journal_offset, self.torn_tail_bytes = found.consumed, found.torn_tail_bytes
        except JournalError as exc:
            self._close_journal(fd)
            raise SoulFileError(self.journal_path, f"{_strip_path(exc, self.journal_path)}; left untouched") from None
        except BaseException:
            self._close_journal(fd)
            raise
        return True

    def _snapshot_replaced(self) -> bool:
        """Whether soul.json is no longer the file this load read (or now exists where none was)."""
        try:
            return _signature(os.stat(self.path)) != self._snapshot_sig
        except OSError:
            return False

    def _apply(self, records: list[dict]) -> None:
        """Apply sound records read from the journal we follow, in order."""
        assert self._graph is not None
        for record in records:
            seq = record.get("seq")
            if self._journal_base < self._snapshot_seq and type(seq) is int and seq <= self._snapshot_seq:
                continue  # a journal the snapshot already holds (compaction was interrupted)
            journal.check_record(record, self._seq + 1, self.journal_path)
            try:
                self._graph.apply_change(record, snapshot.parse_node)
            except (KeyError, TypeError, ValueError) as exc:
                raise JournalError(f"{self.journal_path}: record {seq} cannot be applied ({exc})") from None
            self._seq = seq

    def _catch_up(self) -> None:
        """Apply what other processes wrote since our last look, reading as little as we can."""
        if self._journal_fd >= 0:
            self._read_journal_tail()
        try:
            journal_st = os.stat(self.journal_path)
            journal_sig = (journal_st.st_dev, journal_st.st_ino)
        except FileNotFoundError:
            journal_sig = None
        except OSError as exc:
            raise SoulFileError(self.journal_path, f"cannot be read ({_os_reason(exc)})") from None
        try:
            snapshot_sig = _signature(os.stat(self.path))
        except FileNotFoundError:
            snapshot_sig = None
        except OSError as exc:
            raise SoulFileError(self.path, f"cannot be read ({_os_reason(exc)})") from None
        if journal_sig == self._journal_sig and snapshot_sig == self._snapshot_sig:
            return
        # Replaced: another process compacted or saved (or someone edited the files by hand).
        if snapshot_sig is not None and journal_sig is not None and self._journal_sig is not None:
            try:
                header = snapshot.read_header(snapshot.head_of(self.path))
            except OSError:
                header = None
            if header and header[0] == FORMAT and header[1] == SCHEMA and header[2] == self._seq:
                # The new snapshot is exactly what we hold: follow its journal from the start.
                if self._follow_new_journal(snapshot_sig, header[2]):
                    return
                if journal_sig == self._journal_sig:
                    return  # its journal is not started yet: we are current, look again next time
        self._load()

    def _follow_new_journal(self, snapshot_sig: tuple[int, int, int, int], seq: int) -> bool:
        try:
            fd = os.open(self.journal_path, os.O_RDWR)
        except OSError:
            return False  # a full read (which also opens a read-only journal) follows
        try:
            st = os.fstat(fd)
            first = os.pread(fd, 4096, 0)
            end = first.find(b"\n")
            header = journal.decode_line(first[:end]) if end >= 0 else None
            if header is None or journal.parse_header(header, self.journal_path) != seq:
                os.close(fd)
                return False
        except (OSError, JournalError):
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        self._close_journal()
        self._journal_fd, self._journal_writable = fd, True
        self._journal_sig, self._journal_base, self._journal_offset = (st.st_dev, st.st_ino), seq, end + 1
        self._snapshot_seq, self._snapshot_sig, self._snapshot_size, self._schema = seq, snapshot_sig, snapshot_sig[3], SCHEMA
        self._read_journal_tail()
        return True

    def _scan_journal(self, fd: int, offset: int) -> tuple[bytes, journal.Scan]:
        """The journal's bytes from `offset` and what they hold. A reader that does not hold
        the write lock looks twice at a line that seems damaged, so a record being written
        at that moment is never taken for damage."""
        data = _read_all(fd, offset)
        found = journal.scan(data)
        if found.damaged_at is not None and self._lock_holder is None:
            time.sleep(0.005)  # a record is one pwrite: microseconds
            data = _read_all(fd, offset)
            found = journal.scan(data)
        return data, found

    def _read_journal_tail(self) -> None:
        try:
            data, found = self._scan_journal(self._journal_fd, self._journal_offset)
        except OSError as exc:
            raise SoulFileError(self.journal_path, f"cannot be read ({_os_reason(exc)})") from None
        if not data:
            self.torn_tail_bytes = 0
            return
        if found.damaged_at is not None:
            raise SoulFileError(self.journal_path, f"{found.damage(self._journal_offset)}; left untouched")
        try:
            self._apply(found.records)
        except JournalError as exc:
            self._graph = None  # the state is uncertain: read everything again next time
            raise SoulFileError(self.journal_path, f"{_strip_path(exc, self.journal_path)}; left untouched") from None
        self._journal_offset += found.consumed
        self.torn_tail_bytes = found.torn_tail_bytes

    def _close_journal(self, opened: int = -1) -> None:
        """Close the journal we follow, and `opened`: one just opened and not yet followed
        (a journal refused on every tool call must not cost a file descriptor each time)."""
        if opened >= 0 and opened != self._journal_fd:
            with contextlib.suppress(OSError):
                os.close(opened)
        if self._journal_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._journal_fd)
        self._journal_fd, self._journal_sig, self._journal_base = -1, None, -1
        self._journal_offset, self._journal_writable = 0, False

    # ------------------------------------------------------------------ serving
    def open_for_serving(self) -> bool:
        """Check the file before a server answers anyone, without making start-up wait on
        a big graph: a small file is read whole now; a large one only has its header checked
        (ours, a schema we read). Returns True when the graph is still to be read: call
        `preload()` when the client is not waiting (a damaged body found then surfaces as
        SoulFileError on every tool call, and is never overwritten).
        """
        if self.given_path.is_symlink() and not os.path.exists(self.path):
            raise SoulFileError(self.given_path, f"is a symlink to {self.path}, which does not exist; not read")
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            self.graph()  # a journal without its snapshot is refused now
            return False
        except OSError:
            size = 0  # let the full read report the problem
        if size <= EAGER_LOAD_BYTES:
            self.graph()
            return False
        header = snapshot.read_header(snapshot.head_of(self.path))
        if not header or header[0] != FORMAT:
            self.graph()  # not our layout: the full read says exactly what is wrong
            return False
        try:
            snapshot.check_schema(header[1])
        except SnapshotError as exc:
            raise SoulFileError(self.path, f"{exc}; left untouched") from None
        return True

    def preload(self) -> None:
        """Read the graph in a background thread (once); a tool call that needs it first waits."""
        if self._preloading is not None:
            return

        def read() -> None:
            # Under the mutex, so a tool call waits for the masks too instead of racing them.
            with self._mutex, contextlib.suppress(SoulFileError):  # reported again by the first call
                self._current().index.build_common_masks()

        self._preloading = threading.Thread(target=read, name="soul-preload", daemon=True)
        self._preloading.start()

    # ------------------------------------------------------------------ writing
    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        if self._lock_holder == threading.get_ident():
            yield  # already held by this thread: a flock on a second descriptor would wait for ourselves
            return
        try:
            try:
                fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
            except FileNotFoundError:  # no folder yet (a new soul): made once, not at every write
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise SoulFileError(self.lock_path, f"cannot take the write lock ({_os_reason(exc)}); not written") from None
        try:
            deadline = time.monotonic() + self.lock_timeout
            pause = 0.0005
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
                        raise SoulFileError(self.lock_path, f"another process (pid {holder}) has held the write lock "
                                                         f"for {self.lock_timeout:g} s; not written") from None
                    time.sleep(pause)
                    pause = min(pause * 2, 0.02)
            with contextlib.suppress(OSError):  # who holds it, for the message above
                # Written in place at a fixed width (no truncation: that is a metadata change,
                # paid at every write), and only when another process wrote it last.
                holder = b"%-15d\n" % os.getpid()
                if os.pread(fd, len(holder), 0) != holder:
                    os.pwrite(fd, holder, 0)
            self._lock_holder = threading.get_ident()
            try:
                yield
            finally:
                self._lock_holder = None
        finally:
            os.close(fd)  # closing releases the lock

    @contextlib.contextmanager
    def change(self) -> Iterator[SoulGraph]:
        """Change the graph under the write lock; durable when the block ends without error.

        If the block raises, or the change cannot be made durable, everything it did is
        taken back: the graph in memory stays equal to what the files hold.
        """
        with self._mutex, self._locked():
            graph = self._current()
            graph.begin()
            incomplete: ChangeKept | None = None
            try:
                yield graph
                change = graph.pending()
                if change is not None:
                    self._make_durable(graph, change)
            except ChangeKept as exc:
                incomplete = exc  # soul.json holds the change: keep it in memory too
            except BaseException:
                graph.rollback()
                raise
            graph.end()
            if incomplete is not None:
                raise incomplete
            if change is not None:
                self._compact_if_due(graph)

    def _make_durable(self, graph: SoulGraph, change: dict) -> None:
        self._refuse_read_only()
        forgotten = [entry["node"] for entry in change.get("audit", ()) if entry.get("action") == "forget"]
        if forgotten:
            # Forgetting must leave no copy in what we wrote: not in the journal's earlier
            # records, not in a backup. So the change is made durable by a whole new snapshot
            # and journal, never by a record appended after the content.
            contents = [image["content"] for image in map(graph.before_image, forgotten) if image]
            try:
                self._snapshot_change(graph, forgotten=contents)
            except NotSynced:
                self._scrub_backups(contents)
                raise
            self._scrub_backups(contents)
        elif self._can_append():
            self._append({"seq": self._seq + 1, **change})
        else:  # no journal that continues the snapshot (a new file, schema 1, an interrupted compaction)
            self._snapshot_change(graph)

    def _snapshot_change(self, graph: SoulGraph, *, forgotten: list[str] = ()) -> None:
        """Make the open change durable as a whole new snapshot (numbered as the next change).
        `forgotten`: texts a forget removed, which the old journal may hold: it must not
        outlive the new snapshot, even when no new journal can be started."""
        self._seq += 1
        try:
            self._compact(graph, "the change was not made")
        except NotSynced:
            self._remove_old_journal(forgotten)
            raise
        except BaseException:
            self._seq -= 1
            raise
        if self._journal_base != self._snapshot_seq:
            self._remove_old_journal(forgotten)

    def _remove_old_journal(self, forgotten: list[str]) -> None:
        """The new snapshot holds everything; a journal older than it that holds text a
        forget removed goes. Unlinking needs no free space, so this works on a full disk."""
        if not forgotten or self._journal_base == self._snapshot_seq:
            return
        try:
            data = self.journal_path.read_bytes()
        except FileNotFoundError:
            return
        except OSError:
            data = None  # cannot tell: remove it
        if data is not None and not any(needle in data for needle in _needles(forgotten)):
            return
        self._close_journal()
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.journal_path)
            fsync_folder(self.path.parent)
        except OSError as exc:
            raise ForgetIncomplete(self.journal_path, f"still holds the forgotten text and cannot be removed "
                                                      f"({_os_reason(exc)}); the memory is gone from "
                                                      f"{self.path.name}, but the forget is not complete "
                                                      "until this file is deleted") from None

    def _can_append(self) -> bool:
        return (self._schema == SCHEMA and self._journal_fd >= 0 and self._journal_writable
                and self._journal_base == self._snapshot_seq)

    def _refuse_read_only(self) -> None:
        for path in (self.path, self.journal_path):
            try:
                mode = os.stat(path).st_mode
            except OSError:
                continue
            if not mode & 0o222:
                raise SoulFileError(path, f"is read-only (mode {mode & 0o777:04o}); not written. "
                                       "Make it writable (chmod u+w) to record memories")

    def _append(self, record: dict) -> None:
        line = journal.encode_line(record)
        fd, offset = self._journal_fd, self._journal_offset
        try:
            if self.torn_tail_bytes or os.fstat(fd).st_size != offset:
                os.ftruncate(fd, offset)  # a torn record a dead writer left: never acknowledged
                self.torn_tail_bytes = 0
            view = memoryview(line)
            position = offset
            while view:
                written = os.pwrite(fd, view, position)
                view, position = view[written:], position + written
            os.fdatasync(fd)
        except OSError as exc:
            try:  # take the record back, so no reader ever applies it
                os.ftruncate(fd, offset)
            except OSError as undo_exc:
                self._record_left_behind(fd, offset, line, record["seq"], exc, undo_exc)
            with contextlib.suppress(OSError):
                os.fdatasync(fd)  # readers already see it cut; a power cut may bring back an unacknowledged record
            raise SoulFileError(self.journal_path, f"cannot write the journal ({_os_reason(exc)}); "
                                                "the change was not made") from None
        self._journal_offset = offset + len(line)
        self._seq = record["seq"]

    def _record_left_behind(self, fd: int, offset: int, line: bytes, seq: int, exc: OSError,
                            undo_exc: OSError) -> None:
        """A failed append whose record could not be cut off again (the file system went
        read-only or bad in between). An incomplete record is a torn tail that readers skip:
        the change was not made. A complete one is read by every process: the change stands,
        in memory too, but it is not known to be on the disk."""
        try:
            whole = os.fstat(fd).st_size >= offset + len(line) and os.pread(fd, len(line), offset) == line
        except OSError:
            whole = False
        if not whole:
            self.torn_tail_bytes = 1  # the next append cuts it off first
            raise SoulFileError(self.journal_path, f"cannot write the journal ({_os_reason(exc)}); the change was "
                                                f"not made (a partial record, which readers skip, could not be "
                                                f"removed: {_os_reason(undo_exc)})") from None
        self._journal_offset, self._seq = offset + len(line), seq
        raise NotSynced(self.journal_path, f"cannot sync the journal ({_os_reason(exc)}) and the record could not "
                                           f"be taken back ({_os_reason(undo_exc)}): the change is in the file and "
                                           "may not survive a power cut") from None

    def _compact_if_due(self, graph: SoulGraph) -> None:
        """Fold the journal into a new soul.json once it has grown past its share. The
        change is already durable, so a failure here is only a warning."""
        journal_bytes = self._journal_offset
        if journal_bytes <= max(self.journal_min_bytes, self.journal_share * self._snapshot_size):
            return
        try:
            self._compact(graph, "the change is saved in the journal; compaction is tried again after the next change")
        except SoulFileError as exc:
            self.warnings.append(str(exc))

    def _compact(self, graph: SoulGraph, consequence: str) -> None:
        """Write the whole graph as soul.json at the current seq, then an empty journal
        after it. Caller holds the lock. `consequence`: what a failed write means for the
        caller's change, said in the error."""
        if len(self._encoded) < len(graph.nodes) - len(graph.dirty):
            self._reuse_snapshot_lines(graph)
        data = snapshot.encode(graph, self._seq, self.clock(), self._encoded)
        unsynced: OSError | None = None
        try:
            if self._schema is not None and self._schema < SCHEMA:
                self._back_up_old_schema()
            sweep_temp_files(self.path)  # we hold the lock: any temp file here is from a writer that died
            try:
                write_atomically(self.path, data, mode=0o600)
            except FolderSyncError as exc:
                unsynced = exc  # the new snapshot is in place: carry on from it, then say so
            st = os.stat(self.path)
        except OSError as exc:
            self._encoded = {}  # the cache now runs ahead of the file: rebuild it next time
            raise SoulFileError(self.path, f"cannot be written ({_os_reason(exc)}); {consequence}") from None
        self._schema, self._snapshot_seq, self._snapshot_sig, self._snapshot_size = SCHEMA, self._seq, _signature(st), len(data)
        graph.dirty.clear()  # every node is now as this snapshot holds it
        self._encoded = {}
        graph.branch_dirty = False
        self.compactions += 1
        if unsynced is not None:
            # The old journal stays: with the new snapshot it is read correctly (its records
            # are skipped), and should the rename be lost in a power cut, the old snapshot
            # still has it. The next write starts a new one.
            raise NotSynced(self.path, f"was written, but its folder could not be synced ({_os_reason(unsynced)}); "
                                       "the change is in the file and may not survive a power cut")
        # The snapshot holds everything: from here on a failure only leaves an old journal
        # the snapshot already covers, which readers skip and the next write replaces.
        try:
            sweep_temp_files(self.journal_path)
            journal.write_new(self.journal_path, self._seq)
            fd = os.open(self.journal_path, os.O_RDWR)
            st = os.fstat(fd)
        except OSError as exc:
            self.warnings.append(f"{self.journal_path}: cannot start a new journal ({_os_reason(exc)})")
            return
        self._close_journal()
        self._journal_fd, self._journal_writable = fd, True
        self._journal_sig, self._journal_base = (st.st_dev, st.st_ino), self._seq
        self._journal_offset, self.torn_tail_bytes = st.st_size, 0

    def _reuse_snapshot_lines(self, graph: SoulGraph) -> None:
        """Take unchanged nodes' lines from the snapshot we loaded instead of encoding them."""
        try:
            with open(self.path, "rb") as handle:
                if _signature(os.fstat(handle.fileno())) != self._snapshot_sig:
                    return  # not the snapshot we loaded
                raw = handle.read()
        except OSError:
            return
        dirty = graph.dirty
        for node_id, line in snapshot.node_lines(raw).items():
            if node_id in graph.nodes and node_id not in dirty:
                self._encoded.setdefault(node_id, line)

    def _scrub_backups(self, contents: list[str]) -> None:
        """Remove the backups this store wrote that hold forgotten content."""
        needles = _needles(contents)
        stem = self.path.name.removesuffix(".json")
        # This store's own copies beside the soul: schema backups, the soul a restore replaced
        # (store/backup.py), the copy made for `hermes backup` (the provider's backup_paths),
        # a damaged file `repair` kept.
        kept_copies = [*self.path.parent.glob(f"{self.path.name}*.bak-schema*"),
                       *self.path.parent.glob(f"{stem}-before-restore-*.json"),
                       *self.path.parent.glob(f"{stem}-hermes-backup.json"),
                       *self.path.parent.glob(f"{self.path.name}.damaged-*")]
        for backup in kept_copies:
            try:
                data = backup.read_bytes()
                if any(needle in data for needle in needles):
                    backup.unlink()
                    self.warnings.append(f"{backup}: removed (it held a forgotten memory)")
            except OSError as exc:
                raise self._not_forgotten(backup, "checked or removed", exc) from None
        # The load image holds every memory of a snapshot that is no longer the soul's: it goes
        # whatever it holds, and the next load makes a new one (store/image_file.py).
        image = image_path(self.path)
        try:
            if image.exists():
                image.unlink()
        except FileNotFoundError:
            pass  # another process removed it meanwhile
        except OSError as exc:
            raise self._not_forgotten(image, "removed", exc) from None

    def _not_forgotten(self, copy: Path, what: str, exc: OSError) -> "ForgetIncomplete":
        return ForgetIncomplete(copy, f"may hold the forgotten text and could not be {what} ({_os_reason(exc)}); "
                                      f"the memory is gone from {self.path.name}, but the forget is not complete "
                                      "until this file is deleted")

    def _back_up_old_schema(self) -> None:
        """Before the first rewrite in a new schema: soul.json and its journal as they were,
        for a runtime that reads only the old schema."""
        for path in (self.path, self.journal_path):
            backup = path.with_name(f"{path.name}.bak-schema{self._schema}")
            if path.exists() and not backup.exists():
                shutil.copy2(path, backup)

    def compact(self) -> None:
        """Fold the journal into soul.json now (the operator's `compact`)."""
        with self._mutex, self._locked():
            graph = self._current()
            self._refuse_read_only()
            self._compact(graph, "nothing was changed")

    def vet(self, graph: SoulGraph) -> None:
        """Vet a graph built without the write guard, or read from another file: every string
        as if written now (a secret refuses it, SoulFileError; injection flags). `save` does
        it when not done yet; a caller about to save such a graph under the writers' lock
        calls this first, so writers do not wait through the scan."""
        if write_guard.needs_vetting(graph):
            try:
                write_guard.vet(graph)
            except write_guard.refused() as exc:
                raise SoulFileError(self.path, f"{exc}; the graph was not written") from None

    def save(self, graph: SoulGraph) -> None:
        """Replace the whole graph (for example with a freshly seeded one). Other processes
        see a snapshot newer than anything they hold, and read it whole. A graph not built
        through the write guard (or read from another file) is vetted whole first."""
        with self._mutex, self._locked():
            self._refuse_read_only()
            self.vet(graph)
            last = self._last_seq_on_disk()
            kept = self._graph, self._encoded, self._schema, self._seq
            graph.strength_half_life = self.strength_half_life
            # The snapshot on disk describes the graph being replaced: none of its lines may be
            # reused for a node that merely shares an id with one of them.
            graph.dirty.update(graph.nodes)
            self._graph, self._encoded = graph, {}
            self._schema = self._schema if self._schema is not None else SCHEMA
            self._seq = last + 1
            try:
                self._compact(graph, "the graph was not replaced")
            except NotSynced:
                raise  # the new graph is the file's now
            except BaseException:
                # Nothing on disk changed: what this process holds must stay what the files
                # hold, so the graph it had comes back (keeping the new one made the next
                # change a journal record numbered past the journal's end).
                self._graph, self._encoded, self._schema, self._seq = kept
                raise

    def _last_seq_on_disk(self) -> int:
        """The highest change number the files hold, as far as they can be read."""
        last = 0
        with contextlib.suppress(OSError):
            header = snapshot.read_header(snapshot.head_of(self.path))
            if header:
                last = header[2]
        with contextlib.suppress(OSError, JournalError):
            data = self.journal_path.read_bytes()
            found = journal.scan(data)
            if found.records:
                last = max(last, journal.parse_header(found.records[0], self.journal_path))
                for record in found.records[1:]:
                    if type(record.get("seq")) is int:
                        last = max(last, record["seq"])
        return max(last, self._seq)


def _needles(texts: list[str]) -> list[bytes]:
    """How each text can stand in a file of ours: JSON-escaped, as UTF-8 or as ASCII."""
    needles = {json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8") for text in texts}
    needles |= {json.dumps(text)[1:-1].encode("ascii") for text in texts}
    return [needle for needle in needles if needle]


def _read_all(fd: int, offset: int) -> bytes:
    chunks = []
    while True:
        chunk = os.pread(fd, max(_JOURNAL_READ, os.fstat(fd).st_size - offset), offset)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        offset += len(chunk)


def _strip_path(exc: Exception, path: Path) -> str:
    text = str(exc)
    prefix = f"{path}: "
    return text[len(prefix):] if text.startswith(prefix) else text


