"""The memory lifecycle: a memory can be confirmed, doubted, contradicted, replaced,
archived, merged into another, or forgotten. Each operation is a graph change (journaled by
the store, taken back with it on failure) plus one audit entry:

    {"at": seconds, "action": "supersede", "node": "n4", "writer": "tool:soul_update",
     "by": "n9"?, "reason": "…"?, "scope": "telegram:1001"?, "before": digest, "after": digest or null}

`scope` is there for one user's memory (memory/scopes.py), so the trail says whose it was;
forgetting a user (`forget_user`) replaces it in every entry by `forgotten:<digest>`.

A digest is the first 16 hex digits of the SHA-256 of the node's record: enough to tell what
changed and to check a record against the trail, while `forget` leaves nothing of the content.

Out of default recall: superseded, contradicted and archived memories (status), and forgotten
ones (gone). Validity: supersede sets the old memory's `valid_to` to now, so "what was true on
date D" keeps finding it for dates before.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from soulgraph.engine import record
from soulgraph.engine.graph import Node, SoulGraph, SoulGraphError

ACTIONS = ("confirm", "weaken", "contradict", "supersede", "revise", "archive", "unarchive", "pin", "unpin",
           "merge", "share", "forget", "release")
UPDATED = "updated"  # metadata key: what later memories changed of this one (`revise`)


def digest(node_record: dict[str, Any] | None) -> str | None:
    if node_record is None:
        return None
    text = json.dumps(node_record, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _log(graph: SoulGraph, action: str, node_id: str, writer: str, before: dict[str, Any] | None,
         **extra: Any) -> None:
    after = graph.record(node_id) if node_id in graph.nodes else None
    entry = {"at": graph.clock(), "action": action, "node": node_id, "writer": writer}
    entry.update({k: v for k, v in extra.items() if v is not None})
    scope = (after or before or {}).get("scope")
    if scope:
        entry["scope"] = scope
    entry["before"], entry["after"] = digest(before), digest(after)
    graph.log(entry)


def _node(graph: SoulGraph, node_id: str) -> tuple[Node, dict[str, Any]]:
    node = graph.get(node_id)
    return node, graph.record(node_id)


def confirm(graph: SoulGraph, node_id: str, *, writer: str) -> Node:
    """It was true again, or it helped: strength grows, last_confirmed_at is now."""
    node, before = _node(graph, node_id)
    now = graph.clock()
    graph.update(node_id, strength=record.confirm(node.strength, node.confirmed_at, now, pinned=node.pinned,
                                                      half_life=graph.strength_half_life),
                 last_confirmed_at=now)
    _log(graph, "confirm", node_id, writer, before)
    return node


def weaken(graph: SoulGraph, node_id: str, *, writer: str, reason: str | None = None) -> Node:
    """Doubted: strength halves (from what is left of it now)."""
    node, before = _node(graph, node_id)
    now = graph.clock()
    strength = record.weaken(node.strength, node.confirmed_at, now, pinned=node.pinned, half_life=graph.strength_half_life)
    graph.update(node_id, strength=strength, last_confirmed_at=now)
    _log(graph, "weaken", node_id, writer, before, reason=reason)
    return node


def contradict(graph: SoulGraph, node_id: str, by_id: str, *, writer: str, reason: str | None = None) -> Node:
    """`by_id` says otherwise: this memory leaves default recall, marked contradicted."""
    if by_id == node_id:
        raise SoulGraphError(f"{node_id!r} cannot contradict itself")
    graph.get(by_id)
    node, before = _node(graph, node_id)
    graph.update(node_id, status="contradicted")
    graph.update(node_id, strength=record.weaken(node.strength, node.confirmed_at, graph.clock(), pinned=node.pinned,
                                                       half_life=graph.strength_half_life))
    _log(graph, "contradict", node_id, writer, before, by=by_id, reason=reason)
    return node


def supersede(graph: SoulGraph, old_id: str, new_id: str, *, writer: str, reason: str | None = None) -> Node:
    """`new_id` replaces `old_id`: the old one stays for history, leaves default recall, and
    its validity ends now. The new one is linked as built on the old (refused when the old is
    the new one's descendant: that edge would close a cycle)."""
    if old_id == new_id:
        raise SoulGraphError(f"{old_id!r} cannot supersede itself")
    graph.get(new_id)
    node, before = _node(graph, old_id)
    if node.status == "superseded":
        raise SoulGraphError(f"{old_id!r} is already superseded by {node.superseded_by!r}")
    graph.link(old_id, new_id)  # raises CycleError when new_id is an ancestor of old_id
    graph.update(old_id, status="superseded", superseded_by=new_id, valid_to=graph.clock())
    _log(graph, "supersede", old_id, writer, before, by=new_id, reason=reason)
    return node


def revise(graph: SoulGraph, node_id: str, by_id: str, *, old: str, new: str, about: list[str] | tuple[str, ...],
           writer: str) -> Node:
    """`by_id` changes one value this memory holds (`old` -> `new`, `about` the words that
    name it): the memory stays active, for the rest of what it says, and its metadata lists
    the change (`updated`), which recall shows beside it. For a memory that holds many
    statements (a conversation turn); one that holds one is superseded instead."""
    if by_id == node_id:
        raise SoulGraphError(f"{node_id!r} cannot revise itself")
    graph.get(by_id)
    node, before = _node(graph, node_id)
    changes = [c for c in node.metadata.get(UPDATED, []) if c.get("by") != by_id or c.get("old") != old]
    changes.append({"old": old, "new": new, "about": list(about), "by": by_id, "at": graph.clock()})
    graph.update(node_id, metadata={**node.metadata, UPDATED: changes[-10:]})
    _log(graph, "revise", node_id, writer, before, by=by_id)
    return node


def archive(graph: SoulGraph, node_id: str, *, writer: str, reason: str | None = None) -> Node:
    """Out of default recall, still searchable with include_archived."""
    node, before = _node(graph, node_id)
    graph.update(node_id, status="archived")
    _log(graph, "archive", node_id, writer, before, reason=reason)
    return node


def unarchive(graph: SoulGraph, node_id: str, *, writer: str, reason: str | None = None) -> Node:
    """An archived memory back in default recall (a superseded or contradicted one is not:
    the memory that replaced it would have to go first)."""
    node, before = _node(graph, node_id)
    if node.status != "archived":
        raise SoulGraphError(f"{node_id!r} is {node.status}, not archived")
    graph.update(node_id, status=record.DEFAULT_STATUS)
    _log(graph, "unarchive", node_id, writer, before, reason=reason)
    return node


def pin(graph: SoulGraph, node_id: str, pinned: bool = True, *, writer: str, reason: str | None = None) -> Node:
    """Pinned: an axiom, never fading, first in every prime (the write guard refuses a flagged
    memory). An audit entry only when the pin changes."""
    node, before = _node(graph, node_id)
    if node.pinned == pinned:
        return node
    graph.pin(node_id, pinned)
    _log(graph, "pin" if pinned else "unpin", node_id, writer, before, reason=reason)
    return node


def merge(graph: SoulGraph, keep_id: str, merge_id: str, *, writer: str) -> Node:
    """Two memories that say the same: `merge_id` goes into `keep_id`, which keeps both
    sources, all tags, every edge of both and the larger use count; `merge_id` is removed.
    Refused when one is built on the other (the merged node would be its own ancestor)."""
    if keep_id == merge_id:
        raise SoulGraphError(f"cannot merge {keep_id!r} into itself")
    keep, keep_before = _node(graph, keep_id)
    gone, gone_before = _node(graph, merge_id)
    if graph.path(keep_id, merge_id) or graph.path(merge_id, keep_id):
        raise SoulGraphError(f"{merge_id!r} and {keep_id!r} are built on one another; merging them would "
                             "make a node its own ancestor")
    parents, children = set(graph.parents[merge_id]), set(graph.children[merge_id])
    sources = keep.metadata.get("merged_from", []) + [{"id": merge_id, "source": gone.source,
                                                        "content": gone.content}]
    graph.remove(merge_id)
    for tag in gone.tags:
        graph.tag(keep_id, tag)
    for parent in parents - {keep_id}:
        graph.link(parent, keep_id)
    for child in children - {keep_id}:
        graph.link(keep_id, child)
    graph.update(keep_id, metadata={**keep.metadata, "merged_from": sources},
                 confidence=max(keep.confidence, gone.confidence),
                 importance=max(keep.importance, gone.importance),
                 strength=keep.strength + gone.strength,
                 first_seen_at=min(keep.seen_at, gone.seen_at))
    _log(graph, "merge", keep_id, writer, keep_before, merged=merge_id)
    _log(graph, "merge", merge_id, writer, gone_before, into=keep_id)
    return keep


def forget(graph: SoulGraph, node_id: str, reason: str, *, writer: str, force: bool = False) -> None:
    """Gone for good: the node and its edges leave the graph; only an audit entry with the id,
    the time and the reason stays. A pinned axiom needs `force`. (The store then rewrites the
    files, so no journal record or backup it writes keeps the content.)"""
    if not reason.strip():
        raise SoulGraphError("forget needs a reason (it is all that stays)")
    node, before = _node(graph, node_id)
    if node.pinned and not force:
        raise SoulGraphError(f"{node_id!r} is a pinned axiom; forgetting it needs force=true")
    graph.remove(node_id)
    _log(graph, "forget", node_id, writer, before, reason=reason)


def share(graph: SoulGraph, node_id: str, *, writer: str, reason: str) -> Node:
    """One user's memory becomes shared: every user of the agent sees it from now on. The
    audit entry keeps the scope it had."""
    node, before = _node(graph, node_id)
    graph.update(node_id, scope=record.DEFAULT_SCOPE)
    _log(graph, "share", node_id, writer, before, reason=reason, scope=before.get("scope"))
    return node


FORGOTTEN_SCOPE = "forgotten:"


def forgotten_scope(scope: str) -> str:
    """What the audit says of a forgotten user: a digest, no name."""
    return FORGOTTEN_SCOPE + hashlib.sha256(scope.encode("utf-8")).hexdigest()[:16]


def forget_user(graph: SoulGraph, scope: str, reason: str, *, writer: str) -> list[str]:
    """Every memory of one user's scope forgotten (pinned ones too: the user asked), and the
    user's name taken out of the audit trail; returns the ids. Hypotheses of that user are
    dropped too. The store rewrites every file without them (see `forget`)."""
    if not scope:
        raise SoulGraphError("forget_user needs a user's scope (platform:user), not the shared scope")
    ids = sorted(graph.scopes.get(scope, ()), key=lambda i: (graph.nodes[i].created_at, i))
    # A hypothesis is built only on what its writer sees: those built on this user's are this
    # user's too, so dropping the ones nothing is built on, round by round, drops them all.
    mine = {h for h, node in graph.branch.items() if node.scope == scope}
    while mine:
        leaves = {h for h in mine if not any(h in graph.branch_parents.get(o, ()) for o in graph.branch)}
        if not leaves:
            raise SoulGraphError(f"hypotheses of {scope} are built on each other in a way discard cannot undo")
        for hypothesis in sorted(leaves):
            graph.discard(hypothesis)
        mine -= leaves
    for node_id in ids:
        forget(graph, node_id, reason, writer=writer, force=True)
    hidden = forgotten_scope(scope)
    graph.rewrite_audit(lambda entry: {**entry, "scope": hidden} if entry.get("scope") == scope else entry)
    for entry in graph.audit[len(graph.audit) - len(ids):]:
        if entry.get("scope") == scope:
            entry["scope"] = hidden
    return ids


def history(graph: SoulGraph, node_id: str) -> list[dict[str, Any]]:
    """Every audit entry about a node, oldest first (also entries naming it as `by`, `merged`
    or `into`)."""
    return [entry for entry in graph.audit
            if node_id in (entry.get("node"), entry.get("by"), entry.get("merged"), entry.get("into"))]
