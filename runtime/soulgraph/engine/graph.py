"""The soul graph engine: nodes, DAG lineage, recency order, tags, pins and search.

Every memory, decision or belief is a `Node`. Four structures sit over the nodes:

- DAG edges parent -> child ("the child was built on the parent"); cycles are refused.
- A splay tree keyed on ``log(access_count + 1) + last_accessed / DAY``. That key orders
  nodes exactly as the recency score ``(access_count + 1) * exp(-age / DAY)`` does at
  every moment (log of the score is the key minus ``now / DAY``, common to all nodes),
  so the tree never goes stale and `hot()` is a read of it.
- Tags, for cross-cutting dimensions (`axiom`, `lesson`, `project:<name>`).
- Pins: axioms that never decay and always lead `hot()`.

Time comes from an injectable clock (seconds since the epoch), so tests and ledger
replays decide what "now" is.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections import deque
from dataclasses import dataclass, field, fields
from typing import AbstractSet, Any, Callable, Container, Iterable, Iterator

from soulgraph.engine import edges, record
from soulgraph.engine.bitsets import RecencyTiers, has_slot
from soulgraph.engine.index import InvertedIndex, words
from soulgraph.engine.splay import SplayTree

DAY = 86400.0
Clock = Callable[[], float]

# How much of a search hit's score its DAG neighbours inherit in `related`. Parents
# weigh more: a hit is often a recent sibling, and the old foundation is its parent.
PARENT_SHARE = 0.7
CHILD_SHARE = 0.5
DEFAULT_RECENCY_WEIGHT = 0.5
# Candidates of equal lexical score up to this many are scored one by one; larger groups
# are taken hottest first through the recency tiers (`SoulGraph._take_group`).
_SMALL_GROUP = 32


class SoulGraphError(ValueError):
    """A request the graph refuses; the message says why and names the nodes."""


class UnknownNode(SoulGraphError, KeyError):
    def __init__(self, node_id: str):
        super().__init__(f"unknown node id {node_id!r}")
        self.node_id = node_id

    def __str__(self) -> str:  # KeyError would quote the message again
        return self.args[0]


class CycleError(SoulGraphError):
    def __init__(self, parent: str, child: str):
        super().__init__(
            f"refused edge {parent!r} -> {child!r}: {child!r} is already an ancestor "
            f"of {parent!r}, so the edge would close a cycle"
        )
        self.parent, self.child = parent, child


@dataclass(slots=True)
class Node:
    id: str
    content: str
    tags: list[str] = field(default_factory=list)
    created_at: float = 0.0
    last_accessed: float = 0.0
    access_count: int = 0
    pinned: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    # The memory record (engine/record.py has the meanings and the allowed values). A field
    # equal to its default is left out of the file (`to_dict`), so old records read as-is.
    kind: str = record.DEFAULT_KIND
    source: str = ""
    source_ref: str | None = None
    writer: str | None = None
    first_seen_at: float | None = None  # None: created_at
    last_confirmed_at: float | None = None  # None: created_at
    confidence: float = record.DEFAULT_CONFIDENCE
    importance: float = record.DEFAULT_IMPORTANCE
    strength: float = record.DEFAULT_STRENGTH
    status: str = record.DEFAULT_STATUS
    superseded_by: str | None = None
    valid_from: float | None = None
    valid_to: float | None = None
    privacy: str = record.DEFAULT_PRIVACY
    scope: str = record.DEFAULT_SCOPE

    @property
    def recency_key(self) -> float:
        return math.log1p(self.access_count) + self.last_accessed / DAY

    def recency_score(self, now: float) -> float:
        return (self.access_count + 1) * math.exp(-(now - self.last_accessed) / DAY)

    def to_dict(self) -> dict[str, Any]:
        data = {
            "id": self.id,
            "content": self.content,
            "tags": list(self.tags),
            "created_at": self.created_at,
            "last_accessed": self.last_accessed,
            "access_count": self.access_count,
            "pinned": self.pinned,
            "metadata": dict(self.metadata),
        }
        for name, default in MEMORY_DEFAULTS:
            value = getattr(self, name)
            if value != default and value is not default:
                data[name] = value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Node":
        node = cls(
            id=str(data["id"]),
            content=str(data["content"]),
            tags=[str(t) for t in data.get("tags", [])],
            created_at=float(data.get("created_at", 0.0)),
            last_accessed=float(data.get("last_accessed", data.get("created_at", 0.0))),
            access_count=int(data.get("access_count", 0)),
            pinned=bool(data.get("pinned", False)),
            metadata=dict(data.get("metadata", {})),
        )
        for name, _default in MEMORY_DEFAULTS:
            if name in data:
                setattr(node, name, data[name])
        return node

    @property
    def seen_at(self) -> float:
        return self.created_at if self.first_seen_at is None else self.first_seen_at

    @property
    def confirmed_at(self) -> float:
        return self.created_at if self.last_confirmed_at is None else self.last_confirmed_at


ACTIVE = record.DEFAULT_STATUS  # the one status in default recall

# The memory fields and their defaults, in Node's order: what `to_dict` leaves out when equal.
MEMORY_DEFAULTS: tuple[tuple[str, Any], ...] = tuple(
    (f.name, f.default) for f in fields(Node)[8:]
)
MEMORY_FIELD_NAMES = tuple(name for name, _default in MEMORY_DEFAULTS)


class HiddenIds(set):
    """Node ids a reader must never get (`SoulGraph.hidden_from`), with `mask`, the same
    nodes as a bitmask of word-index slots, so the search's mask groups leave them out too."""

    mask: int = 0
    version: int = 0  # bumped by every change, so what is built from it knows when to start again


@dataclass(slots=True, frozen=True)
class Hit:
    """A node found by a search, with its score and why it was found."""

    node: Node
    score: float
    via: str = "match"  # "match", "parent of <id>" or "child of <id>"


class SoulGraph:
    def __init__(self, clock: Clock = time.time, recency_weight: float = DEFAULT_RECENCY_WEIGHT):
        self.clock = clock
        self.recency_weight = recency_weight
        # How fast reinforcement fades without confirmation (engine/record.py); a setting of
        # the store and the server (--strength-half-life-days).
        self.strength_half_life = record.STRENGTH_HALF_LIFE
        self.nodes: dict[str, Node] = {}
        # node id -> its parents, and its children (engine/edges.py: a tuple, or a set when many)
        self.parents: dict[str, edges.Edges] = {}
        self.children: dict[str, edges.Edges] = {}
        self.tags: dict[str, set[str]] = {}
        self.pinned: set[str] = set()
        self.kinds: dict[str, set[str]] = {}  # memory kind -> node ids (the prompt snapshot's sections)
        # A user's scope -> the ids of that user's memories (memory/scopes.py). Shared memories
        # (scope "") are not listed: a soul without users has nothing here, and reads filter nothing.
        self.scopes: dict[str, set[str]] = {}
        # Per reader scope asked for (`hidden_from`): the ids of every other user's memories,
        # kept up to date as memories come and go, so a search excludes them at no cost.
        self._hidden: dict[str, HiddenIds] = {}
        self.order = SplayTree()
        # Each index reads a node's text from the node (`indexed_text`) instead of keeping a copy.
        self.index = InvertedIndex(self.indexed_text)
        # Memories out of default recall (superseded, contradicted, archived) are searched
        # only when asked for (include_archived): their words live here instead of `index`.
        self.archive_index = InvertedIndex(self.indexed_text)
        # The hottest nodes as nested bitmasks over index slots, for search (see bitsets).
        self._tiers = RecencyTiers(self._hottest_slots)
        self.next_id = 1
        # Ids of nodes changed since the store last saved, so a save re-encodes only those.
        self.dirty: set[str] = set()
        self.branch_dirty = False
        # The exploration branch: hypotheses that may later be promoted. It holds only
        # what differs from the graph (a copy-on-write view), so it costs nothing to keep.
        self.branch: dict[str, Node] = {}
        self.branch_parents: dict[str, set[str]] = {}
        # While a change is open (`begin`): each touched node's record as it was before
        # (None: it did not exist), in the order first touched, so the store can journal
        # exactly what changed, or put everything back when it could not be made durable.
        self._before: dict[str, dict[str, Any] | None] | None = None
        self._before_branch: tuple[dict[str, Node], dict[str, set[str]]] | None = None
        self._before_next_id = 0
        # The audit trail: one entry per lifecycle change (memory/lifecycle.py), oldest first.
        self.audit: list[dict[str, Any]] = []
        self._before_audit = 0
        self._audit_before_rewrite: list[dict[str, Any]] | None = None  # see rewrite_audit
        # Bumped by every change to nodes or edges: caches built from the graph (the sibling
        # order of engine/hybrid.py) know when to start again.
        self.generation = 0
        # Called with a node's id whenever it is inserted or taken out, so a side index (the
        # vectors of store/vectors.py) can follow without scanning the graph.
        self.watchers: list[Callable[[str], None]] = []
        # ... and these, also whenever a node's fields change in place (`update`, a write guard's
        # marks on `tag`), so an index over what the fields say (memory/flagged.py) can follow.
        self.field_watchers: list[Callable[[str], None]] = []
        # The write guard (memory/guard.py; the store gives every graph it holds one): None,
        # or an object that vets every writer string before it enters. The engine only calls it:
        #   guard.node(graph, node)   a node about to enter (add, explore, promote) or a node's
        #                             next state (update, tag): it raises to refuse, or marks the
        #                             node (any field it changes is applied with the change)
        #   guard.strings             the fields whose `update` calls guard.node
        #   guard.pin(graph, node)    before a pin: it raises to refuse
        #   guard.entry(graph, entry) an audit entry about to be logged: raises, or returns the
        #                             entry to keep
        self.guard: Any = None

    # ----------------------------------------------------------------- nodes
    def __len__(self) -> int:
        return len(self.nodes)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self.nodes

    def get(self, node_id: str) -> Node:
        try:
            return self.nodes[node_id]
        except KeyError:
            raise UnknownNode(node_id) from None

    def _new_id(self) -> str:
        number = self._free_number()
        self.next_id = number + 1
        return f"n{number}"

    def _free_number(self) -> int:
        """The number of the id `_new_id` gives next (taken only once the node is in)."""
        number = self.next_id
        while f"n{number}" in self.nodes or f"n{number}" in self.branch:
            number += 1
        return number

    def add(
        self,
        content: str,
        tags: Iterable[str] = (),
        *,
        parents: Iterable[str] = (),
        pinned: bool = False,
        metadata: dict[str, Any] | None = None,
        node_id: str | None = None,
        created_at: float | None = None,
        kind: str | None = None,
        source: str = "",
        source_ref: str | None = None,
        writer: str | None = None,
        confidence: float = record.DEFAULT_CONFIDENCE,
        importance: float = record.DEFAULT_IMPORTANCE,
        privacy: str = record.DEFAULT_PRIVACY,
        valid_from: float | None = None,
        valid_to: float | None = None,
        scope: str = record.DEFAULT_SCOPE,
    ) -> Node:
        """Add a node, optionally built on `parents` (which must exist). The memory fields
        (engine/record.py) are checked: `kind` defaults to axiom for a pin, else note."""
        memory = {"kind": kind or ("axiom" if pinned else record.DEFAULT_KIND), "source": source,
                  "source_ref": source_ref, "writer": writer, "confidence": confidence,
                  "importance": importance, "privacy": privacy, "valid_from": valid_from, "valid_to": valid_to,
                  "scope": scope}
        try:
            memory = {name: record.checked(name, value) for name, value in memory.items()}
        except ValueError as exc:
            raise SoulGraphError(str(exc).removeprefix("memory: ")) from None
        if valid_from is not None and valid_to is not None and valid_to < valid_from:
            raise SoulGraphError(f"valid_to ({valid_to}) is before valid_from ({valid_from})")
        content = content.strip() if isinstance(content, str) else content
        if not isinstance(content, str) or not content:
            raise SoulGraphError("content must be a non-empty string")
        parents = list(dict.fromkeys(parents))
        for parent in parents:
            self.get(parent)
        numbered = node_id is None
        if numbered:
            node_id = f"n{self._free_number()}"
        elif node_id in self.nodes:
            raise SoulGraphError(f"node id {node_id!r} already exists")
        now = self.clock() if created_at is None else created_at
        node = Node(
            id=node_id,
            content=content,
            tags=list(dict.fromkeys(tags)),
            created_at=now,
            last_accessed=now,
            pinned=pinned,
            metadata=dict(metadata or {}),
            **memory,
        )
        if self.guard is not None:
            self.guard.node(self, node)  # before anything changes: a refusal leaves no trace
        if numbered:
            self._new_id()
        self._insert(node)
        for parent in parents:
            self._add_edge(parent, node_id)
        return node

    @property
    def changed(self) -> bool:
        """Has anything changed since the store last saved?"""
        return bool(self.dirty) or self.branch_dirty

    def _insert(self, node: Node) -> None:
        self._keep(node.id)
        self.generation += 1
        for watcher in (*self.watchers, *self.field_watchers):
            watcher(node.id)
        self.nodes[node.id] = node
        self.dirty.add(node.id)
        self.parents.setdefault(node.id, edges.NONE)
        self.children.setdefault(node.id, edges.NONE)
        for tag in node.tags:
            self.tags.setdefault(tag, set()).add(node.id)
        if node.pinned:
            self.pinned.add(node.id)
        self.kinds.setdefault(node.kind, set()).add(node.id)
        self.order.insert((node.recency_key, node.id))
        self.index.add(node.id, _indexed_text(node))
        if node.scope:
            self._scope_add(node.id, node.scope)  # after `index.add`: the node has its slot
        self._tiers.note(self.index.slot(node.id), node.recency_key)
        if node.status != ACTIVE:
            self._deactivate(node)

    def _deactivate(self, node: Node) -> None:
        """Out of default recall: its words move from the search index to the archive's
        (it keeps its slot there, so the bitmask machinery stays consistent)."""
        text = _indexed_text(node)
        self.index.remove(node.id, text)
        self.archive_index.add(node.id, text)

    def _reactivate(self, node: Node) -> None:
        text = _indexed_text(node)
        self.archive_index.remove(node.id, text)
        self.index.add(node.id, text)

    def indexed_text(self, node_id: str) -> str:
        """The text a node's words are indexed from (its content and tags)."""
        return _indexed_text(self.nodes[node_id])

    def splay(self, node_id: str, at: float | None = None) -> Node:
        """Mark a node used: one more access, now. It moves to the top of the recency order."""
        node = self.get(node_id)
        self._keep(node_id)
        self.order.remove((node.recency_key, node.id))
        node.access_count += 1
        node.last_accessed = self.clock() if at is None else at
        self.order.insert((node.recency_key, node.id))
        self._tiers.note(self.index.slot(node_id), node.recency_key)
        self.dirty.add(node_id)
        return node

    def pin(self, node_id: str, pinned: bool = True) -> Node:
        node = self.get(node_id)
        if pinned and self.guard is not None:
            self.guard.pin(self, node)
        self._keep(node_id)
        node.pinned = pinned
        self.dirty.add(node_id)
        if pinned:
            self.pinned.add(node_id)
        else:
            self.pinned.discard(node_id)
        return node

    def tag(self, node_id: str, *tags: str) -> Node:
        node = self.get(node_id)
        new = [tag for tag in dict.fromkeys(tags) if tag not in node.tags]
        marked = self._vetted(node, {"tags": node.tags + new}) if new and self.guard is not None else {}
        marked.pop("tags", None)
        self._keep(node_id)
        # Out of its index with the words it has now: the index reads a node's text from the node.
        (self.index if node.status == ACTIVE else self.archive_index).remove(node_id, _indexed_text(node))
        for tag in new:
            node.tags.append(tag)
            self.tags.setdefault(tag, set()).add(node_id)
        if marked:
            self._set(node, marked)
        (self.index if node.status == ACTIVE else self.archive_index).add(node.id, _indexed_text(node))
        self.dirty.add(node_id)
        return node

    def _vetted(self, node: Node, changes: dict[str, Any]) -> dict[str, Any]:
        """`changes` to `node` as the guard lets them through: it may refuse (raises, nothing
        changed) or add changes of its own (a flag, a dropped pin)."""
        candidate = Node(**{f.name: getattr(node, f.name) for f in fields(Node)})
        candidate.tags, candidate.metadata = list(node.tags), dict(node.metadata)
        for name, value in changes.items():
            setattr(candidate, name, value)
        self.guard.node(self, candidate)
        return {f.name: getattr(candidate, f.name) for f in fields(Node)
                if f.name in changes or getattr(candidate, f.name) != getattr(node, f.name)}

    def _set(self, node: Node, values: dict[str, Any]) -> None:
        """Set fields of a node (inside `_keep`) and keep the indexes over them right."""
        node_id = node.id
        was_active, old_kind, old_scope = node.status == ACTIVE, node.kind, node.scope
        for name, value in values.items():
            setattr(node, name, value)
        for watcher in self.field_watchers:
            watcher(node_id)
        if "pinned" in values:
            (self.pinned.add if node.pinned else self.pinned.discard)(node_id)
        if node.kind != old_kind:
            self.kinds[old_kind].discard(node_id)
            self.kinds.setdefault(node.kind, set()).add(node_id)
        if node.scope != old_scope:
            self._unscope(node_id, old_scope)
            if node.scope:
                self._scope_add(node_id, node.scope)
        if was_active != (node.status == ACTIVE):
            (self._reactivate if node.status == ACTIVE else self._deactivate)(node)

    # ----------------------------------------------------------------- edges
    def link(self, parent: str, child: str) -> bool:
        """Add the edge parent -> child. Returns False when it already existed."""
        self.get(parent)
        self.get(child)
        if child in self.children[parent]:
            return False
        self._add_edge(parent, child)
        return True

    def _add_edge(self, parent: str, child: str) -> None:
        if parent == child or self._reaches(child, parent):
            raise CycleError(parent, child)
        self._keep(child)
        self.children[parent] = edges.joined(self.children[parent], child)
        self.parents[child] = edges.joined(self.parents[child], parent)
        self.generation += 1
        self.dirty.add(child)  # a node's file record carries its parents

    def _reaches(self, start: str, goal: str) -> bool:
        """Is `goal` a descendant of `start`?"""
        seen = {start}
        stack = [start]
        while stack:
            for child in self.children[stack.pop()]:
                if child == goal:
                    return True
                if child not in seen:
                    seen.add(child)
                    stack.append(child)
        return False

    def edges(self) -> Iterator[tuple[str, str]]:
        for parent, kids in self.children.items():
            for child in kids:
                yield parent, child

    def _walk(self, start: str, neighbours: dict[str, set[str]], depth: int | None,
              where: Callable[[Node], bool] | None = None) -> list[tuple[Node, int]]:
        """Breadth-first from `start` (excluded), each node with its distance; `where`: the
        nodes the walk may enter (it does not pass through the others)."""
        self.get(start)
        seen = {start}
        found: list[tuple[Node, int]] = []
        frontier = deque([(start, 0)])
        while frontier:
            node_id, dist = frontier.popleft()
            if depth is not None and dist >= depth:
                continue
            # Sorted so that a walk gives the same answer on every run.
            for nxt in sorted(neighbours[node_id], key=self._hotness, reverse=True):
                if nxt not in seen and (where is None or where(self.nodes[nxt])):
                    seen.add(nxt)
                    found.append((self.nodes[nxt], dist + 1))
                    frontier.append((nxt, dist + 1))
        return found

    def _hotness(self, node_id: str) -> tuple[float, str]:
        return (self.nodes[node_id].recency_key, node_id)

    def ancestors(self, node_id: str, depth: int | None = None, *,
                  where: Callable[[Node], bool] | None = None) -> list[tuple[Node, int]]:
        """What a node was built on, nearest first."""
        return self._walk(node_id, self.parents, depth, where)

    def discover(self, node_id: str, depth: int = 2, *,
                 where: Callable[[Node], bool] | None = None) -> list[tuple[Node, int]]:
        """What was built on a node: its children, their children, … up to `depth`."""
        return self._walk(node_id, self.children, depth, where)

    def path(self, start: str, goal: str) -> list[Node] | None:
        """A shortest chain start -> … -> goal along the edges, or None."""
        self.get(start)
        self.get(goal)
        previous: dict[str, str | None] = {start: None}
        frontier = deque([start])
        while frontier:
            node_id = frontier.popleft()
            if node_id == goal:
                chain = []
                step: str | None = node_id
                while step is not None:
                    chain.append(self.nodes[step])
                    step = previous[step]
                return chain[::-1]
            for child in self.children[node_id]:
                if child not in previous:
                    previous[child] = node_id
                    frontier.append(child)
        return None

    # ----------------------------------------------------------------- recency
    def hot(self, n: int = 10, *, where: Callable[[Node], bool] | None = None) -> list[Node]:
        """Pinned nodes first (hottest first), then the top of the splay tree; `where`: only
        the nodes it accepts."""
        pinned = sorted(
            (self.nodes[i] for i in self.pinned),
            key=lambda node: (node.recency_key, node.id),
            reverse=True,
        )
        result = [node for node in pinned if node.status == ACTIVE and (where is None or where(node))][:n]
        return result + self._hottest_unpinned(n - len(result), where)

    def _hottest_unpinned(self, n: int, where: Callable[[Node], bool] | None = None) -> list[Node]:
        """The top `n` of the splay tree that are neither pinned nor out of recall."""
        found: list[Node] = []
        for _key, node_id in self.order.descending():
            if len(found) >= n:
                break
            node = self.nodes[node_id]
            if not node.pinned and node.status == ACTIVE and (where is None or where(node)):
                found.append(node)
        return found

    def by_tag(self, tag: str, *, include_archived: bool = False,
               where: Callable[[Node], bool] | None = None) -> list[Node]:
        """Every node with a tag, hottest first (in default recall only, unless asked)."""
        ids = self.tags.get(tag, ())
        nodes = (self.nodes[i] for i in ids)
        if not include_archived:
            nodes = (node for node in nodes if node.status == ACTIVE)
        if where is not None:
            nodes = (node for node in nodes if where(node))
        return sorted(nodes, key=lambda n: (n.recency_key, n.id), reverse=True)

    # ----------------------------------------------------------------- search
    def _hottest_slots(self) -> Iterator[tuple[float, int]]:
        """(recency key, index slot) from the hottest node down: what the tiers are cut from."""
        slot = self.index.slot
        return ((key, slot(node_id)) for key, node_id in self.order.descending())

    def query(
        self,
        text: str,
        k: int = 10,
        *,
        hint: str | None = None,
        recency_weight: float | None = None,
        tag: str | None = None,
        include_archived: bool = False,
        where: Callable[[Node], bool] | None = None,
        exclude: AbstractSet[str] = frozenset(),
    ) -> list[Hit]:
        """Search: idf of the shared words, boosted by recency; `hint` adds a second query.
        Superseded, contradicted and archived memories only with `include_archived` (scored
        by the words they share among themselves, marked via="archived"). `where` keeps only
        the nodes it accepts (memory/filters.py builds it from kind and time ranges);
        `exclude`: ids never returned (other users' memories, `hidden_from`), left out as
        the search goes, so it stays the pruned search."""
        weight = self.recency_weight if recency_weight is None else recency_weight
        if include_archived and len(self.archive_index):
            return self._with_archived(text, k, hint, weight, tag, where, exclude)
        query_words = words(text)
        if hint:
            # A word in both the query and the hint counts twice: both ask for it.
            return self._rank_exhaustive(query_words, words(hint), k, weight, tag, where, exclude)
        if tag is not None or where is not None:
            return self._rank_exhaustive(query_words, set(), k, weight, tag, where, exclude)
        return self._rank_pruned(query_words, k, weight, exclude)

    def scores_of(self, text: str, node_ids: Iterable[str], recency_weight: float | None = None) -> dict[str, float]:
        """`query`'s score for each of these nodes that shares a word with `text` (the others
        are left out), without searching: for candidates found another way (the vectors)."""
        weight = self.recency_weight if recency_weight is None else recency_weight
        candidates = self.nodes.keys() & node_ids  # a set, whatever iterable node_ids is
        lexical: dict[str, float] = {}
        self.index.add_shared(lexical, self.index.weighted_words(words(text)), candidates)  # in `query`'s order
        if weight:
            nodes, now, exp = self.nodes, self.clock(), math.exp
            for node_id, score in lexical.items():
                node = nodes[node_id]
                recency = (node.access_count + 1) * exp(-(now - node.last_accessed) / DAY)  # Node.recency_score
                lexical[node_id] = score * (1.0 + weight * recency / (1.0 + recency))
        return lexical

    def _with_archived(self, text: str, k: int, hint: str | None, weight: float, tag: str | None,
                       where: Callable[[Node], bool] | None = None,
                       exclude: AbstractSet[str] = frozenset()) -> list[Hit]:
        hits = self.query(text, k, hint=hint, recency_weight=weight, tag=tag, where=where, exclude=exclude)
        lexical = self.archive_index.lexical_scores(words(text) | (words(hint) if hint else set()))
        now = self.clock()
        for node_id, score in lexical.items():
            node = self.nodes[node_id]
            if ((tag is not None and tag not in node.tags) or (where is not None and not where(node))
                    or node_id in exclude):
                continue
            recency = node.recency_score(now)
            hits.append(Hit(node, score * (1.0 + weight * recency / (1.0 + recency)), "archived"))
        return sorted(hits, key=lambda h: (-h.score, h.node.id))[:k]

    def _rank_exhaustive(self, query_words: set[str], hint_words: set[str], k: int, weight: float, tag: str | None,
                         where: Callable[[Node], bool] | None = None,
                         exclude: AbstractSet[str] = frozenset()) -> list[Hit]:
        lexical = self.index.lexical_scores(query_words)
        for node_id, score in self.index.lexical_scores(hint_words).items():
            lexical[node_id] = lexical.get(node_id, 0.0) + score
        if exclude:
            for node_id in lexical.keys() & exclude:
                del lexical[node_id]
        if tag is not None:
            allowed = self.tags.get(tag, set())
            lexical = {i: s for i, s in lexical.items() if i in allowed}
        if where is not None:
            nodes = self.nodes
            lexical = {i: s for i, s in lexical.items() if where(nodes[i])}
        return self._top(lexical, k, weight)

    def _top(self, lexical: dict[str, float], k: int, weight: float, common: list[tuple[float, str]] = (),
             exclude: AbstractSet[str] = frozenset()) -> list[Hit]:
        """The k best of the candidates once recency is applied; highest score first,
        equal scores to the smaller id, so ties never depend on how candidates were found.

        Candidates are `lexical` (id -> lexical score) and, when `common` words are given
        (rarest first, searched through masks), every other node holding any of them,
        scored by the common words alone. (A node of `lexical` is in the masks too, with a
        lower score than its own: it is skipped there, see `_take_group`; so is a node of
        `exclude`, which `lexical` must not hold.)

        Best-first search. The boost lies in [1, 1 + weight), so candidates are taken by
        descending best possible lexical score, and the taking stops once that score times
        (1 + weight) cannot reach the k-th best final score found so far: the many weak
        matches of a common word never get their recency computed. The common words'
        nodes enter as one part of the graph, split word by word (partition refinement
        with `&`) into the nodes with and without the word, best part first; a part split
        on every word is a group of nodes sharing the same words, whose score was built
        word by word in the query's order, so it is bit-identical to each node's own.
        """
        if k <= 0:
            return []
        reach = (1.0 + weight) * (1 + 1e-9)  # the most a boost can multiply by, rounded up
        # The k-th best lexical score is a floor for the k-th best final score (boost >= 1).
        floor = heapq.nlargest(k, lexical.values())[-1] if len(lexical) >= k else 0.0
        top = _TopK(k, floor, self.nodes, self.clock(), weight)
        tiers = self._tiers.tiers(len(self.nodes)) if weight else []
        # What common[p:] could still add to a part's score. (Summed in another order than
        # a real score, which may differ in the last bit: `reach` allows for that.)
        still = [0.0] * (len(common) + 1)
        for position in range(len(common) - 1, -1, -1):
            still[position] = still[position + 1] + common[position][0]

        # The queue: (-best possible score, arrival, score so far, members, next word).
        # Members are a list of ids or a mask; next word None: the members all score `score`.
        queue: list[tuple[float, int, float, list[str] | int, int | None]] = []
        arrival = itertools.count()  # breaks ties in the queue, so members are never compared
        skip: Container[str] = lexical
        same_score: dict[float, list[str]] = {}
        for node_id, score in lexical.items():
            if score * reach >= floor:
                same_score.setdefault(score, []).append(node_id)
        for score, node_ids in same_score.items():
            queue.append((-score, next(arrival), score, node_ids, None))
        if common:
            everyone = (1 << self.index.n_slots) - 1
            hidden_mask = getattr(exclude, "mask", None)
            if hidden_mask:  # other users' memories never enter the groups
                everyone &= ~hidden_mask
            queue.append((-still[0], next(arrival), 0.0, everyone, 0))
        heapq.heapify(queue)
        while queue:
            best_possible, _, score, members, position = heapq.heappop(queue)
            if -best_possible * reach < top.bar:
                break  # nothing left in the queue can make the top k
            if position is None or position == len(common):
                if isinstance(members, int):  # a group found through the masks
                    if exclude and skip is lexical and not getattr(exclude, "mask", None):
                        skip = lexical.keys() | exclude  # made once, the first time it is needed
                    self._take_group(top, score, members, tiers, skip=skip)
                elif len(members) <= _SMALL_GROUP:
                    top.take(score, members)
                else:  # many candidates of one score: hottest first, as for a mask group
                    self._take_group(top, score, self.index.mask_of(members), tiers, skip={})
                continue
            idf, word = common[position]
            with_word = members & self.index.mask(word)
            without = members ^ with_word
            for part_score, part in ((score + idf, with_word), (score, without)):
                best = part_score + still[position + 1]
                if part and best > 0.0 and best * reach >= top.bar:
                    heapq.heappush(queue, (-best, next(arrival), part_score, part, position + 1))
        return [Hit(self.nodes[node_id], final) for final, node_id in top.best()]

    def _take_group(self, top: "_TopK", score: float, mask: int, tiers: list[tuple[float, int]],
                    skip: Container[str]) -> None:
        """Take the members of a group of equal lexical score that could make the top k,
        except those in `skip` (nodes scored on their own, which the masks hold too).

        Their final scores differ only by recency, so the hottest come first: the group
        is cut by the recency tiers (the 32 hottest nodes, the 128 hottest, …) and each
        cut is taken whole. After a tier, the rest of the group is no hotter than the
        tier's floor; once the boost of that floor cannot lift `score` to the bar, the
        rest is skipped. Once that boost is exactly 1.0 (always so with weight 0), every
        remaining member scores exactly `score`, and only the smallest ids can matter.
        """
        rest = mask
        flat = not top.weight
        for floor_key, tier in tiers:
            hot = rest & tier
            if hot:
                rest ^= hot
                top.take(score, self.index.ids_in(hot), skip)
            if not rest:
                return
            recency_left = _max_recency(floor_key, top.now)
            best_left = (1.0 + top.weight * recency_left / (1.0 + recency_left)) * (1 + 1e-12)
            if score * best_left < top.bar:
                return
            if top.weight * recency_left < 1e-17:
                flat = True  # 1.0 + this rounds to exactly 1.0: the rest all score `score`
                break
        if flat:
            self._take_smallest_ids(top, score, rest, skip)
        else:
            # Boosts too close to tell apart (nodes idle for weeks), or no tiers yet.
            top.take(score, self.index.ids_in(rest, many=True), skip)

    def _take_smallest_ids(self, top: "_TopK", score: float, mask: int, skip: Container[str]) -> None:
        """Take the k smallest ids of a group whose members all score exactly `score`
        (boost 1.0): ties go to the smaller id, so no other member can make the top k."""
        index = self.index
        members = mask.bit_count()
        # Walking all ids in order meets a member every n_slots / members ids, so finding
        # k of them costs about k * n_slots / members steps; taking every member (slot
        # order is not id order) costs `members` steps. Do the cheaper.
        if members * members <= top.k * index.n_slots:
            top.take(score, index.ids_in(mask, many=True), skip)
            return
        in_id_order = (node_id for node_id in index.ids_by_id()
                       if has_slot(mask, index.slot(node_id)) and node_id not in skip)
        top.take(score, itertools.islice(in_id_order, top.k))

    def _rank_pruned(self, query_words: set[str], k: int, weight: float,
                     exclude: AbstractSet[str] = frozenset()) -> list[Hit]:
        """Top-k by the same score as `_rank_exhaustive`, skipping hopeless candidates.

        Rare words first, member by member, with MaxScore pruning: once the words left
        could not lift a node that shares none of the words seen so far above the
        current k-th best, the rest only add to the candidates already found (exact).
        The common words (those searched through masks, which come last) are not
        walked member by member: `_top` splits the nodes they match into groups of equal
        score with `&`, and takes from those only the few that can matter.
        """
        index = self.index
        weighted = index.weighted_words(query_words)
        if not weighted or k <= 0:
            return []
        # What a node not seen yet could still score: the sum of the words left. (Summed
        # in another order than a real score, which may differ in the last bit: `reach`
        # allows for that, so a tie is never pruned away.)
        suffix = [0.0] * (len(weighted) + 1)
        for position in range(len(weighted) - 1, -1, -1):
            suffix[position] = suffix[position + 1] + weighted[position][0]
        reach = (1.0 + weight) * (1 + 1e-9)
        common_start = index.common_suffix_start(weighted)
        scores: dict[str, float] = {}
        for position, (idf, word) in enumerate(weighted):
            if position and len(scores) >= k:
                # Lexical scores are floors of final scores (the boost is at least 1).
                kth_lexical = heapq.nlargest(k, scores.values())[-1]
                if suffix[position] * reach < kth_lexical:
                    self._add_to_known(scores, weighted[position:])
                    return self._top(scores, k, weight)
            if position == common_start:
                break
            holders = index.holders(word)  # a set, or a mask's ids (a word masked but under the threshold)
            if exclude:
                holders = holders - exclude if isinstance(holders, set) else itertools.filterfalse(exclude.__contains__, holders)
            for node_id in holders:
                scores[node_id] = scores.get(node_id, 0.0) + idf
        if common_start == len(weighted):
            return self._top(scores, k, weight)
        common = weighted[common_start:]
        self._add_to_known(scores, common)  # the rare words' candidates are now complete
        return self._top(scores, k, weight, common, exclude)

    def _add_to_known(self, scores: dict[str, float], weighted: list[tuple[float, str]]) -> None:
        """Add the remaining words' weights to the candidates already found, and no others."""
        self.index.add_shared(scores, weighted, scores.keys())

    def related(self, text: str, k: int = 10, *, hint: str | None = None, recency_weight: float | None = None,
                hits: list[Hit] | None = None, where: Callable[[Node], bool] | None = None,
                exclude: AbstractSet[str] = frozenset()) -> list[Hit]:
        """Search hits followed by their DAG parents and children.

        A neighbour inherits a share of its hit's score (parents more than children),
        so an old foundation under a strong recent hit outranks a weak direct match.
        `hits`: the search hits to start from, when another ranking found them
        (memory/ranking.py); by default this graph's `query`. `where`: the nodes it may
        return (hits and neighbours alike); `exclude`: ids it never returns.
        """
        if hits is None:
            hits = self.query(text, k, hint=hint, recency_weight=recency_weight, where=where, exclude=exclude)
        best: dict[str, Hit] = {hit.node.id: hit for hit in hits}
        for hit in hits:
            for share, neighbours, relation in (
                (PARENT_SHARE, self.parents, "parent"),
                (CHILD_SHARE, self.children, "child"),
            ):
                for other in neighbours[hit.node.id]:
                    if (self.nodes[other].status != ACTIVE or other in exclude
                            or (where is not None and not where(self.nodes[other]))):
                        continue  # out of default recall, or not the reader's
                    score = hit.score * share
                    if other not in best or best[other].score < score:
                        best[other] = Hit(self.nodes[other], score, f"{relation} of {hit.node.id}")
        ranked = sorted(best.values(), key=lambda h: (-h.score, h.node.id))
        return ranked[:k]

    def prime(self, context: str = "", n: int = 10, depth: int = 2, pin_share: float = 0.3, *,
              where: Callable[[Node], bool] | None = None) -> dict[str, Any]:
        """Session start: `hot`, n nodes: pins (at most `pin_share` of n, at least one, in
        their natural order: oldest first), then what the agent has been doing (the hottest
        other nodes), with pins again only where there is nothing else; plus a short walk
        around the best match of `context`. `where`: only the nodes it accepts."""
        focus = self.query(context, 1, where=where) if context.strip() else []
        walk: list[tuple[Node, int, str]] = []
        if focus:
            focus_id = focus[0].node.id
            walk = [(node, d, "ancestor") for node, d in self.ancestors(focus_id, depth, where=where)]
            walk += [(node, d, "descendant") for node, d in self.discover(focus_id, depth, where=where)]
            walk = [step for step in walk if step[0].status == ACTIVE]
        return {"hot": self._primed_hot(n, pin_share, where), "focus": focus[0] if focus else None,
                "walk": walk[: 2 * n]}

    def _primed_hot(self, n: int, pin_share: float, where: Callable[[Node], bool] | None = None) -> list[Node]:
        pins = sorted((self.nodes[i] for i in self.pinned
                       if self.nodes[i].status == ACTIVE and (where is None or where(self.nodes[i]))),
                      key=lambda node: (node.created_at, node.id))
        recent = self._hottest_unpinned(n, where)
        take = min(len(pins), max(1, int(n * pin_share)), n)
        take = max(take, n - len(recent))  # pins fill what recent work cannot
        return pins[:take] + recent[: n - min(take, len(pins))]

    def summary(self, n: int = 5, *, where: Callable[[Node], bool] | None = None) -> dict[str, Any]:
        """Counts and the hottest nodes; `where`: counted over the nodes it accepts only."""
        if where is None:
            return {
                "nodes": len(self.nodes),
                "edges": sum(len(kids) for kids in self.children.values()),
                "pinned": len(self.pinned),
                "tags": {tag: len(ids) for tag, ids in sorted(self.tags.items(), key=lambda t: (-len(t[1]), t[0]))},
                "hypotheses": len(self.branch),
                "hot": self.hot(n),
            }
        seen = {i for i, node in self.nodes.items() if where(node)}
        tags: dict[str, int] = {}
        for node_id in seen:
            for tag in self.nodes[node_id].tags:
                tags[tag] = tags.get(tag, 0) + 1
        return {
            "nodes": len(seen),
            "edges": sum(len(seen.intersection(self.children[i])) for i in seen),
            "pinned": len(self.pinned & seen),
            "tags": dict(sorted(tags.items(), key=lambda t: (-t[1], t[0]))),
            "hypotheses": sum(1 for node in self.branch.values() if where(node)),
            "hot": self.hot(n, where=where),
        }

    # ----------------------------------------------------------------- exploration
    def explore(self, content: str, tags: Iterable[str] = (), *, parents: Iterable[str] = (),
                scope: str = record.DEFAULT_SCOPE) -> Node:
        """Add a hypothesis to the exploration branch; the graph itself is unchanged."""
        content = content.strip() if isinstance(content, str) else content
        if not isinstance(content, str) or not content:
            raise SoulGraphError("content must be a non-empty string")
        parents = list(dict.fromkeys(parents))
        for parent in parents:
            if parent not in self.nodes and parent not in self.branch:
                raise UnknownNode(parent)
        now = self.clock()
        node = Node(id=f"n{self._free_number()}", content=content, tags=list(dict.fromkeys(tags)),
                    created_at=now, last_accessed=now, metadata={"hypothesis": True},
                    scope=record.checked("scope", scope))
        if self.guard is not None:
            self.guard.node(self, node)  # before anything changes: a refusal leaves no trace
        self._keep_branch()
        self._new_id()
        self.branch[node.id] = node
        self.branch_parents[node.id] = set(parents)
        self.branch_dirty = True
        return node

    def promote(self, node_id: str) -> Node:
        """Move one hypothesis into the graph, with its edges to its parents. Refused while a
        parent is itself still a hypothesis (that edge would be lost): promote it first."""
        if node_id not in self.branch:
            raise SoulGraphError(f"{node_id!r} is not a hypothesis in the exploration branch")
        waiting = sorted(p for p in self.branch_parents[node_id] if p in self.branch)
        if waiting:
            raise SoulGraphError(f"{node_id!r} is built on {', '.join(repr(p) for p in waiting)}, still "
                                 f"{'a hypothesis' if len(waiting) == 1 else 'hypotheses'}: promote "
                                 f"{'it' if len(waiting) == 1 else 'them'} first, or discard {node_id!r}")
        self._keep_branch()
        if self.guard is not None:
            self.guard.node(self, self.branch[node_id])  # vetted again as it enters the graph
        node = self.branch.pop(node_id)
        self.branch_dirty = True
        parents = [p for p in self.branch_parents.pop(node_id) if p in self.nodes]
        node.metadata.pop("hypothesis", None)
        node.metadata["promoted_at"] = self.clock()
        self._insert(node)
        for parent in parents:
            self._add_edge(parent, node_id)
        return node

    def discard(self, node_id: str) -> Node:
        """Drop a hypothesis from the exploration branch. Refused while other hypotheses are
        built on it (discard them first)."""
        if node_id not in self.branch:
            raise SoulGraphError(f"{node_id!r} is not a hypothesis in the exploration branch")
        built_on = sorted(h for h, parents in self.branch_parents.items() if node_id in parents)
        if built_on:
            raise SoulGraphError(f"{', '.join(repr(h) for h in built_on)} {'is' if len(built_on) == 1 else 'are'} "
                                 f"built on {node_id!r}: discard or promote {'it' if len(built_on) == 1 else 'them'} first")
        self._keep_branch()
        node = self.branch.pop(node_id)
        self.branch_parents.pop(node_id, None)
        self.branch_dirty = True
        return node

    def hypotheses(self, *, where: Callable[[Node], bool] | None = None) -> list[tuple[Node, list[str]]]:
        """The open hypotheses, newest first, each with its parents."""
        return [(node, sorted(self.branch_parents.get(node.id, ())))
                for node in sorted(self.branch.values(), key=lambda n: n.created_at, reverse=True)
                if where is None or where(node)]

    # ----------------------------------------------------------------- changes as records
    def record(self, node_id: str) -> dict[str, Any]:
        """A node as the soul file stores it: its fields and its parents."""
        record = self.nodes[node_id].to_dict()
        record["parents"] = sorted(self.parents[node_id])
        return record

    def branch_records(self) -> list[dict[str, Any]]:
        return [{**node.to_dict(), "parents": sorted(self.branch_parents.get(node_id, ()))}
                for node_id, node in self.branch.items()]

    def begin(self) -> None:
        """Open a change: from now on every touched node's old record is kept (see `pending`,
        `rollback`, `end`). Changes do not nest."""
        if self._before is not None:
            raise RuntimeError("a change is already open on this graph")
        self._before, self._before_branch, self._before_next_id = {}, None, self.next_id
        self._before_audit = len(self.audit)
        self._audit_before_rewrite = None

    def _keep(self, node_id: str) -> None:
        if self._before is not None and node_id not in self._before:
            self._before[node_id] = self.record(node_id) if node_id in self.nodes else None

    def _keep_branch(self) -> None:
        if self._before is not None and self._before_branch is None:
            # Copies, not references: promote edits the node it moves.
            self._before_branch = ({i: Node.from_dict(n.to_dict()) for i, n in self.branch.items()},
                                   {i: set(p) for i, p in self.branch_parents.items()})

    def pending(self) -> dict[str, Any] | None:
        """What the open change did, as one record of after-images (what a journal stores
        and `apply_change` replays): {"nodes": [...], "next_id": n, "branch": [...] if the
        exploration branch changed}; None when it changed nothing."""
        if self._before is None:
            raise RuntimeError("no change is open")
        branch_changed = self._before_branch is not None
        audit = self.audit[self._before_audit:]
        if not self._before and not branch_changed and self.next_id == self._before_next_id and not audit:
            return None
        change: dict[str, Any] = {
            "nodes": [self.record(i) if i in self.nodes else {"id": i, "deleted": True} for i in self._before],
            "next_id": self.next_id,
        }
        if branch_changed:
            change["branch"] = self.branch_records()
        if audit:
            change["audit"] = audit
        return change

    def end(self) -> None:
        """Close the change and keep it."""
        self._before, self._before_branch, self._audit_before_rewrite = None, None, None

    def rollback(self) -> None:
        """Close the change and put every touched node, the branch and next_id back."""
        if self._before is None:
            raise RuntimeError("no change is open")
        before, branch = self._before, self._before_branch
        self._before, self._before_branch = None, None
        self._put(list(reversed(before.items())))
        self.next_id = self._before_next_id
        if self._audit_before_rewrite is not None:
            self.audit, self._audit_before_rewrite = self._audit_before_rewrite, None
        del self.audit[self._before_audit:]
        if branch is not None:
            self.branch, self.branch_parents = branch

    def apply_change(self, change: dict[str, Any], parse: Callable[[dict[str, Any]], Node] = Node.from_dict) -> None:
        """Replay a record made by `pending` (another process's journaled change)."""
        self._put([(r["id"], None if r.get("deleted") else r) for r in change["nodes"]], parse)
        self.next_id = max(self.next_id, int(change["next_id"]))
        if "branch" in change:
            self.branch = {}
            self.branch_parents = {}
            for record in change["branch"]:
                node = parse(record)
                self.branch[node.id] = node
                self.branch_parents[node.id] = set(record.get("parents", ()))
        self.audit.extend(change.get("audit", ()))

    # ----------------------------------------------------------------- record edits
    def update(self, node_id: str, **values: Any) -> Node:
        """Set memory fields of a node (status, strength, superseded_by, validity, …), each
        checked against engine/record.py; the change is kept for the journal and undo."""
        node = self.get(node_id)
        checked = {}
        for name, value in values.items():
            if name == "metadata":
                if type(value) is not dict:
                    raise SoulGraphError(f"metadata must be an object, got {type(value).__name__}")
                checked[name] = dict(value)
                continue
            if name not in MEMORY_FIELD_NAMES:
                raise SoulGraphError(f"{name!r} is not a memory field ({', '.join(MEMORY_FIELD_NAMES)})")
            try:
                checked[name] = record.checked(name, value)
            except ValueError as exc:
                raise SoulGraphError(str(exc).removeprefix("memory: ")) from None
        if self.guard is not None and not self.guard.strings.isdisjoint(checked):
            checked = self._vetted(node, checked)  # a strength or a date alone is not rescanned
        self._keep(node_id)
        self._set(node, checked)
        self.dirty.add(node_id)
        return node

    def remove(self, node_id: str) -> Node:
        """Take a node out of the graph with its edges (its children lose it as a parent)."""
        node = self.get(node_id)
        for child in self.children[node_id]:
            self._keep(child)
        self._keep(node_id)
        # Hypotheses built on it lose it as a parent too: a branch naming a node that is gone
        # is a file no process can load.
        built_on = [h for h, parents in self.branch_parents.items() if node_id in parents]
        if built_on:
            self._keep_branch()
            for hypothesis in built_on:
                self.branch_parents[hypothesis].discard(node_id)
            self.branch_dirty = True
        self._put([(node_id, None)])
        return node

    def before_image(self, node_id: str) -> dict[str, Any] | None:
        """A node's record as it was when the open change began (None: it did not exist)."""
        if self._before is None:
            raise RuntimeError("no change is open")
        if node_id in self._before:
            return self._before[node_id]
        return self.record(node_id) if node_id in self.nodes else None

    def log(self, entry: dict[str, Any]) -> None:
        """Append an audit entry; it is journaled with the change that made it."""
        if self.guard is not None:
            entry = self.guard.entry(self, entry)
        self.audit.append(entry)

    def rewrite_audit(self, rewrite: Callable[[dict[str, Any]], dict[str, Any]]) -> int:
        """Replace each earlier audit entry by `rewrite(entry)` (a changed entry must be a new
        dict), inside an open change: a rollback puts the old entries back. A journal carries
        only new entries, so the change that does this must be made durable as a whole
        snapshot (a forget is). Returns how many entries changed."""
        if self._before is None:
            raise RuntimeError("no change is open")
        if self._audit_before_rewrite is None:
            self._audit_before_rewrite = list(self.audit)
        changed = 0
        for at, entry in enumerate(self.audit[: self._before_audit]):
            new = rewrite(entry)
            if new is not entry:
                self.audit[at] = new
                changed += 1
        return changed

    def _put(self, records: list[tuple[str, dict[str, Any] | None]],
             parse: Callable[[dict[str, Any]], Node] = Node.from_dict) -> None:
        """Make each node exactly its record (None: absent): nodes first, then parents, so
        a record may name a parent that comes later in the list."""
        cooler = False  # a key went down or a node went away: the recency tiers must be recut
        for node_id, record in records:
            old = self.nodes.get(node_id)
            if old is not None:
                old_key = old.recency_key
                self._remove_node_data(old)
            if record is None:
                if old is not None:
                    for parent in self.parents.pop(node_id, ()):
                        self.children[parent] = edges.parted(self.children[parent], node_id)
                    for child in self.children.pop(node_id, ()):
                        self.parents[child] = edges.parted(self.parents[child], node_id)
                        # A node's record carries its parents: the child changed too, and a
                        # snapshot that reused its old line would name a node that is gone.
                        self.dirty.add(child)
                    self.dirty.add(node_id)
                    cooler = True
                continue
            node = parse(record)
            self._insert(node)
            if old is not None and node.recency_key < old_key:
                cooler = True
        for node_id, record in records:
            if record is None:
                continue
            wanted = edges.packed(str(p) for p in record.get("parents", ()))
            current = self.parents[node_id]
            for parent in set(current).difference(wanted):
                self.children[parent] = edges.parted(self.children[parent], node_id)
            for parent in set(wanted).difference(current):
                self.get(parent)
                self.children[parent] = edges.joined(self.children[parent], node_id)
            self.parents[node_id] = wanted
            self.generation += 1
        if cooler:
            self._tiers = RecencyTiers(self._hottest_slots)

    def hidden_from(self, scope: str) -> "HiddenIds":
        """The ids of every user's memory but `scope`'s: what a reader of `scope` (or of the
        shared memories alone, scope "") must never get. Built once per scope, then kept up to
        date by every change; read it, never change it."""
        hidden = self._hidden.get(scope)
        if hidden is None:
            hidden = HiddenIds(set().union(*(ids for s, ids in self.scopes.items() if s != scope)))
            hidden.mask = self.index.mask_of(hidden)
            self._hidden[scope] = hidden
        return hidden

    def _scope_add(self, node_id: str, scope: str) -> None:
        self.scopes.setdefault(scope, set()).add(node_id)
        if self._hidden:
            bit = 1 << self.index.slot(node_id)
            for reader, hidden in self._hidden.items():
                if reader != scope:
                    hidden.add(node_id)
                    hidden.mask |= bit
                    hidden.version += 1

    def _unscope(self, node_id: str, scope: str) -> None:
        ids = self.scopes.get(scope) if scope else None
        if ids is not None:
            ids.discard(node_id)
            if not ids:
                del self.scopes[scope]
            if self._hidden:
                keep = ~(1 << self.index.slot(node_id))  # a node keeps its slot for good
                for hidden in self._hidden.values():
                    if node_id in hidden:
                        hidden.discard(node_id)
                        hidden.mask &= keep
                        hidden.version += 1

    def _remove_node_data(self, node: Node) -> None:
        """Take a node out of every structure but the edges."""
        del self.nodes[node.id]
        self.generation += 1
        for watcher in (*self.watchers, *self.field_watchers):
            watcher(node.id)
        for tag in node.tags:
            ids = self.tags.get(tag)
            if ids is not None:
                ids.discard(node.id)
                if not ids:
                    del self.tags[tag]
        self.pinned.discard(node.id)
        self.kinds.get(node.kind, set()).discard(node.id)
        self._unscope(node.id, node.scope)
        self.order.remove((node.recency_key, node.id))
        text = _indexed_text(node)  # the node is no longer in `nodes`, where the indexes read it
        self.index.remove(node.id, text)
        self.archive_index.remove(node.id, text)

    # ----------------------------------------------------------------- portable forms
    @classmethod
    def from_dag(cls, dag: dict[str, Any], clock: Clock = time.time, **options: Any) -> "SoulGraph":
        """Load the portable {"nodes": [...], "edges": [...]} form.

        A node's `label` becomes its content, its `type` a tag, and `axiom` nodes are
        pinned. An edge is {"from", "to"}, {"source", "target"}, {"parent", "child"} or
        a [parent, child] pair.
        """
        graph = cls(clock=clock, **options)
        for raw in dag.get("nodes", []):
            node_type = raw.get("type")
            tags = list(raw.get("tags", []))
            if node_type and node_type not in tags:
                tags.insert(0, node_type)
            extra = {k: v for k, v in raw.items() if k not in {"id", "label", "content", "type", "tags"}}
            graph.add(
                str(raw.get("label") or raw.get("content") or ""),
                tags,
                node_id=str(raw["id"]) if "id" in raw else None,
                pinned=node_type == "axiom" or bool(raw.get("pinned")),
                metadata=extra,
            )
        for edge in dag.get("edges", []):
            parent, child = _edge_ends(edge)
            graph.link(parent, child)
        return graph

    def to_dag(self) -> dict[str, Any]:
        return {
            "nodes": [{"id": n.id, "label": n.content, "tags": n.tags, "pinned": n.pinned} for n in self.nodes.values()],
            "edges": [{"from": p, "to": c} for p, c in sorted(self.edges())],
        }


class _TopK:
    """The k best (final score, id) taken so far, and the bar a newcomer must reach.

    The bar is the k-th best final score taken so far, or, until k have been taken, a
    known lower bound of the k-th final score. A candidate whose best possible score is
    below the bar cannot make the top k; one equal to it still can (by a smaller id).
    """

    def __init__(self, k: int, floor: float, nodes: dict[str, Node], now: float, weight: float) -> None:
        self.k, self.bar = k, floor
        self.nodes, self.now, self.weight = nodes, now, weight
        self._taken: list[tuple[float, str]] = []
        self._finals: list[float] = []  # min-heap of the k best finals taken

    def take(self, score: float, node_ids: Iterable[str], skip: Container[str] = ()) -> None:
        """Score candidates of lexical score `score`: final = score * boost, with
        boost = 1 + weight * r / (1 + r) and r = `Node.recency_score` (weight 0: no boost).
        Written out here, in the same arithmetic (so bit-identical), because it runs for
        every candidate that is scored."""
        nodes, now, weight, finals, k = self.nodes, self.now, self.weight, self._finals, self.k
        exp = math.exp
        for node_id in node_ids:
            if node_id in skip:
                continue
            if weight:
                node = nodes[node_id]
                recency = (node.access_count + 1) * exp(-(now - node.last_accessed) / DAY)  # Node.recency_score
                final = score * (1.0 + weight * recency / (1.0 + recency))
            else:
                final = score
            if final < self.bar:
                continue  # below the k-th best final score: cannot make the top k
            self._taken.append((final, node_id))
            if len(finals) < k:
                heapq.heappush(finals, final)
            elif final > finals[0]:
                heapq.heapreplace(finals, final)
            else:
                continue
            if len(finals) == k and finals[0] > self.bar:
                self.bar = finals[0]

    def best(self) -> list[tuple[float, str]]:
        return heapq.nsmallest(self.k, self._taken, key=lambda pair: (-pair[0], pair[1]))


def _indexed_text(node: Node) -> str:
    return node.content + " " + " ".join(node.tags)


def _max_recency(key: float, now: float) -> float:
    """An upper bound of the recency score of any node whose recency key is at most `key`.

    The score is exp(key - now / DAY) in exact arithmetic; the margin in the exponent
    covers the rounding of the key and of the score as `Node.recency_score` computes it
    (about 1e-11 for dates near today), so the bound is safe to prune with.
    """
    exponent = key - now / DAY
    exponent += 1e-9 * (1.0 + abs(key) + abs(now / DAY))
    return math.exp(min(exponent, 700.0))  # 700: exp would overflow soon after


def _edge_ends(edge: Any) -> tuple[str, str]:
    if isinstance(edge, (list, tuple)) and len(edge) == 2:
        return str(edge[0]), str(edge[1])
    if isinstance(edge, dict):
        for a, b in (("from", "to"), ("source", "target"), ("parent", "child")):
            if a in edge and b in edge:
                return str(edge[a]), str(edge[b])
    raise SoulGraphError(f"cannot read edge {edge!r}: expected {{'from','to'}} or [parent, child]")

