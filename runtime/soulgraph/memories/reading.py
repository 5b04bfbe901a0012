"""What a person reads of a soul: lists, searches, one memory, the audit trail. Nothing here
writes; each function takes the graph `SoulFile.graph()` gave (which follows the journal, so
what servers and the gateway wrote a moment ago is there)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from soulgraph.engine import record
from soulgraph.engine.graph import Hit, Node, SoulGraph, UnknownNode
from soulgraph.memory import lifecycle, ranking, scopes

ORDERS = ("newest", "oldest", "hot")


@dataclass(frozen=True)
class Filters:
    """Which memories: every field left empty lets all through. `statuses` empty means the
    active ones only (what recall serves), unless `any_status`."""

    kinds: tuple[str, ...] = ()
    scopes: tuple[str, ...] = ()  # "" is the shared scope
    tags: tuple[str, ...] = ()  # all of them
    statuses: tuple[str, ...] = ()
    any_status: bool = False
    since: float | None = None  # created at or after
    until: float | None = None  # created before
    pinned: bool | None = None
    flagged: bool | None = None
    extra: tuple[Callable[[Node], bool], ...] = field(default=(), compare=False)

    @property
    def narrows(self) -> bool:
        """Do these filters take away anything recall's own default (the active memories) keeps?"""
        return self != Filters() or bool(self.extra)

    @property
    def out_of_recall_too(self) -> bool:
        """Do these filters reach superseded, contradicted or archived memories?"""
        return self.any_status or any(s != record.DEFAULT_STATUS for s in self.statuses)

    def accepts(self, node: Node) -> bool:
        if self.statuses:
            if node.status not in self.statuses:
                return False
        elif not self.any_status and node.status != record.DEFAULT_STATUS:
            return False
        return ((not self.kinds or node.kind in self.kinds)
                and (not self.scopes or node.scope in self.scopes)
                and all(tag in node.tags for tag in self.tags)
                and (self.since is None or node.created_at >= self.since)
                and (self.until is None or node.created_at < self.until)
                and (self.pinned is None or node.pinned == self.pinned)
                and (self.flagged is None or bool(record.flagged(node.metadata)) == self.flagged)
                and all(test(node) for test in self.extra))


def listing(graph: SoulGraph, filters: Filters = Filters(), *, limit: int | None = 50,
            order: str = "newest") -> tuple[list[Node], int]:
    """The memories the filters let through, in `order` (newest or oldest written first, or
    hot: pinned first, then the most recently and often used), at most `limit`; and how many
    there are in all."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {', '.join(ORDERS)}, not {order!r}")
    found = [node for node in graph.nodes.values() if filters.accepts(node)]
    if order == "hot":
        found.sort(key=lambda n: (not n.pinned, -n.recency_key, n.id))
    else:
        found.sort(key=lambda n: (n.created_at, n.id), reverse=order == "newest")
    return (found if limit is None else found[:limit]), len(found)


def search(graph: SoulGraph, query: str, filters: Filters = Filters(), *, limit: int = 10,
           as_scope: str | None = None, vectors: Any = None) -> list[Hit]:
    """Recall as the agent's tools serve it (memory/ranking.py: words and, for a question,
    vectors; trust; a replaced memory brings its replacement; near-copies kept apart), with
    the filters on top. `as_scope`: what a server serving that user would find (the shared
    memories and that user's); None: every user's, as the operator may."""
    reader = None if as_scope is None else scopes.Reader(as_scope)
    exclude = reader.hidden_ids(graph) if reader is not None else frozenset()
    # No predicate when the filters add nothing: recall's word index then stays the fast pruned
    # search (a predicate makes it score every match: 215 ms against 5 ms at 100,000 memories).
    return ranking.recall(graph, query, limit, where=filters.accepts if filters.narrows else None, exclude=exclude,
                          include_archived=filters.out_of_recall_too, vectors=vectors)


def get(graph: SoulGraph, node_id: str) -> Node:
    """A memory or a hypothesis by id; UnknownNode when there is neither."""
    node = graph.nodes.get(node_id) or graph.branch.get(node_id)
    if node is None:
        raise UnknownNode(node_id)
    return node


def history(graph: SoulGraph, node_id: str | None = None, *, limit: int | None = 50,
            actions: tuple[str, ...] = (), scope: str | None = None) -> list[dict[str, Any]]:
    """Audit entries, oldest first: a memory's (forgotten ones too), or the soul's latest
    `limit`; only these `actions`, only about this `scope` ("" the shared memories)."""
    entries = lifecycle.history(graph, node_id) if node_id else list(graph.audit)
    if actions:
        entries = [e for e in entries if e.get("action") in actions]
    if scope is not None:
        entries = [e for e in entries if e.get("scope", "") == scope]
    return entries if limit is None else entries[-limit:] if limit else []
