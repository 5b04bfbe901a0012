"""A memory as a person at the shell sees it: plain values, times in UTC ISO 8601.

A flagged memory (memory/flagged.py) is shown withheld, as every tool answer shows it: its
id, kind, scope, dates, pin and links, and the rules it matched in place of its text, tags,
source and metadata, unless the person asks for it (`show_flagged`)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from soulgraph.engine import record
from soulgraph.engine.graph import Node, SoulGraph
from soulgraph.memory import flagged, lifecycle, scopes


def iso(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def marker(rules: tuple[str, ...]) -> str:
    return f"[withheld: {flagged.REASON} ({', '.join(rules)}); --show-flagged shows it]"


def _withheld(node: Node, show_flagged: bool) -> tuple[str, ...]:
    rules = record.flagged(node.metadata)
    return () if show_flagged else rules


def brief(graph: SoulGraph, node: Node, *, show_flagged: bool = False, **extra: Any) -> dict[str, Any]:
    """One memory in a list."""
    hidden = _withheld(node, show_flagged)
    item: dict[str, Any] = {
        "id": node.id,
        "kind": node.kind,
        "scope": scopes.label(node.scope),
        "status": node.status,
        "pinned": node.pinned,
        "created_at": iso(node.created_at),
        "content": marker(hidden) if hidden else node.content,
        "tags": [] if hidden else list(node.tags),
    }
    rules = record.flagged(node.metadata)
    if rules:
        item["flagged"] = list(rules)
        item["withheld"] = bool(hidden)
    if node.id in graph.branch:
        item["hypothesis"] = True
    item.update(extra)
    return item


def _link(graph: SoulGraph, node_id: str, show_flagged: bool) -> dict[str, Any]:
    node = graph.nodes.get(node_id) or graph.branch.get(node_id)
    if node is None:
        return {"id": node_id, "content": None}
    hidden = _withheld(node, show_flagged)
    return {"id": node_id, "kind": node.kind, "status": node.status,
            "content": marker(hidden) if hidden else node.content}


def detail(graph: SoulGraph, node: Node, *, show_flagged: bool = False) -> dict[str, Any]:
    """One memory on its own: what it says, where it came from, how sure and how strong it is
    now, what it was built on and what was built on it, what replaced it, and its history."""
    hidden = _withheld(node, show_flagged)
    now = graph.clock()
    shown = brief(graph, node, show_flagged=show_flagged)
    shown.update({
        "provenance": {
            "source": None if hidden else node.source,
            "source_ref": None if hidden else node.source_ref,
            "writer": node.writer,
            "first_seen_at": iso(node.seen_at),
            "last_confirmed_at": iso(node.confirmed_at),
        },
        "confidence": node.confidence,
        "importance": node.importance,
        "strength": round(record.effective_strength(node.strength, node.confirmed_at, now, pinned=node.pinned,
                                                    half_life=graph.strength_half_life), 4),
        "access_count": node.access_count,
        "last_accessed": iso(node.last_accessed),
        "valid_from": iso(node.valid_from),
        "valid_to": iso(node.valid_to),
        "superseded_by": node.superseded_by,
        "supersedes": sorted(other.id for other in graph.nodes.values() if other.superseded_by == node.id),
        "privacy": node.privacy,
        "parents": [_link(graph, p, show_flagged) for p in sorted(_parents(graph, node.id))],
        "children": [_link(graph, c, show_flagged) for c in sorted(_children(graph, node.id))],
        "metadata": {} if hidden else dict(node.metadata),
        "history": [entry_shown(graph, e, show_flagged) for e in lifecycle.history(graph, node.id)],
    })
    return shown


def _parents(graph: SoulGraph, node_id: str) -> set[str]:
    return set(graph.parents.get(node_id, ())) | set(graph.branch_parents.get(node_id, ()))


def _children(graph: SoulGraph, node_id: str) -> set[str]:
    return set(graph.children.get(node_id, ()))


def entry_shown(graph: SoulGraph, entry: dict[str, Any], show_flagged: bool = False) -> dict[str, Any]:
    """An audit entry, its time readable; the reason withheld when the entry, or the memory it
    is about, is flagged (a reason is writer text, and may quote the memory)."""
    shown = {**entry, "at": iso(entry.get("at"))}
    if show_flagged or "reason" not in entry:
        return shown
    about = graph.nodes.get(entry.get("node"))
    rules = record.flagged(entry) or (record.flagged(about.metadata) if about is not None else ())
    if rules:
        shown["reason"] = marker(rules)
    return shown
