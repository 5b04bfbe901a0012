"""Upkeep: memory that improves over time instead of only growing.

Two operations, planned first (a `Plan` says what would change and why) and then applied, so
`--dry-run` and the real run come from one design:

- **archive** a statement whose reinforcement decayed below `ARCHIVE_BELOW` and that was never
  confirmed: written once, never said again, not used for a half-life. It leaves default recall
  and the snapshot and stays searchable (`include_archived`); a pinned memory, a flagged one
  (it is kept for the operator, memory/flagged.py) and a hypothesis are never archived, and
  neither is a conversation turn: turns are the record of what was said, and a question months
  later is about exactly such a turn (archiving decayed turns took the share of LoCoMo's
  evidence that prefetch injects from 0.61 to 0.37; docs/decisions/upkeep.md).
- **merge** duplicates: active memories of one user (scope) and one kind whose text is the same
  once case, whitespace and end punctuation are set aside. The oldest keeps both sources, every
  tag and edge and the summed strength (memory/lifecycle.merge). Conversation turns are events,
  not statements: two turns with the same words are two turns, never merged.

Bounded: a plan looks at most `max_nodes` memories and stops at its `deadline` (seconds), so a
session's end stays cheap however large the graph. A session's end looks at the memories in
the order they were written, so in a graph too large for its deadline the newest are reached
only by the on-demand command, which has no deadline.
Run at each Hermes session's end (the memory service's `consolidate`) for that user's memories,
and on demand for the whole soul: `python -m soulgraph.memories consolidate [--dry-run]`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from soulgraph.engine import record
from soulgraph.engine.graph import ACTIVE, Node, SoulGraph
from soulgraph.memory import lifecycle

ARCHIVE_BELOW = 0.05  # effective strength: written once and left alone for ~130 days (30-day half-life)
MAX_NODES = 20_000  # memories one plan looks at
SESSION_DEADLINE = 0.05  # seconds a session end may spend planning
WRITER = "upkeep"
EVENT_SOURCES = frozenset({"hermes:sync_turn", "hermes:session"})  # turns: never archived, never merged


@dataclass
class Plan:
    archive: list[tuple[str, float]] = field(default_factory=list)  # (id, effective strength)
    merge: list[tuple[str, str]] = field(default_factory=list)  # (keep id, merged id)
    looked_at: int = 0
    complete: bool = True  # False: the deadline or max_nodes stopped it before the end

    def report(self, graph: SoulGraph) -> dict[str, Any]:
        def brief(node_id: str) -> dict[str, Any]:
            node = graph.nodes[node_id]
            text = " ".join(node.content.split())
            return {"id": node_id, "kind": node.kind, "text": text if len(text) <= 120 else text[:119] + "…"}

        return {"archive": [{**brief(i), "strength": round(s, 4)} for i, s in self.archive],
                "merge": [{"keep": brief(k), "merged": brief(m)} for k, m in self.merge],
                "looked_at": self.looked_at, "complete": self.complete}


def _plain(text: str) -> str:
    return " ".join(text.lower().split()).strip(" .!?;:")


def plan(graph: SoulGraph, *, where: Callable[[Node], bool] | None = None, below: float = ARCHIVE_BELOW,
         max_nodes: int = MAX_NODES, deadline: float | None = None) -> Plan:
    """What upkeep would do now to the memories `where` accepts (all, if None)."""
    started = time.perf_counter()
    now = graph.clock()
    out = Plan()
    half_life = graph.strength_half_life
    candidates: list[tuple[float, str]] = []
    first_of: dict[tuple[str, str, str], Node] = {}
    for count, node in enumerate(graph.nodes.values()):
        if count >= max_nodes or (deadline is not None and count % 512 == 0
                                  and time.perf_counter() - started > deadline):
            out.complete = False
            break
        out.looked_at += 1
        if (node.status != ACTIVE or node.pinned or record.flagged(node.metadata) or node.source in EVENT_SOURCES
                or (where is not None and not where(node))):
            continue
        strength = record.effective_strength(node.strength, node.confirmed_at, now, half_life=half_life)
        if strength < below and node.confirmed_at <= node.seen_at and now - node.last_accessed > half_life:
            candidates.append((strength, node.id))
            continue
        key = (node.scope, node.kind, _plain(node.content))
        held = first_of.get(key)
        if held is None:
            first_of[key] = node
        else:
            keep, gone = (held, node) if (held.created_at, held.id) <= (node.created_at, node.id) else (node, held)
            if not (graph.path(keep.id, gone.id) or graph.path(gone.id, keep.id)):
                out.merge.append((keep.id, gone.id))
                first_of[key] = keep
    out.archive = [(node_id, strength) for strength, node_id in sorted(candidates)]
    return out


def apply(graph: SoulGraph, planned: Plan, *, writer: str = WRITER) -> dict[str, int]:
    """Carry a plan out (inside `SoulFile.change()`); each step is an audit entry."""
    archived = merged = 0
    for node_id, strength in planned.archive:
        node = graph.nodes.get(node_id)
        if node is not None and node.status == ACTIVE:
            lifecycle.archive(graph, node_id, writer=writer,
                              reason=f"decayed to strength {strength:.3f}, never confirmed")
            archived += 1
    for keep, gone in planned.merge:
        if keep in graph.nodes and gone in graph.nodes:
            lifecycle.merge(graph, keep, gone, writer=writer)
            merged += 1
    return {"archived": archived, "merged": merged}
