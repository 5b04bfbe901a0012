"""soul.json: where a soul graph lives between sessions.

The file format (schema 1) is documented in docs/soul-graph.md. In short::

    {"format": "soulgraph", "schema": 1, "next_id": 42,
     "nodes": [{"id", "content", "tags", "created_at", "last_accessed",
                "access_count", "pinned", "metadata", "parents": [ids]}, ...],
     "exploration": {"nodes": [... the same, plus "parents" ...]}}

Guarantees:
- Saved atomically: a temp file in the same folder, fsync, rename, fsync of the
  folder. A crash at any moment leaves the old file or the new one, never a mix.
- Private: mode 0600 from the moment the temp file exists.
- Never overwrites what it cannot read: a corrupt file, one that is not a soul
  graph, or one of a newer schema stops us with `SoulFileError`.
- Several processes may share one file (Hermes' CLI and gateway each start a
  server): every change takes an exclusive lock, re-reads the file if another
  process wrote it, applies the change and saves, so no write is lost.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from soulgraph.store.atomic import sweep_temp_files, write_atomically
from soulgraph.engine.graph import Clock, DEFAULT_RECENCY_WEIGHT, Node, SoulGraph, SoulGraphError

FORMAT = "soulgraph"
SCHEMA = 1
# Files up to this size are read whole before the server answers; larger ones are checked
# by their header and read in the background, so start-up does not grow with the graph.
EAGER_LOAD_BYTES = 1 << 20
_HEADER = re.compile(rb'^\{"format": "([^"]*)", "schema": (\d+)')


class SoulFileError(Exception):
    """The soul file cannot be used; the message names the file and the problem."""

    def __init__(self, path: Path, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path, self.problem = path, problem


def default_soul_file(environ: dict[str, str] | None = None) -> Path:
    """`$HERMES_HOME/soul.json`, else `~/.hermes/soul.json`. Never an OpenClaw path."""
    env = os.environ if environ is None else environ
    home = env.get("HERMES_HOME")
    base = Path(home).expanduser() if home else Path(env.get("HOME") or Path.home()) / ".hermes"
    return base / "soul.json"


def _node_record(node: Node, parents: set[str]) -> dict[str, Any]:
    record = node.to_dict()
    record["parents"] = sorted(parents)
    return record


def encode_node(graph: SoulGraph, node_id: str) -> str:
    return json.dumps(_node_record(graph.nodes[node_id], graph.parents[node_id]), ensure_ascii=False)


def decode(text: str, path: Path, clock: Clock = time.time, recency_weight: float = DEFAULT_RECENCY_WEIGHT) -> SoulGraph:
    """Parse a soul file's text into a graph, or raise SoulFileError saying what is wrong."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise SoulFileError(path, f"not valid JSON ({exc}); left untouched") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise SoulFileError(path, f"not a soul graph file (no \"format\": \"{FORMAT}\"); left untouched")
    schema = data.get("schema")
    if not isinstance(schema, int) or schema < 1:
        raise SoulFileError(path, f"unreadable schema {schema!r}; left untouched")
    if schema > SCHEMA:
        raise SoulFileError(
            path, f"schema {schema} is newer than this soulgraph understands ({SCHEMA}); upgrade soulgraph. Left untouched"
        )
    graph = SoulGraph(clock=clock, recency_weight=recency_weight)
    try:
        records = data["nodes"]
        edges: list[tuple[str, str]] = []
        for record in records:
            node = Node.from_dict(record)
            if node.id in graph.nodes:
                raise ValueError(f"node id {node.id!r} appears twice")
            graph._insert(node)
            edges.extend((str(parent), node.id) for parent in record.get("parents", []))
        for parent, child in edges:
            graph.get(parent)  # an edge to a node that is not there: damaged
            graph.children[parent].add(child)
            graph.parents[child].add(parent)
        _check_acyclic(graph)  # once for the whole file, not a cycle search per edge
        for record in data.get("exploration", {}).get("nodes", []):
            node = Node.from_dict(record)
            graph.branch[node.id] = node
            graph.branch_parents[node.id] = {str(p) for p in record.get("parents", [])}
        graph.next_id = int(data.get("next_id", 1))
    except (KeyError, TypeError, ValueError) as exc:
        raise SoulFileError(path, f"damaged soul graph ({type(exc).__name__}: {exc}); left untouched") from None
    graph.dirty.clear()
    graph.branch_dirty = False
    return graph


def _check_acyclic(graph: SoulGraph) -> None:
    """Kahn's algorithm: every node can be taken in parent-first order iff there is no cycle."""
    indegree = {node_id: len(parents) for node_id, parents in graph.parents.items()}
    ready = [node_id for node_id, degree in indegree.items() if degree == 0]
    taken = 0
    while ready:
        node_id = ready.pop()
        taken += 1
        for child in graph.children[node_id]:
            indegree[child] -= 1
            if indegree[child] == 0:
                ready.append(child)
    if taken != len(graph.nodes):
        stuck = sorted(node_id for node_id, degree in indegree.items() if degree > 0)[:5]
        raise ValueError(f"the edges form a cycle through {', '.join(stuck)}")


class SoulFile:
    """One soul.json on disk and the graph it holds, kept in step with other writers."""

    def __init__(self, path: str | os.PathLike[str], clock: Clock = time.time,
                 recency_weight: float = DEFAULT_RECENCY_WEIGHT):
        self.path = Path(path).expanduser().absolute()
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.clock = clock
        self.recency_weight = recency_weight
        self._graph: SoulGraph | None = None
        self._signature: tuple[int, int, int] | None = None
        self._encoded: dict[str, str] = {}  # node id -> its JSON record, as last saved
        self._reading = threading.Lock()  # a background preload and a tool call may both read
        self._preloading: threading.Thread | None = None

    # ------------------------------------------------------------------ reading
    def _stat_signature(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise SoulFileError(self.path, f"cannot be read ({exc.strerror})") from None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def _read(self) -> None:
        try:
            with open(self.path, "rb") as handle:
                st = os.fstat(handle.fileno())
                raw = handle.read()
        except FileNotFoundError:
            self._graph = SoulGraph(clock=self.clock, recency_weight=self.recency_weight)
            self._signature = None
            self._encoded = {}
            return
        except IsADirectoryError:
            raise SoulFileError(self.path, "is a directory, not a soul file") from None
        except OSError as exc:
            raise SoulFileError(self.path, f"cannot be read ({exc.strerror})") from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise SoulFileError(self.path, "not UTF-8 text; left untouched") from None
        self._graph = decode(text, self.path, self.clock, self.recency_weight)
        # A big graph is hundreds of thousands of long-lived objects: without this, every full
        # collection walks them all and a tool call now and then pays tens of milliseconds.
        gc.freeze()
        self._signature = (st.st_ino, st.st_mtime_ns, st.st_size)
        self._encoded = {}

    @property
    def loaded(self) -> SoulGraph:
        """The graph as last read or saved, without looking at the file again."""
        return self._graph if self._graph is not None else self.graph()

    def graph(self) -> SoulGraph:
        """The graph as the file holds it now (re-read only when another process saved)."""
        with self._reading:
            return self._current()

    def _current(self) -> SoulGraph:
        if self._graph is None or self._stat_signature() != self._signature:
            self._read()
        assert self._graph is not None
        return self._graph

    def open_for_serving(self) -> bool:
        """Check the file before a server answers anyone, without making start-up wait on
        a big graph: a small file is read whole now; a large one only has its header checked
        (ours, a schema we read). Returns True when the graph is still to be read: call
        `preload()` when the client is not waiting (a damaged body found then surfaces as
        SoulFileError on every tool call, and is never overwritten).
        """
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            return False
        except OSError:
            size = 0  # let the full read report the problem
        if size <= EAGER_LOAD_BYTES:
            self.graph()
            return False
        with open(self.path, "rb") as handle:
            head = handle.read(256)
        match = _HEADER.match(head)
        if not match or match.group(1) != FORMAT.encode():
            self.graph()  # not our layout: the full read says exactly what is wrong
            return False
        if int(match.group(2)) > SCHEMA:
            raise SoulFileError(self.path, f"schema {int(match.group(2))} is newer than this soulgraph "
                                           f"understands ({SCHEMA}); upgrade soulgraph. Left untouched")
        return True

    def preload(self) -> None:
        """Read the graph in a background thread (once); a tool call that needs it first waits."""
        if self._preloading is not None:
            return

        def read() -> None:
            # Under the read lock, so a tool call waits for the masks too instead of racing them.
            with self._reading, contextlib.suppress(SoulFileError):  # reported again by the first call
                self._current().index.build_common_masks()

        self._preloading = threading.Thread(target=read, name="soul-preload", daemon=True)
        self._preloading.start()

    # ------------------------------------------------------------------ writing
    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    @contextlib.contextmanager
    def change(self) -> Iterator[SoulGraph]:
        """Change the graph under the file lock; saved when the block ends without error.

        If the block raises, the change is dropped: the graph is re-read from the file,
        so a refused request (say, an edge closing a cycle) leaves no half-change behind.
        """
        with self._locked():
            graph = self.graph()
            try:
                yield graph
            except SoulGraphError:
                raise  # the graph refuses before it changes anything: nothing to undo
            except BaseException:
                self._graph = None  # re-read on next use: the file is the truth
                raise
            if graph.changed or self._signature is None:
                self._save(graph)

    def save(self, graph: SoulGraph) -> None:
        """Write a whole graph (for example a freshly seeded one) to this file."""
        with self._locked():
            self._graph, self._encoded = graph, {}
            self._save(graph)

    def _save(self, graph: SoulGraph) -> None:
        for node_id in graph.dirty:
            self._encoded[node_id] = encode_node(graph, node_id)
        graph.dirty.clear()
        graph.branch_dirty = False
        missing = graph.nodes.keys() - self._encoded.keys()
        for node_id in missing:  # first save after a load: encode everything once
            self._encoded[node_id] = encode_node(graph, node_id)
        exploration = [_node_record(node, graph.branch_parents.get(node_id, set())) for node_id, node in graph.branch.items()]
        header = json.dumps({"format": FORMAT, "schema": SCHEMA, "next_id": graph.next_id, "saved_at": self.clock()})
        text = "".join([
            header[:-1],
            ',\n"nodes": [\n',
            ",\n".join(self._encoded[node_id] for node_id in graph.nodes),
            '\n],\n"exploration": ',
            json.dumps({"nodes": exploration}, ensure_ascii=False),
            "}\n",
        ])
        self._write_atomically(text.encode("utf-8"))

    def _write_atomically(self, data: bytes) -> None:
        sweep_temp_files(self.path)  # we hold the lock: any temp file here is from a writer that died
        write_atomically(self.path, data, mode=0o600)
        st = os.stat(self.path)
        self._signature = (st.st_ino, st.st_mtime_ns, st.st_size)
